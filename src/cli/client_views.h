// The tables and texts the user commands print for people (`-o table`), built from the server's
// JSON replies (shapes: server/control_plane.cc, control_plane_admin.cc, server_job.cc). Pure:
// each takes the reply's data and the current time and returns text, so tests can check them
// without a server. Missing keys read as empty; a value of the wrong type throws
// nlohmann::json::exception, which the commands report as an unexpected reply.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/listing.h"

namespace tidepool {

// `tidepool jobs`: ID NAME TENANT QUEUE STATE GPUS AGE TIME NODES REASON, one row per job of the
// array `jobs`. AGE is the time since submission; TIME the time run (running, or ended after a
// run). REASON: for a pending job its kind from `pending_kinds` (job id -> "quota", "capacity",
// ...) when known, else the job's last message; nothing for running jobs; the final message for
// ended ones.
// Wide columns: PRIORITY CLASS MODELS SUBMITTED SUBMITTER; -o name: job/ID.
Listing jobs_listing(const nlohmann::json& jobs,
                     const std::map<std::int64_t, std::string>& pending_kinds, std::int64_t now_ms);

// `tidepool job ID`: the spec in a few lines, the times, what its steps say when it reported some
// (its `step_summary`: step times, communication share, all-reduce, MFU), the transitions and the
// placement; for a service's job (its `service_status`, as render_service_details reads it) then
// its replicas.
std::string render_job_details(const nlohmann::json& job, std::int64_t now_ms);

// `tidepool why ID`: the state with its reason; for a pending job, how long it has waited and the
// seconds it has waited for each kind of reason.
std::string render_why(const nlohmann::json& why);
// `tidepool advise`: each advice on a line, then the note on communication and the MFU it would
// reach (GET /v1/jobs/ID/advice).
std::string render_advice(const nlohmann::json& advice);

// `tidepool nodes`: NAME STATE MODEL GPUS USED LEAF JOBS REASON (REASON: why it is drained).
// AGENT: the registered agent's version ("-": none yet); HEARTBEAT: its last, as of `now_ms`.
// Wide columns: SPINE CPUS MEMORY ADDRESS (the agent's); -o name: node/NAME.
Listing nodes_listing(const nlohmann::json& nodes, std::int64_t now_ms);

// `tidepool queues`: TENANT QUEUE PENDING RUNNING.
// -o name: queue/TENANT/QUEUE.
Listing queues_listing(const nlohmann::json& queues);

// `tidepool tenants`: one row per tenant and GPU model of its quota: TENANT ORG WEIGHT MODEL
// GUARANTEED USED BORROWED BORROW-LIMIT LEND-LIMIT PENDING RUNNING (a tenant without a quota:
// one row with MODEL "-").
// Wide column: QUEUES; -o name: tenant/NAME (once per tenant).
Listing tenants_listing(const nlohmann::json& tenants);

// `tidepool services`: one row per service of the array `services` (GET /v1/services; each as
// server/service_desk.h's ServiceDesk::view writes it): ID NAME TENANT READY/WANTED (ready
// replicas / the autoscaler's count, "-" before its first decision) MIN-MAX TARGET ("p95 500ms",
// "queue 2.0/replica", "concurrency 4.0/replica") LAST-DECISION (its reason, cut to
// `decision_width` characters with "..."; 0: whole).
// Wide columns: STATE SPREAD PHASES ("1 starting, 2 ready") ENDPOINTS DECIDED (the decision's
// age as of `now_ms`); -o name: service/ID.
inline constexpr std::size_t kDecisionWidth = 60;
Listing services_listing(const nlohmann::json& services, std::int64_t now_ms,
                         std::size_t decision_width = kDecisionWidth);

// `tidepool services ID`: the service in a few lines (state, tenant, replicas ready of wanted
// within min-max, target, spread), its replicas (replicas_table), its endpoints and the last
// decision with its reason and age as of `now_ms`.
std::string render_service_details(const nlohmann::json& service, std::int64_t now_ms);

// A service's replicas, from the view's `replicas` array: JOB PHASE NODE PORT RPS P95 MS WAITING
// IN FLIGHT, figures in natural units (thousandths of a request with one decimal, milliseconds
// whole); "-" for a figure not reported, a node not yet placed on, a port not yet given.
std::string replicas_table(const nlohmann::json& replicas);

// `tidepool token list`: ID ROLE TENANT NODE CREATED STATE DESCRIPTION.
// -o name: token/ID.
Listing tokens_listing(const nlohmann::json& tokens);

// One frame of `tidepool top`.
struct TopFrameStyle {
  int width = 100;     // terminal columns: nodes are laid out in as many columns as fit
  bool color = false;  // ANSI colors per tenant
  std::string title;   // the first line (server, time, refresh interval)
};

// The pool at a glance: per node with GPUs a bar of its GPUs, each shown as the letter of the
// tenant holding it (lower case: partly used by fractional jobs; '+': shared by several tenants),
// '.' free, 'x' free on a drained node; then a legend and per tenant the GPUs it holds and its
// running and pending jobs, with the pending jobs per queue. `nodes`, `running_jobs` and `queues`
// are the arrays of GET /v1/nodes, /v1/jobs?state=running and /v1/queues.
std::string render_top_frame(const nlohmann::json& nodes, const nlohmann::json& running_jobs,
                             const nlohmann::json& queues, const TopFrameStyle& style);

}  // namespace tidepool
