//===- StrategyTest.cpp - Hand-checked cases for every strategy -----------===//

#include "TestUtil.h"

#include "gtest/gtest.h"

using namespace oasr::schedule;
using namespace oasr::schedule::test;

namespace {

constexpr uint64_t MiB = 1ull << 20;

Profile counterExample() { return makeProfile({5, 3, 6}, {4, 3, 6}); }

Plan plan(llvm::StringRef strategy, const Profile &p, const CommModel &m) {
  llvm::Expected<Plan> plan = makePlan(strategy, p, m);
  EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  return plan ? *plan : Plan();
}

std::vector<unsigned> ends(llvm::StringRef strategy, const Profile &p,
                           const CommModel &m = unitModel(1, 1)) {
  return plan(strategy, p, m).groupEnds;
}

double iteration(llvm::StringRef strategy, const Profile &p,
                 const CommModel &m) {
  return simulate(p, m, plan(strategy, p, m)).iterationUs;
}

std::string planError(llvm::StringRef strategy) {
  llvm::Expected<Plan> p =
      makePlan(strategy, counterExample(), unitModel(1, 1));
  if (p)
    return "<no error>";
  return llvm::toString(p.takeError());
}

using Ends = std::vector<unsigned>;

TEST(Strategy, WfbpIsOneGroupPerLayerWithGradients) {
  Profile p = counterExample();
  p.layers.insert(p.layers.begin() + 1, Layer{"relu", 1, 0, {}});
  p.layers[0].grads.push_back({"l0.b", 2});
  // Ready order: l2.w | l1.w | (relu has none) | l0.w l0.b.
  EXPECT_EQ(ends("wfbp", p), (Ends{1, 2, 4}));
  EXPECT_EQ(plan("wfbp", p, unitModel(1, 1)).strategy, "wfbp");
}

TEST(Strategy, SingleIsOneGroup) {
  EXPECT_EQ(ends("single", counterExample()), (Ends{3}));
  EXPECT_NEAR(iteration("single", counterExample(), unitModel(4, 1)), 31, 1e-9);
}

TEST(Strategy, BucketClosesBeforeOverflow) {
  // Forward sizes [5, 3, 4, 2, 6]; ready order [6, 2, 4, 3, 5].
  Profile p = makeProfile({1, 1, 1, 1, 1}, {5, 3, 4, 2, 6});
  EXPECT_EQ(ends("bucket:8", p), (Ends{2, 4, 5}));
  // A tensor larger than the cap gets its own bucket.
  EXPECT_EQ(ends("bucket:3", p), (Ends{1, 2, 3, 4, 5}));
  EXPECT_EQ(ends("bucket:100", p), (Ends{5}));
  Profile big = makeProfile({1, 1}, {MiB, MiB});
  EXPECT_EQ(ends("bucket:1MiB", big), (Ends{1, 2}));
  EXPECT_EQ(ends("bucket:2MiB", big), (Ends{2}));
  EXPECT_EQ(ends("bucket:2M", big), (Ends{1, 2})); // 2,000,000 < 2 MiB
  EXPECT_EQ(ends("bucket:3MB", big), (Ends{2}));
}

TEST(Strategy, DdpFirstBucketThenTwentyFiveMiB) {
  // Ready order [0.5, 0.6, 10, 20, 1] MiB: a bucket closes once it reaches
  // its limit (1 MiB for the first, then 25 MiB).
  Profile p = makeProfile({1, 1, 1, 1, 1},
                          {MiB, 20 * MiB, 10 * MiB, 6 * MiB / 10, MiB / 2});
  EXPECT_EQ(ends("ddp", p), (Ends{2, 4, 5}));
}

TEST(Strategy, HorovodFusesUpTo128MiB) {
  Profile p = makeProfile({1, 1, 1, 1}, {MiB, 10 * MiB, 20 * MiB, 100 * MiB});
  EXPECT_EQ(ends("horovod", p), (Ends{2, 4}));
}

TEST(Strategy, MgwfbpCounterExample) {
  // The counter-example: MG-WFBP merges l1 into l2's group (the
  // wait, 3, is below alpha = 4) and then cannot merge l0 (wait 5 > 4):
  // [6, 9+13=22], [22, 30]. The optimum is {l2}, {l1, l0}: [6, 16],
  // [16, 27].
  Profile p = counterExample();
  CommModel m = unitModel(4, 1);
  EXPECT_EQ(ends("mgwfbp", p, m), (Ends{2, 3}));
  EXPECT_NEAR(iteration("mgwfbp", p, m), 30, 1e-9);
  EXPECT_EQ(ends("optimal", p, m), (Ends{1, 3}));
  EXPECT_NEAR(iteration("optimal", p, m), 27, 1e-9);
  EXPECT_NEAR(iteration("oasr", p, m), 27, 1e-9);
  EXPECT_NEAR(iteration("wfbp", p, m), 31, 1e-9);
}

TEST(Strategy, MgwfbpComputeBoundKeepsLayers) {
  // Each group ends before the next gradient is ready: nothing to merge.
  Profile p = makeProfile({100, 100, 100}, {1, 1, 1});
  EXPECT_EQ(ends("mgwfbp", p), (Ends{1, 2, 3}));
}

TEST(Strategy, MgwfbpMergesWhatWaitsAnyway) {
  // Ready at 10, 10.5, 11 with T = 5 + bytes: the second and third tensors
  // become ready while the first group has not finished, each wait is
  // below alpha, so everything merges.
  Profile p = makeProfile({0.5, 0.5, 10}, {1, 1, 1});
  EXPECT_EQ(ends("mgwfbp", p, unitModel(5, 1)), (Ends{3}));
}

TEST(Strategy, OasrEqualsOptimalWithoutExtras) {
  Profile p = counterExample();
  CommModel m = unitModel(4, 1);
  EXPECT_EQ(ends("oasr", p, m), ends("optimal", p, m));
}

TEST(Strategy, OasrAvoidsPackingCopies) {
  // Packing at 10 us/byte makes every multi-tensor group expensive: the
  // basic optimum {l2}, {l1, l0} costs 6 + 10, then 16 + 4 + 7 + 70 = 97;
  // oasr keeps one tensor per group: 31.
  Profile p = counterExample();
  CommModel m = unitModel(4, 1);
  m.packUsPerByte = 10;
  EXPECT_NEAR(iteration("optimal", p, m), 97, 1e-9);
  EXPECT_EQ(ends("oasr", p, m), (Ends{1, 2, 3}));
  EXPECT_NEAR(iteration("oasr", p, m), 31, 1e-9);
}

TEST(Strategy, OasrSharesOverheadPerGroup) {
  // A 20 us per-group overhead: wfbp 91, optimal's {l2}, {l1, l0} 67,
  // {l2, l1}, {l0} 70, single 14 + 17 + 20 = 51.
  Profile p = counterExample();
  CommModel m = unitModel(4, 1);
  m.groupOverheadUs = 20;
  EXPECT_NEAR(iteration("wfbp", p, m), 91, 1e-9);
  EXPECT_NEAR(iteration("optimal", p, m), 67, 1e-9);
  EXPECT_EQ(ends("oasr", p, m), (Ends{3}));
  EXPECT_NEAR(iteration("oasr", p, m), 51, 1e-9);
}

TEST(Strategy, ZeroByteGradientsCostNothing) {
  Profile p = makeProfile({1, 1, 1}, {0, 0, 0});
  CommModel m = unitModel(4, 1);
  for (const std::string &s : strategyNames())
    EXPECT_NEAR(iteration(s, p, m), 3, 1e-9) << s;
}

TEST(Strategy, NamesAndErrors) {
  std::vector<std::string> names = strategyNames();
  for (const char *n :
       {"wfbp", "single", "ddp", "horovod", "mgwfbp", "optimal", "oasr"})
    EXPECT_TRUE(llvm::is_contained(names, n)) << n;
  EXPECT_NE(planError("greedy").find("unknown strategy 'greedy'"),
            std::string::npos);
  EXPECT_NE(planError("bucket:0").find("strategy 'bucket:0'"),
            std::string::npos);
  EXPECT_NE(planError("bucket:abc").find("positive number of bytes"),
            std::string::npos);
  EXPECT_NE(planError("bucket:12XB").find("bucket:12XB"), std::string::npos);
  EXPECT_NE(planError("bucket:").find("bucket:"), std::string::npos);
  EXPECT_FALSE(bool(checkStrategy("bucket:25MiB")));
}

} // namespace
