//===- PropertyTest.cpp - Randomized properties of the planner ------------===//
//
// Thousands of seeded random instances: the optimum is never beaten, equals
// exhaustive enumeration, the pruned DP equals the O(n^2) one, oasr is never
// worse than mgwfbp or optimal, and the lower bound holds.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <chrono>

using namespace oasr::schedule;
using namespace oasr::schedule::test;

namespace {

double iterationOf(const Profile &p, const CommModel &m, const Plan &plan) {
  return simulate(p, m, plan).iterationUs;
}

bool leq(double a, double b) {
  return a <= b + 1e-9 * std::max(1.0, std::fabs(b));
}

std::vector<std::string> allStrategies() {
  std::vector<std::string> s = strategyNames();
  for (const char *b : {"bucket:1", "bucket:500", "bucket:2000"})
    s.push_back(b);
  return s;
}

TEST(Property, OptimalBeatsEveryStrategyAndBoundHolds) {
  std::mt19937_64 rng(20240401);
  std::vector<std::string> names = allStrategies();
  for (int it = 0; it < 3000; ++it) {
    RandomInstance ri = randomInstance(rng, 40);
    Plan opt = optimalPlan(ri.profile, ri.comm);
    ASSERT_FALSE(bool(verifyPlan(opt, ri.profile.numGrads())));
    double best = iterationOf(ri.profile, ri.comm, opt);
    double bound = lowerBoundUs(ri.profile, ri.comm);
    ASSERT_TRUE(leq(bound, best)) << "instance " << it;
    for (const std::string &s : names) {
      llvm::Expected<Plan> p = makePlan(s, ri.profile, ri.comm);
      ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
      ASSERT_TRUE(leq(best, iterationOf(ri.profile, ri.comm, *p)))
          << "instance " << it << " strategy " << s;
    }
  }
}

TEST(Property, OptimalEqualsBruteForce) {
  std::mt19937_64 rng(7);
  int checked = 0;
  for (int it = 0; it < 3000; ++it) {
    RandomInstance ri = randomInstance(rng, 12, 2, /*integral=*/it % 2);
    if (ri.profile.numGrads() > 12)
      continue;
    ++checked;
    Timeline brute = bruteForce(ri.profile, ri.comm);
    Timeline opt =
        simulate(ri.profile, ri.comm, optimalPlan(ri.profile, ri.comm));
    ASSERT_TRUE(close(opt.commEndUs, brute.commEndUs))
        << "instance " << it << ": " << opt.commEndUs << " vs "
        << brute.commEndUs;
    ASSERT_TRUE(close(opt.iterationUs, brute.iterationUs)) << it;
  }
  EXPECT_GT(checked, 1500);
}

TEST(Property, OasrWithExtrasEqualsBruteForceUnderExtras) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> extra(0, 5);
  for (int it = 0; it < 1500; ++it) {
    RandomInstance ri = randomInstance(rng, 10, 2);
    if (ri.profile.numGrads() > 11)
      continue;
    ri.comm.groupOverheadUs = it % 3 ? extra(rng) : 0;
    ri.comm.packUsPerByte = it % 2 ? extra(rng) * 1e-2 : 0;
    Timeline brute = bruteForce(ri.profile, ri.comm);
    Timeline o = simulate(ri.profile, ri.comm, oasrPlan(ri.profile, ri.comm));
    ASSERT_TRUE(close(o.commEndUs, brute.commEndUs))
        << "instance " << it << ": " << o.commEndUs << " vs "
        << brute.commEndUs;
  }
}

TEST(Property, OasrWithOverlapRateEqualsBruteForce) {
  // The overlap rate is planned in channel-capacity coordinates; exhaustive
  // enumeration scores every partition with the simulator.
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> unit(0, 1);
  int checked = 0;
  for (int it = 0; it < 1500; ++it) {
    RandomInstance ri = randomInstance(rng, 10, 2);
    if (ri.profile.numGrads() > 11)
      continue;
    ++checked;
    ri.comm.overlapRate = it % 4 == 0 ? 0 : unit(rng);
    ri.comm.groupOverheadUs = it % 3 ? unit(rng) * 5 : 0;
    Timeline brute = bruteForce(ri.profile, ri.comm);
    Timeline o = simulate(ri.profile, ri.comm, oasrPlan(ri.profile, ri.comm));
    ASSERT_TRUE(close(o.commEndUs, brute.commEndUs))
        << "instance " << it << ": " << o.commEndUs << " vs " << brute.commEndUs
        << " rate " << ri.comm.overlapRate;
    ASSERT_TRUE(leq(lowerBoundUs(ri.profile, ri.comm), o.iterationUs)) << it;
  }
  EXPECT_GT(checked, 700);
}

TEST(Property, TwoLevelRoutesEqualBruteForce) {
  // Groups take the flat or the two-level allreduce, whichever is faster
  // for their size: the cost is the lower of two lines, and the optimum
  // still equals exhaustive enumeration (the flat line alone, the
  // two-level one alone, and lines that cross).
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> unit(0, 1);
  int checked = 0, crossing = 0;
  for (int it = 0; it < 1500; ++it) {
    RandomInstance ri = randomInstance(rng, 10, 2, /*integral=*/it % 2);
    if (ri.profile.numGrads() > 11)
      continue;
    ++checked;
    CommModel &m = ri.comm;
    m.ranks = 4;
    m.twoLevel.ranksPerNode = 2;
    // Seconds, around the flat line's own terms.
    m.twoLevel.intraAlphaS = m.alphaS * unit(rng);
    m.twoLevel.interAlphaS = m.alphaS * 2 * unit(rng);
    m.twoLevel.intraBetaSPerByte = m.betaSPerByte * 0.2 * unit(rng);
    m.twoLevel.interBetaSPerByte = m.betaSPerByte * 2 * unit(rng);
    crossing += !m.linearCost();
    if (it % 5 == 0)
      m.route = AllreduceRoute::TwoLevel;
    Timeline brute = bruteForce(ri.profile, m);
    Timeline opt = simulate(ri.profile, m, optimalPlan(ri.profile, m));
    ASSERT_TRUE(close(opt.commEndUs, brute.commEndUs))
        << "instance " << it << ": " << opt.commEndUs << " vs "
        << brute.commEndUs << " (" << m.describe() << ")";
    Timeline o = simulate(ri.profile, m, oasrPlan(ri.profile, m));
    ASSERT_TRUE(close(o.commEndUs, brute.commEndUs)) << it;
    ASSERT_TRUE(leq(lowerBoundUs(ri.profile, m), opt.iterationUs)) << it;
  }
  EXPECT_GT(checked, 700);
  EXPECT_GT(crossing, 100);
}

TEST(Property, TwoLevelChoosesTheFasterRoutePerGroup) {
  CommModel m = CommModel::alphaBeta(1e-3, 1e-8, 4);
  // Two-level: more start-up, a third of the slope.
  m.twoLevel = {2, 2e-4, 1e-10, 2e-3, 6e-9};
  ASSERT_TRUE(m.twoLevelUsable());
  EXPECT_FALSE(m.linearCost());
  // Crossing at about 1.2e-3 s / 6.9e-9 s/B, 174 kB.
  EXPECT_FALSE(m.sendsTwoLevel(1000));
  EXPECT_TRUE(m.sendsTwoLevel(10'000'000));
  EXPECT_DOUBLE_EQ(m.timeUs(1000), m.flatTimeUs(1000));
  EXPECT_DOUBLE_EQ(m.timeUs(10'000'000), m.twoLevelTimeUs(10'000'000));
  EXPECT_NEAR(m.twoLevelTimeUs(10'000'000),
              1e6 * (2e-4 + 1e-10 * 1e7 + 2e-3 + 6e-9 * 1e7 / 2), 1e-6);
  m.route = AllreduceRoute::Flat;
  EXPECT_FALSE(m.sendsTwoLevel(10'000'000));
  m.route = AllreduceRoute::TwoLevel;
  EXPECT_TRUE(m.sendsTwoLevel(1000));
  // A 16-bit wire halves the flat slope and the share between the nodes,
  // not the node's own reduce-scatter and all-gather.
  m.route = AllreduceRoute::Auto;
  m.wire = WireDType::BF16;
  ASSERT_TRUE(m.twoLevelUsable());
  EXPECT_NEAR(m.twoLevelTimeUs(10'000'000),
              1e6 * (2e-4 + 1e-10 * 1e7 + 2e-3 + 6e-9 * 1e7 / 4), 1e-6);
  EXPECT_NEAR(m.flatTimeUs(10'000'000), 1e6 * (1e-3 + 1e-8 * 1e7 / 2), 1e-6);
  EXPECT_TRUE(m.sendsTwoLevel(10'000'000));
  m.wire = WireDType::F32;
  // One node, or nodes of unequal size: one tier.
  m.ranks = 2;
  EXPECT_FALSE(m.twoLevelUsable());
  m.ranks = 6;
  m.twoLevel.ranksPerNode = 4;
  EXPECT_FALSE(m.twoLevelUsable());
}

TEST(Property, NoOverlapMeansOneGroup) {
  // With no progress during backward every group waits for its end, so
  // one group (one start-up) is optimal and meets the lower bound.
  std::mt19937_64 rng(21);
  for (int it = 0; it < 500; ++it) {
    RandomInstance ri = randomInstance(rng, 40);
    ri.comm.overlapRate = 0;
    const Profile &p = ri.profile;
    Plan o = oasrPlan(p, ri.comm);
    double single = iterationOf(p, ri.comm, *makePlan("single", p, ri.comm));
    ASSERT_TRUE(close(iterationOf(p, ri.comm, o), single)) << it;
    ASSERT_TRUE(close(lowerBoundUs(p, ri.comm), single)) << it;
  }
}

TEST(Property, PrunedDPEqualsQuadratic) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> extra(0, 5);
  for (int it = 0; it < 2000; ++it) {
    RandomInstance ri = randomInstance(rng, 120, 3, /*integral=*/it % 3 == 0);
    if (it % 4 == 1) {
      ri.comm.groupOverheadUs = extra(rng);
      ri.comm.packUsPerByte = extra(rng) * 1e-3;
    }
    const Profile &p = ri.profile;
    // Basic model: optimal.
    double fast =
        simulate(p, ri.comm.basic(), optimalPlan(p, ri.comm)).commEndUs;
    double slow = simulate(p, ri.comm.basic(), optimalPlanQuadratic(p, ri.comm))
                      .commEndUs;
    ASSERT_TRUE(close(fast, slow)) << it << ": " << fast << " vs " << slow;
  }
}

TEST(Property, OasrNeverWorseThanOptimalOrMgwfbp) {
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> extra(0, 5);
  for (int it = 0; it < 3000; ++it) {
    RandomInstance ri = randomInstance(rng, 60);
    const Profile &p = ri.profile;
    // Under the basic model oasr is the optimum.
    double o = iterationOf(p, ri.comm, oasrPlan(p, ri.comm));
    double opt = iterationOf(p, ri.comm, optimalPlan(p, ri.comm));
    ASSERT_TRUE(close(o, opt)) << it;
    ASSERT_TRUE(leq(o, iterationOf(p, ri.comm, mgwfbpPlan(p, ri.comm)))) << it;
    // With real-system extras, scored with them, oasr still wins.
    CommModel x = ri.comm;
    x.groupOverheadUs = extra(rng);
    x.packUsPerByte = it % 2 ? extra(rng) * 1e-3 : 0;
    x.overlapRate = it % 3 ? extra(rng) / 5 : 1;
    double ox = iterationOf(p, x, oasrPlan(p, x));
    ASSERT_TRUE(leq(ox, iterationOf(p, x, optimalPlan(p, x)))) << it;
    ASSERT_TRUE(leq(ox, iterationOf(p, x, mgwfbpPlan(p, x)))) << it;
    for (const std::string &s : allStrategies())
      ASSERT_TRUE(leq(ox, iterationOf(p, x, *makePlan(s, p, x))))
          << it << " " << s;
  }
}

TEST(Property, LargeModelsPlanFast) {
  // 1e5 tensors: the pruned DP must stay far below a second.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> time(0, 50);
  std::uniform_int_distribution<uint64_t> size(1, 1 << 22);
  Profile p;
  for (int i = 0; i < 100000; ++i)
    p.layers.push_back({"l" + std::to_string(i),
                        time(rng),
                        0,
                        {{"g" + std::to_string(i), size(rng)}}});
  CommModel m = CommModel::alphaBeta(9.75e-5, 3.06e-10);
  auto t0 = std::chrono::steady_clock::now();
  Plan plan = optimalPlan(p, m);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_FALSE(bool(verifyPlan(plan, 100000)));
  EXPECT_LT(secs, 1.0);
}

} // namespace
