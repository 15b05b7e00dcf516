#include "core/autoscaler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

#include "core/queueing_model.h"

namespace tidepool {
namespace {

using ::testing::HasSubstr;

AutoscalerSpec queue_spec() {
  AutoscalerSpec spec;
  spec.min_replicas = 1;
  spec.max_replicas = 20;
  spec.metric = ScaleMetric::kQueuePerReplica;
  spec.target = 2000;  // 2 requests waiting per replica
  auto made = make_autoscaler_spec(spec);
  EXPECT_TRUE(made.has_value());
  return *made;
}

Observation observation(Seconds at, int ready, std::int64_t value) {
  Observation o;
  o.at = at;
  o.ready_replicas = ready;
  o.value = value;
  return o;
}

// The same value reported every 2 s over (from, to].
void report(Autoscaler& a, Seconds from, Seconds to, std::int64_t value, int ready = 1) {
  for (Seconds t = from + 2; t <= to; t += 2) a.observe(observation(t, ready, value));
}

TEST(AutoscalerSpecTest, EachBadFieldIsNamed) {
  const auto refused = [](auto change) {
    AutoscalerSpec spec;
    spec.max_replicas = 4;
    change(spec);
    auto made = make_autoscaler_spec(spec);
    return made ? std::string() : made.error().field;
  };
  EXPECT_EQ(refused([](AutoscalerSpec&) {}), "");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.min_replicas = -1; }), "min_replicas");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.min_replicas = 5; }), "max_replicas");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.target = 0; }), "target");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.stable_window = 5; }), "stable_window");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.panic_window = 61; }), "panic_window");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.panic_percent = 100; }), "panic_percent");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.tolerance_percent = 60; }), "tolerance_percent");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.up_period = 0; }), "up_period");
  EXPECT_EQ(refused([](AutoscalerSpec& s) { s.down_window = -1; }), "down_window");
  EXPECT_EQ(parse_scale_metric("queue_per_replica"), ScaleMetric::kQueuePerReplica);
  EXPECT_EQ(parse_scale_metric("p95").error().field, "metric");
}

TEST(AutoscalerTest, WithoutFiguresItKeepsTheCountWithinItsBounds) {
  Autoscaler a(queue_spec());
  const ScaleDecision first = a.decide(0, 0);
  EXPECT_EQ(first.wanted, 1);
  EXPECT_THAT(first.reason, HasSubstr("no figures"));
  EXPECT_EQ(a.decide(10, 30).wanted, 20);
}

TEST(AutoscalerTest, ScalesToTheLoadAndHoldsWithinTheTolerance) {
  Autoscaler a(queue_spec());
  report(a, 0, 60, 10'000);  // 10 waiting: 5 replicas at 2 each
  const ScaleDecision up = a.decide(60, 4);
  EXPECT_EQ(up.wanted, 5);
  EXPECT_FALSE(up.panic);
  EXPECT_EQ(up.reason, "4 -> 5: 10.0 requests waiting over 60s, target 2.0 per replica");
  // 10.5 waiting on 5 replicas is within 10% of their 10: no sixth.
  Autoscaler b(queue_spec());
  report(b, 0, 60, 10'500);
  EXPECT_EQ(b.decide(60, 5).wanted, 5);
  // A late report (older than the last) is ignored.
  b.observe(observation(30, 5, 90'000));
  EXPECT_EQ(b.decide(61, 5).wanted, 5);
}

TEST(AutoscalerTest, OneStepUpPerPeriodAndDownOnlyAfterTheDownWindowByHalves) {
  AutoscalerSpec spec = queue_spec();
  spec.stable_window = 6;
  spec.panic_window = 6;
  spec.panic_percent = 10'000;  // no panic here
  Autoscaler a(spec);
  report(a, 54, 60, 10'000);
  EXPECT_EQ(a.decide(60, 4).wanted, 5);
  report(a, 60, 66, 20'000);  // 10 wanted, 6 s after the last step up
  const ScaleDecision held = a.decide(66, 5);
  EXPECT_EQ(held.wanted, 5);
  EXPECT_THAT(held.reason, HasSubstr("the last step up was 6s ago (at most one per 15s)"));
  report(a, 66, 75, 20'000);
  EXPECT_EQ(a.decide(75, 5).wanted, 10);

  // The load drops to 1 replica's worth: the 10 wanted at 75 hold for the down window.
  report(a, 75, 100, 2'000);
  const ScaleDecision kept = a.decide(100, 10);
  EXPECT_EQ(kept.wanted, 10);
  EXPECT_THAT(kept.reason, HasSubstr("10 wanted within the last 300s"));
  report(a, 374, 380, 2'000);
  EXPECT_EQ(a.decide(380, 10).wanted, 5);  // at most half at once
  report(a, 394, 400, 2'000);
  const ScaleDecision waits = a.decide(400, 5);
  EXPECT_EQ(waits.wanted, 5);
  EXPECT_THAT(waits.reason, HasSubstr("the last step down was 20s ago (at most one per 60s)"));
  // Then a step a minute, each of at most half, down to the one replica the load wants.
  for (const auto& [at, from, to] :
       {std::tuple{440, 5, 3}, std::tuple{500, 3, 2}, std::tuple{560, 2, 1}}) {
    report(a, at - 6, at, 2'000);
    EXPECT_EQ(a.decide(at, from).wanted, to) << "at " << at;
  }
}

TEST(AutoscalerTest, ABurstPanicsUpAtOnceAndNothingScalesDownWhilePanicking) {
  Autoscaler a(queue_spec());
  report(a, 0, 60, 8'000);  // 4 replicas' worth
  EXPECT_EQ(a.decide(60, 4).wanted, 4);
  report(a, 60, 66, 40'000);  // 20 replicas' worth over the last 6 s
  const ScaleDecision burst = a.decide(66, 4);
  EXPECT_TRUE(burst.panic);
  EXPECT_EQ(burst.wanted, 8);  // at most max(4, 100%) more at once
  EXPECT_THAT(burst.reason, HasSubstr("(a burst: panic)"));
  // The burst ends: still panicking, so no step down.
  report(a, 66, 70, 0);
  const ScaleDecision after = a.decide(70, 8);
  EXPECT_TRUE(after.panic);
  EXPECT_EQ(after.wanted, 8);
  // A stable window later, the panic is over: down, by the highest count of the down window.
  report(a, 70, 130, 0);
  const ScaleDecision calm = a.decide(130, 8);
  EXPECT_FALSE(calm.panic);
  EXPECT_EQ(calm.wanted, 6);
}

TEST(AutoscalerTest, LatencyScalesTheCurrentCountByItsRatioToTheTarget) {
  AutoscalerSpec spec = queue_spec();
  spec.metric = ScaleMetric::kP95LatencyMs;
  spec.target = 100;
  spec.panic_percent = 400;
  Autoscaler a(spec);
  report(a, 0, 60, 300);  // three times the target on 2 replicas: 6
  const ScaleDecision up = a.decide(60, 2);
  EXPECT_EQ(up.wanted, 6);
  EXPECT_FALSE(up.panic);
  EXPECT_THAT(up.reason, HasSubstr("p95 latency 300 ms over 60s, target 100 ms"));
  spec.max_replicas = 3;
  Autoscaler bounded(spec);
  report(bounded, 0, 60, 300);
  EXPECT_EQ(bounded.decide(60, 2).wanted, 3);
}

AutoscalerSpec model_spec() {
  AutoscalerSpec spec;
  spec.min_replicas = 1;
  spec.max_replicas = 50;
  spec.metric = ScaleMetric::kP95LatencyMs;
  spec.target = 400;
  spec.slots_per_replica = 2;
  spec.lead = 30;
  auto made = make_autoscaler_spec(spec);
  EXPECT_TRUE(made.has_value());
  return *made;
}

// Reports every 2 s over (from, to] with the load: `rate(t)` requests/s, 100 ms to serve one.
template <class Rate>
void report_load(Autoscaler& a, Seconds from, Seconds to, Rate rate) {
  for (Seconds t = from + 2; t <= to; t += 2) {
    Observation o = observation(t, 1, 999);
    o.arrivals_milli_rps = static_cast<std::int64_t>(rate(t) * 1000);
    o.service_us = 100'000;
    a.observe(o);
  }
}

TEST(AutoscalerTest, LatencyWithTheLoadAsksTheQueueingModelForTheCount) {
  Autoscaler a(model_spec());
  report_load(a, 0, 60, [](Seconds) { return 80.0; });
  const ScaleDecision d = a.decide(60, 3);
  // The model's count at a steady 80/s, whatever latency the replicas reported (999 ms).
  EXPECT_EQ(d.wanted, replicas_for_p95(80, 0.1, 400, 50, 2));
  EXPECT_THAT(d.reason, HasSubstr("80.0 requests/s over 60s, 100 ms to serve one"));
  EXPECT_THAT(d.reason, ::testing::Not(HasSubstr("rising")));
  // Neither the count of replicas nor the latency changes the answer: no oscillation.
  Autoscaler b(model_spec());
  report_load(b, 0, 60, [](Seconds) { return 80.0; });
  // (down by at most half of the replicas in one step)
  EXPECT_EQ(b.decide(60, 9).wanted, std::max(*replicas_for_p95(80, 0.1, 400, 50, 2), 9 - 4));
}

TEST(AutoscalerTest, ARisingLoadIsPlannedAheadByTheReplicasLeadAndTheNextStep) {
  AutoscalerSpec spec = model_spec();
  spec.panic_percent = 10'000;  // no panic here
  Autoscaler rising(spec);
  // 1 request/s more every second: 62/s to 120/s over the window.
  report_load(rising, 0, 60, [](Seconds t) { return 60.0 + static_cast<double>(t); });
  const ScaleDecision d = rising.decide(60, 10);
  // Planned at 91 (the mean of 62..120) + 1 x (30 + 15 + 30) = 166 requests/s.
  EXPECT_EQ(d.wanted, replicas_for_p95(166, 0.1, 400, 50, 2));
  EXPECT_THAT(d.reason, HasSubstr("planned 75s ahead"));
  EXPECT_GT(d.wanted, *replicas_for_p95(90, 0.1, 400, 50, 2));
  // Reports without the load's figures fall back to the latency ratio.
  Autoscaler ratio(spec);
  report(ratio, 0, 60, 800);
  EXPECT_EQ(ratio.decide(60, 3).wanted, 6);
}

TEST(AutoscalerTest, AServiceTimeOverTheTargetAsksForTheMostReplicas) {
  Autoscaler a(model_spec());
  for (Seconds t = 2; t <= 60; t += 2) {
    Observation o = observation(t, 1, 0);
    o.arrivals_milli_rps = 5'000;
    o.service_us = 900'000;  // a request alone takes longer than the 400 ms target
    a.observe(o);
  }
  const ScaleDecision d = a.decide(60, 50);
  EXPECT_EQ(d.wanted, 50);
  EXPECT_THAT(d.reason, HasSubstr("even 50 replicas miss the p95 target of 400 ms"));
}

}  // namespace
}  // namespace tidepool
