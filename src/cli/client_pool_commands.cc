// tidepool nodes, drain, undrain, queues, tenants, top.
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

#include "api/job_spec.h"
#include "cli/client_commands.h"
#include "cli/client_session.h"
#include "cli/client_views.h"

namespace tidepool {
namespace {

std::string node_path(const std::string& name) { return "/v1/nodes/" + url_escape(name); }

// GETs `path` and prints its `key` array as the listing `list` makes of it, or the whole reply,
// as -o says.
Result<void> print_listing(const ClientFlags& flags, const std::string& path, const char* key,
                           const std::function<Listing(const nlohmann::json&)>& list) {
  auto client = open_client(flags);
  if (!client) return std::unexpected(client.error());
  auto reply = client->get(path);
  if (!reply) return std::unexpected(reply.error());
  const OutputFormat format = output_format(flags);
  if (is_document(format)) {
    write_document(*reply, format, std::cout);
  } else {
    std::cout << render_listing(
        list(key == nullptr ? nlohmann::json::array({*reply}) : reply->at(key)), format,
        !flags.no_headers);
  }
  return {};
}

// --- drain, undrain ---

struct DrainFlags {
  ClientFlags client;
  std::vector<std::string> nodes;  // names or hostlists ("h100-a-[01-04]")
  std::string reason;
};

Result<void> set_drained(const DrainFlags& flags, bool drain) {
  std::vector<std::string> names;
  for (const std::string& item : flags.nodes) {
    auto expanded = expand_node_names(item, "NODE");
    if (!expanded) return std::unexpected(expanded.error());
    names.insert(names.end(), expanded->begin(), expanded->end());
  }
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  nlohmann::json body = nlohmann::json::object();
  if (drain && !flags.reason.empty()) body["reason"] = flags.reason;
  const OutputFormat format = output_format(flags.client);
  nlohmann::json done = nlohmann::json::array();
  int failures = 0;
  for (const std::string& name : names) {
    auto node = client->post(node_path(name) + (drain ? "/drain" : "/undrain"), body);
    if (!node) {
      if (is_connection_error(node.error())) return std::unexpected(node.error());
      print_error(node.error());
      ++failures;
      continue;
    }
    if (is_document(format)) {
      done.push_back(std::move(*node));
    } else if (drain) {
      const auto running = node->value("jobs", nlohmann::json::array()).size();
      fmt::print("Node {} drained ({}); no new jobs go there.", name,
                 node->value("drain_reason", ""));
      fmt::print(" {} job(s) still run on it.\n", running);
    } else {
      fmt::print("Node {} undrained; new jobs may be placed there again.\n", name);
    }
  }
  if (is_document(format)) write_document({{"nodes", done}}, format, std::cout);
  if (failures > 0) {
    if (names.size() == 1) return std::unexpected(already_reported());
    return fail("", fmt::format("{} of {} nodes not {}", failures, names.size(),
                                drain ? "drained" : "undrained"));
  }
  return {};
}

// --- top ---

struct TopFlags {
  ClientFlags client;
  std::string interval = "2s";
  bool interval_given = false;  // --interval was on the command line
  bool once = false;
  bool no_color = false;
};

std::atomic<bool> top_interrupted{false};

extern "C" void on_top_interrupt(int /*signal*/) { top_interrupted = true; }

Result<std::chrono::milliseconds> parse_interval(const std::string& text) {
  const auto bad = [&] {
    return fail("--interval", fmt::format("'{}' is not a refresh interval; use e.g. 2s, 500ms or "
                                          "1m (from 200ms to 1h)",
                                          text));
  };
  auto ms = parse_duration_ms(text);
  if (!ms || *ms < 200 || *ms > 3'600'000) return bad();
  return std::chrono::milliseconds(*ms);
}

int terminal_width() {
  winsize size{};
  if (::isatty(STDOUT_FILENO) != 0 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 &&
      size.ws_col > 0) {
    return size.ws_col;
  }
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr) {
    const int n = std::atoi(columns);
    if (n > 0) return n;
  }
  return 100;
}

Result<std::string> top_frame(ApiClient& client, const TopFlags& flags, bool color,
                              const std::string& every) {
  auto nodes = client.get("/v1/nodes");
  if (!nodes) return std::unexpected(nodes.error());
  auto jobs = client.get_jobs({{"state", "running"}});
  if (!jobs) return std::unexpected(jobs.error());
  auto queues = client.get("/v1/queues");
  if (!queues) return std::unexpected(queues.error());
  TopFrameStyle style;
  style.width = terminal_width();
  style.color = color;
  style.title =
      fmt::format("tidepool top  {}  {}", client.server(), format_local_time(wall_clock_ms()));
  if (!flags.once) style.title += fmt::format("  (every {}; Ctrl-C quits)", every);
  return render_top_frame(nodes->at("nodes"), jobs->at("jobs"), queues->at("queues"), style);
}

Result<void> run_top(const TopFlags& flags) {
  auto interval = parse_interval(flags.interval);
  if (!interval) return std::unexpected(interval.error());
  ApiClientOptions options;
  options.read_timeout = std::max<std::chrono::milliseconds>(*interval, std::chrono::seconds(5));
  auto client = open_client(flags.client, options);
  if (!client) return std::unexpected(client.error());
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  const bool color = tty && !flags.no_color && std::getenv("NO_COLOR") == nullptr;
  // Without a terminal (a pipe, a file, a cron job) one frame, as --once, unless --interval asks
  // for frames one after another (as top -b), each after a blank line.
  if (flags.once || (!tty && !flags.interval_given)) {
    auto frame = top_frame(*client, flags, color, flags.interval);
    if (!frame) return std::unexpected(frame.error());
    std::cout << *frame << std::flush;
    return {};
  }
  struct sigaction action {};
  action.sa_handler = on_top_interrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  if (tty) std::cout << "\x1b[?1049h\x1b[?25l";  // alternate screen, cursor hidden
  bool first = true;
  while (!top_interrupted) {
    auto frame = top_frame(*client, flags, color, flags.interval);
    std::string text = frame ? *frame
                             : fmt::format(
                                   "tidepool top  {}  {}\n\nerror: {}\n(retrying every {}; "
                                   "Ctrl-C quits)\n",
                                   client->server(), format_local_time(wall_clock_ms()),
                                   frame.error().message(), flags.interval);
    if (tty) {
      std::cout << "\x1b[H\x1b[2J";
    } else if (!first) {
      std::cout << '\n';
    }
    first = false;
    std::cout << text << std::flush;
    const auto until = std::chrono::steady_clock::now() + *interval;
    while (!top_interrupted && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (tty) std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
  return {};
}

}  // namespace

void add_pool_commands(CLI::App& app, int* exit_code) {
  {
    auto flags = std::make_shared<ClientFlags>();
    CLI::App* cmd = app.add_subcommand("nodes", "List nodes, their GPUs and the jobs on them");
    add_client_flags(*cmd, *flags, kListingFormats);
    cmd->footer(
        "Columns: USED is the GPUs allocated (fractions for shared GPUs), AGENT the version of "
        "the agent that registered the node (- : none has, and the node takes no jobs), "
        "HEARTBEAT when it was last heard from, JOBS the ids of the jobs running there, REASON "
        "why a node takes no jobs (drained, no agent, heartbeats missed).\n\n"
        "Examples:\n  tidepool nodes\n  tidepool nodes -o json\n\n" +
        connection_help());
    cmd->callback([flags, exit_code] {
      run_client_command(exit_code, [&] {
        return print_listing(*flags, "/v1/nodes", "nodes", [](const nlohmann::json& nodes) {
          return nodes_listing(nodes, wall_clock_ms());
        });
      });
    });
  }
  for (const bool drain : {true, false}) {
    auto flags = std::make_shared<DrainFlags>();
    CLI::App* cmd = app.add_subcommand(
        drain ? "drain" : "undrain",
        drain ? "(admin) Place no new jobs on a node; the jobs running there go on"
              : "(admin) Place jobs on a drained node again");
    cmd->add_option("NODE", flags->nodes,
                    "Node names as `tidepool nodes` lists them, or hostlists as Slurm writes "
                    "them: h100-a-[01-04,06]")
        ->required();
    if (drain) {
      cmd->add_option("--reason", flags->reason,
                      "Why, shown by `tidepool nodes` (draining a drained node again with "
                      "another reason replaces it)");
    }
    add_client_flags(*cmd, flags->client, kDocumentFormats);
    cmd->footer(std::string(drain ? "Examples:\n  tidepool drain h100-a-01 --reason \"bad GPU 3\"\n"
                                    "  tidepool drain h100-b-[01-04] --reason \"rack 7 power\"\n\n"
                                  : "Examples:\n  tidepool undrain h100-a-01\n"
                                    "  tidepool undrain h100-b-[01-04]\n\n") +
                connection_help());
    cmd->callback([flags, exit_code, drain] {
      run_client_command(exit_code, [&] { return set_drained(*flags, drain); });
    });
  }
  {
    auto flags = std::make_shared<ClientFlags>();
    CLI::App* cmd =
        app.add_subcommand("queues", "List team queues with their pending and running jobs");
    add_client_flags(*cmd, *flags, kListingFormats);
    cmd->footer("Example:\n  tidepool queues\n\n" + connection_help());
    cmd->callback([flags, exit_code] {
      run_client_command(
          exit_code, [&] { return print_listing(*flags, "/v1/queues", "queues", queues_listing); });
    });
  }
  {
    auto flags = std::make_shared<ClientFlags>();
    auto name = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand(
        "tenants",
        "List tenants: quota per GPU model (guaranteed, used, borrowed, limits), weight");
    cmd->add_option("NAME", *name, "Only this tenant");
    add_client_flags(*cmd, *flags, kListingFormats);
    cmd->footer(
        "Columns: GUARANTEED GPUs are the tenant's own; BORROWED the GPUs it uses beyond them "
        "(idle capacity of others, taken back when needed); BORROW-LIMIT caps the borrowing, "
        "LEND-LIMIT how much of the guarantee others may borrow.\n\n"
        "Examples:\n  tidepool tenants\n  tidepool tenants vision -o yaml\n\n" +
        connection_help());
    cmd->callback([flags, name, exit_code] {
      run_client_command(exit_code, [&] {
        if (name->empty()) {
          return print_listing(*flags, "/v1/tenants", "tenants", tenants_listing);
        }
        return print_listing(*flags, "/v1/tenants/" + url_escape(*name), nullptr, tenants_listing);
      });
    });
  }
  {
    auto flags = std::make_shared<TopFlags>();
    CLI::App* cmd = app.add_subcommand(
        "top", "A refreshing view of the pool: who holds each GPU, and the queues per tenant");
    CLI::Option* interval =
        cmd->add_option("--interval", flags->interval,
                        "Refresh interval, e.g. 2s, 500ms, 1m (without a terminal: print a frame "
                        "this often, one after another; else one frame)")
            ->capture_default_str();
    cmd->add_flag("--once", flags->once, "Print one frame and exit (no screen clearing)");
    cmd->add_flag("--no-color", flags->no_color, "No colors (also: the NO_COLOR variable)");
    add_client_flags(*cmd, flags->client);
    cmd->footer(
        "Each node shows one character per GPU: the letter of the tenant holding it (listed "
        "below the nodes), in lower case when a fractional job uses part of it, '+' when "
        "tenants share it, '.' free, 'x' free on a drained node.\n\n"
        "Examples:\n  tidepool top\n  tidepool top --interval 5s\n  tidepool top --once\n\n" +
        connection_help());
    cmd->callback([flags, exit_code, interval] {
      flags->interval_given = interval->count() > 0;
      run_client_command(exit_code, [&] { return run_top(*flags); });
    });
  }
}

}  // namespace tidepool
