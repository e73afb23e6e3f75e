//===- SimulatorTest.cpp - Ready order, simulator, lower bound by hand ----===//

#include "TestUtil.h"

#include "gtest/gtest.h"

using namespace oasr::schedule;
using namespace oasr::schedule::test;

namespace {

// The MG-WFBP counter-example of the issue, in forward order: backward
// times [5, 3, 6], sizes [4, 3, 6], alpha = 4, beta = 1 (model time units).
Profile counterExample(double forward = 0, double update = 0) {
  return makeProfile({5, 3, 6}, {4, 3, 6}, forward, update);
}

TEST(Simulator, ReadyOrderIsReverseForwardOrder) {
  Profile p = counterExample(10);
  p.layers[1].grads.push_back({"l1.b", 1});
  std::vector<ReadyGrad> r = readyOrder(p);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].name, "l2.w");
  EXPECT_EQ(r[0].readyUs, 16);
  EXPECT_EQ(r[1].name, "l1.w");
  EXPECT_EQ(r[2].name, "l1.b");
  EXPECT_EQ(r[1].readyUs, 19);
  EXPECT_EQ(r[2].readyUs, 19);
  EXPECT_EQ(r[2].layer, 1u);
  EXPECT_EQ(r[2].index, 1u);
  EXPECT_EQ(r[3].name, "l0.w");
  EXPECT_EQ(r[3].readyUs, 24);
}

TEST(Simulator, WfbpTimelineByHand) {
  // Ready at 6, 9, 14; each group waits for the previous one:
  // [6, 16], [16, 23], [23, 31].
  Profile p = counterExample();
  Timeline t = simulate(p, unitModel(4, 1), planFromSizes("wfbp", {1, 1, 1}));
  ASSERT_EQ(t.groups.size(), 3u);
  EXPECT_NEAR(t.groups[0].startUs, 6, 1e-9);
  EXPECT_NEAR(t.groups[0].endUs, 16, 1e-9);
  EXPECT_NEAR(t.groups[1].readyUs, 9, 1e-9);
  EXPECT_NEAR(t.groups[1].startUs, 16, 1e-9);
  EXPECT_NEAR(t.groups[1].endUs, 23, 1e-9);
  EXPECT_NEAR(t.groups[2].startUs, 23, 1e-9);
  EXPECT_NEAR(t.groups[2].endUs, 31, 1e-9);
  EXPECT_EQ(t.groups[2].bytes, 4u);
  EXPECT_NEAR(t.backwardEndUs, 14, 1e-9);
  EXPECT_NEAR(t.commEndUs, 31, 1e-9);
  EXPECT_NEAR(t.iterationUs, 31, 1e-9);
  EXPECT_NEAR(t.commBusyUs, 25, 1e-9);
  EXPECT_NEAR(t.nonOverlappedCommUs, 17, 1e-9);
  EXPECT_NEAR(t.overlapRatio, 1 - 17.0 / 25, 1e-12);
  ASSERT_EQ(t.backward.size(), 3u);
  EXPECT_EQ(t.backward[0].layer, 2u);
  EXPECT_NEAR(t.backward[2].startUs, 9, 1e-9);
  EXPECT_NEAR(t.backward[2].endUs, 14, 1e-9);
}

TEST(Simulator, ForwardAndUpdateFrameTheIteration) {
  // Same plan with t_f = 10, t_update = 2: everything shifts by 10 and the
  // iteration gains 12.
  Timeline t = simulate(counterExample(10, 2), unitModel(4, 1),
                        planFromSizes("x", {1, 2}));
  EXPECT_NEAR(t.groups[0].startUs, 16, 1e-9);
  EXPECT_NEAR(t.groups[1].startUs, 26, 1e-9); // max(ready 24, end 26)
  EXPECT_NEAR(t.commEndUs, 37, 1e-9);         // 26 + 4 + 7
  EXPECT_NEAR(t.iterationUs, 39, 1e-9);
}

TEST(Simulator, ComputeBoundPlanHidesCommunication) {
  // Long backward: each group is done before the next layer ends.
  Profile p = makeProfile({100, 100, 100}, {1, 1, 1}, 0, 5);
  Timeline t = simulate(p, unitModel(1, 1), planFromSizes("wfbp", {1, 1, 1}));
  EXPECT_NEAR(t.backwardEndUs, 300, 1e-9);
  EXPECT_NEAR(t.commEndUs, 302, 1e-9);
  EXPECT_NEAR(t.nonOverlappedCommUs, 2, 1e-9);
  EXPECT_NEAR(t.iterationUs, 307, 1e-9);
  EXPECT_NEAR(t.overlapRatio, 1 - 2.0 / 6, 1e-12);
}

TEST(Simulator, ExtrasAreCharged) {
  CommModel m = unitModel(4, 1);
  m.groupOverheadUs = 1;
  m.packUsPerByte = 0.5;
  // Group {l1, l0}: 4 + 7 + 1 + 3.5 = 15.5 from max(16 + 1, 14) = 17.
  Timeline t = simulate(counterExample(), m, planFromSizes("x", {1, 2}));
  EXPECT_NEAR(t.groups[0].endUs, 17, 1e-9);
  EXPECT_NEAR(t.commEndUs, 32.5, 1e-9);
}

TEST(Simulator, OverlapRateByHand) {
  // Backward: l1 ends at 10, l0 at 20 (= B); 4 us per group.
  Profile p = makeProfile({10, 10}, {4, 4});
  Plan wfbp = planFromSizes("wfbp", {1, 1});
  CommModel m = unitModel(0, 1);
  // Own channel: 10..14, 20..24.
  Timeline own = simulate(p, m, wfbp);
  EXPECT_NEAR(own.groups[0].endUs, 14, 1e-12);
  EXPECT_NEAR(own.commEndUs, 24, 1e-12);
  // Half rate during backward: group 0 needs 8 us of backward (10..18);
  // group 1 is ready at 20 = B, full speed: 20..24.
  m.overlapRate = 0.5;
  Timeline half = simulate(p, m, wfbp);
  EXPECT_NEAR(half.groups[0].endUs, 18, 1e-12);
  EXPECT_NEAR(half.groups[1].startUs, 20, 1e-12);
  EXPECT_NEAR(half.commEndUs, 24, 1e-12);
  // Rate 0.25: group 0 does 2.5 of its 4 us by B, the rest 20..21.5;
  // group 1 21.5..25.5.
  m.overlapRate = 0.25;
  Timeline quarter = simulate(p, m, wfbp);
  EXPECT_NEAR(quarter.groups[0].endUs, 21.5, 1e-12);
  EXPECT_NEAR(quarter.commEndUs, 25.5, 1e-12);
  EXPECT_NEAR(quarter.nonOverlappedCommUs, 5.5, 1e-12);
  // No overlap: everything after backward, 20..24..28; the one-group plan
  // saves nothing here (alpha = 0) but the lower bound is 28 as well.
  m.overlapRate = 0;
  Timeline none = simulate(p, m, wfbp);
  EXPECT_NEAR(none.groups[0].startUs, 10, 1e-12); // issued when ready
  EXPECT_NEAR(none.groups[0].endUs, 24, 1e-12);
  EXPECT_NEAR(none.commEndUs, 28, 1e-12);
  EXPECT_NEAR(lowerBoundUs(p, m), 28, 1e-12);
  EXPECT_NEAR(simulate(p, m, planFromSizes("single", {2})).commEndUs, 28,
              1e-12);
}

/// The overlap rate by direct reasoning in real time, per group: rate rho
/// until backward ends, then full speed. Independent of the capacity
/// coordinates the simulator uses.
double directCommEnd(const Profile &p, const CommModel &m, const Plan &plan) {
  std::vector<ReadyGrad> ready = readyOrder(p);
  double backwardEnd = p.forwardUs + p.backwardUs(), end = 0;
  for (unsigned k = 0; k < plan.numGroups(); ++k) {
    uint64_t bytes = 0;
    for (unsigned i = plan.groupBegin(k); i < plan.groupEnds[k]; ++i)
      bytes += ready[i].bytes;
    double w = m.groupTimeUs(bytes, plan.groupEnds[k] - plan.groupBegin(k));
    double s = std::max(ready[plan.groupEnds[k] - 1].readyUs, end);
    if (w == 0) {
      end = s;
      continue;
    }
    double before = s < backwardEnd ? m.overlapRate * (backwardEnd - s) : 0;
    end = before >= w ? s + w / m.overlapRate
                      : std::max(s, backwardEnd) + (w - before);
  }
  return end;
}

TEST(Simulator, OverlapRateMatchesDirectReasoning) {
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> rate(0, 1);
  for (int it = 0; it < 2000; ++it) {
    RandomInstance ri = randomInstance(rng, 30);
    ri.comm.overlapRate = it % 5 == 0 ? 0 : it % 5 == 1 ? 1 : rate(rng);
    ri.comm.groupOverheadUs = it % 2 ? rate(rng) * 3 : 0;
    for (const char *s : {"wfbp", "single", "bucket:700", "mgwfbp"}) {
      Plan plan = *makePlan(s, ri.profile, ri.comm);
      double sim = simulate(ri.profile, ri.comm, plan).commEndUs;
      double direct = directCommEnd(ri.profile, ri.comm, plan);
      ASSERT_NEAR(sim, direct, 1e-9 * std::max(1.0, direct))
          << "instance " << it << " " << s << " rate " << ri.comm.overlapRate;
    }
  }
}

TEST(Simulator, ComputeRateByHand) {
  // Backward [10, 10] (layer 1 then layer 0), one 6-byte gradient each;
  // alpha = 4, beta = 1: each group needs 10. Compute beside an allreduce
  // runs at 0.5, communication beside backward at full speed.
  Profile p = makeProfile({10, 10}, {6, 6});
  CommModel m = unitModel(4, 1);
  m.computeRate = 0.5;
  Timeline t = simulate(p, m, planFromSizes("wfbp", {1, 1}));
  // Layer 1 alone: [0, 10]; group 1 [10, 20] beside layer 0, which does 5
  // of its 10 by then and the rest alone: [10, 25]; group 0 [25, 35].
  ASSERT_EQ(t.groups.size(), 2u);
  EXPECT_NEAR(t.groups[0].readyUs, 10, 1e-9);
  EXPECT_NEAR(t.groups[0].endUs, 20, 1e-9);
  ASSERT_EQ(t.backward.size(), 2u);
  EXPECT_EQ(t.backward[1].layer, 0u);
  EXPECT_NEAR(t.backward[1].endUs, 25, 1e-9);
  EXPECT_NEAR(t.backwardEndUs, 25, 1e-9);
  EXPECT_NEAR(t.groups[1].readyUs, 25, 1e-9);
  EXPECT_NEAR(t.groups[1].startUs, 25, 1e-9);
  EXPECT_NEAR(t.iterationUs, 35, 1e-9);
  EXPECT_NEAR(t.commBusyUs, 20, 1e-9);
  // One group after backward: nothing beside compute, nothing slowed.
  t = simulate(p, m, planFromSizes("single", {2}));
  EXPECT_NEAR(t.backwardEndUs, 20, 1e-9);
  EXPECT_NEAR(t.iterationUs, 20 + 16, 1e-9);
  // Layer times measured beside communication already carry the slowdown:
  // the rate is not charged again (the plain timeline, 30).
  p.computeBesideComm = true;
  EXPECT_NEAR(simulate(p, m, planFromSizes("wfbp", {1, 1})).iterationUs, 30,
              1e-9);
  p.computeBesideComm = false;
  // With the overlap rate as well: group 1 beside layer 0 at 0.5 each way.
  m.overlapRate = 0.5;
  t = simulate(p, m, planFromSizes("wfbp", {1, 1}));
  // [10, 30] both at half speed: layer 0 and group 1 end at 30; group 0
  // [30, 40].
  EXPECT_NEAR(t.backwardEndUs, 30, 1e-9);
  EXPECT_NEAR(t.groups[0].endUs, 30, 1e-9);
  EXPECT_NEAR(t.iterationUs, 40, 1e-9);
}

TEST(Simulator, CallStartByHand) {
  // The counter-example's wfbp timeline (ready at 6, 9, 14) when a call
  // that starts the moment it is ready holds compute for 2.
  Profile p = counterExample();
  CommModel m = unitModel(4, 1);
  m.callComputeUs = 2;
  Timeline t = simulate(p, m, planFromSizes("wfbp", {1, 1, 1}));
  // Group 0 starts at 6 on an idle channel: layer 1 waits for its start,
  // [8, 11]; group 0 runs [6, 16]. Group 1 (ready at 11) queues behind it
  // and starts at 16, beside no start of its own; layer 0 runs [11, 16].
  // Group 2, ready at 16, starts at 23 after group 1: [23, 31].
  ASSERT_EQ(t.backward.size(), 3u);
  EXPECT_NEAR(t.backward[1].startUs, 8, 1e-9);
  EXPECT_NEAR(t.backward[1].endUs, 11, 1e-9);
  EXPECT_NEAR(t.backward[2].endUs, 16, 1e-9);
  EXPECT_NEAR(t.groups[0].startUs, 6, 1e-9);
  EXPECT_NEAR(t.groups[0].endUs, 16, 1e-9);
  EXPECT_NEAR(t.groups[1].readyUs, 11, 1e-9);
  EXPECT_NEAR(t.groups[1].startUs, 16, 1e-9);
  EXPECT_NEAR(t.groups[2].startUs, 23, 1e-9);
  EXPECT_NEAR(t.iterationUs, 31, 1e-9);
  // One group after backward: its start holds nothing that computes.
  t = simulate(p, m, planFromSizes("single", {3}));
  EXPECT_NEAR(t.backwardEndUs, 14, 1e-9);
  EXPECT_NEAR(t.iterationUs, 14 + 4 + 13, 1e-9);
  // Under an overlap rate the group runs at full speed while its start
  // holds compute: group 0 does 2 of its 10 by 8, then 0.5 a unit beside
  // layer 1 [8, 11] (1.5) and layer 0 [11, 16] (2.5): 4 left at 16, [6, 20].
  m.overlapRate = 0.5;
  t = simulate(p, m, planFromSizes("wfbp", {1, 1, 1}));
  EXPECT_NEAR(t.groups[0].endUs, 20, 1e-9);
  EXPECT_NEAR(t.backwardEndUs, 16, 1e-9);
}

TEST(Simulator, ComputeRateNearOneIsTheCapacityForm) {
  // The stepped timeline at compute rate 1 - 1e-9 agrees with the capacity
  // form the planners use, on random instances, plans and overlap rates.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> rate(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    RandomInstance in = randomInstance(rng, 12);
    in.comm.overlapRate = trial % 3 ? rate(rng) : 1.0;
    unsigned n = in.profile.numGrads();
    if (n == 0)
      continue;
    std::vector<unsigned> sizes;
    for (unsigned left = n; left > 0;) {
      unsigned s = 1 + unsigned(rng() % left);
      sizes.push_back(s);
      left -= s;
    }
    Plan plan = planFromSizes("random", sizes);
    CommModel coupled = in.comm;
    coupled.computeRate = 1 - 1e-9;
    Timeline a = simulate(in.profile, in.comm, plan);
    Timeline b = simulate(in.profile, coupled, plan);
    EXPECT_NEAR(b.iterationUs, a.iterationUs, 1e-5 * (1 + a.iterationUs))
        << "trial " << trial;
    EXPECT_NEAR(b.backwardEndUs, a.backwardEndUs, 1e-5 * (1 + a.backwardEndUs));
    for (size_t k = 0; k < a.groups.size(); ++k)
      EXPECT_NEAR(b.groups[k].endUs, a.groups[k].endUs,
                  1e-5 * (1 + a.groups[k].endUs))
          << "trial " << trial << " group " << k;
  }
}

TEST(Simulator, NoGradients) {
  Profile p;
  p.forwardUs = 3;
  p.updateUs = 1;
  p.layers.push_back({"relu", 2, 0, {}});
  Plan plan;
  Timeline t = simulate(p, unitModel(4, 1), plan);
  EXPECT_EQ(t.groups.size(), 0u);
  EXPECT_NEAR(t.iterationUs, 6, 1e-9);
  EXPECT_EQ(t.overlapRatio, 1);
  EXPECT_NEAR(lowerBoundUs(p, unitModel(4, 1)), 6, 1e-9);
}

TEST(Simulator, VerifyPlan) {
  EXPECT_FALSE(bool(verifyPlan(planFromSizes("ok", {2, 1}), 3)));
  llvm::Error e = verifyPlan(planFromSizes("short", {1, 1}), 3);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("covers 2 gradients"),
            std::string::npos);
  e = verifyPlan(planFromSizes("empty", {1, 0, 2}), 3);
  ASSERT_TRUE(bool(e));
  llvm::consumeError(std::move(e));
}

TEST(LowerBound, ByHand) {
  // max(end of backward 14, last ready 14 + T(4) = 22,
  //     first ready 6 + T(13) = 23) = 23.
  EXPECT_NEAR(lowerBoundUs(counterExample(), unitModel(4, 1)), 23, 1e-9);
  // Compute bound: 300 + 5.
  EXPECT_NEAR(lowerBoundUs(makeProfile({100, 100, 100}, {1, 1, 1}, 0, 5),
                           unitModel(1, 1)),
              305 + 2, 1e-9);
}

} // namespace
