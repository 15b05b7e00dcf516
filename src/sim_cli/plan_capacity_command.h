// `tidepool plan capacity`: the smallest pool that keeps the p95 queueing time of a job trace, or
// of the job history of a running server, under a target, found by simulation
// (sim/cluster_simulation.h, as `tidepool sim run`).
//
//   tidepool plan capacity --cluster FILE (--jobs TRACE [--format philly] |
//                          --from-server [--since 30d] [--server URL] [--token T])
//                          --tenants FILE --target-p95-queue 1h
//                          [--growth 0.2] [--policy tidepool] [--limit-jobs N] [--max-gpus N]
//                          [--threads 2] [--output table|json]
//
// The jobs come from exactly one source (neither or both is an error naming --jobs):
//   --jobs TRACE   a Philly trace (sim/philly_workload.h: one-GPU tasks, a tenant per team);
//   --from-server  GET /v1/jobs of the server that the user commands reach (--server, --token,
//                  else their environment and config file: client_config.h), the jobs the token
//                  sees (an admin token: all) submitted in the last --since (default 30d; 0: the
//                  whole history), each with its own spec, submitted when it was and running as
//                  long as it actually ran (sim_cli/server_history.h: a running job up to now; one
//                  that never ran for its runtime_estimate, else its max_runtime, else left out).
//                  What was counted and left out is said on stderr; a window without jobs is an
//                  error. The server's tenants and queues must be in --tenants, its jobs' GPU
//                  models in the template pool.
// --since, --server and --token without --from-server, and --format (other than philly) with it,
// are errors.
//
// Candidate pools are the template pool (--cluster, or --nodes) grown or shrunk in whole nodes,
// searched as sim/capacity_search.h says, --threads probes at a time, up to --max-gpus. With
// --growth g the trace's submit times are divided by 1 + g (compress_submit_times): the same jobs
// arrive 1 + g times as fast, the load grows by g (0.2: 20% more). Every probe is the same run as
// `tidepool sim run` under --policy with the default seed and checkpoint interval. When even
// --max-gpus misses, the search stops there and says so (exit status 0, no answer).
//
// Output: -o table (default) prints every probe in order (round, nodes, GPUs, leaves, p95 and avg
// queue in hours, never started, meets, wall seconds), then the answer line. -o json prints the
// same as one object, with "source": where the jobs came from ({"kind": "trace", "jobs", "format"}
// or {"kind": "server", "server", "since_s", "running", "never_ran", "older", "unknown_runtime"}).
// Progress goes to stderr, one line per probe. Errors: "error: <flag>: <reason>" (a server that
// cannot be reached or refuses the token: the client's error, as `tidepool jobs` prints it),
// exit status 1.
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// Adds the `capacity` subcommand to `plan`; its exit status is written to `*exit_code`.
void add_plan_capacity_command(CLI::App& plan, int* exit_code);

}  // namespace tidepool
