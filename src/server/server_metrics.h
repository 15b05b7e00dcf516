// The server's Prometheus metrics (prometheus-cpp), served by GET /metrics in the text format.
// Names follow Prometheus' conventions: a tidepool_ prefix, base units (seconds), _total for
// counters.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "server/control_plane.h"
#include "server/queue_waits.h"
#include "store/store.h"

namespace tidepool {

// Seconds from `start` to now on the steady clock: how the metrics' durations are measured.
double seconds_since(std::chrono::steady_clock::time_point start);

class ServerMetrics {
 public:
  ServerMetrics();

  void count_request(const std::string& method, const std::string& route, int status,
                     double seconds);
  void count_rate_limited();
  // GET /v1/events requests parked now, waiting for an event or their timeout.
  void set_long_polls(std::size_t parked);
  // A committed batch: its size and how long the commit took; counts its job events.
  void count_commit(const Batch& batch, double seconds);
  void count_commit_failure();
  void count_pass(double seconds);
  // A run of the pre-warm hook ended (prewarm_calls.h); thread-safe.
  void count_prewarm_call(bool ok);
  // The gauges, from the control plane's figures.
  void set_figures(const ControlPlane::Figures& figures);
  // This server leads (a server alone always does); `term`: the leaderships of the pool since its
  // first leader, 1 for that one (etcd_election.h), so term - 1 failovers.
  void set_leading(std::int64_t term);

  // Everything in the Prometheus text exposition format.
  [[nodiscard]] std::string render() const;

 private:
  // The step telemetry gauges (set_figures' part).
  void set_step_figures(const ControlPlane::Figures& figures);

  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_seconds_;
  prometheus::Counter& rate_limited_;
  prometheus::Histogram& commit_seconds_;
  prometheus::Histogram& commit_records_;
  prometheus::Counter& commit_failures_;
  prometheus::Histogram& pass_seconds_;
  prometheus::Family<prometheus::Counter>& job_events_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Gauge& gpus_;
  prometheus::Gauge& gpus_allocated_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Family<prometheus::Gauge>& tenant_gpus_;
  prometheus::Gauge& last_event_;
  prometheus::Gauge& long_polls_;
  prometheus::Counter& node_failures_;
  prometheus::Counter& internal_errors_;
  prometheus::Family<prometheus::Counter>& requeues_;
  prometheus::Family<prometheus::Counter>& lost_work_;
  prometheus::Family<prometheus::Gauge>& prices_;
  prometheus::Family<prometheus::Counter>& tenant_charges_;
  prometheus::Family<prometheus::Counter>& tenant_credits_;
  prometheus::Family<prometheus::Gauge>& tenant_budget_spend_;
  prometheus::Family<prometheus::Gauge>& burst_gpus_;
  prometheus::Counter& burst_rentals_;
  prometheus::Family<prometheus::Counter>& prewarm_calls_;
  prometheus::Family<prometheus::Counter>& job_starts_;
  prometheus::Gauge& leader_;
  prometheus::Counter& failovers_;
  prometheus::Family<prometheus::Histogram>& queue_waits_;
  prometheus::Family<prometheus::Gauge>& oldest_pending_;
  std::set<std::string> waiting_tenants_;  // those with an oldest_pending_ series now
  prometheus::Family<prometheus::Gauge>& guarantee_shortfall_;
  prometheus::Family<prometheus::Counter>& spend_anomalies_;
  // Step telemetry: per running job (removed when it stops) and per tenant.
  prometheus::Family<prometheus::Gauge>& job_step_seconds_;
  prometheus::Family<prometheus::Gauge>& job_comm_share_;
  prometheus::Family<prometheus::Gauge>& job_mfu_;
  prometheus::Family<prometheus::Gauge>& tenant_comm_share_;
  prometheus::Family<prometheus::Gauge>& tenant_mfu_;
  // The label sets each of those families has a series of now, to remove those that went.
  std::map<const void*, std::set<std::map<std::string, std::string>>> step_series_;
  std::map<std::string, QueueWaits> reported_waits_;  // what the histograms hold, per tenant
  // Guards gpu_metrics_: written by the loop thread, read by the /metrics handler.
  mutable std::mutex gpu_metrics_mutex_;
  std::string gpu_metrics_;  // the GPUs' figures, rendered by the control plane
};

}  // namespace tidepool
