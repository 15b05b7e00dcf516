#include "sim/openb_trace.h"

#include <fstream>

#include "config/csv.h"

namespace tidepool {

Result<std::vector<NodeSpec>> read_openb_nodes(std::istream& in, const std::string& source,
                                               GpuModelCatalog& models) {
  auto csv = CsvReader::open(in, source);
  if (!csv) return std::unexpected(csv.error());
  if (auto ok = csv->require({"sn", "cpu_milli", "memory_mib", "gpu", "model"}); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<NodeSpec> nodes;
  while (csv->next()) {
    NodeSpec node;
    node.name = std::string(csv->text("sn"));
    if (node.name.empty()) return fail(csv->where("sn"), "the node has no name");
    auto cpu = csv->integer("cpu_milli");
    auto memory = csv->integer("memory_mib");
    auto gpus = csv->integer("gpu");
    if (!cpu) return std::unexpected(cpu.error());
    if (!memory) return std::unexpected(memory.error());
    if (!gpus) return std::unexpected(gpus.error());
    if (*cpu < 0) return fail(csv->where("cpu_milli"), "must not be negative");
    if (*memory < 0) return fail(csv->where("memory_mib"), "must not be negative");
    if (*gpus < 0 || *gpus > kMaxGpusPerNode) {
      return fail(csv->where("gpu"), "must be between 0 and " + std::to_string(kMaxGpusPerNode) +
                                         ", got " + std::to_string(*gpus));
    }
    node.milli_cpu = *cpu;
    node.memory_mib = *memory;
    node.gpu_count = static_cast<int>(*gpus);
    if (node.gpu_count > 0) {
      auto model = models.intern(csv->text("model"));
      if (!model) return fail(csv->where("model"), model.error().reason);
      node.model = *model;
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

Result<std::vector<PodRecord>> read_openb_pods(std::istream& in, const std::string& source,
                                               GpuModelCatalog& models) {
  auto csv = CsvReader::open(in, source);
  if (!csv) return std::unexpected(csv.error());
  if (auto ok = csv->require({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}); !ok) {
    return std::unexpected(ok.error());
  }
  std::vector<PodRecord> pods;
  while (csv->next()) {
    PodRecord pod;
    pod.name = std::string(csv->text("name"));
    if (pod.name.empty()) return fail(csv->where("name"), "the pod has no name");
    std::int64_t value[4];
    const char* columns[4] = {"num_gpu", "gpu_milli", "cpu_milli", "memory_mib"};
    for (int i = 0; i < 4; ++i) {
      auto parsed = csv->integer(columns[i]);
      if (!parsed) return std::unexpected(parsed.error());
      value[i] = *parsed;
    }
    auto constraint = parse_model_set(csv->text("gpu_spec"), models);
    if (!constraint) return fail(csv->where("gpu_spec"), constraint.error().reason);
    auto shape = make_task_shape(value[0], value[1], value[2], value[3], *constraint);
    if (!shape) {
      const std::string& field = shape.error().field;
      return fail(csv->where(field == "gpu_count" ? "num_gpu" : field), shape.error().reason);
    }
    pod.shape = *shape;
    const char* times[3] = {"creation_time", "deletion_time", "scheduled_time"};
    std::optional<Seconds>* slots[3] = {&pod.creation_time, &pod.deletion_time,
                                        &pod.scheduled_time};
    for (int i = 0; i < 3; ++i) {
      auto parsed = csv->optional_integer(times[i]);
      if (!parsed) return std::unexpected(parsed.error());
      if (*parsed && **parsed < 0) return fail(csv->where(times[i]), "must not be negative");
      *slots[i] = *parsed;
    }
    if (pod.creation_time && pod.deletion_time && *pod.deletion_time < *pod.creation_time) {
      return fail(csv->where("deletion_time"), "the pod is deleted before it is created");
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

namespace {

template <class Reader>
auto load_file(const std::string& path, GpuModelCatalog& models, Reader reader)
    -> decltype(reader(std::declval<std::istream&>(), path, models)) {
  std::ifstream in(path);
  if (!in) return fail(path, "cannot open the file");
  return reader(in, path, models);
}

}  // namespace

Result<std::vector<NodeSpec>> load_openb_nodes(const std::string& path, GpuModelCatalog& models) {
  return load_file(path, models, read_openb_nodes);
}

Result<std::vector<PodRecord>> load_openb_pods(const std::string& path, GpuModelCatalog& models) {
  return load_file(path, models, read_openb_pods);
}

}  // namespace tidepool
