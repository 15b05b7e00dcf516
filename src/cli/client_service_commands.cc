// tidepool services [ID].
#include <iostream>
#include <memory>

#include "cli/client_commands.h"
#include "cli/client_session.h"
#include "cli/client_views.h"

namespace tidepool {
namespace {

struct ServicesFlags {
  ClientFlags client;
  std::string id;  // empty: every service the token may see
};

Result<void> show_services(const ServicesFlags& flags) {
  auto client = open_client(flags.client);
  if (!client) return std::unexpected(client.error());
  const bool one = !flags.id.empty();
  auto reply = client->get(one ? "/v1/services/" + url_escape(flags.id) : "/v1/services");
  if (!reply) return std::unexpected(reply.error());
  const OutputFormat format = output_format(flags.client);
  if (is_document(format)) {
    write_document(*reply, format, std::cout);
  } else if (one && format == OutputFormat::kTable) {
    std::cout << render_service_details(*reply, wall_clock_ms());
  } else {
    // CSV is for programs: the decisions' reasons whole.
    const std::size_t width = format == OutputFormat::kCsv ? 0 : kDecisionWidth;
    const nlohmann::json services = one ? nlohmann::json::array({*reply}) : reply->at("services");
    std::cout << render_listing(services_listing(services, wall_clock_ms(), width), format,
                                !flags.client.no_headers);
  }
  return {};
}

}  // namespace

void add_service_commands(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServicesFlags>();
  CLI::App* cmd = app.add_subcommand(
      "services", "List inference services (kind: service jobs), or show one with its replicas");
  cmd->add_option("ID", flags->id,
                  "Only this service (its job id): its replicas, endpoints and the autoscaler's "
                  "last decision");
  add_client_flags(*cmd, flags->client, kListingFormats);
  cmd->footer(
      "Columns: READY/WANTED is the replicas ready to serve over the count the autoscaler wants "
      "(- before its first decision); MIN-MAX the bounds of that count; TARGET what it holds per "
      "replica (p95 latency, requests waiting or in flight); LAST-DECISION why it chose its "
      "count (whole with -o csv, -o json or an ID). -o wide adds STATE, SPREAD, the replicas per "
      "phase, the ENDPOINTS ready and when it DECIDED.\n\n"
      "With an ID: the replicas (JOB PHASE NODE PORT, and the figures their agents last "
      "reported: RPS requests per second, P95 MS latency, WAITING and IN FLIGHT requests; - "
      "when not reported), the endpoints to send requests to, and the last decision. `tidepool "
      "job ID` shows the replicas too.\n\n"
      "Examples:\n  tidepool services\n  tidepool services 7\n  tidepool services 7 -o yaml\n\n" +
      connection_help());
  cmd->callback(
      [flags, exit_code] { run_client_command(exit_code, [&] { return show_services(*flags); }); });
}

}  // namespace tidepool
