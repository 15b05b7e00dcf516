#include "sim_cli/plan_tco_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/market_file.h"
#include "core/gpu_cost.h"
#include "core/money.h"
#include "core/split_text.h"
#include "report/csv_field.h"
#include "report/text_table.h"

namespace tidepool {
namespace {

struct TcoOptions {
  std::string market;
  std::string utilisation = "0.3,0.5,0.7,0.9";
  std::vector<std::string> models;
  std::string output = "table";
};

enum class TcoFormat : std::uint8_t { kTable, kCsv, kJson };

// A break-even utilisation against a rented price: absent without the price; `share` nullopt
// when owning costs more even fully used.
struct BreakEven {
  std::optional<Ppm> share;
};

// One model's figures, everything the three formats print.
struct ModelTco {
  const GpuCostInputs* inputs = nullptr;
  GpuCost cost;
  std::optional<Micros> spot_useful;  // spot per useful hour
  std::optional<BreakEven> on_demand_break_even, spot_break_even;
};

// At one utilisation: what a used GPU-hour costs each way, and the cheapest.
struct Comparison {
  Ppm utilisation = 0;
  Micros owned = 0;
  std::string_view cheapest;
};

Result<TcoFormat> parse_format(const std::string& name) {
  if (name == "table") return TcoFormat::kTable;
  if (name == "csv") return TcoFormat::kCsv;
  if (name == "json") return TcoFormat::kJson;
  return fail("--output", fmt::format("unknown format '{}'; expected table, csv or json", name));
}

Result<std::vector<Ppm>> parse_utilisations(const std::string& text) {
  std::vector<Ppm> shares;
  for (const std::string_view item : split_text(text, ',')) {
    const auto share = parse_ppm(item, "--utilisation");
    if (!share || *share <= 0 || *share > kPpmOne) {
      return fail("--utilisation",
                  fmt::format("'{}' is not a share above 0 and at most 1; expected "
                              "shares joined by commas, e.g. 0.3,0.5,0.7,0.9",
                              item));
    }
    shares.push_back(*share);
  }
  return shares;
}

// The models to show: all of the file's in file order, or those named, in the order named.
Result<std::vector<const GpuCostInputs*>> chosen_models(const MarketSpec& market,
                                                        const std::vector<std::string>& names) {
  std::vector<const GpuCostInputs*> chosen;
  if (names.empty()) {
    for (const GpuCostInputs& inputs : market.models) chosen.push_back(&inputs);
    return chosen;
  }
  for (const std::string& name : names) {
    const GpuCostInputs* inputs = find_market_model(market, name);
    if (inputs == nullptr) {
      std::string known;
      for (const GpuCostInputs& m : market.models) {
        known += (known.empty() ? "" : ", ") + m.model;
      }
      return fail("--model",
                  fmt::format("model '{}' is not in the market file; it has {}", name, known));
    }
    if (std::find(chosen.begin(), chosen.end(), inputs) != chosen.end()) {
      return fail("--model", fmt::format("model '{}' is given twice", name));
    }
    chosen.push_back(inputs);
  }
  return chosen;
}

ModelTco model_tco(const GpuCostInputs& inputs) {
  ModelTco tco;
  tco.inputs = &inputs;
  tco.cost = gpu_cost(inputs);
  if (inputs.on_demand_per_hour) {
    tco.on_demand_break_even =
        BreakEven{break_even_utilisation(tco.cost, *inputs.on_demand_per_hour)};
  }
  if (inputs.spot_per_hour) {
    tco.spot_useful = spot_cost_per_useful_hour(inputs);
    tco.spot_break_even = BreakEven{break_even_utilisation(tco.cost, *tco.spot_useful)};
  }
  return tco;
}

Comparison compare(const ModelTco& tco, Ppm utilisation) {
  Comparison c;
  c.utilisation = utilisation;
  c.owned = owned_cost_per_used_hour(tco.cost, utilisation);
  c.cheapest = "owned";
  Micros best = c.owned;
  // Strictly cheaper only: ties go to owning, then on demand.
  if (tco.inputs->on_demand_per_hour && *tco.inputs->on_demand_per_hour < best) {
    best = *tco.inputs->on_demand_per_hour;
    c.cheapest = "on-demand";
  }
  if (tco.spot_useful && *tco.spot_useful < best) c.cheapest = "spot";
  return c;
}

std::string optional_money(const std::optional<Micros>& amount) {
  return amount ? money_text(*amount) : "-";
}

std::string break_even_text(const std::optional<BreakEven>& b) {
  if (!b) return "-";
  return b->share ? percent_text(*b->share) : "never";
}

// Amortisation period as people say it: "4 years", "42 months".
std::string amortisation_text(int months) {
  if (months % 12 == 0) return fmt::format("{} year{}", months / 12, months == 12 ? "" : "s");
  return fmt::format("{} months", months);
}

void print_tables(const MarketSpec& market, const std::string& path,
                  const std::vector<ModelTco>& models, const std::vector<Ppm>& utilisations) {
  const std::string& cur = market.currency;
  std::cout << fmt::format("TCO per GPU from {}; amounts in {}.\n\n", path, cur);

  std::cout << "Cost of owning one GPU, per hour it exists (used or not):\n";
  TextTable costs({"model", "purchase", "written off over", "amortisation/h", "power/h",
                   "operations/h", "owned/h", "target use", "cost base/used h"});
  for (const ModelTco& m : models) {
    const GpuCostInputs& in = *m.inputs;
    costs.add_row({in.model, money_text(in.purchase_price),
                   amortisation_text(in.amortisation_months),
                   money_text(m.cost.amortisation_per_hour), money_text(m.cost.power_per_hour),
                   money_text(m.cost.operations_per_hour), money_text(m.cost.owned_per_hour),
                   percent_text(in.target_utilisation), money_text(m.cost.cost_base)});
  }
  costs.print(std::cout);

  std::cout << "\nOwning vs renting, per used GPU-hour:\n";
  TextTable comparison({"model", "utilisation", "owned", "on-demand", "spot/useful h", "cheapest"});
  for (const ModelTco& m : models) {
    for (Ppm u : utilisations) {
      const Comparison c = compare(m, u);
      comparison.add_row({m.inputs->model, percent_text(u), money_text(c.owned),
                          optional_money(m.inputs->on_demand_per_hour),
                          optional_money(m.spot_useful), std::string(c.cheapest)});
    }
  }
  comparison.print(std::cout);

  std::cout << "\nBreak-even utilisation: owning is cheaper above it:\n";
  TextTable break_even({"model", "on-demand/h", "vs on-demand", "spot/h", "spot interrupted",
                        "spot/useful h", "vs spot"});
  for (const ModelTco& m : models) {
    const GpuCostInputs& in = *m.inputs;
    break_even.add_row({in.model, optional_money(in.on_demand_per_hour),
                        break_even_text(m.on_demand_break_even), optional_money(in.spot_per_hour),
                        in.spot_per_hour ? percent_text(in.spot_interruption) : "-",
                        optional_money(m.spot_useful), break_even_text(m.spot_break_even)});
  }
  break_even.print(std::cout);
  std::cout
      << "\nOwned per used GPU-hour = owned/h / utilisation. Spot per useful hour = spot/h /\n"
         "(1 - interrupted share): interrupted hours are redone. Spot capacity can be taken\n"
         "back at any time: it suits only preemptible work that checkpoints.\n";
}

std::string csv_money(const std::optional<Micros>& amount) {
  return amount ? exact_money_text(*amount) : "";
}

std::string csv_break_even(const std::optional<BreakEven>& b) {
  if (!b) return "";
  return b->share ? ppm_text(*b->share) : "never";
}

void print_csv(const MarketSpec& market, const std::vector<ModelTco>& models,
               const std::vector<Ppm>& utilisations) {
  std::cout << "model,currency,purchase_price,amortisation_months,power_watts,pue,"
               "electricity_per_kwh,operations_per_year,amortisation_per_hour,power_per_hour,"
               "operations_per_hour,owned_per_hour,target_utilisation,cost_base,"
               "on_demand_per_hour,spot_per_hour,spot_interruption,spot_per_useful_hour,"
               "break_even_on_demand,break_even_spot,utilisation,owned_per_used_hour,cheapest\n";
  for (const ModelTco& m : models) {
    const GpuCostInputs& in = *m.inputs;
    const std::string model_fields = fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", csv_field(in.model),
        csv_field(market.currency), exact_money_text(in.purchase_price), in.amortisation_months,
        in.power_watts, ppm_text(in.pue_milli * 1000), exact_money_text(in.electricity_per_kwh),
        exact_money_text(in.operations_per_year), exact_money_text(m.cost.amortisation_per_hour),
        exact_money_text(m.cost.power_per_hour), exact_money_text(m.cost.operations_per_hour),
        exact_money_text(m.cost.owned_per_hour), ppm_text(in.target_utilisation),
        exact_money_text(m.cost.cost_base), csv_money(in.on_demand_per_hour),
        csv_money(in.spot_per_hour), in.spot_per_hour ? ppm_text(in.spot_interruption) : "",
        csv_money(m.spot_useful), csv_break_even(m.on_demand_break_even),
        csv_break_even(m.spot_break_even));
    for (Ppm u : utilisations) {
      const Comparison c = compare(m, u);
      std::cout << fmt::format("{},{},{},{}\n", model_fields, ppm_text(u),
                               exact_money_text(c.owned), c.cheapest);
    }
  }
}

// Micro-units as a JSON number in whole units (exact to the micro: doubles hold 15 digits).
nlohmann::ordered_json units(std::int64_t micros) {
  return static_cast<double>(micros) / static_cast<double>(kMicrosPerUnit);
}

void print_tco_json(const MarketSpec& market, const std::string& path,
                    const std::vector<ModelTco>& models, const std::vector<Ppm>& utilisations) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["market"] = path;
  out["currency"] = market.currency;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ModelTco& m : models) {
    const GpuCostInputs& in = *m.inputs;
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    j["model"] = in.model;
    j["purchase_price"] = units(in.purchase_price);
    j["amortisation_months"] = in.amortisation_months;
    j["power_watts"] = in.power_watts;
    j["pue"] = units(in.pue_milli * 1000);
    j["electricity_per_kwh"] = units(in.electricity_per_kwh);
    j["operations_per_year"] = units(in.operations_per_year);
    j["target_utilisation"] = units(in.target_utilisation);
    j["per_hour"] = {{"amortisation", units(m.cost.amortisation_per_hour)},
                     {"power", units(m.cost.power_per_hour)},
                     {"operations", units(m.cost.operations_per_hour)},
                     {"owned", units(m.cost.owned_per_hour)}};
    j["cost_base"] = units(m.cost.cost_base);
    if (in.on_demand_per_hour) {
      j["on_demand_per_hour"] = units(*in.on_demand_per_hour);
      j["break_even_on_demand"] = m.on_demand_break_even->share
                                      ? units(*m.on_demand_break_even->share)
                                      : nlohmann::ordered_json(nullptr);
    }
    if (in.spot_per_hour) {
      j["spot_per_hour"] = units(*in.spot_per_hour);
      j["spot_interruption"] = units(in.spot_interruption);
      j["spot_per_useful_hour"] = units(*m.spot_useful);
      j["break_even_spot"] = m.spot_break_even->share ? units(*m.spot_break_even->share)
                                                      : nlohmann::ordered_json(nullptr);
    }
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (Ppm u : utilisations) {
      const Comparison c = compare(m, u);
      rows.push_back({{"utilisation", units(u)},
                      {"owned_per_used_hour", units(c.owned)},
                      {"cheapest", std::string(c.cheapest)}});
    }
    j["comparison"] = std::move(rows);
    list.push_back(std::move(j));
  }
  out["models"] = std::move(list);
  std::cout << out.dump(2) << '\n';
}

Result<void> run_plan_tco(const TcoOptions& options) {
  auto format = parse_format(options.output);
  if (!format) return std::unexpected(format.error());
  auto utilisations = parse_utilisations(options.utilisation);
  if (!utilisations) return std::unexpected(utilisations.error());
  auto market = load_market_yaml(options.market);
  if (!market) return std::unexpected(market.error());
  auto chosen = chosen_models(*market, options.models);
  if (!chosen) return std::unexpected(chosen.error());
  std::vector<ModelTco> models;
  for (const GpuCostInputs* inputs : *chosen) models.push_back(model_tco(*inputs));
  switch (*format) {
    case TcoFormat::kTable:
      print_tables(*market, options.market, models, *utilisations);
      break;
    case TcoFormat::kCsv:
      print_csv(*market, models, *utilisations);
      break;
    case TcoFormat::kJson:
      print_tco_json(*market, options.market, models, *utilisations);
      break;
  }
  return {};
}

}  // namespace

void add_plan_tco_command(CLI::App& plan, int* exit_code) {
  auto options = std::make_shared<TcoOptions>();
  CLI::App* command = plan.add_subcommand(
      "tco",
      "Total cost of ownership per GPU model: what a GPU-hour costs to own (amortisation, power, "
      "operations), the cost base at the target utilisation, and owning vs renting on demand or "
      "spot at several utilisations, with the break-even utilisations");
  command
      ->add_option("--market", options->market,
                   "market file (YAML; format in src/config/market_file.h, example in "
                   "data/market/example.yaml)")
      ->required();
  command
      ->add_option("--utilisation", options->utilisation,
                   "utilisations to compare at, shares in (0, 1] joined by commas")
      ->capture_default_str();
  command
      ->add_option("--model", options->models,
                   "only this GPU model of the market file, repeatable (default: all, in file "
                   "order)")
      ->allow_extra_args(false);
  command->add_option("-o,--output", options->output, "output format: table, csv or json")
      ->capture_default_str();
  command->footer(
      "Example: tidepool plan tco --market data/market/example.yaml --model H100 "
      "--utilisation 0.2,0.5,0.8\n"
      "Prints the cost of owning one GPU per hour (amortisation, power, operations, their sum and "
      "the cost base per used GPU-hour), owning vs on-demand vs spot per used GPU-hour at each "
      "utilisation with the cheapest, and the break-even utilisations. Spot suits only "
      "preemptible work that checkpoints.");
  command->callback([options, exit_code] {
    if (auto ok = run_plan_tco(*options); !ok) {
      std::cerr << "error: " << ok.error().message() << '\n';
      *exit_code = 1;
    }
  });
}

}  // namespace tidepool
