//===- LossScaleTest.cpp - Dynamic loss scaling's schedule ----------------===//

#include "oasr/Runtime/LossScale.h"

#include <gtest/gtest.h>

using namespace oasr::rt;

TEST(LossScale, StartsAtGradScalersDefault) {
  LossScaler s;
  EXPECT_EQ(s.scale, 65536.0);
  EXPECT_EQ(s.growthInterval, 2000);
}

TEST(LossScale, OverflowHalvesAndCountsTheSkip) {
  LossScaler s;
  s.update(false);
  EXPECT_EQ(s.scale, 32768.0);
  EXPECT_EQ(s.skipped, 1);
  s.update(false);
  EXPECT_EQ(s.scale, 16384.0);
  EXPECT_EQ(s.skipped, 2);
}

TEST(LossScale, GrowsAfterAnIntervalOfGoodSteps) {
  LossScaler s;
  s.growthInterval = 3;
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale, 65536.0);
  s.update(true);
  EXPECT_EQ(s.scale, 131072.0);
  EXPECT_EQ(s.goodSteps, 0);
}

TEST(LossScale, AnOverflowRestartsTheInterval) {
  LossScaler s;
  s.growthInterval = 3;
  s.update(true);
  s.update(true);
  s.update(false); // 32768, the interval starts again
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale, 32768.0);
  s.update(true);
  EXPECT_EQ(s.scale, 65536.0);
  EXPECT_EQ(s.skipped, 1);
}
