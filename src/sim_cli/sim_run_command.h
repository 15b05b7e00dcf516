// `tidepool sim run`: the multi-tenant experiment (sim/cluster_simulation.h) on a Philly trace,
// one run per scheduler policy (core/scheduler.h: scheduler_policy), each written to
// <out>/<policy>/ (sim/sim_run_report.h), then a side-by-side table of the summaries on stdout.
//
// Every policy sees the same pool, tenants, workload, windows and loans:
//   - the workload is the trace (sim/philly_workload.h), optionally cut to its first N jobs by
//     submit time (--limit-jobs), plus, with --inference, the replicas of a diurnal inference
//     service (sim/inference_generator.h: day 08:00-24:00, 600 s steps, seed --seed, over
//     [0, the last submit of those jobs + 1 day)) for the --inference-tenant (added to the first
//     org of the tenants file, weight 1, no quota, queue "default", when the file lacks it);
//   - --loan: tenant:gpus:start:duration of the pool's first GPU model (model id 0), start counted
//     from the trace's first submit;
//   - --window tidal windows go to every policy's SchedulerConfig (a policy whose rules ignore
//     windows still protects their capacity: windows are an input of the experiment, not a rule
//     of one policy);
//   - time 0 is the trace's first submit; every SchedulerConfig's day_offset (and the inference
//     service's) is the trace's start_epoch mod 86400 (the trace's times are read as UTC).
// Errors are printed as "error: <flag or file position>: <reason>" with exit status 1.
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// Adds the `run` subcommand to `sim`; its exit status is written to `*exit_code`.
void add_sim_run_command(CLI::App& sim, int* exit_code);

}  // namespace tidepool
