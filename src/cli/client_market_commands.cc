// tidepool price, bill: the internal market as the server runs it (GET /v1/prices, /v1/bill).
#include <fmt/format.h>

#include <ctime>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/client_commands.h"
#include "cli/client_session.h"
#include "core/budget.h"
#include "report/csv_field.h"
#include "report/text_table.h"

namespace tidepool {
namespace {

// "2026-12-01 04:35Z" for Unix seconds.
std::string utc_minute_text(std::int64_t unix_seconds) {
  const auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min);
}

std::string amount_text(const nlohmann::json& value) {
  return fmt::format("{:.2f}", value.get<double>());
}

std::string multiplier_text(const nlohmann::json& value) {
  return fmt::format("x{:g}", value.get<double>());
}

std::string render_prices(const nlohmann::json& prices) {
  std::ostringstream out;
  const auto& models = prices.at("models");
  if (models.empty()) return "No GPU models.\n";
  out << fmt::format("Prices in force per GPU-hour ({}), from {} until {}\n",
                     prices.at("currency").get<std::string>(),
                     utc_minute_text(models.front().at("from").get<std::int64_t>()),
                     utc_minute_text(models.front().at("until").get<std::int64_t>()));
  TextTable table({"MODEL", "COST-BASE", "UTILISATION", "UTIL-MULT", "TIME-MULT", "STANDARD",
                   "PREEMPTIBLE", "EMERGENCY"});
  for (const auto& m : models) {
    const auto& classes = m.at("per_gpu_hour");
    table.add_row({m.at("model").get<std::string>(), amount_text(m.at("cost_base")),
                   fmt::format("{:.1f}%", m.at("utilisation").get<double>() * 100),
                   multiplier_text(m.at("utilisation_multiplier")),
                   multiplier_text(m.at("time_multiplier")), amount_text(classes.at("standard")),
                   amount_text(classes.at("preemptible")), amount_text(classes.at("emergency"))});
  }
  table.print(out);
  return out.str();
}

constexpr OutputFormat kBillFormats[] = {OutputFormat::kTable, OutputFormat::kCsv,
                                         OutputFormat::kJson, OutputFormat::kYaml};

struct BillFlags {
  ClientFlags client;
  std::string tenant;
  std::string from;
  std::string to;
  std::string by = "team";
};

std::string render_bill(const nlohmann::json& bill) {
  std::ostringstream out;
  out << fmt::format("Bill of tenant {}, {} to {} ({}), by {}\n",
                     bill.at("tenant").get<std::string>(), bill.at("from").get<std::string>(),
                     bill.at("to").get<std::string>(), bill.at("currency").get<std::string>(),
                     bill.at("by").get<std::string>());
  std::string heading = bill.at("by").get<std::string>();
  for (char& c : heading) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  TextTable table({heading, "GPU-HOURS", "CHARGES", "CREDITS", "NET"});
  auto row = [](const std::string& name, const nlohmann::json& g) {
    return std::vector<std::string>{name, fmt::format("{:.2f}", g.at("gpu_hours").get<double>()),
                                    amount_text(g.at("charges")), amount_text(g.at("credits")),
                                    amount_text(g.at("net"))};
  };
  for (const auto& g : bill.at("groups")) table.add_row(row(g.at("group").get<std::string>(), g));
  table.add_row(row("TOTAL", bill.at("total")));
  table.print(out);
  return out.str();
}

std::string render_bill_csv(const nlohmann::json& bill) {
  std::string out =
      fmt::format("{},gpu_hours,charges,credits,net,currency\n", bill.at("by").get<std::string>());
  const std::string currency = csv_field(bill.at("currency").get<std::string>());
  auto line = [&](const std::string& name, const nlohmann::json& g) {
    out += fmt::format("{},{:.6f},{:.6f},{:.6f},{:.6f},{}\n", csv_field(name),
                       g.at("gpu_hours").get<double>(), g.at("charges").get<double>(),
                       g.at("credits").get<double>(), g.at("net").get<double>(), currency);
  };
  for (const auto& g : bill.at("groups")) line(g.at("group").get<std::string>(), g);
  line("total", bill.at("total"));
  return out;
}

Result<void> run_bill(const BillFlags& flags) {
  for (auto [field, text] : {std::pair{"--from", &flags.from}, std::pair{"--to", &flags.to}}) {
    if (auto day = parse_utc_date(*text, field); !day) return std::unexpected(day.error());
  }
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  auto reply = client->get(
      "/v1/bill",
      {{"tenant", flags.tenant}, {"from", flags.from}, {"to", flags.to}, {"by", flags.by}});
  if (!reply) return std::unexpected(reply.error());
  if (flags.client.output == "csv") {
    std::cout << render_bill_csv(*reply);
  } else if (flags.client.output == "table") {
    std::cout << render_bill(*reply);
  } else {
    write_document(*reply, output_format(flags.client), std::cout);
  }
  return {};
}

}  // namespace

void add_market_commands(CLI::App& app, int* exit_code) {
  {
    auto flags = std::make_shared<ClientFlags>();
    CLI::App* cmd = app.add_subcommand(
        "price", "Show the internal market's price in force of a GPU-hour, per GPU model");
    add_client_flags(*cmd, *flags, kDocumentFormats);
    cmd->footer(
        "Columns: COST-BASE is the cost of a used GPU-hour (TCO at the target utilisation); the "
        "price is cost base x utilisation multiplier x time-of-day multiplier, x the class "
        "multiplier for PREEMPTIBLE and EMERGENCY work. Prices hold for one period.\n\n"
        "Examples:\n  tidepool price\n  tidepool price -o json\n\n" +
        connection_help());
    cmd->callback([flags, exit_code] {
      run_client_command(exit_code, [&]() -> Result<void> {
        auto client = open_client(*flags);
        if (!client) return std::unexpected(client.error());
        auto reply = client->get("/v1/prices");
        if (!reply) return std::unexpected(reply.error());
        const OutputFormat format = output_format(*flags);
        if (format == OutputFormat::kTable) {
          std::cout << render_prices(*reply);
        } else {
          write_document(*reply, format, std::cout);
        }
        return {};
      });
    });
  }
  {
    auto flags = std::make_shared<BillFlags>();
    CLI::App* cmd = app.add_subcommand(
        "bill", "A tenant's charges and lending credits over whole UTC days, grouped");
    cmd->add_option("--tenant", flags->tenant, "The tenant billed")->required();
    cmd->add_option("--from", flags->from, "First day, YYYY-MM-DD (UTC)")->required();
    cmd->add_option("--to", flags->to, "Last day, YYYY-MM-DD (UTC), included")->required();
    cmd->add_option("--by", flags->by, "Group by team (queue), job, model or label")
        ->check(CLI::IsMember({"team", "job", "model", "label"}))
        ->capture_default_str();
    add_client_flags(*cmd, flags->client);
    flags->client.formats = kBillFormats;
    cmd->add_option("-o,--output", flags->client.output, "Output format: table, csv, json or yaml")
        ->check(CLI::IsMember({"table", "csv", "json", "yaml"}))
        ->capture_default_str();
    cmd->footer(
        "Charges are posted to the ledger every posting interval of the server (60s by default) "
        "and when a job stops; an entry counts on the day its interval ends. Lending credits "
        "belong to the tenant, not to a job: they are their own group unless grouped by model. "
        "By label, a job's group is all its labels (k=v,...).\n\n"
        "Examples:\n  tidepool bill --tenant vision --from 2026-10-01 --to 2026-12-31\n"
        "  tidepool bill --tenant vision --from 2026-12-01 --to 2026-12-01 --by job -o csv\n\n" +
        connection_help());
    cmd->callback(
        [flags, exit_code] { run_client_command(exit_code, [&] { return run_bill(*flags); }); });
  }
}

}  // namespace tidepool
