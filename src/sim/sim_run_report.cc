#include "sim/sim_run_report.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/gpus_text.h"
#include "core/job.h"
#include "core/pending_reason.h"
#include "report/csv_field.h"

namespace tidepool {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr int kJobClassCount = 4;

std::string optional_text(const std::optional<Seconds>& value) {
  return value ? std::to_string(*value) : std::string();
}

const std::string& tenant_name(const ClusterSimRun& run, TenantId tenant) {
  static const std::string kUnknown = "?";
  return tenant.value < run.tenant_names.size() ? run.tenant_names[tenant.value] : kUnknown;
}

double gpus_value(std::int64_t milli) { return static_cast<double>(milli) / kMilliPerGpu; }

Json optional_json(const std::optional<Seconds>& value) {
  return value ? Json(*value) : Json(nullptr);
}

}  // namespace

void write_services_csv(std::ostream& out, const ClusterSimRun& run) {
  out << "service,time_s,rate_rps,ready,live,wanted,oracle,p95_ms\n";
  for (const SimServiceResult& service : run.services) {
    for (const ServiceTick& t : service.ticks) {
      out << fmt::format("{},{},{:.3f},{},{},{},{},{}\n", csv_field(service.name), t.time, t.rate,
                         t.ready, t.live, t.wanted, t.oracle,
                         t.p95_ms ? std::to_string(*t.p95_ms) : std::string());
    }
  }
}

void write_jobs_csv(std::ostream& out, const ClusterSimRun& run, std::span<const SimJob> workload,
                    std::span<const SimLoan> loans) {
  out << "job,name,tenant,class,gpus,submit_s,start_s,end_s,queue_s,preemptions,lost_gpu_seconds,"
         "nodes,leaves,slowdown,comm_overhead,est_mfu,predicted_runtime_s,main_pending_reason\n";
  for (const SimJobResult& r : run.jobs) {
    std::string name;
    TenantId tenant;
    JobClass job_class = JobClass::kTraining;
    std::int64_t milli = 0;
    Seconds submit = 0;
    if (r.id.value < workload.size()) {
      const SimJob& job = workload[r.id.value];
      name = job.name;
      tenant = job.job.tenant;
      job_class = job.job.job_class;
      milli = job.job.total_milli_gpu();
      submit = job.job.submit_time;
    } else if (const std::size_t k = r.id.value - workload.size(); k < loans.size()) {
      name = "loan-" + std::to_string(k + 1);
      tenant = loans[k].tenant;
      milli = std::int64_t{loans[k].gpus} * kMilliPerGpu;
      submit = loans[k].start;
    } else if (const std::size_t replica = k - loans.size(); replica < run.replica_jobs.size()) {
      const SimJob& job = run.replica_jobs[replica];
      name = job.name;
      tenant = job.job.tenant;
      job_class = job.job.job_class;
      milli = job.job.total_milli_gpu();
      submit = job.job.submit_time;
    }
    out << fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{},{}\n", r.id.value,
        csv_field(name), csv_field(tenant_name(run, tenant)), job_class_name(job_class),
        gpus_number(milli), submit, optional_text(r.first_start), optional_text(r.end),
        r.queue_seconds, r.preemptions, r.lost_gpu_seconds, r.nodes, r.leaves, r.slowdown,
        r.comm_share, r.est_mfu, r.predicted_runtime, pending_kind_name(r.main_reason));
  }
}

void write_timeline_csv(std::ostream& out, const ClusterSimRun& run) {
  out << "time_s";
  for (const std::string& tenant : run.tenant_names) out << ',' << csv_field("gpus_" + tenant);
  out << ",allocated_gpus,queued,running,free_gpus,fragmented_gpus,fragmentation\n";
  for (const SimSample& s : run.samples) {
    out << s.time;
    for (std::size_t t = 0; t < run.tenant_names.size(); ++t) {
      out << ',' << gpus_number(t < s.tenant_milli.size() ? s.tenant_milli[t] : 0);
    }
    const double fragmentation =
        s.free_gpus > 0 ? static_cast<double>(s.fragmented_gpus) / static_cast<double>(s.free_gpus)
                        : 0.0;
    out << fmt::format(",{},{},{},{},{},{:.4f}\n", gpus_number(s.allocated_milli), s.queued,
                       s.running, s.free_gpus, s.fragmented_gpus, fragmentation);
  }
}

void write_costs_csv(std::ostream& out, const ClusterSimRun& run) {
  out << "tenant,charges,lending_credits,net,budget_alerts,budget_exhaustions,"
         "budget_held_h,spend_anomalies\n";
  if (!run.cost) return;
  for (std::size_t t = 0; t < run.cost->tenants.size() && t < run.tenant_names.size(); ++t) {
    const SimTenantCost& c = run.cost->tenants[t];
    out << fmt::format("{},{},{},{},{},{},{:.2f},{}\n", csv_field(run.tenant_names[t]),
                       money_text(c.charges), money_text(c.credits),
                       money_text(c.credits - c.charges), c.budget_alerts, c.budget_exhaustions,
                       static_cast<double>(c.budget_held_s) / 3600.0, c.spend_anomalies);
  }
}

namespace {

Json cost_json(const ClusterSimRun& run) {
  if (!run.cost) return nullptr;
  const SimCost& c = *run.cost;
  Json tenants = Json::object();
  for (std::size_t t = 0; t < c.tenants.size() && t < run.tenant_names.size(); ++t) {
    tenants[run.tenant_names[t]] = Json{{"charges", money_text(c.tenants[t].charges)},
                                        {"lending_credits", money_text(c.tenants[t].credits)},
                                        {"budget_alerts", c.tenants[t].budget_alerts},
                                        {"budget_exhaustions", c.tenants[t].budget_exhaustions},
                                        {"budget_held_s", c.tenants[t].budget_held_s},
                                        {"spend_anomalies", c.tenants[t].spend_anomalies}};
  }
  const auto hours = [](std::int64_t milli_seconds) {
    return static_cast<double>(milli_seconds) / (kMilliPerGpu * 3600.0);
  };
  return Json{{"charged", money_text(c.charged)},
              {"lending_credits", money_text(c.credited)},
              {"owned_cost", money_text(c.owned_cost)},
              {"useful_gpu_hours", hours(c.useful_milli_seconds)},
              {"allocated_gpu_hours", hours(c.allocated_milli_seconds)},
              {"charged_per_useful_gpu_hour", money_text(c.charged_per_useful_gpu_hour)},
              {"owned_cost_per_useful_gpu_hour", money_text(c.owned_per_useful_gpu_hour)},
              {"ledger_entries", c.ledger_entries},
              {"ledger_balanced", c.ledger_balanced},
              {"tenants", tenants}};
}

}  // namespace

std::string summary_json_text(const ClusterSimRun& run, std::string_view policy) {
  const SimSummary& s = run.summary;
  Json pending = Json::object();
  for (int k = 0; k < kPendingKinds; ++k) {
    pending[std::string(pending_kind_name(static_cast<PendingKind>(k)))] =
        s.pending_seconds[static_cast<std::size_t>(k)];
  }
  Json class_hours = Json::object();
  for (int c = 0; c < kJobClassCount; ++c) {
    const auto index = static_cast<std::size_t>(c);
    class_hours[std::string(job_class_name(static_cast<JobClass>(c)))] =
        index < s.class_gpu_hours_in_horizon.size() ? s.class_gpu_hours_in_horizon[index] : 0.0;
  }
  Json loans = Json::array();
  for (const SimLoanResult& loan : s.loans) {
    loans.push_back(Json{{"tenant", tenant_name(run, loan.loan.tenant)},
                         {"gpus", loan.loan.gpus},
                         {"start_s", loan.loan.start},
                         {"duration_s", loan.loan.duration},
                         {"served_after_s", optional_json(loan.served_after)},
                         {"end_s", loan.end},
                         {"held_after_end_gpus", gpus_value(loan.held_after_end_milli)}});
  }
  Json services = Json::array();
  for (const SimServiceResult& service : run.services) {
    const double hours = static_cast<double>(service.seconds) / 3600.0;
    services.push_back(Json{{"name", service.name},
                            {"p95_target_ms", service.target_ms},
                            {"hours", hours},
                            {"above_target_share", service.above_target_share()},
                            {"replica_hours", service.replica_hours},
                            {"gpu_hours", service.gpu_hours},
                            {"oracle_replica_hours", service.oracle_replica_hours},
                            {"replica_hours_over_oracle", service.replica_hours_over_oracle()},
                            {"max_replicas_held", service.max_replicas_held},
                            {"scale_decisions", service.decisions},
                            {"last_decision", service.last_reason}});
  }
  Json training_outside = Json::object();
  for (std::size_t t = 0;
       t < s.tenant_training_gpu_hours_outside_windows.size() && t < run.tenant_names.size(); ++t) {
    training_outside[run.tenant_names[t]] = s.tenant_training_gpu_hours_outside_windows[t];
  }
  Json tenant_ratios = Json::object();
  for (std::size_t t = 0; t < s.tenant_guarantee_ratio.size() && t < run.tenant_names.size(); ++t) {
    tenant_ratios[run.tenant_names[t]] = s.tenant_guarantee_ratio[t];
  }
  Json tenant_queueing = Json::object();
  for (std::size_t t = 0; t < s.tenant_queueing.size() && t < run.tenant_names.size(); ++t) {
    const TenantQueueing& q = s.tenant_queueing[t];
    tenant_queueing[run.tenant_names[t]] = Json{{"jobs", q.jobs},
                                                {"avg_queue_s", q.avg_s},
                                                {"p95_queue_s", q.p95_s},
                                                {"p99_queue_s", q.p99_s},
                                                {"max_queue_s", q.max_s}};
  }
  const Json summary = {
      {"policy", std::string(policy)},
      {"jobs", s.jobs},
      {"finished", s.finished},
      {"never_started", s.never_started},
      {"avg_queue_s", s.avg_queue_s},
      {"p50_queue_s", s.p50_queue_s},
      {"p95_queue_s", s.p95_queue_s},
      {"p99_queue_s", s.p99_queue_s},
      {"max_queue_s", s.max_queue_s},
      {"tenant_queueing", tenant_queueing},
      {"avg_jct_s", s.avg_jct_s},
      {"makespan_s", s.makespan_s},
      {"gpu_allocation_avg", s.gpu_allocation_avg},
      {"comm_overhead_share", s.comm_overhead_share},
      {"est_mfu", s.est_mfu},
      {"est_mfu_advised_accumulate", s.est_mfu_advised_accumulate},
      {"est_mfu_advised_compact", s.est_mfu_advised_compact},
      {"est_mfu_advised_both", s.est_mfu_advised_both},
      {"jobs_advised_accumulate", s.jobs_advised_accumulate},
      {"jobs_advised_compact", s.jobs_advised_compact},
      {"prewarm_calls", s.prewarm_calls},
      {"starts", s.starts},
      {"prewarmed_starts", s.prewarmed_starts},
      {"starts_after_lead", s.starts_after_lead},
      {"prewarmed_starts_after_lead", s.prewarmed_starts_after_lead},
      {"fully_staged_starts", s.fully_staged_starts},
      {"start_delay_saved_avg_s", s.start_delay_saved_avg_s},
      {"start_delay_saved_gpu_hours", s.start_delay_saved_gpu_hours},
      {"preemptions", s.preemptions},
      {"lost_gpu_hours_share", s.lost_gpu_hours_share},
      {"min_tenant_guarantee_ratio", s.min_tenant_guarantee_ratio},
      {"min_guarantee_tenant", s.min_guarantee_tenant},
      {"tenant_guarantee_ratio", tenant_ratios},
      {"wall_seconds", s.wall_seconds},
      {"predictor_median_abs_error_s", s.predictor_median_abs_error_s},
      {"baseline_median_abs_error_s", s.baseline_median_abs_error_s},
      {"backfilled", s.backfilled},
      {"pending_seconds", pending},
      {"class_gpu_hours_in_horizon", class_hours},
      {"inference_max_wait_in_window_s", s.inference_max_wait_in_window_s < 0
                                             ? Json(nullptr)
                                             : Json(s.inference_max_wait_in_window_s)},
      {"loans", loans},
      {"tenant_training_gpu_hours_outside_windows", training_outside},
      {"services", services},
      {"cost", cost_json(run)},
  };
  return summary.dump(2) + '\n';
}

Result<std::string> write_sim_run_report(const std::string& dir, std::string_view policy,
                                         const ClusterSimRun& run, std::span<const SimJob> workload,
                                         std::span<const SimLoan> loans) {
  const fs::path folder = fs::path(dir) / std::string(policy);
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    return fail("--out", "cannot create folder '" + folder.string() + "': " + error.message());
  }
  const auto write = [](const fs::path& path, const auto& fill) -> Result<void> {
    std::ofstream out(path);
    if (out) fill(out);
    out.close();
    if (!out) return fail("--out", "cannot write '" + path.string() + "'");
    return {};
  };
  if (auto ok = write(folder / "jobs.csv",
                      [&](std::ostream& out) { write_jobs_csv(out, run, workload, loans); });
      !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok =
          write(folder / "timeline.csv", [&](std::ostream& out) { write_timeline_csv(out, run); });
      !ok) {
    return std::unexpected(ok.error());
  }
  if (run.cost) {
    if (auto ok =
            write(folder / "costs.csv", [&](std::ostream& out) { write_costs_csv(out, run); });
        !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (!run.services.empty()) {
    if (auto ok = write(folder / "services.csv",
                        [&](std::ostream& out) { write_services_csv(out, run); });
        !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (auto ok = write(folder / "summary.json",
                      [&](std::ostream& out) { out << summary_json_text(run, policy); });
      !ok) {
    return std::unexpected(ok.error());
  }
  return folder.string();
}

}  // namespace tidepool
