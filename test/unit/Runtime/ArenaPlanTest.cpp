//===- ArenaPlanTest.cpp - The arena planner by hand and at random --------===//

#include "oasr/Runtime/ArenaPlan.h"

#include "gtest/gtest.h"

#include "llvm/ADT/STLExtras.h"

#include <random>

using namespace oasr::rt;

namespace {

ArenaBuffer buffer(int def, int lastUse, size_t bytes, int donor = -1) {
  ArenaBuffer b;
  b.def = def;
  b.lastUse = lastUse;
  b.bytes = bytes;
  b.donor = donor;
  return b;
}

TEST(ArenaPlan, DisjointLifetimesShareASlot) {
  // a lives in step 0..1, b in 2..3: b takes a's slot.
  ArenaPlan p = planArena({buffer(0, 1, 100), buffer(2, 3, 100)}, 64, true);
  EXPECT_EQ(p.offsets[0], 0u);
  EXPECT_EQ(p.offsets[1], 0u);
  EXPECT_EQ(p.bytes, 128u);
  EXPECT_EQ(p.unsharedBytes, 256u);
}

TEST(ArenaPlan, OverlappingLifetimesDoNot) {
  ArenaPlan p = planArena({buffer(0, 2, 100), buffer(1, 3, 10)}, 64, true);
  EXPECT_EQ(p.offsets[0], 0u);
  EXPECT_EQ(p.offsets[1], 128u);
  EXPECT_EQ(p.bytes, 192u);
}

TEST(ArenaPlan, BestFitTakesTheSmallestHole) {
  // Holes of 256 and 64 bytes after step 1; a 64-byte buffer takes the 64.
  ArenaPlan p =
      planArena({buffer(0, 1, 256), buffer(0, 9, 64), buffer(0, 1, 64),
                 buffer(0, 9, 64), buffer(2, 9, 60)},
                64, true);
  EXPECT_EQ(p.offsets[2], 320u);
  EXPECT_EQ(p.offsets[4], 320u);
  EXPECT_EQ(p.bytes, 448u);
}

TEST(ArenaPlan, TheLastHoleGrowsAtTheTop) {
  // The freed top slot (64 bytes) grows to 192 instead of a new slot.
  ArenaPlan p = planArena(
      {buffer(0, 9, 64), buffer(0, 1, 64), buffer(2, 3, 192)}, 64, true);
  EXPECT_EQ(p.offsets[2], 64u);
  EXPECT_EQ(p.bytes, 256u);
}

TEST(ArenaPlan, ADonorHandsOverItsSlot) {
  // b writes in place over a, which dies at b's step.
  ArenaPlan p = planArena(
      {buffer(0, 1, 100), buffer(1, 2, 100, /*donor=*/0), buffer(1, 2, 100)},
      64, true);
  EXPECT_EQ(p.offsets[1], p.offsets[0]);
  EXPECT_NE(p.offsets[2], p.offsets[0]);
  EXPECT_EQ(p.bytes, 256u);
}

TEST(ArenaPlan, ScratchIsFreeAfterItsStep) {
  ArenaBuffer scratch = buffer(0, 0, 500);
  scratch.scratch = true;
  ArenaPlan p =
      planArena({buffer(0, 1, 64), scratch, buffer(1, 2, 500)}, 64, true);
  EXPECT_EQ(p.offsets[1], 64u);
  EXPECT_EQ(p.offsets[2], 64u);
  EXPECT_EQ(p.bytes, 576u);
}

TEST(ArenaPlan, WithoutReuseEveryBufferHasItsOwnSlot) {
  ArenaPlan p = planArena({buffer(0, 0, 1), buffer(1, 1, 0), buffer(2, 2, 65)},
                          64, false);
  EXPECT_EQ(p.offsets[0], 0u);
  EXPECT_EQ(p.offsets[1], 64u);
  EXPECT_EQ(p.offsets[2], 128u);
  EXPECT_EQ(p.bytes, 256u);
  EXPECT_EQ(p.bytes, p.unsharedBytes);
}

/// Random step programs: no two buffers alive at once overlap, every slot
/// lies inside the arena, a donor's slot passes on, and the arena holds at
/// least the bytes alive at the busiest step.
TEST(ArenaPlan, RandomProgramsNeverOverlapLiveBuffers) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::uniform_int_distribution<int> steps(1, 30), perStep(0, 3),
        size(0, 5000), coin(0, 3);
    int n = steps(rng);
    std::vector<ArenaBuffer> bufs;
    for (int k = 0; k < n; ++k) {
      for (int j = perStep(rng); j > 0; --j) {
        ArenaBuffer b = buffer(k, 0, size_t(size(rng)));
        b.lastUse = coin(rng) == 0
                        ? ArenaBuffer::kLive
                        : std::uniform_int_distribution<int>(k, n)(rng);
        // Sometimes take over an earlier buffer dying here.
        if (coin(rng) == 0)
          for (size_t d = 0; d < bufs.size(); ++d) {
            bool taken = false;
            for (const ArenaBuffer &o : bufs)
              taken |= o.donor == int(d);
            if (!bufs[d].scratch && bufs[d].lastUse == k && !taken &&
                bufs[d].def < k) {
              b.donor = int(d);
              b.bytes = bufs[d].bytes;
              break;
            }
          }
        bufs.push_back(b);
      }
      if (coin(rng) == 0) {
        ArenaBuffer s = buffer(k, k, size_t(size(rng)));
        s.scratch = true;
        bufs.push_back(s);
      }
    }
    for (bool reuse : {true, false}) {
      ArenaPlan p = planArena(bufs, 64, reuse);
      ASSERT_EQ(p.offsets.size(), bufs.size());
      auto end = [&](const ArenaBuffer &b) {
        return b.scratch ? b.def : std::max(b.def, b.lastUse);
      };
      auto slot = [](size_t bytes) {
        return (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
      };
      size_t peak = 0;
      for (int k = 0; k < n; ++k) {
        size_t live = 0;
        for (size_t b = 0; b < bufs.size(); ++b)
          if (bufs[b].def <= k && k <= end(bufs[b]))
            live += slot(bufs[b].bytes);
        peak = std::max(peak, live);
      }
      for (size_t a = 0; a < bufs.size(); ++a) {
        EXPECT_EQ(p.offsets[a] % 64, 0u);
        EXPECT_LE(p.offsets[a] + slot(bufs[a].bytes), p.bytes);
        if (bufs[a].donor >= 0 && reuse) {
          EXPECT_EQ(p.offsets[a], p.offsets[size_t(bufs[a].donor)]);
        }
        for (size_t b = a + 1; b < bufs.size(); ++b) {
          if (reuse && bufs[b].donor == int(a))
            continue; // the same memory, handed over at b's step
          bool overlapTime =
              bufs[a].def <= end(bufs[b]) && bufs[b].def <= end(bufs[a]);
          // A buffer dying at step k and one born at k share memory only
          // in place (the donor case above).
          if (!overlapTime)
            continue;
          bool overlapSpace =
              p.offsets[a] < p.offsets[b] + slot(bufs[b].bytes) &&
              p.offsets[b] < p.offsets[a] + slot(bufs[a].bytes);
          EXPECT_FALSE(overlapSpace)
              << "trial " << trial << " buffers " << a << " and " << b;
        }
      }
      if (!reuse) {
        EXPECT_EQ(p.bytes, p.unsharedBytes);
      }
      EXPECT_LE(p.bytes, p.unsharedBytes);
      if (!reuse || llvm::none_of(bufs, [](const ArenaBuffer &b) {
            return b.donor >= 0;
          })) {
        EXPECT_GE(p.bytes, peak);
      }
    }
  }
}

} // namespace
