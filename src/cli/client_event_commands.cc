// tidepool events: the pool's event stream (GET /v1/events) as lines for people, from a time on,
// and with --watch as it happens (kubectl get events --watch).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "api/event_text.h"
#include "cli/client_commands.h"
#include "cli/client_session.h"
#include "cli/time_text.h"

namespace tidepool {
namespace {

struct EventsFlags {
  ClientFlags client;
  std::string since = "1h";
  bool watch = false;
  std::vector<std::string> kinds;  // prefixes; empty: every kind
};

constexpr int kPage = 1000;
constexpr std::chrono::seconds kWatchPoll{30};  // one long poll's wait for new events

bool wanted(const EventsFlags& flags, const std::string& kind) {
  if (flags.kinds.empty()) return true;
  for (const std::string& prefix : flags.kinds) {
    // "job" and "job." both mean every job event; "job.failed" that one kind.
    if (kind == prefix || kind.starts_with(prefix.ends_with('.') ? prefix : prefix + ".")) {
      return true;
    }
  }
  return false;
}

// "2026-12-04 13:04:05  job.started       job 12 (...): placed on ... on h100-a-01:8"
std::string event_line(const nlohmann::json& event) {
  const auto at = event.find("at_ms");
  const auto kind = event.find("kind");
  const auto data = event.find("data");
  return fmt::format(
      "{}  {:<16}  {}\n",
      format_local_time(at != event.end() && at->is_number_integer() ? at->get<std::int64_t>() : 0),
      kind != event.end() && kind->is_string() ? kind->get<std::string>() : "?",
      data != event.end() ? event_text(*data) : "");
}

// The events after `since` (a sequence number; -1 with `since_ms` for a time), up to those there
// are now, page by page; `last_seq` is where the next read goes on from.
Result<std::vector<nlohmann::json>> read_events(ApiClient& client, std::int64_t since,
                                                std::int64_t since_ms, std::int64_t& last_seq,
                                                std::chrono::seconds wait) {
  std::vector<nlohmann::json> out;
  while (true) {
    QueryParams params = {{"limit", std::to_string(kPage)},
                          {"timeout", fmt::format("{}s", wait.count())}};
    if (since < 0) {
      params.emplace_back("since_ms", std::to_string(since_ms));
    } else {
      params.emplace_back("since", std::to_string(since));
    }
    auto reply = client.get("/v1/events", params);
    if (!reply) return std::unexpected(reply.error());
    const auto& events = reply->at("events");
    const auto next = reply->at("last_seq").get<std::int64_t>();
    const bool moved = next > since;
    since = next;
    last_seq = since;
    for (const nlohmann::json& event : events) out.push_back(event);
    // A page that is not full is all there is now (and a wait gives one reply only); a reply that
    // does not move the sequence on is not read again and again.
    if (events.size() < static_cast<std::size_t>(kPage) || wait.count() > 0 || !moved) return out;
  }
}

Result<void> show_events(const EventsFlags& flags) {
  // A watch waits on the server for up to kWatchPoll: the read must wait longer.
  ApiClientOptions options;
  options.read_timeout = kWatchPoll + std::chrono::seconds(15);
  auto client = open_client(flags.client, options);
  if (!client) return std::unexpected(client.error());
  auto since_ms = parse_time_point(flags.since, wall_clock_ms(), "--since");
  if (!since_ms) return std::unexpected(since_ms.error());
  const OutputFormat format = output_format(flags.client);
  std::int64_t last_seq = 0;
  auto first = read_events(*client, -1, std::max<std::int64_t>(0, *since_ms), last_seq,
                           std::chrono::seconds(0));
  if (!first) return std::unexpected(first.error());
  std::vector<nlohmann::json> events;
  for (nlohmann::json& event : *first) {
    if (wanted(flags, event.value("kind", ""))) events.push_back(std::move(event));
  }
  // A document of the events there are; with --watch, one JSON object per line (JSON lines).
  if (is_document(format) && !flags.watch) {
    write_document({{"events", events}, {"last_seq", last_seq}}, format, std::cout);
    return {};
  }
  const auto print = [&](const nlohmann::json& event) {
    const std::string text = is_document(format) ? event.dump() + "\n" : event_line(event);
    std::fwrite(text.data(), 1, text.size(), stdout);
  };
  if (!flags.watch && events.empty()) {
    std::fprintf(stderr, "No events since %s.\n", format_local_time(*since_ms).c_str());
  }
  for (const nlohmann::json& event : events) print(event);
  if (!flush_stdout()) return {};
  while (flags.watch) {
    auto more = read_events(*client, last_seq, 0, last_seq, kWatchPoll);
    if (!more) return std::unexpected(more.error());
    for (const nlohmann::json& event : *more) {
      if (wanted(flags, event.value("kind", ""))) print(event);
    }
    if (!flush_stdout()) return {};
  }
  return {};
}

}  // namespace

void add_event_commands(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<EventsFlags>();
  CLI::App* cmd = app.add_subcommand(
      "events",
      "Show the pool's events (jobs started, preempted, failed; nodes; budgets), or "
      "--watch them as they happen");
  cmd->add_option("--since", flags->since,
                  "From this time on: a span ago (1h, 30m, 2d), a day (2026-12-01) or a day and "
                  "time (2026-12-01T13:30; local time, Z for UTC)")
      ->capture_default_str();
  cmd->add_flag("-w,--watch", flags->watch,
                "After the events there are, print new ones as they happen, until Ctrl-C");
  cmd->add_option("--kind", flags->kinds,
                  "Only these kinds, or groups of kinds: job.failed, node, budget (repeatable)");
  add_client_flags(*cmd, flags->client, kDocumentFormats);
  cmd->footer(
      "Each line: the local time, the kind, and what happened (the server's log says the same).\n"
      "Users see their tenant's events. -o json with --watch prints one JSON object per line.\n\n"
      "Examples:\n"
      "  tidepool events\n"
      "  tidepool events --since 2026-12-01 --kind job.failed --kind job.preempted\n"
      "  tidepool events --watch --kind node\n\n" +
      connection_help());
  cmd->callback(
      [flags, exit_code] { run_client_command(exit_code, [&] { return show_events(*flags); }); });
}

}  // namespace tidepool
