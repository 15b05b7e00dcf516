#include "server/server_metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace tidepool {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

Histogram::BucketBoundaries latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ServerMetrics::ServerMetrics()
    : requests_(BuildCounter()
                    .Name("tidepool_http_requests_total")
                    .Help("HTTP requests answered, by method, route and status code")
                    .Register(*registry_)),
      request_seconds_(BuildHistogram()
                           .Name("tidepool_http_request_duration_seconds")
                           .Help("Time from a request's arrival to its answer, by route")
                           .Register(*registry_)),
      rate_limited_(BuildCounter()
                        .Name("tidepool_http_rate_limited_requests_total")
                        .Help("Requests refused with 429 by the per-token rate limit")
                        .Register(*registry_)
                        .Add({})),
      commit_seconds_(BuildHistogram()
                          .Name("tidepool_store_commit_seconds")
                          .Help("Time to commit one batch of changes durably")
                          .Register(*registry_)
                          .Add({}, latency_buckets())),
      commit_records_(
          BuildHistogram()
              .Name("tidepool_store_commit_jobs")
              .Help("Job records written per committed batch (group commit)")
              .Register(*registry_)
              .Add({}, Histogram::BucketBoundaries{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000})),
      commit_failures_(BuildCounter()
                           .Name("tidepool_store_commit_failures_total")
                           .Help("Batches the store failed to commit (their requests got 503)")
                           .Register(*registry_)
                           .Add({})),
      pass_seconds_(BuildHistogram()
                        .Name("tidepool_scheduler_pass_duration_seconds")
                        .Help("Time of one scheduling pass, with applying its result")
                        .Register(*registry_)
                        .Add({}, latency_buckets())),
      job_events_(BuildCounter()
                      .Name("tidepool_job_transitions_total")
                      .Help("Committed job transitions, by the state entered")
                      .Register(*registry_)),
      jobs_(BuildGauge()
                .Name("tidepool_jobs")
                .Help("Jobs the server knows, by state")
                .Register(*registry_)),
      gpus_(
          BuildGauge().Name("tidepool_gpus").Help("GPUs in the pool").Register(*registry_).Add({})),
      gpus_allocated_(BuildGauge()
                          .Name("tidepool_gpus_allocated")
                          .Help("GPUs held by running jobs (fractions count as such)")
                          .Register(*registry_)
                          .Add({})),
      nodes_(BuildGauge()
                 .Name("tidepool_nodes")
                 .Help("Nodes of the pool, by state")
                 .Register(*registry_)),
      tenant_gpus_(BuildGauge()
                       .Name("tidepool_tenant_gpus_used")
                       .Help("GPUs held by each tenant's running jobs")
                       .Register(*registry_)),
      last_event_(BuildGauge()
                      .Name("tidepool_events_last_sequence")
                      .Help("Sequence number of the last committed event")
                      .Register(*registry_)
                      .Add({})),
      long_polls_(BuildGauge()
                      .Name("tidepool_api_long_polls")
                      .Help("GET /v1/events requests waiting for an event or their timeout")
                      .Register(*registry_)
                      .Add({})),
      node_failures_(BuildCounter()
                         .Name("tidepool_node_failures_total")
                         .Help("Nodes marked NotReady because their agent missed heartbeats "
                               "(faults, counted apart from scheduling)")
                         .Register(*registry_)
                         .Add({})),
      internal_errors_(BuildCounter()
                           .Name("tidepool_internal_errors_total")
                           .Help("internal.error events: the control plane and its scheduler "
                                 "disagreed (a bug to report)")
                           .Register(*registry_)
                           .Add({})),
      requeues_(BuildCounter()
                    .Name("tidepool_job_requeues_total")
                    .Help("Runs stopped and queued again, by cause: preemption (the scheduler) "
                          "or node_failure (a fault)")
                    .Register(*registry_)),
      lost_work_(BuildCounter()
                     .Name("tidepool_lost_work_seconds_total")
                     .Help("Run time not saved by a checkpoint when runs were stopped, by cause: "
                           "preemption or node_failure")
                     .Register(*registry_)),
      prices_(BuildGauge()
                  .Name("tidepool_price_credits_per_gpu_hour")
                  .Help("The internal market's price in force of one GPU-hour, in the market's "
                        "currency, by GPU model and price class")
                  .Register(*registry_)),
      tenant_charges_(BuildCounter()
                          .Name("tidepool_tenant_charged_credits_total")
                          .Help("What each tenant was charged (posted ledger entries), in the "
                                "market's currency")
                          .Register(*registry_)),
      tenant_credits_(BuildCounter()
                          .Name("tidepool_tenant_lending_credits_total")
                          .Help("Lending credits each tenant earned (posted ledger entries), in "
                                "the market's currency")
                          .Register(*registry_)),
      tenant_budget_spend_(BuildGauge()
                               .Name("tidepool_tenant_budget_spend_ratio")
                               .Help("Each tenant's spend this quarter (charges minus credits) "
                                     "over its quarterly budget; tenants with a budget only")
                               .Register(*registry_)),
      burst_gpus_(BuildGauge()
                      .Name("tidepool_burst_gpus")
                      .Help("GPUs rented from burst providers now (coming up or in use), by offer")
                      .Register(*registry_)),
      burst_rentals_(BuildCounter()
                         .Name("tidepool_burst_rentals_total")
                         .Help("Jobs sent to rented capacity (provider `up` requests)")
                         .Register(*registry_)
                         .Add({})),
      prewarm_calls_(BuildCounter()
                         .Name("tidepool_prewarm_calls_total")
                         .Help("Runs of the pre-warm hook, by outcome: ok (exit status 0 in its "
                               "timeout) or failed")
                         .Register(*registry_)),
      job_starts_(BuildCounter()
                      .Name("tidepool_job_starts_total")
                      .Help("Job runs started on the pool's nodes, by whether the pre-warm hook "
                            "had been called for every node of the start")
                      .Register(*registry_)),
      leader_(BuildGauge()
                  .Name("tidepool_leader")
                  .Help("1 while this server leads the pool (a standby answers 0)")
                  .Register(*registry_)
                  .Add({})),
      failovers_(BuildCounter()
                     .Name("tidepool_failovers_total")
                     .Help("Leaderships taken over since the pool's first leader (etcd store)")
                     .Register(*registry_)
                     .Add({})),
      queue_waits_(BuildHistogram()
                       .Name("tidepool_queue_wait_seconds")
                       .Help("Time jobs waited before they started (since their submission or "
                             "their last preemption), by tenant; percentiles by "
                             "histogram_quantile")
                       .Register(*registry_)),
      oldest_pending_(BuildGauge()
                          .Name("tidepool_tenant_oldest_pending_since_seconds")
                          .Help("Unix time at which each tenant's longest-waiting pending job "
                                "that may start (not held, dependencies met) began to wait; "
                                "tenants with such a job only")
                          .Register(*registry_)),
      guarantee_shortfall_(BuildGauge()
                               .Name("tidepool_tenant_guarantee_shortfall_gpus")
                               .Help("GPUs of each tenant's unused guarantee of a model that its "
                                     "pending jobs ask for (0: the guarantee is honoured)")
                               .Register(*registry_)),
      spend_anomalies_(
          BuildCounter()
              .Name("tidepool_tenant_spend_anomalies_total")
              .Help("Spend anomalies raised for each tenant (a day's spend past twice its "
                    "7-day average: cost.anomaly events), since the server started")
              .Register(*registry_)),
      job_step_seconds_(BuildGauge()
                            .Name("tidepool_job_step_seconds")
                            .Help("Step time of each running job that reports its steps "
                                  "(TIDEPOOL_STEP_REPORT), by quantile 0.5, 0.9 and 0.99, over "
                                  "all its steps")
                            .Register(*registry_)),
      job_comm_share_(BuildGauge()
                          .Name("tidepool_job_comm_share")
                          .Help("Share of each running job's step time spent communicating: "
                                "(step - compute) / step, or all-reduce / step (0..1)")
                          .Register(*registry_)),
      job_mfu_(BuildGauge()
                   .Name("tidepool_job_mfu")
                   .Help("Model FLOPs utilisation of each running job: its declared "
                         "model_flops_per_step over its mean step time and its GPUs' peak (0..1)")
                   .Register(*registry_)),
      tenant_comm_share_(BuildGauge()
                             .Name("tidepool_tenant_comm_share")
                             .Help("Share of the step time of each tenant's running jobs spent "
                                   "communicating, weighted by step time (0..1)")
                             .Register(*registry_)),
      tenant_mfu_(BuildGauge()
                      .Name("tidepool_tenant_mfu")
                      .Help("Model FLOPs of each tenant's running jobs over what their GPUs "
                            "could have done in their step time (0..1); jobs that declare "
                            "model_flops_per_step only")
                      .Register(*registry_)) {}

void ServerMetrics::count_request(const std::string& method, const std::string& route, int status,
                                  double seconds) {
  requests_.Add({{"method", method}, {"route", route}, {"code", std::to_string(status)}})
      .Increment();
  request_seconds_.Add({{"route", route}}, latency_buckets()).Observe(seconds);
}

void ServerMetrics::count_rate_limited() { rate_limited_.Increment(); }

void ServerMetrics::set_long_polls(std::size_t parked) {
  long_polls_.Set(static_cast<double>(parked));
}

void ServerMetrics::count_commit(const Batch& batch, double seconds) {
  commit_seconds_.Observe(seconds);
  commit_records_.Observe(static_cast<double>(batch.jobs.size()));
  for (const EventRecord& e : batch.events) {
    if (e.kind.starts_with("job.") && e.kind != "job.checkpointed") {
      job_events_.Add({{"state", e.kind.substr(4)}}).Increment();
    }
  }
}

void ServerMetrics::count_commit_failure() { commit_failures_.Increment(); }

void ServerMetrics::count_pass(double seconds) { pass_seconds_.Observe(seconds); }

void ServerMetrics::count_prewarm_call(bool ok) {
  prewarm_calls_.Add({{"outcome", ok ? "ok" : "failed"}}).Increment();
}

void ServerMetrics::set_leading(std::int64_t term) {
  leader_.Set(1);
  const double failovers = static_cast<double>(std::max<std::int64_t>(term - 1, 0));
  if (failovers > failovers_.Value()) failovers_.Increment(failovers - failovers_.Value());
}

void ServerMetrics::set_figures(const ControlPlane::Figures& figures) {
  for (const auto& [state, count] : figures.jobs_by_state) {
    jobs_.Add({{"state", state}}).Set(static_cast<double>(count));
  }
  gpus_.Set(static_cast<double>(figures.gpus_total));
  gpus_allocated_.Set(static_cast<double>(figures.gpu_milli_allocated) / 1000.0);
  nodes_.Add({{"state", "drained"}}).Set(static_cast<double>(figures.nodes_drained));
  nodes_.Add({{"state", "not_ready"}}).Set(static_cast<double>(figures.nodes_not_ready));
  nodes_.Add({{"state", "ready"}})
      .Set(static_cast<double>(figures.nodes_total - figures.nodes_drained -
                               figures.nodes_not_ready));
  // The figures count since the control plane started; a counter only goes up to them.
  const auto raise_to = [](prometheus::Counter& counter, double value) {
    if (value > counter.Value()) counter.Increment(value - counter.Value());
  };
  raise_to(node_failures_, static_cast<double>(figures.node_failures));
  // Every cause and tenant from the start, at 0: a rule's rate() or increase() sees the first.
  for (const char* cause : {"preemption", "node_failure"}) {
    requeues_.Add({{"cause", cause}});
    lost_work_.Add({{"cause", cause}});
  }
  for (const char* outcome : {"ok", "failed"}) prewarm_calls_.Add({{"outcome", outcome}});
  // A tenant's queue-wait histogram (made on first use).
  const auto queue_waits_of = [this](const std::string& tenant) -> Histogram& {
    return queue_waits_.Add(
        {{"tenant", tenant}},
        Histogram::BucketBoundaries(kQueueWaitBounds.begin(), kQueueWaitBounds.end()));
  };
  for (const auto& [tenant, milli] : figures.tenant_gpu_milli) queue_waits_of(tenant);
  raise_to(internal_errors_, static_cast<double>(figures.internal_errors));
  for (const auto& [cause, count] : figures.requeued_by_cause) {
    raise_to(requeues_.Add({{"cause", cause}}), static_cast<double>(count));
  }
  for (const auto& [cause, ms] : figures.lost_work_ms_by_cause) {
    raise_to(lost_work_.Add({{"cause", cause}}), static_cast<double>(ms) / 1000.0);
  }
  {
    std::lock_guard lock(gpu_metrics_mutex_);
    gpu_metrics_ = figures.gpu_metrics;
  }
  const auto money = [](Micros amount) {
    return static_cast<double>(amount) / static_cast<double>(kMicrosPerUnit);
  };
  for (const auto& [key, price] : figures.price_per_gpu_hour) {
    prices_.Add({{"model", key.first}, {"class", key.second}}).Set(money(price));
  }
  for (const auto& [tenant, amount] : figures.tenant_charges) {
    raise_to(tenant_charges_.Add({{"tenant", tenant}}), money(amount));
  }
  for (const auto& [tenant, amount] : figures.tenant_credits) {
    raise_to(tenant_credits_.Add({{"tenant", tenant}}), money(amount));
  }
  for (const auto& [tenant, spend] : figures.tenant_budget_spend) {
    tenant_budget_spend_.Add({{"tenant", tenant}})
        .Set(static_cast<double>(spend) / static_cast<double>(kPpmOne));
  }
  for (const auto& [offer, gpus] : figures.burst_gpus) {
    burst_gpus_.Add({{"offer", offer}}).Set(static_cast<double>(gpus));
  }
  raise_to(burst_rentals_, static_cast<double>(figures.burst_rentals));
  raise_to(job_starts_.Add({{"prewarmed", "true"}}), static_cast<double>(figures.starts_prewarmed));
  raise_to(job_starts_.Add({{"prewarmed", "false"}}),
           static_cast<double>(figures.starts_not_prewarmed));
  for (const auto& [tenant, milli] : figures.tenant_gpu_milli) {
    tenant_gpus_.Add({{"tenant", tenant}}).Set(static_cast<double>(milli) / 1000.0);
  }
  last_event_.Set(static_cast<double>(figures.last_event_seq));
  std::set<std::string> waiting;
  for (const auto& [tenant, ms] : figures.tenant_oldest_pending_ms) {
    oldest_pending_.Add({{"tenant", tenant}}).Set(static_cast<double>(ms) / 1000.0);
    waiting.insert(tenant);
  }
  for (const std::string& tenant : waiting_tenants_) {
    if (!waiting.contains(tenant))
      oldest_pending_.Remove(&oldest_pending_.Add({{"tenant", tenant}}));
  }
  waiting_tenants_ = std::move(waiting);
  for (const auto& [key, milli] : figures.guarantee_shortfall_milli) {
    guarantee_shortfall_.Add({{"tenant", key.first}, {"model", key.second}})
        .Set(static_cast<double>(milli) / 1000.0);
  }
  for (const auto& [tenant, count] : figures.tenant_spend_anomalies) {
    raise_to(spend_anomalies_.Add({{"tenant", tenant}}), static_cast<double>(count));
  }
  set_step_figures(figures);
  // The figures count since the control plane started; a histogram takes what is new.
  for (const auto& [tenant, waits] : figures.tenant_queue_waits) {
    QueueWaits& reported = reported_waits_[tenant];
    if (waits.count <= reported.count) continue;
    std::vector<double> increments;
    for (std::size_t b = 0; b < waits.counts.size(); ++b) {
      increments.push_back(static_cast<double>(waits.counts[b] - reported.counts[b]));
    }
    queue_waits_of(tenant).ObserveMultiple(increments, waits.sum_seconds - reported.sum_seconds);
    reported = waits;
  }
}

void ServerMetrics::set_step_figures(const ControlPlane::Figures& figures) {
  using Labels = std::map<std::string, std::string>;
  std::map<const void*, std::set<Labels>> now;
  const auto set = [&now](prometheus::Family<prometheus::Gauge>& family, const Labels& labels,
                          double value) {
    family.Add(labels).Set(value);
    now[&family].insert(labels);
  };
  for (const auto& [id, job] : figures.running_job_steps) {
    const Labels labels = {{"job", std::to_string(id)}, {"tenant", job.tenant}};
    for (auto [quantile, us] : {std::pair{"0.5", job.p50_us}, std::pair{"0.9", job.p90_us},
                                std::pair{"0.99", job.p99_us}}) {
      Labels with = labels;
      with["quantile"] = quantile;
      set(job_step_seconds_, with, static_cast<double>(us) / 1e6);
    }
    if (job.comm_share) set(job_comm_share_, labels, *job.comm_share);
    if (job.mfu) set(job_mfu_, labels, *job.mfu);
  }
  for (const auto& [tenant, steps] : figures.tenant_steps) {
    if (steps.step_seconds > 0) {
      set(tenant_comm_share_, {{"tenant", tenant}}, steps.comm_seconds / steps.step_seconds);
    }
    if (steps.peak_flops > 0) {
      set(tenant_mfu_, {{"tenant", tenant}}, steps.model_flops / steps.peak_flops);
    }
  }
  // A job that stopped (or a tenant without such jobs now) loses its series.
  for (auto* family :
       {&job_step_seconds_, &job_comm_share_, &job_mfu_, &tenant_comm_share_, &tenant_mfu_}) {
    const std::set<Labels>& current = now[family];
    for (const Labels& labels : step_series_[family]) {
      if (!current.contains(labels)) family->Remove(&family->Add(labels));
    }
    step_series_[family] = current;
  }
}

std::string ServerMetrics::render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  std::lock_guard lock(gpu_metrics_mutex_);
  return out.str() + gpu_metrics_;
}

}  // namespace tidepool
