#include "api/job_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <exception>
#include <initializer_list>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "api/body_fields.h"
#include "core/money.h"
#include "core/split_text.h"

namespace tidepool {
namespace {

using body_fields::describe;
using body_fields::index_path;
using body_fields::integer_in;
using body_fields::Json;
using body_fields::key_path;
using body_fields::member;
using body_fields::quote;
using body_fields::read_optional;

// ---------------------------------------------------------------------------------------------
// Bodies

// Thrown by the body builders to stop a parser at the first problem; parse_body catches it.
struct Refusal {
  Error error;
};

std::string too_deep() {
  return fmt::format("nested deeper than {} levels of maps and lists", kMaxBodyDepth);
}

bool blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

std::string yaml_where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return fmt::format(" (line {}, column {})", mark.line + 1, mark.column + 1);
}

bool all_digits_in_base(std::string_view text, int base) {
  const auto digit = [base](char c) {
    if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
    return c >= '0' && c < static_cast<char>('0' + base);
  };
  return !text.empty() && std::all_of(text.begin(), text.end(), digit);
}

// A YAML 1.2 core-schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool float_syntax(std::string_view text) {
  std::size_t i = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i - start;
  };
  const std::size_t whole = digits();
  std::size_t fraction = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    fraction = digits();
  }
  if (whole == 0 && fraction == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == text.size();
}

// A plain YAML scalar typed as the core schema does; what it does not type stays a string.
Json typed_scalar(const std::string& text) {
  static constexpr std::array kNulls = {"", "~", "null", "Null", "NULL"};
  static constexpr std::array kTrues = {"true", "True", "TRUE"};
  static constexpr std::array kFalses = {"false", "False", "FALSE"};
  const auto among = [&](const auto& words) {
    return std::find(words.begin(), words.end(), text) != words.end();
  };
  if (among(kNulls)) return nullptr;
  if (among(kTrues)) return true;
  if (among(kFalses)) return false;

  const std::string_view all(text);
  const bool negative = all.starts_with('-');
  const std::string_view unsigned_part = all.substr(all.starts_with('+') || negative ? 1 : 0);
  if (all_digits_in_base(unsigned_part, 10)) {
    const char* end = text.data() + text.size();
    if (std::int64_t value = 0;
        std::from_chars(negative ? all.data() : unsigned_part.data(), end, value).ec ==
        std::errc()) {
      return value;
    }
    if (std::uint64_t value = 0;
        !negative && std::from_chars(unsigned_part.data(), end, value).ec == std::errc()) {
      return value;
    }
    // Too large for 64 bits: a float, as a JSON parser makes of it.
  }
  for (auto [prefix, base] : {std::pair{"0x", 16}, std::pair{"0o", 8}}) {
    const std::string_view digits = all.substr(std::min<std::size_t>(2, all.size()));
    if (all.starts_with(prefix) && all_digits_in_base(digits, base)) {
      std::uint64_t value = 0;
      if (std::from_chars(digits.data(), digits.data() + digits.size(), value, base).ec ==
          std::errc()) {
        return value;
      }
      return text;
    }
  }
  if (float_syntax(all)) {
    double value = 0;
    const std::string_view number = all.starts_with('+') ? all.substr(1) : all;
    const char* end = number.data() + number.size();
    if (auto [stop, error] = std::from_chars(number.data(), end, value);
        error == std::errc() && stop == end) {
      return value;
    }
  }
  return text;
}

// Builds the JSON value of one YAML document from the parser's events, without recursion, and
// stops the parser (by throwing a Refusal) at the first thing a body may not hold.
class YamlToJson final : public YAML::EventHandler {
 public:
  std::optional<Json> root;

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1)
      refuse(mark, "body", "a second YAML document starts here; a body holds one");
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    if (at_key()) refuse(mark, path(), "a key must be a string, got null");
    add(nullptr);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    refuse(mark, path(), "YAML aliases (*name) are not supported; write the value out");
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                const std::string& value) override {
    if (!body_fields::valid_utf8(value)) refuse(mark, path(), "the text is not valid UTF-8");
    const bool plain = tag == "?";
    if (!plain && tag != "!" && tag != "tag:yaml.org,2002:str") refuse_tag(mark, tag);
    if (at_key()) {
      Frame& map = frames_.back();
      if (map.value.contains(value)) {
        refuse(mark, key_path(key_path_of_next(), value), "the key is given twice");
      }
      map.key = value;
      return;
    }
    add(plain ? typed_scalar(value) : Json(value));
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    open(Json::array(), mark, tag);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    open(Json::object(), mark, tag);
  }
  void OnMapEnd() override { close(); }

 private:
  // An open map or list; for a map, the key whose value comes next.
  struct Frame {
    Json value;
    std::optional<std::string> key;
  };

  [[noreturn]] static void refuse(const YAML::Mark& mark, std::string field, std::string reason) {
    throw Refusal{Error{std::move(field), std::move(reason) + yaml_where(mark)}};
  }
  [[noreturn]] void refuse_tag(const YAML::Mark& mark, const std::string& tag) const {
    refuse(mark, path(),
           fmt::format("the YAML tag {} is not supported; quote the value to make it a string",
                       quote(tag)));
  }

  [[nodiscard]] bool at_key() const {
    return !frames_.empty() && frames_.back().value.is_object() && !frames_.back().key;
  }
  // The key path of the value that comes next ("body" at the root).
  [[nodiscard]] std::string path() const {
    std::string path = key_path_of_next();
    return path.empty() ? "body" : path;
  }
  // The key path of the value that comes next ("" at the root).
  [[nodiscard]] std::string key_path_of_next() const {
    std::string path;
    for (const Frame& frame : frames_) {
      if (frame.value.is_array()) {
        path = index_path(path, frame.value.size());
      } else if (frame.key) {
        path = key_path(path, *frame.key);
      }
    }
    return path;
  }

  void open(Json value, const YAML::Mark& mark, const std::string& tag) {
    if (tag != "?" && tag != "!") refuse_tag(mark, tag);
    if (at_key()) {
      refuse(mark, path(),
             value.is_array() ? "a key must be a string, got a list"
                              : "a key must be a string, got a map");
    }
    if (frames_.size() >= kMaxBodyDepth) refuse(mark, "body", too_deep());
    frames_.push_back({std::move(value), std::nullopt});
  }
  void close() {
    Json value = std::move(frames_.back().value);
    frames_.pop_back();
    add(std::move(value));
  }
  void add(Json value) {
    if (frames_.empty()) {
      root = std::move(value);
      return;
    }
    Frame& frame = frames_.back();
    if (frame.value.is_array()) {
      frame.value.push_back(std::move(value));
    } else {
      frame.value.emplace(*frame.key, std::move(value));
      frame.key.reset();
    }
  }

  std::vector<Frame> frames_;
  int documents_ = 0;
};

Result<Json> parse_yaml(std::string_view body) {
  std::istringstream in{std::string(body)};
  YAML::Parser parser(in);
  YamlToJson builder;
  // At most two calls: the second only to refuse a second document. (YAML::LoadAll may loop
  // forever on some malformed input, see config/yaml_reader.h.)
  if (parser.HandleNextDocument(builder)) parser.HandleNextDocument(builder);
  return builder.root.value_or(nullptr);
}

Result<Json> parse_json(std::string_view body) {
  // What the parser is inside of: the keys of a map seen so far, or the items of a list.
  struct Frame {
    bool map = false;
    std::set<std::string, std::less<>> keys;
    std::optional<std::string> key;
    std::size_t items = 0;
  };
  std::vector<Frame> frames;
  const auto path = [&] {
    std::string path;
    for (const Frame& frame : frames) {
      if (!frame.map) {
        path = index_path(path, frame.items);
      } else if (frame.key) {
        path = key_path(path, *frame.key);
      }
    }
    return path;
  };
  const auto track = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (frames.size() >= kMaxBodyDepth) throw Refusal{Error{"body", too_deep()}};
        frames.emplace_back();
        frames.back().map = event == Json::parse_event_t::object_start;
        break;
      case Json::parse_event_t::key: {
        Frame& map = frames.back();
        map.key = parsed.get<std::string>();
        if (!map.keys.insert(*map.key).second)
          throw Refusal{Error{path(), "the key is given twice"}};
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames.pop_back();
        if (!frames.empty()) ++frames.back().items;
        break;
      case Json::parse_event_t::value:
        if (!frames.empty()) ++frames.back().items;
        break;
    }
    return true;
  };
  return Json::parse(body.begin(), body.end(), track);
}

// ---------------------------------------------------------------------------------------------
// Job spec fields

constexpr std::array kTopologyLevels = {TopologyLevel::kNvlink, TopologyLevel::kNode,
                                        TopologyLevel::kLeaf, TopologyLevel::kSpine};
constexpr std::array kJobClasses = {JobClass::kTraining, JobClass::kInference, JobClass::kDev,
                                    JobClass::kBatch};

std::string_view topology_mode_name(TopologyStrength strength) {
  return strength == TopologyStrength::kRequired ? "required" : "preferred";
}

// Money: a decimal with up to 6 places, as a string ("12.5") or a number; more than 0.
Result<Micros> read_money(const Json& value, const std::string& path) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_number_integer() || value.is_number_float()) {
    text = value.dump();
  } else {
    return fail(path, "expected an amount such as 250 or \"12.5\", got " + describe(value));
  }
  auto amount = parse_money(text, path);
  if (!amount) return amount;
  if (*amount <= 0) return fail(path, "must be more than 0");
  return amount;
}

Result<Seconds> read_duration(const Json& value, const std::string& path) {
  return body_fields::read_duration_in(value, path, 1, kMaxDuration);
}

Result<JobClass> read_job_class(const Json& value, const std::string& path) {
  const std::string_view kClasses = "training, inference, dev, batch";
  if (!value.is_string()) {
    return fail(path, fmt::format("expected one of {}, got {}", kClasses, describe(value)));
  }
  const auto& name = value.get_ref<const std::string&>();
  for (JobClass job_class : kJobClasses) {
    if (job_class_name(job_class) == name) return job_class;
  }
  return fail(path, fmt::format("unknown job class {}; one of {}", quote(name), kClasses));
}

Result<std::vector<std::string>> read_gpu_models(const Json& value, const std::string& path) {
  if (value.is_string()) {
    auto name = body_fields::read_name(value, path);
    if (!name) return std::unexpected(name.error());
    return std::vector<std::string>{*name};
  }
  if (auto list = body_fields::check_list(value, path, kMaxJobGpuModels, "GPU model names");
      !list) {
    return std::unexpected(list.error());
  }
  std::vector<std::string> models;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto name = body_fields::read_name(value[i], index_path(path, i));
    if (!name) return std::unexpected(name.error());
    if (std::find(models.begin(), models.end(), *name) != models.end()) {
      return fail(index_path(path, i), fmt::format("{} is listed twice", quote(*name)));
    }
    models.push_back(*name);
  }
  return models;
}

// "1g.10gb" .. "7g.80gb" (core/mig.h).
Result<MigProfile> read_mig_profile(const Json& value, const std::string& path) {
  std::vector<std::string_view> names;
  for (const MigProfileSpec& profile : mig_profiles()) names.push_back(profile.name);
  if (value.is_string()) {
    if (auto profile = parse_mig_profile(value.get_ref<const std::string&>())) return profile;
  }
  return fail(path, fmt::format("{} is not a MIG profile; one of {}",
                                value.is_string() ? quote(value.get_ref<const std::string&>())
                                                  : describe(value),
                                fmt::join(names, ", ")));
}

// What a task on one MIG instance may not ask for besides (the file comment); `gpu_milli_given`:
// whether the body gave gpu_milli.
Result<void> check_mig_spec(const JobSpec& spec, bool gpu_milli_given) {
  if (!spec.mig_profile) return {};
  const std::string_view profile = mig_profile_spec(*spec.mig_profile).name;
  if (spec.tasks != 1) {
    return fail("tasks", fmt::format("mig_profile asks for one MIG instance ({}) for one task, got "
                                     "tasks: {}",
                                     profile, spec.tasks));
  }
  if (spec.gpus_per_task != 1) {
    return fail("gpus_per_task",
                fmt::format("mig_profile asks for one MIG instance ({}) of one GPU, got "
                            "gpus_per_task: {}",
                            profile, spec.gpus_per_task));
  }
  if (gpu_milli_given) {
    return fail("gpu_milli", fmt::format("mig_profile asks for one MIG instance ({}); gpu_milli "
                                         "does not apply",
                                         profile));
  }
  for (std::size_t i = 0; i < spec.gpu_models.size(); ++i) {
    if (!model_supports_mig(spec.gpu_models[i])) {
      return fail(index_path("gpu_model", i),
                  fmt::format("{} cannot be partitioned into MIG instances (mig_profile {}); "
                              "list only models that can, or leave gpu_model out",
                              quote(spec.gpu_models[i]), profile));
    }
  }
  return {};
}

Result<std::vector<std::int64_t>> read_dependencies(const Json& value, const std::string& path) {
  if (auto list = body_fields::check_list(value, path, kMaxDependencies, "job ids"); !list) {
    return std::unexpected(list.error());
  }
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto id = body_fields::read_integer(value[i], index_path(path, i), 1,
                                        std::numeric_limits<std::int64_t>::max());
    if (!id) return std::unexpected(id.error());
    if (std::ranges::find(ids, *id) != ids.end()) {
      return fail(index_path(path, i), fmt::format("job {} is listed twice", *id));
    }
    ids.push_back(*id);
  }
  return ids;
}

Result<std::string> read_array(const Json& value, const std::string& path) {
  if (!value.is_string()) {
    return fail(path, "expected the indexes as a string, e.g. \"0-99\" or \"1,3,5-7\"");
  }
  auto text = body_fields::read_text(value, path, body_fields::kMaxTextBytes);
  if (!text) return std::unexpected(text.error());
  if (auto indexes = parse_array_indexes(*text); !indexes) {
    return fail(path, indexes.error().reason);
  }
  return text;
}

Result<TopologyRequirement> read_topology(const Json& value, const std::string& path) {
  if (auto keys = body_fields::check_keys(value, path, "a map of within and mode",
                                          {"within", "mode"}, false);
      !keys) {
    return std::unexpected(keys.error());
  }
  TopologyRequirement topology;
  if (const Json* within = member(value, "within")) {
    const std::string within_path = key_path(path, "within");
    const auto* name = within->is_string() ? &within->get_ref<const std::string&>() : nullptr;
    const auto level = std::find_if(kTopologyLevels.begin(), kTopologyLevels.end(), [&](auto l) {
      return name != nullptr && topology_level_name(l) == *name;
    });
    if (level == kTopologyLevels.end()) {
      return fail(within_path,
                  "expected one of nvlink, node, leaf, spine, got " + describe(*within));
    }
    topology.level = *level;
  }
  if (const Json* mode = member(value, "mode")) {
    const auto* name = mode->is_string() ? &mode->get_ref<const std::string&>() : nullptr;
    if (name != nullptr && *name == "required") {
      topology.strength = TopologyStrength::kRequired;
    } else if (name != nullptr && *name == "preferred") {
      topology.strength = TopologyStrength::kPreferred;
    } else {
      return fail(key_path(path, "mode"), "expected required or preferred, got " + describe(*mode));
    }
  }
  return topology;
}

// An absolute path, where the job's tasks start.
Result<std::string> read_working_dir(const Json& value, const std::string& path) {
  auto text = body_fields::read_text(value, path, body_fields::kMaxTextBytes);
  if (!text) return std::unexpected(text.error());
  if (!text->starts_with('/')) {
    return fail(path,
                fmt::format("{} is not an absolute path (one starting with /)", quote(*text)));
  }
  return text;
}

// A map of strings to strings; `check_key` says why a key is refused (nullopt: accepted).
template <class CheckKey>
Result<std::map<std::string, std::string>> read_string_map(const Json& value,
                                                           const std::string& path,
                                                           std::size_t max_entries,
                                                           std::string_view what,
                                                           CheckKey check_key) {
  if (auto map = body_fields::check_map(value, path, max_entries, what); !map) {
    return std::unexpected(map.error());
  }
  std::map<std::string, std::string> entries;
  for (const auto& [key, item] : value.items()) {
    const std::string item_path = key_path(path, key);
    if (std::optional<std::string> why = check_key(key)) return fail(item_path, *why);
    auto text = body_fields::read_text(item, item_path, body_fields::kMaxTextBytes);
    if (!text) return std::unexpected(text.error());
    entries.emplace(key, std::move(*text));
  }
  return entries;
}

Result<std::map<std::string, std::string>> read_labels(const Json& value, const std::string& path) {
  return read_string_map(value, path, kMaxLabels, "labels",
                         [](const std::string& key) -> std::optional<std::string> {
                           if (auto valid = check_name(key); !valid) {
                             return "a label key must be a name: " + valid.error().reason;
                           }
                           return std::nullopt;
                         });
}

// `kind` and, for a service, its block and what a service's spec may not hold.
Result<void> read_service_kind(const Json& value, JobSpec& spec) {
  std::string kind = "job";
  if (auto ok =
          body_fields::read_optional(value, "", "kind", kind,
                                     [](const Json& v, const std::string& p) {
                                       return body_fields::read_word(v, p, {"job", "service"});
                                     });
      !ok) {
    return ok;
  }
  const Json* block = body_fields::member(value, "service");
  if (kind == "job") {
    if (block != nullptr) return fail("service", "only with kind: service");
    return {};
  }
  if (block == nullptr) {
    return fail("service",
                "missing: a service needs its block (replicas and target), e.g. "
                "service: {max_replicas: 4, target: {p95_latency_ms: 500}}");
  }
  auto service = read_service_spec(*block, "service");
  if (!service) return std::unexpected(service.error());
  spec.service = std::move(*service);
  const bool classed = body_fields::member(value, "class") != nullptr;
  if (classed && spec.job_class != JobClass::kInference) {
    return fail("class", fmt::format("a service is of class inference, not {}",
                                     job_class_name(spec.job_class)));
  }
  spec.job_class = JobClass::kInference;
  if (spec.tasks != 1) {
    return fail("tasks", fmt::format("a service's replica is one task, got {}; scale with "
                                     "service.max_replicas",
                                     spec.tasks));
  }
  for (auto [key, given] :
       {std::pair{"array", !spec.array.empty()}, std::pair{"after_ok", !spec.after_ok.empty()},
        std::pair{"max_runtime", spec.max_runtime.has_value()},
        std::pair{"runtime_estimate", spec.runtime_estimate.has_value()}}) {
    if (given) return fail(key, "not for a service, which runs until it is cancelled");
  }
  // Figures for a model the service does not accept would never be used: a typo.
  if (!spec.gpu_models.empty()) {
    for (const auto& [model, figures] : spec.service->models) {
      if (std::ranges::find(spec.gpu_models, model) == spec.gpu_models.end()) {
        return fail("service.models." + model,
                    fmt::format("'{}' is not one of the service's gpu_model ({})", model,
                                fmt::join(spec.gpu_models, ", ")));
      }
    }
  }
  return {};
}

// A job's model FLOPs per step: a number, integer or not, in (0, kMaxModelFlopsPerStep].
Result<double> read_model_flops(const Json& value, const std::string& path) {
  if (!value.is_number()) {
    return fail(path,
                "expected a number of FLOPs (such as 4.2e16), got " + body_fields::describe(value));
  }
  const double flops = value.get<double>();
  if (!(flops > 0) || !(flops <= kMaxModelFlopsPerStep)) {
    return fail(path, fmt::format("{} is out of range: more than 0 and at most {:g}",
                                  body_fields::describe(value), kMaxModelFlopsPerStep));
  }
  return flops;
}

}  // namespace

Result<std::vector<std::string>> read_job_command(const Json& value, const std::string& path) {
  if (auto list = body_fields::check_list(value, path, kMaxCommandWords, "command words"); !list) {
    return std::unexpected(list.error());
  }
  std::vector<std::string> words;
  for (std::size_t i = 0; i < value.size(); ++i) {
    auto word = body_fields::read_text(value[i], index_path(path, i), body_fields::kMaxTextBytes);
    if (!word) return std::unexpected(word.error());
    words.push_back(std::move(*word));
  }
  return words;
}

Result<std::map<std::string, std::string>> read_job_env(const Json& value,
                                                        const std::string& path) {
  return read_string_map(value, path, kMaxEnvEntries, "env entries",
                         [](const std::string& key) -> std::optional<std::string> {
                           if (valid_env_name(key)) return std::nullopt;
                           return "not a variable name; use letters, digits and '_', not "
                                  "starting with a digit";
                         });
}

bool operator==(const JobSpec& a, const JobSpec& b) {
  const auto fields = [](const JobSpec& s) {
    return std::tie(s.name, s.tenant, s.queue, s.job_class, s.priority, s.tasks, s.gpus_per_task,
                    s.gpu_milli, s.mig_profile, s.gpu_models, s.cpu_milli_per_task,
                    s.memory_mib_per_task, s.topology.level, s.topology.strength,
                    s.runtime_estimate, s.max_runtime, s.max_cost, s.preemptible,
                    s.checkpoint_interval, s.command, s.working_dir, s.env, s.labels, s.after_ok,
                    s.array, s.model_flops_per_step, s.service);
  };
  return fields(a) == fields(b);
}

Result<nlohmann::json> parse_body(std::string_view body, BodyFormat format) {
  if (blank(body)) return nullptr;
  try {
    return format == BodyFormat::kJson ? parse_json(body) : parse_yaml(body);
  } catch (const Refusal& refusal) {
    return std::unexpected(refusal.error);
  } catch (const YAML::Exception& e) {
    return fail("body",
                "malformed YAML: " + body_fields::printable(e.msg, 200) + yaml_where(e.mark));
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." without the tag.
    std::string_view what = e.what();
    if (const auto tag_end = what.find("] "); tag_end != std::string_view::npos) {
      what.remove_prefix(tag_end + 2);
    }
    return fail("body", "malformed JSON: " + body_fields::printable(what, 200));
  } catch (const std::exception& e) {
    return fail("body", "cannot read the body: " + body_fields::printable(e.what(), 200));
  } catch (...) {
    return fail("body", "cannot read the body");
  }
}

Result<JobSpec> job_spec_from_json(const nlohmann::json& value) {
  if (auto keys = body_fields::check_keys(value, "", "a map of the job's fields",
                                          {"name",
                                           "tenant",
                                           "queue",
                                           "class",
                                           "priority",
                                           "tasks",
                                           "gpus_per_task",
                                           "gpu_milli",
                                           "mig_profile",
                                           "gpu_model",
                                           "cpu_milli_per_task",
                                           "memory_mib_per_task",
                                           "topology",
                                           "runtime_estimate",
                                           "max_runtime",
                                           "max_cost",
                                           "preemptible",
                                           "checkpoint_interval",
                                           "command",
                                           "working_dir",
                                           "env",
                                           "labels",
                                           "after_ok",
                                           "array",
                                           "model_flops_per_step",
                                           "kind",
                                           "service"},
                                          false);
      !keys) {
    return std::unexpected(keys.error());
  }
  JobSpec spec;
  for (auto [key, out] : {std::pair{"name", &spec.name}, std::pair{"tenant", &spec.tenant}}) {
    auto name = body_fields::required(value, "", key);
    if (!name) return std::unexpected(name.error());
    auto read = body_fields::read_name(**name, key);
    if (!read) return std::unexpected(read.error());
    *out = std::move(*read);
  }
  // One step per optional key, in the order of the file comment.
  if (auto read = body_fields::first_failure({
          read_optional(value, "", "queue", spec.queue, body_fields::read_name),
          read_optional(value, "", "class", spec.job_class, read_job_class),
          read_optional(value, "", "priority", spec.priority,
                        integer_in(-kMaxPriorityClass, kMaxPriorityClass)),
          read_optional(value, "", "tasks", spec.tasks, integer_in(1, kMaxGangTasks)),
          read_optional(value, "", "gpus_per_task", spec.gpus_per_task,
                        integer_in(0, kMaxGpusPerNode)),
          read_optional(value, "", "gpu_milli", spec.gpu_milli, integer_in(1, 1000)),
          read_optional(value, "", "mig_profile", spec.mig_profile, read_mig_profile),
          read_optional(value, "", "gpu_model", spec.gpu_models, read_gpu_models),
          read_optional(value, "", "cpu_milli_per_task", spec.cpu_milli_per_task,
                        integer_in(0, kMaxCpuMilliPerTask)),
          read_optional(value, "", "memory_mib_per_task", spec.memory_mib_per_task,
                        integer_in(0, kMaxMemoryMibPerTask)),
          read_optional(value, "", "topology", spec.topology, read_topology),
          read_optional(value, "", "runtime_estimate", spec.runtime_estimate, read_duration),
          read_optional(value, "", "max_runtime", spec.max_runtime, read_duration),
          read_optional(value, "", "max_cost", spec.max_cost, read_money),
          read_optional(value, "", "preemptible", spec.preemptible, body_fields::read_bool),
          read_optional(value, "", "checkpoint_interval", spec.checkpoint_interval, read_duration),
          read_optional(value, "", "command", spec.command, read_job_command),
          read_optional(value, "", "working_dir", spec.working_dir, read_working_dir),
          read_optional(value, "", "env", spec.env, read_job_env),
          read_optional(value, "", "labels", spec.labels, read_labels),
          read_optional(value, "", "after_ok", spec.after_ok, read_dependencies),
          read_optional(value, "", "array", spec.array, read_array),
          read_optional(value, "", "model_flops_per_step", spec.model_flops_per_step,
                        read_model_flops),
      });
      !read) {
    return std::unexpected(read.error());
  }
  if (auto ok = read_service_kind(value, spec); !ok) return std::unexpected(ok.error());
  if (auto ok = check_mig_spec(spec, member(value, "gpu_milli") != nullptr); !ok) {
    return std::unexpected(ok.error());
  }
  if (spec.gpu_milli < 1000 && (spec.tasks != 1 || spec.gpus_per_task != 1)) {
    return fail("gpu_milli", fmt::format("a share of a GPU ({}) needs tasks: 1 and gpus_per_task: "
                                         "1, got tasks: {} and gpus_per_task: {}",
                                         spec.gpu_milli, spec.tasks, spec.gpus_per_task));
  }
  if (spec.runtime_estimate && spec.max_runtime && *spec.runtime_estimate > *spec.max_runtime) {
    return fail("runtime_estimate", fmt::format("{} is longer than max_runtime {}",
                                                format_duration(*spec.runtime_estimate),
                                                format_duration(*spec.max_runtime)));
  }
  return spec;
}

Result<std::vector<std::int64_t>> parse_array_indexes(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return fail("array", fmt::format("{}: {}; write indexes as 0-99 or 1,3,5-7", quote(text), why));
  };
  const auto number = [](std::string_view digits) -> std::optional<std::int64_t> {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      return std::nullopt;
    }
    return n;
  };
  std::vector<std::int64_t> indexes;
  for (const std::string_view item : split_text(text, ',')) {
    const std::size_t dash = item.find('-');
    const auto from = number(item.substr(0, dash));
    const auto to = dash == std::string_view::npos ? from : number(item.substr(dash + 1));
    if (!from || !to) return bad(fmt::format("{} is not an index or a range", quote(item)));
    if (*to < *from) return bad(fmt::format("{} ends before it starts", quote(item)));
    if (*to > kMaxArrayIndex) return bad(fmt::format("indexes go up to {}", kMaxArrayIndex));
    if (static_cast<std::size_t>(*to - *from) >= kMaxArrayJobs ||
        indexes.size() + static_cast<std::size_t>(*to - *from + 1) > kMaxArrayJobs) {
      return bad(fmt::format("an array has at most {} jobs", kMaxArrayJobs));
    }
    for (std::int64_t i = *from; i <= *to; ++i) indexes.push_back(i);
  }
  std::ranges::sort(indexes);
  if (auto twice = std::ranges::adjacent_find(indexes); twice != indexes.end()) {
    return bad(fmt::format("index {} is given twice", *twice));
  }
  return indexes;
}

Result<void> check_runnable(const JobSpec& spec) {
  if (spec.command.empty()) {
    return fail("command",
                "missing: a job needs a command to run, e.g. command: [python, train.py]");
  }
  if (spec.command.front().empty()) {
    return fail("command[0]", "empty: the first word is the program to run");
  }
  return {};
}

Result<JobSpec> parse_job_spec(std::string_view body, BodyFormat format) {
  auto value = parse_body(body, format);
  if (!value) return std::unexpected(value.error());
  return job_spec_from_json(*value);
}

nlohmann::json job_spec_to_json(const JobSpec& spec) {
  const auto duration = [](const std::optional<Seconds>& seconds) -> Json {
    if (!seconds) return nullptr;
    return format_duration(*seconds);
  };
  Json out{
      {"name", spec.name},
      {"tenant", spec.tenant},
      {"queue", spec.queue},
      {"class", job_class_name(spec.job_class)},
      {"priority", spec.priority},
      {"tasks", spec.tasks},
      {"gpus_per_task", spec.gpus_per_task},
      {"gpu_model", spec.gpu_models},
      {"cpu_milli_per_task", spec.cpu_milli_per_task},
      {"memory_mib_per_task", spec.memory_mib_per_task},
      {"topology",
       {{"within", topology_level_name(spec.topology.level)},
        {"mode", topology_mode_name(spec.topology.strength)}}},
      {"runtime_estimate", duration(spec.runtime_estimate)},
      {"max_runtime", duration(spec.max_runtime)},
      {"max_cost", spec.max_cost ? Json(exact_money_text(*spec.max_cost)) : Json(nullptr)},
      {"preemptible", spec.preemptible},
      {"checkpoint_interval", duration(spec.checkpoint_interval)},
      {"command", spec.command},
      {"working_dir", spec.working_dir.empty() ? Json(nullptr) : Json(spec.working_dir)},
      {"env", spec.env},
      {"labels", spec.labels},
  };
  if (spec.mig_profile) {
    out["mig_profile"] = mig_profile_spec(*spec.mig_profile).name;
  } else {
    out["gpu_milli"] = spec.gpu_milli;
  }
  if (!spec.after_ok.empty()) out["after_ok"] = spec.after_ok;
  if (!spec.array.empty()) out["array"] = spec.array;
  if (spec.model_flops_per_step) out["model_flops_per_step"] = *spec.model_flops_per_step;
  if (spec.service) {
    out["kind"] = "service";
    out["service"] = service_spec_to_json(*spec.service);
  }
  return out;
}

bool valid_env_name(std::string_view key) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  return !key.empty() && !(key[0] >= '0' && key[0] <= '9') &&
         std::all_of(key.begin(), key.end(), word);
}

Result<void> check_name(std::string_view name) {
  if (name.empty()) return fail("", "must not be empty");
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(name[0])) return fail("", quote(name) + " must start with a letter or a digit");
  for (char c : name) {
    if (alnum(c) || c == '.' || c == '_' || c == '-') continue;
    const auto byte = static_cast<unsigned char>(c);
    const std::string shown = byte >= 0x20 && byte < 0x7F ? fmt::format("'{}'", c)
                                                          : fmt::format("the byte 0x{:02X}", byte);
    return fail("", fmt::format("{} contains {}; a name has only letters, digits, '.', '_' and '-'",
                                quote(name), shown));
  }
  if (name.size() > kMaxNameLength) {
    return fail("", fmt::format("{} is {} characters long; at most {}", quote(name), name.size(),
                                kMaxNameLength));
  }
  return {};
}

std::string spec_field(const std::string& core_field) {
  static const std::map<std::string, std::string, std::less<>> kNames = {
      {"task_count", "tasks"},
      {"gpu_count", "gpus_per_task"},
      {"milli_per_gpu", "gpu_milli"},
      {"milli_cpu", "cpu_milli_per_task"},
      {"memory_mib", "memory_mib_per_task"},
      {"priority_class", "priority"},
      {"caps.max_runtime", "max_runtime"},
      {"models", "gpu_models"},
  };
  auto it = kNames.find(core_field);
  return it == kNames.end() ? core_field : it->second;
}

std::int64_t task_gpu_milli(const JobSpec& spec) {
  if (spec.gpus_per_task == 0) return 0;
  if (spec.mig_profile) return mig_gpu_milli(*spec.mig_profile);
  return spec.gpu_milli;
}

Result<Job> core_job_of(const JobSpec& spec, JobId id, TenantId tenant, QueueId queue,
                        Seconds submit_time, const GpuModelCatalog& models) {
  ModelSet accepted = spec.gpu_models.empty() ? ModelSet::any() : ModelSet::none();
  for (std::size_t i = 0; i < spec.gpu_models.size(); ++i) {
    auto model = models.find(spec.gpu_models[i]);
    if (!model) {
      std::vector<std::string> names;
      for (int m = 0; m < models.size(); ++m) {
        names.push_back(models.name(GpuModelId{static_cast<std::uint32_t>(m)}));
      }
      return fail(fmt::format("gpu_model[{}]", i),
                  fmt::format("the cluster has no GPU model '{}'; models: {}", spec.gpu_models[i],
                              fmt::join(names, ", ")));
    }
    accepted.add(*model);
  }
  if (auto mig = check_mig_spec(spec, spec.mig_profile && spec.gpu_milli != 1000); !mig) {
    return std::unexpected(mig.error());
  }
  auto task =
      spec.mig_profile
          ? make_mig_task_shape(*spec.mig_profile, spec.cpu_milli_per_task,
                                spec.memory_mib_per_task, accepted)
          : make_task_shape(spec.gpus_per_task, spec.gpus_per_task == 0 ? 0 : spec.gpu_milli,
                            spec.cpu_milli_per_task, spec.memory_mib_per_task, accepted);
  if (!task) return fail(spec_field(task.error().field), task.error().reason);
  Job job;
  job.id = id;
  job.tenant = tenant;
  job.queue = queue;
  job.job_class = spec.job_class;
  job.priority_class = spec.priority;
  job.preemptible = spec.preemptible;
  job.checkpoint_interval = spec.checkpoint_interval;
  job.runtime_estimate = spec.runtime_estimate;
  job.submit_time = submit_time;
  job.gang.task_count = spec.tasks;
  job.gang.task = *task;
  job.gang.topology = spec.topology;
  job.caps.max_runtime = spec.max_runtime;
  auto valid = make_job(job);
  if (!valid) return fail(spec_field(valid.error().field), valid.error().reason);
  return valid;
}

}  // namespace tidepool
