//===- WireDTypeTest.cpp - Gradients on the wire in bf16/f16 --------------===//
//
// A narrower wire type halves the bytes each gradient puts on the wire: the
// model charges beta on half the gradient bytes while alpha, the per-group
// overhead and the packing copy stay, and every strategy plans with it.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <random>

using namespace oasr::schedule;
using namespace oasr::schedule::test;

namespace {

CommModel withWire(CommModel m, WireDType wire) {
  m.wire = wire;
  return m;
}

TEST(WireDType, NamesParseAndFactor) {
  for (WireDType d : {WireDType::F32, WireDType::BF16, WireDType::F16}) {
    llvm::Expected<WireDType> back = parseWireDType(wireDTypeName(d));
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(wireFactor(WireDType::F32), 1.0);
  EXPECT_EQ(wireFactor(WireDType::BF16), 0.5);
  EXPECT_EQ(wireFactor(WireDType::F16), 0.5);
  llvm::Expected<WireDType> bad = parseWireDType("f8");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "unknown gradient wire type 'f8': expected f32, bf16 or f16");
}

TEST(WireDType, HalvesTheBetaTermOnly) {
  // alpha = 100 us, beta = 2e-3 us/B: 1 MB costs 100 + 2000 us in f32.
  CommModel f32 = unitModel(100, 2e-3);
  f32.groupOverheadUs = 7;
  f32.packUsPerByte = 1e-4;
  for (WireDType d : {WireDType::BF16, WireDType::F16}) {
    CommModel m = withWire(f32, d);
    EXPECT_DOUBLE_EQ(m.timeUs(1000000), 100 + 2e-3 * 1000000 / 2);
    EXPECT_DOUBLE_EQ(m.alphaUs(), f32.alphaUs());
    EXPECT_DOUBLE_EQ(m.betaUsPerByte(), f32.betaUsPerByte() / 2);
    // The calibrated beta (seconds per byte on the wire) is unchanged.
    EXPECT_EQ(m.betaSPerByte, f32.betaSPerByte);
    EXPECT_EQ(m.timeUs(0), 0);
    // Overhead and packing (a copy of the f32 buffer) are not halved.
    EXPECT_DOUBLE_EQ(m.groupTimeUs(1000000, 2),
                     100 + 1000 + 7 + 1e-4 * 1000000);
    EXPECT_DOUBLE_EQ(m.groupTimeUs(1000000, 1), 100 + 1000 + 7);
    // basic() keeps the wire type: `optimal` plans on the same wire.
    EXPECT_EQ(m.basic().wire, d);
  }
  EXPECT_NE(withWire(f32, WireDType::BF16).describe().find("grad_dtype=bf16"),
            std::string::npos);
  EXPECT_EQ(f32.describe().find("grad_dtype"), std::string::npos);
}

TEST(WireDType, SimulatedCommTimeIsAlphaPlusHalfBetaBytes) {
  // One group of 4 MB after a 1000 us backward: comm ends at
  // 1000 + alpha + beta * bytes / 2.
  Profile p = makeProfile({1000}, {4000000});
  CommModel m = withWire(unitModel(50, 1e-3), WireDType::BF16);
  Plan single = *makePlan("single", p, m);
  Timeline t = simulate(p, m, single);
  ASSERT_EQ(t.groups.size(), 1u);
  EXPECT_DOUBLE_EQ(t.groups[0].endUs - t.groups[0].startUs,
                   50 + 1e-3 * 4000000 / 2);
  EXPECT_DOUBLE_EQ(t.commBusyUs, 50 + 2000);
  EXPECT_DOUBLE_EQ(t.iterationUs, 1000 + 50 + 2000);
  // The lower bound carries the same halved term.
  EXPECT_DOUBLE_EQ(lowerBoundUs(p, m), 1000 + 50 + 2000);
}

TEST(WireDType, OptimalPlanChangesWithTheWire) {
  // Forward order backward [4, 9, 1, 4] us, sizes [8, 16, 4, 10] B, alpha 2,
  // beta 1: ready order l3 (4 us, 10 B), l2 (5 us, 4 B), l1 (14 us, 16 B),
  // l0 (18 us, 8 B). In f32 merging l3 with l2 is best (47 us; next best
  // 48); with half the bytes on the wire l2 goes alone (30 us; next 31).
  Profile p = makeProfile({4, 9, 1, 4}, {8, 16, 4, 10});
  CommModel f32 = unitModel(2, 1);
  CommModel bf16 = withWire(f32, WireDType::BF16);
  for (const char *s : {"optimal", "oasr"}) {
    Plan a = *makePlan(s, p, f32), b = *makePlan(s, p, bf16);
    EXPECT_EQ(a.groupEnds, (std::vector<unsigned>{2, 4})) << s;
    EXPECT_EQ(b.groupEnds, (std::vector<unsigned>{2, 3, 4})) << s;
    EXPECT_DOUBLE_EQ(simulate(p, f32, a).iterationUs, 47);
    EXPECT_DOUBLE_EQ(simulate(p, bf16, b).iterationUs, 30);
    // The f32 plan on the bf16 wire is worse than the bf16 plan.
    EXPECT_GT(simulate(p, bf16, a).iterationUs, 30);
  }
}

TEST(WireDType, EveryStrategyPlansAsWithHalfBeta) {
  // A bf16 model plans and scores exactly like the f32 model with half the
  // beta, on random instances with and without extras.
  std::mt19937_64 rng(16);
  for (int trial = 0; trial < 300; ++trial) {
    RandomInstance in = randomInstance(rng, 30);
    if (trial % 2) {
      in.comm.groupOverheadUs = 3;
      in.comm.overlapRate = 0.5;
    }
    CommModel bf16 = withWire(in.comm, WireDType::BF16);
    CommModel half = in.comm;
    half.betaSPerByte /= 2;
    for (const char *s : {"mgwfbp", "optimal", "oasr", "wfbp", "single"}) {
      Plan a = *makePlan(s, in.profile, bf16);
      Plan b = *makePlan(s, in.profile, half);
      EXPECT_EQ(a.groupEnds, b.groupEnds) << s << " trial " << trial;
      EXPECT_TRUE(close(simulate(in.profile, bf16, a).iterationUs,
                        simulate(in.profile, half, b).iterationUs))
          << s << " trial " << trial;
    }
    EXPECT_TRUE(close(lowerBoundUs(in.profile, bf16),
                      lowerBoundUs(in.profile, half)));
  }
}

} // namespace
