#include "sim_cli/shadow_report.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <sstream>

#include "core/duration_format.h"
#include "report/csv_field.h"
#include "report/text_table.h"

namespace tidepool {
namespace {

using Json = nlohmann::json;

// "2026-12-07 06:52:01" (UTC) for seconds since the epoch.
std::string utc_text(std::int64_t epoch, bool with_date) {
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, with_date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
  return text;
}

// "0-3", "0,2", "0-1,4-5".
std::string gpu_ranges(GpuSet gpus) {
  std::string out;
  for (int g = 0; g < 32; ++g) {
    if (!gpu_set_contains(gpus, g)) continue;
    int last = g;
    while (last + 1 < 32 && gpu_set_contains(gpus, last + 1)) ++last;
    out +=
        (out.empty() ? "" : ",") + (last == g ? std::to_string(g) : fmt::format("{}-{}", g, last));
    g = last;
  }
  return out;
}

std::string share_text(const ShadowShare& share) {
  if (share.percent >= 100) return "all jobs";
  return fmt::format("{}% of jobs by {}", share.percent,
                     share.rule == ShareRule::kTenant ? "tenant" : "hash");
}

std::string percent(double value) { return fmt::format("{:.1f}%", value); }

std::string state_of(const ObservedJob& job) {
  if (job.cancelled) return "cancelled";
  if (job.end) return "ended";
  return job.start ? "running" : "pending";
}

Json summary_json(const ShadowSummary& s) {
  return {{"jobs", s.jobs},
          {"started", s.started},
          {"wait_mean_s", s.wait_mean_s},
          {"wait_p50_s", s.wait_p50_s},
          {"wait_p95_s", s.wait_p95_s},
          {"wait_max_s", s.wait_max_s},
          {"makespan_s", s.makespan_s},
          {"gpu_allocation_percent", s.gpu_allocation_percent},
          {"fragmentation_percent", s.fragmentation_percent},
          {"multi_gpu_jobs", s.multi_gpu_jobs},
          {"nodes_per_multi_gpu_job", s.nodes_per_multi_gpu_job},
          {"multi_node_jobs", s.multi_node_jobs},
          {"slowdown_mean", s.slowdown_mean},
          {"comm_share_mean", s.comm_share_mean},
          {"conflicts", s.conflicts}};
}

Json side_json(std::optional<std::int64_t> start, std::optional<std::int64_t> end,
               std::int64_t submit, std::span<const ShadowPlace> places) {
  Json side = {{"start", nullptr}, {"end", nullptr}, {"wait_s", nullptr}, {"nodes", ""}};
  if (start) {
    side["start"] = *start;
    side["wait_s"] = *start - submit;
    side["nodes"] = places_text(places);
  }
  if (end) side["end"] = *end;
  return side;
}

}  // namespace

std::string places_text(std::span<const ShadowPlace> places) {
  std::string out;
  for (const ShadowPlace& p : places) {
    out += (out.empty() ? "" : " ") + p.node;
    if (p.gpus != 0) out += ":" + gpu_ranges(p.gpus);
  }
  return out;
}

std::string shadow_report_text(const ShadowRun& run, std::span<const ObservedJob> jobs,
                               const ShadowReportContext& context) {
  std::ostringstream out;
  const std::string& seen = context.observed;
  out << fmt::format(
      "Shadow of {} ({}): {} jobs, {} compared ({}), on {} nodes / {} GPUs; Tidepool policy {}\n"
      "Tenants: {}\n"
      "From {} to {} UTC (observed at {})\n",
      seen, context.source, jobs.size(), run.observed.jobs, share_text(context.share),
      context.nodes, context.gpus, context.policy,
      context.tenants_file.empty()
          ? "derived from the stream (guarantees in proportion to GPU time so far)"
          : "from " + context.tenants_file,
      utc_text(run.first_submit, true), utc_text(run.now, true), utc_text(run.now, false));
  if (context.share.percent < 100) {
    out << fmt::format(
        "Tenants in the share: {}; jobs left where {} put them and held up by "
        "Tidepool's: {}\n",
        run.chosen_tenants.empty() ? "none"
                                   : fmt::format("{}", fmt::join(run.chosen_tenants, ", ")),
        seen, run.displaced);
  }
  if (context.job_rows) {
    TextTable table({"job", "tenant", "gpus", "submit", seen + " start", seen + " wait",
                     seen + " nodes", "tidepool start", "tidepool wait", "tidepool nodes"});
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const ObservedJob& j = jobs[i];
      const ShadowJobResult& r = run.jobs[i];
      if (!r.chosen) continue;
      auto start = [&](std::optional<std::int64_t> t) {
        return t ? utc_text(*t, false) : (j.cancelled ? "cancelled" : "-");
      };
      auto wait = [&](std::optional<std::int64_t> t) {
        return t ? format_duration(*t - j.submit) : "-";
      };
      table.add_row({j.id, j.tenant, std::to_string(j.gpus), utc_text(j.submit, false),
                     start(r.observed_start), wait(r.observed_start),
                     places_text(r.observed_places), start(r.tidepool_start),
                     wait(r.tidepool_start), places_text(r.tidepool_places)});
    }
    out << '\n';
    table.print(out);
  }
  const ShadowSummary& a = run.observed;
  const ShadowSummary& b = run.tidepool;
  TextTable summary({"figure", seen, "tidepool"});
  auto row = [&](std::string name, std::string x, std::string y) {
    summary.add_row({std::move(name), std::move(x), std::move(y)});
  };
  auto secs = [](double s) { return format_duration(std::llround(s)); };
  row("jobs started", fmt::format("{}/{}", a.started, a.jobs),
      fmt::format("{}/{}", b.started, b.jobs));
  row("wait mean", secs(a.wait_mean_s), secs(b.wait_mean_s));
  row("wait median", format_duration(a.wait_p50_s), format_duration(b.wait_p50_s));
  row("wait p95", format_duration(a.wait_p95_s), format_duration(b.wait_p95_s));
  row("wait max", format_duration(a.wait_max_s), format_duration(b.wait_max_s));
  row("makespan", format_duration(a.makespan_s), format_duration(b.makespan_s));
  row("GPU allocation", percent(a.gpu_allocation_percent), percent(b.gpu_allocation_percent));
  row("fragmentation (FGD)", percent(a.fragmentation_percent), percent(b.fragmentation_percent));
  row("multi-GPU jobs", std::to_string(a.multi_gpu_jobs), std::to_string(b.multi_gpu_jobs));
  row("  nodes per job", fmt::format("{:.2f}", a.nodes_per_multi_gpu_job),
      fmt::format("{:.2f}", b.nodes_per_multi_gpu_job));
  row("  over several nodes", std::to_string(a.multi_node_jobs), std::to_string(b.multi_node_jobs));
  row("  slowdown (model)", fmt::format("{:.3f}", a.slowdown_mean),
      fmt::format("{:.3f}", b.slowdown_mean));
  row("  communication share", percent(100 * a.comm_share_mean), percent(100 * b.comm_share_mean));
  if (a.conflicts + b.conflicts > 0) {
    row("conflicts (left out)", std::to_string(a.conflicts), std::to_string(b.conflicts));
  }
  out << '\n';
  summary.print(out);
  return out.str();
}

nlohmann::json shadow_report_json(const ShadowRun& run, std::span<const ObservedJob> jobs,
                                  const ShadowReportContext& context) {
  Json list = Json::array();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const ObservedJob& j = jobs[i];
    const ShadowJobResult& r = run.jobs[i];
    list.push_back(
        {{"id", j.id},
         {"tenant", j.tenant},
         {"partition", j.partition},
         {"gpus", j.gpus},
         {"submit", j.submit},
         {"state", state_of(j)},
         {"chosen", r.chosen},
         {"observed", side_json(r.observed_start, r.observed_end, j.submit, r.observed_places)},
         {"tidepool", side_json(r.tidepool_start, r.tidepool_end, j.submit, r.tidepool_places)},
         {"displaced_s", r.displaced_seconds}});
  }
  return {{"observed_scheduler", context.observed},
          {"source", context.source},
          {"policy", context.policy},
          {"tenants_file", context.tenants_file.empty() ? nlohmann::json(nullptr)
                                                        : nlohmann::json(context.tenants_file)},
          {"share",
           {{"percent", context.share.percent},
            {"by", context.share.rule == ShareRule::kTenant ? "tenant" : "hash"},
            {"seed", context.share.seed},
            {"tenants", run.chosen_tenants}}},
          {"pool", {{"nodes", context.nodes}, {"gpus", context.gpus}}},
          {"first_submit", run.first_submit},
          {"observed_at", run.now},
          {"displaced", run.displaced},
          {"summary",
           {{"observed", summary_json(run.observed)}, {"tidepool", summary_json(run.tidepool)}}},
          {"jobs", std::move(list)}};
}

std::string shadow_report_csv(const ShadowRun& run, std::span<const ObservedJob> jobs) {
  std::string out =
      "id,tenant,partition,gpus,submit,state,chosen,observed_start,observed_end,observed_wait_s,"
      "observed_nodes,tidepool_start,tidepool_end,tidepool_wait_s,tidepool_nodes,displaced_s\n";
  auto opt = [](std::optional<std::int64_t> v) { return v ? std::to_string(*v) : std::string(); };
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const ObservedJob& j = jobs[i];
    const ShadowJobResult& r = run.jobs[i];
    auto wait = [&](std::optional<std::int64_t> t) {
      return t ? std::to_string(*t - j.submit) : std::string();
    };
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(j.id),
                       csv_field(j.tenant), csv_field(j.partition), j.gpus, j.submit, state_of(j),
                       r.chosen ? 1 : 0, opt(r.observed_start), opt(r.observed_end),
                       wait(r.observed_start), csv_field(places_text(r.observed_places)),
                       opt(r.tidepool_start), opt(r.tidepool_end), wait(r.tidepool_start),
                       csv_field(places_text(r.tidepool_places)), r.displaced_seconds);
  }
  return out;
}

}  // namespace tidepool
