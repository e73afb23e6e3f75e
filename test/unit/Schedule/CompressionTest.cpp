//===- CompressionTest.cpp - Group forms, their cost and their planning ---===//
//
// --compress's parser, which matrices PowerSGD compresses, each form's
// channel time against a hand count, and the joint plan of grouping and
// forms against enumeration of every partition with every form choice.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "oasr/Schedule/Compression.h"

#include "gtest/gtest.h"

using namespace oasr::schedule;
using namespace oasr::schedule::test;

namespace {

TEST(CompressPolicy, Parses) {
  auto off = parseCompressPolicy("off");
  ASSERT_TRUE(bool(off));
  EXPECT_TRUE(off->off());
  auto p = parseCompressPolicy("powersgd:8");
  ASSERT_TRUE(bool(p));
  EXPECT_EQ(p->mode, CompressPolicy::Mode::PowerSGD);
  EXPECT_EQ(p->rank, 8u);
  EXPECT_EQ(p->name(), "powersgd:8");
  auto a = parseCompressPolicy("auto");
  ASSERT_TRUE(bool(a));
  EXPECT_EQ(a->mode, CompressPolicy::Mode::Auto);
  EXPECT_EQ(a->rank, CompressPolicy::kDefaultAutoRank);
  auto a2 = parseCompressPolicy("auto:2");
  ASSERT_TRUE(bool(a2));
  EXPECT_EQ(a2->name(), "auto:2");
  // auto raises ranks up to the cap, or up to M.
  EXPECT_EQ(a->maxRank, CompressPolicy::kMaxRank);
  EXPECT_EQ(a->name(), "auto:8");
  auto a3 = parseCompressPolicy("auto:4-32");
  ASSERT_TRUE(bool(a3));
  EXPECT_EQ(a3->rank, 4u);
  EXPECT_EQ(a3->maxRank, 32u);
  EXPECT_EQ(a3->name(), "auto:4-32");
  auto a4 = parseCompressPolicy("auto:4-4");
  ASSERT_TRUE(bool(a4));
  EXPECT_EQ(a4->maxRank, 4u);
  EXPECT_EQ(p->maxRank, 8u);
  for (const char *bad :
       {"powersgd:0", "powersgd:-1", "powersgd", "auto:", "powersgd:2x",
        "topk:4", "", "auto:2000", "auto:8-4", "auto:4-", "auto:-4",
        "auto:4-2000", "powersgd:4-8", "auto:4-8-16"}) {
    auto e = parseCompressPolicy(bad);
    EXPECT_FALSE(bool(e)) << bad;
    if (!e)
      EXPECT_NE(llvm::toString(e.takeError()).find("expected off, powersgd:R"),
                std::string::npos)
          << bad;
  }
}

TEST(Compression, WhichMatricesCompress) {
  // 64 x 64 at rank 4: 512 factor floats against 4096.
  EXPECT_TRUE(powerSgdCompresses(64, 64 * 64, 4));
  // Vectors, one row, one column, and factors over half the elements.
  EXPECT_FALSE(powerSgdCompresses(0, 4096, 4));
  EXPECT_FALSE(powerSgdCompresses(1, 4096, 4));
  EXPECT_FALSE(powerSgdCompresses(4096, 4096, 4));
  EXPECT_FALSE(powerSgdCompresses(16, 16 * 16, 4));     // 128 * 2 == 256
  EXPECT_TRUE(powerSgdCompresses(17, 17 * 17, 4));      // 136 * 2 < 289
  EXPECT_FALSE(powerSgdCompresses(64, 64 * 64 + 1, 4)); // not rows x cols
}

TEST(Compression, FormCostCountsBytesCallsAndCompute) {
  CommModel m = unitModel(100, 0.01); // us, us per byte
  m.compressUsPerMac = 1e-3;
  m.compressUsPerElement = 1e-2;
  // A 100 x 50 matrix and a 100-element vector, ready together.
  std::vector<ReadyGrad> g = {{0, 0, "w", 100 * 50 * 4, 0, 100},
                              {0, 1, "b", 100 * 4, 0, 0}};
  FormCost plain = formCost(m, g, GroupForm::plain());
  EXPECT_EQ(plain.collectives, 1u);
  EXPECT_EQ(plain.wireBytes, 20400u);
  EXPECT_TRUE(close(plain.channelUs, 100 + 0.01 * 20400));
  FormCost c = formCost(m, g, GroupForm::powerSGD(2));
  EXPECT_EQ(c.collectives, 2u);
  EXPECT_EQ(c.compressed, 1u);
  // P (100 x 2) with the vector, then Q (50 x 2).
  const double first = 4 * 200 + 400, second = 4 * 100;
  EXPECT_EQ(c.wireBytes, uint64_t(first + second));
  const double macs = 3.0 * 100 * 50 * 2 + 100 * 2 * 2;
  EXPECT_TRUE(close(c.computeUs, macs * 1e-3 + 5000 * 1e-2));
  EXPECT_TRUE(close(c.channelUs, (100 + 0.01 * first) + (100 + 0.01 * second) +
                                     c.computeUs));
  // A group of vectors alone costs what plain does.
  std::vector<ReadyGrad> v = {g[1]};
  FormCost cv = formCost(m, v, GroupForm::powerSGD(2));
  EXPECT_EQ(cv.compressed, 0u);
  EXPECT_TRUE(
      close(cv.channelUs, formCost(m, v, GroupForm::plain()).channelUs));
  // In bf16 the factors and the vector travel in half the bytes; the
  // compute is the same.
  CommModel b = m;
  b.wire = WireDType::BF16;
  FormCost cb = formCost(b, g, GroupForm::powerSGD(2));
  EXPECT_EQ(cb.wireBytes, uint64_t(first + second) / 2);
  EXPECT_TRUE(close(cb.computeUs, c.computeUs));
  EXPECT_TRUE(close(cb.channelUs, (100 + 0.005 * first) +
                                      (100 + 0.005 * second) + c.computeUs));
}

TEST(Compression, FactorsTakeOneRouteTogether) {
  // 2 nodes of 2 ranks: flat alpha 100 us; two-level alpha 10 + 150 us,
  // per byte 0.001 inside the node and 0.01 / 2 between the nodes.
  CommModel m = unitModel(100, 0.01);
  m.ranks = 4;
  m.twoLevel = {2, 10e-6, 0.001e-6, 150e-6, 0.01e-6};
  m.compressUsPerMac = 1e-3;
  m.compressUsPerElement = 1e-2;
  auto flatUs = [](double b) { return 100 + 0.01 * b; };
  auto twoUs = [](double b) { return 160 + 0.001 * b + 0.005 * b; };
  // A 4000 x 250 matrix at rank 4: P 64000 bytes, Q 4000. Flat 740 + 140
  // us against two-level 544 + 184 us: both go two-level, though Q alone
  // would be 44 us sooner flat.
  std::vector<ReadyGrad> g = {{0, 0, "w", 4000 * 250 * 4, 0, 4000}};
  FormCost c = formCost(m, g, GroupForm::powerSGD(4));
  ASSERT_EQ(c.compressed, 1u);
  EXPECT_TRUE(c.twoLevel);
  EXPECT_LT(flatUs(4000), twoUs(4000));
  EXPECT_TRUE(close(c.channelUs, twoUs(64000) + twoUs(4000) + c.computeUs));
  // A 40 x 30 matrix at rank 1: 160 and 120 bytes, flat together.
  std::vector<ReadyGrad> s = {{0, 0, "w", 40 * 30 * 4, 0, 40}};
  FormCost cs = formCost(m, s, GroupForm::powerSGD(1));
  ASSERT_EQ(cs.compressed, 1u);
  EXPECT_FALSE(cs.twoLevel);
  EXPECT_TRUE(close(cs.channelUs, flatUs(160) + flatUs(120) + cs.computeUs));
  // The route option forces it; without a usable tier it is flat.
  CommModel forced = m;
  forced.route = AllreduceRoute::TwoLevel;
  EXPECT_TRUE(formCost(forced, s, GroupForm::powerSGD(1)).twoLevel);
  forced.route = AllreduceRoute::Flat;
  EXPECT_FALSE(formCost(forced, g, GroupForm::powerSGD(4)).twoLevel);
  CommModel oneNode = m;
  oneNode.ranks = 2;
  EXPECT_FALSE(formCost(oneNode, g, GroupForm::powerSGD(4)).twoLevel);
  // twoLevelGroups reports each group's route, compressed or plain.
  Profile p;
  p.layers.push_back({"big", 10, 0, {{"big.w", 4000 * 250 * 4, 4000}}});
  p.layers.push_back({"small", 10, 0, {{"small.w", 40 * 30 * 4, 40}}});
  Plan plan;
  plan.groupEnds = {1, 2};
  plan.forms = {GroupForm::powerSGD(4), GroupForm::powerSGD(4)};
  std::vector<bool> routes = twoLevelGroups(p, m, plan);
  ASSERT_EQ(routes.size(), 2u);
  // Ready in backward order: the small layer's group first.
  EXPECT_FALSE(routes[0]);
  EXPECT_TRUE(routes[1]);
  plan.forms.clear(); // plain: 4800 bytes flat, 4 MB two-level
  routes = twoLevelGroups(p, m, plan);
  EXPECT_FALSE(routes[0]);
  EXPECT_TRUE(routes[1]);
}

/// Every partition with every choice of form, scored by the simulator.
double bruteForce(const Profile &p, const CommModel &m,
                  const CompressPolicy &policy) {
  unsigned n = p.numGrads();
  double best = INFINITY;
  for (uint64_t cuts = 0; cuts < (1ull << (n - 1)); ++cuts) {
    Plan plan;
    for (unsigned i = 1; i < n; ++i)
      if (cuts >> (i - 1) & 1)
        plan.groupEnds.push_back(i);
    plan.groupEnds.push_back(n);
    unsigned k = plan.numGroups();
    for (uint64_t forms = 0; forms < (1ull << k); ++forms) {
      plan.forms.clear();
      for (unsigned g = 0; g < k; ++g)
        plan.forms.push_back(forms >> g & 1 ? GroupForm::powerSGD(policy.rank)
                                            : GroupForm::plain());
      best = std::min(best, simulate(p, m, plan).iterationUs);
    }
  }
  return best;
}

TEST(Compression, CostsFromTheOptionTheCalibrationOrTheDefault) {
  // A calibration that measured both rates keeps them.
  llvm::Expected<CommModel> cal = parseCalibration(
      R"({"format": "oasr-comm-v1", "alpha_s": 1e-4, "beta_s_per_byte": 1e-9,
          "compress_us_per_mac": 2e-4, "compress_us_per_element": 5e-4})",
      "c.json");
  ASSERT_TRUE(bool(cal)) << llvm::toString(cal.takeError());
  CommModel m = *cal;
  EXPECT_EQ(setCompressionCosts(m, -1), CompressionCostSource::Calibration);
  EXPECT_DOUBLE_EQ(m.compressUsPerMac, 2e-4);
  EXPECT_DOUBLE_EQ(m.compressUsPerElement, 5e-4);
  // compress-gmacs overrides the multiply-add rate only.
  EXPECT_EQ(setCompressionCosts(m, 10), CompressionCostSource::Option);
  EXPECT_DOUBLE_EQ(m.compressUsPerMac, 1e-4);
  EXPECT_DOUBLE_EQ(m.compressUsPerElement, 5e-4);
  // Nothing measured: the default rates.
  CommModel plain = CommModel::alphaBeta(1e-4, 1e-9);
  EXPECT_EQ(setCompressionCosts(plain, -1), CompressionCostSource::Default);
  EXPECT_GT(plain.compressUsPerMac, 0);
  EXPECT_GT(plain.compressUsPerElement, 0);
  EXPECT_STREQ(compressionCostSourceName(CompressionCostSource::Calibration),
               "calibration");
  // A negative rate in the file is an error naming the field.
  llvm::Expected<CommModel> bad = parseCalibration(
      R"({"format": "oasr-comm-v1", "alpha_s": 1e-4, "beta_s_per_byte": 1e-9,
          "compress_us_per_mac": -1})",
      "c.json");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("compress_us_per_mac"),
            std::string::npos);
}

TEST(Compression, JointPlanIsTheOptimum) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> time(0, 50), beta(0.001, 0.2);
  std::uniform_int_distribution<uint64_t> rows(1, 64), cols(1, 64);
  for (int trial = 0; trial < 60; ++trial) {
    Profile p;
    p.model = "random";
    unsigned layers = 1 + trial % 7;
    for (unsigned l = 0; l < layers; ++l) {
      Layer layer;
      layer.name = "l" + std::to_string(l);
      layer.backwardUs = time(rng);
      uint64_t r = rows(rng), c = cols(rng);
      // Some matrices, some vectors.
      layer.grads.push_back({layer.name + ".w", r * c * 4, trial % 3 ? r : 0});
      p.layers.push_back(layer);
    }
    CommModel m = unitModel(time(rng), beta(rng));
    m.compressUsPerMac = 1e-4;
    m.compressUsPerElement = 1e-3;
    if (trial % 2) { // a second tier: 2 nodes of 2 ranks
      m.ranks = 4;
      m.twoLevel = {2, time(rng) * 1e-6, beta(rng) * 1e-7, time(rng) * 1e-6,
                    beta(rng) * 1e-6};
    }
    CompressPolicy auto2{CompressPolicy::Mode::Auto, 2};
    Plan joint = compressionAwarePlan(p, m, auto2);
    ASSERT_FALSE(bool(verifyPlan(joint, p.numGrads())));
    double got = simulate(p, m, joint).iterationUs;
    EXPECT_NEAR(got, bruteForce(p, m, auto2), 1e-6 * std::max(1.0, got))
        << "trial " << trial;
    // makeCompressedPlan is never slower than the joint plan nor than the
    // strategy's grouping with the best forms.
    auto made = makeCompressedPlan("oasr", p, m, auto2);
    ASSERT_TRUE(bool(made));
    EXPECT_LE(simulate(p, m, *made).iterationUs, got * (1 + 1e-9));
    // Nor with ranks raised where the step allows.
    CompressPolicy raised = auto2;
    raised.maxRank = 64;
    auto up = makeCompressedPlan("oasr", p, m, raised);
    ASSERT_TRUE(bool(up));
    EXPECT_LE(simulate(p, m, *up).iterationUs, got * (1 + 1e-9));
    Plan forms = chooseForms(p, m, auto2, *makePlan("wfbp", p, m));
    EXPECT_LE(simulate(p, m, *made).iterationUs,
              simulate(p, m, forms).iterationUs * (1 + 1e-9));
  }
}

TEST(Compression, ChooseFormsPerGroup) {
  // Two 256 x 256 matrices on a slow link: both compress under auto; on a
  // link whose bytes cost nothing next to the compute, neither does.
  Profile p = makeProfile({10, 10}, {256 * 256 * 4, 256 * 256 * 4});
  for (Layer &l : p.layers)
    l.grads[0].rows = 256;
  CommModel slow = unitModel(10, 1);
  slow.compressUsPerMac = 1e-4;
  Plan a = chooseForms(p, slow, {CompressPolicy::Mode::Auto, 4},
                       *makePlan("wfbp", p, slow));
  ASSERT_EQ(a.forms.size(), 2u);
  EXPECT_TRUE(a.form(0).compressed() && a.form(1).compressed());
  CommModel fast = unitModel(10, 1e-6);
  fast.compressUsPerMac = 1e-4;
  Plan b = chooseForms(p, fast, {CompressPolicy::Mode::Auto, 4},
                       *makePlan("wfbp", p, fast));
  EXPECT_FALSE(b.compresses());
  EXPECT_TRUE(b.forms.empty());
  // powersgd:R compresses whatever it can, cost or not.
  Plan c = chooseForms(p, fast, {CompressPolicy::Mode::PowerSGD, 4},
                       *makePlan("wfbp", p, fast));
  EXPECT_TRUE(c.form(0).compressed() && c.form(1).compressed());
  // Off leaves the plan as it was.
  Plan d = chooseForms(p, slow, {}, *makePlan("wfbp", p, slow));
  EXPECT_TRUE(d.forms.empty());
}

TEST(Compression, FaithfulFormsRaiseTheRankWhereTheStepAllows) {
  // Backward order: a 256 x 256 matrix ready at 10 us, then a vector whose
  // backward takes `after` us. Plain, the matrix's allreduce (2631 us)
  // outlasts backward; its factors at rank r cost 2 * 10 us + 20.48 r us
  // and a little compute, and r = 64 would no longer compress.
  auto at = [](double after, const char *policyText) {
    Profile p = makeProfile({after, 10}, {4096, 256 * 256 * 4});
    p.layers[1].grads[0].rows = 256;
    CommModel m = unitModel(10, 0.01);
    m.compressUsPerMac = 1e-6;
    m.compressUsPerElement = 1e-6;
    CompressPolicy policy = *parseCompressPolicy(policyText);
    Plan plan;
    plan.groupEnds = {1, 2};
    plan.forms = {GroupForm::powerSGD(policy.rank), GroupForm::plain()};
    Plan out = faithfulForms(p, m, policy, plan);
    EXPECT_LE(simulate(p, m, out).iterationUs,
              simulate(p, m, plan).iterationUs * (1 + 1e-12));
    return out.form(0);
  };
  // 1000 us of backward hide rank 32 (about 682 us) but not plain.
  EXPECT_EQ(at(1000, "auto:4"), GroupForm::powerSGD(32));
  EXPECT_EQ(at(1000, "auto:4-16"), GroupForm::powerSGD(16));
  EXPECT_EQ(at(1000, "auto:4-4"), GroupForm::powerSGD(4));
  // 400 us hide rank 16 (about 351 us), not 32.
  EXPECT_EQ(at(400, "auto:4"), GroupForm::powerSGD(16));
  // 50 us hide nothing: the cheapest rank stays.
  EXPECT_EQ(at(50, "auto:4"), GroupForm::powerSGD(4));
  // 3000 us hide the plain allreduce.
  EXPECT_EQ(at(3000, "auto:4"), GroupForm::plain());
}

TEST(Compression, FidelityLadderStopsWhereNothingCompresses) {
  // 64 x 64 compresses below rank 16 (2 r 128 < 4096).
  std::vector<ReadyGrad> g = {{0, 0, "w", 64 * 64 * 4, 0, 64}};
  std::vector<GroupForm> l = fidelityLadder(g, *parseCompressPolicy("auto:2"));
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], GroupForm::plain());
  EXPECT_EQ(l[1], GroupForm::powerSGD(8));
  EXPECT_EQ(l[2], GroupForm::powerSGD(4));
  EXPECT_EQ(fidelityLadder(g, *parseCompressPolicy("auto:2-2")).size(), 1u);
}

TEST(Compression, ProfileRowsRoundTrip) {
  Profile p = makeProfile({1}, {4096});
  p.layers[0].grads[0].rows = 32;
  std::string text;
  llvm::raw_string_ostream(text) << toJSON(p);
  auto back = parseProfile(text, "rows.json");
  ASSERT_TRUE(bool(back));
  EXPECT_EQ(back->layers[0].grads[0].rows, 32u);
}

} // namespace
