// `tidepool demo`: the whole system on one machine without GPUs, for a newcomer's first look.
//
// It makes a run folder (mkdtemp, under $TMPDIR or /tmp), writes a cluster file, a tenants file
// and a server configuration into it (demo_plan.h), starts `tidepool-server` and one
// `tidepool-agent` per node with fake GPUs (found beside tidepool, then on PATH), creates one
// agent token per node with the admin token, waits until every agent has registered, and submits
// the sample workload of the demo folder (data/examples/demo: jobs that run shell scripts,
// checkpoint and resume). While they run it prints a compact block every --refresh: each node's
// GPUs and jobs, the pending jobs, and the events since the last block (GET /v1/events). It ends
// when every submitted job has ended (at most 10 minutes), when --duration is over, or on
// SIGINT, SIGTERM or SIGHUP; then it stops the agents (SIGTERM, SIGKILL after 10 s), any job
// process they left (found by DEMO_RUN_DIR=<run folder> in its environment), and the server, in
// that order, removes the run folder unless --keep, and prints a summary. A second Ctrl-C kills
// what is left at once.
//
// Exit status: 0 when it ran to its end, 130 when interrupted, 1 when something could not start
// or died (its log's last lines are printed).
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

void add_demo_command(CLI::App& app, int* exit_code);

}  // namespace tidepool
