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
//                  long as it actually ran (cli/server_history.h: a running job up to now; one that
//                  never ran for its runtime_estimate, else its max_runtime, else left out). What
//                  was counted and left out is said on stderr; a window without jobs is an error.
//                  The server's tenants and queues must be in --tenants, its jobs' GPU models in
//                  the template pool.
// --since, --server and --token without --from-server, and --format (other than philly) with it,
// are errors.
//
// Candidate pools are the template pool (--cluster, or --nodes) grown or shrunk in whole nodes
// (scale_cluster in sim/scaled_pool.h: the template's node shapes, leaf sizes and leaves per spine
// repeated), with the tenants' quotas scaled to keep each tenant's share (scale_tenants). With
// --growth g the trace's submit times are divided by 1 + g (compress_submit_times): the same jobs
// arrive 1 + g times as fast, the load grows by g (0.2: 20% more).
//
// A probe runs the whole trace on one candidate under --policy. It meets the target when every
// job started and the p95 queueing time of the finished jobs is at most the target. The search
// assumes that queueing falls as the pool grows; where it does not, the answer still meets the
// target and a pool one node smaller was probed and misses it, but a smaller pool may meet it too.
// The search:
//   1. bracket: the template size (capped at --max-gpus) and, with --threads >= 2, twice it, ...
//      (one probe per thread); while every probe misses, the next round doubles the largest
//      (capped at --max-gpus); while every probe meets, the next round halves the smallest;
//   2. bisect: with `hi` the smallest size probed that meets and `lo` the largest size below it
//      probed that misses, each round splits (lo, hi) into threads + 1 equal parts in whole nodes
//      and probes the inner points in parallel, until hi = lo + 1 node (or hi is one node).
// The answer is hi; lo is reported as the largest size probed that misses. When even --max-gpus
// misses the search stops there and says so (exit status 0, no answer). Probes run in parallel on
// std::thread, one Scheduler each (the core stays single-threaded); every probe is the same run
// as `tidepool sim run` with the default seed and checkpoint interval, so results do not depend
// on --threads, only the probed sizes do.
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
