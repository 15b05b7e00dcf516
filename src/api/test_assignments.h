// An assignment the api's and the agent's tests share (header only; not part of the api library).
#pragma once

#include "api/agent_wire.h"

namespace tidepool::test_support {

// Task 1 of a four-GPU gang job, on its second run, resuming from a checkpoint: every field of
// an assignment set, as a heartbeat reply carries it.
inline NodeAssignment gang_task_1() {
  return NodeAssignment{.job = 12,
                        .run = 2,
                        .name = "bert",
                        .tenant = "vision",
                        .world_size = 4,
                        .tasks = {AssignedTask{.index = 1, .gpus = {4, 5}}},
                        .master_addr = "10.0.0.7",
                        .master_port = 20'012,
                        .command = {"python", "train.py", "--epochs=3"},
                        .env = {{"EPOCHS", "3"}, {"RANK", "99"}, {"PATH", "/opt/bin"}},
                        .working_dir = "/data",
                        .cpu_milli_per_task = 4000,
                        .memory_mib_per_task = 1024,
                        .gpu_milli = 1000,
                        .preemptible = true,
                        .checkpoints = true,
                        .resume_from = "/ckpt/12/step-40",
                        .checkpoint_step = 40,
                        .replica = std::nullopt};
}

// A notebook on a 3g.40gb MIG instance of GPU 1, at memory slice 4: a job of one task.
inline NodeAssignment mig_notebook() {
  NodeAssignment a = gang_task_1();
  a.job = 14;
  a.run = 1;
  a.name = "notebook";
  a.world_size = 1;
  a.tasks = {AssignedTask{.index = 0,
                          .gpus = {1},
                          .mig = AssignedMig{.profile = MigProfile::k3g40gb,
                                             .start = 4,
                                             .uuid = "MIG-4f1e2d3c-5b6a-5978-8695-a4b3c2d1e0f9"}}};
  a.command = {"jupyter", "lab"};
  a.env.clear();
  a.checkpoints = false;
  a.resume_from.clear();
  a.checkpoint_step.reset();
  return a;
}

}  // namespace tidepool::test_support
