// Readers for the Alibaba GPU cluster trace v2023 ("openb", published with FGD, Weng et al.,
// USENIX ATC'23): the node list (sn,cpu_milli,memory_mib,gpu,model) and the pod lists
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,
// deletion_time,scheduled_time]). The node list has no topology: each node becomes one NVLink
// domain under a single leaf switch.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/gpu_model.h"
#include "core/node.h"
#include "core/resources.h"
#include "core/task.h"

namespace tidepool {

struct PodRecord {
  std::string name;
  TaskShape shape;
  std::optional<Seconds> creation_time;  // seconds from trace start
  std::optional<Seconds> deletion_time;
  std::optional<Seconds> scheduled_time;  // absent for pods that never ran
};

// Nodes of the list, each on leaf 0. GPU models are added to `models`.
Result<std::vector<NodeSpec>> read_openb_nodes(std::istream& in, const std::string& source,
                                               GpuModelCatalog& models);

// Pods of the list, in file order. Constrained GPU models are added to `models`.
Result<std::vector<PodRecord>> read_openb_pods(std::istream& in, const std::string& source,
                                               GpuModelCatalog& models);

// File-reading wrappers; `path` names the input in errors.
Result<std::vector<NodeSpec>> load_openb_nodes(const std::string& path, GpuModelCatalog& models);
Result<std::vector<PodRecord>> load_openb_pods(const std::string& path, GpuModelCatalog& models);

}  // namespace tidepool
