//===- GradWireTest.cpp - f32 <-> bf16/f16 and the 16-bit allreduce -------===//
//
// The host conversions round to nearest, ties to even (checked on chosen
// values and against the compiler's _Float16 on a million random floats),
// the per-step sum is commutative bit for bit, and, run under
// `mpirun -np 2` (test/runtime/grad-wire-mpi.test), the MPI communicator's
// 16-bit allreduce gives every rank the same averages, equal to the
// reference computed here, in pieces and with the sleeping wait too; and
// (test/runtime/collectives-mpi.test, 3 ranks) its ring reduce-scatter and
// all-gather give each rank its block of the average, summed in ring order,
// and every rank every block.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/GradWire.h"
#include "oasr/Runtime/Communicator.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace oasr::rt;

namespace {

float fromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

TEST(GradWire, BF16RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBF16(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1.
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(floatToBF16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(floatToBF16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  // The largest float rounds to infinity; infinities and NaN stay.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBF16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(fromBits(0x7f800001)))));
  // Every bf16 value converts back to itself.
  for (uint32_t h = 0; h < 0x10000; ++h)
    if (!std::isnan(bf16ToFloat(uint16_t(h))))
      ASSERT_EQ(floatToBF16(bf16ToFloat(uint16_t(h))), h) << h;
}

TEST(GradWire, F16RoundsToNearestEven) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65519.99f), 0x7bff);
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00); // ties to even: infinity
  EXPECT_EQ(floatToF16(0x1p-24f), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToF16(0x1p-25f), 0x0000); // halfway to 0: even
  EXPECT_EQ(floatToF16(0x1.8p-24f), 0x0002);
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToF16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(floatToF16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(std::nanf("")))));
  for (uint32_t h = 0; h < 0x10000; ++h)
    if (!std::isnan(f16ToFloat(uint16_t(h))))
      ASSERT_EQ(floatToF16(f16ToFloat(uint16_t(h))), h) << h;
#ifdef __FLT16_MAX__
  // Against the compiler's conversions (IEEE round to nearest even).
  std::mt19937 rng(16);
  for (int i = 0; i < 1000000; ++i) {
    float x = fromBits(rng());
    if (std::isnan(x))
      continue;
    _Float16 ref = _Float16(x);
    uint16_t refBits;
    std::memcpy(&refBits, &ref, sizeof refBits);
    ASSERT_EQ(floatToF16(x), refBits) << x;
    ASSERT_EQ(bits(f16ToFloat(refBits)), bits(float(ref))) << x;
  }
#endif
}

TEST(GradWire, SumIsCommutativeBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0, 1e-3f);
  for (GradWire w : {GradWire::BF16, GradWire::F16}) {
    std::vector<float> a(4096), b(4096);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = g(rng), b[i] = g(rng);
    std::vector<uint16_t> wa(a.size()), wb(b.size());
    toWire(w, a.data(), wa.data(), a.size());
    toWire(w, b.data(), wb.data(), b.size());
    std::vector<uint16_t> ab = wb, ba = wa;
    wireSum(w, wa.data(), ab.data(), a.size());
    wireSum(w, wb.data(), ba.data(), a.size());
    EXPECT_EQ(ab, ba);
    // The sum is within half a unit of the wire type of the exact one.
    std::vector<float> avg(a.size());
    fromWire(w, ab.data(), avg.data(), a.size(), 0.5f);
    float ulp = w == GradWire::BF16 ? 0x1p-8f : 0x1p-11f;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_LE(std::fabs(avg[i] - (a[i] + b[i]) / 2),
                ulp * (std::fabs(a[i]) + std::fabs(b[i])) + 1e-7f);
  }
}

/// Rank r's gradients (a fixed function of r and i).
std::vector<float> gradients(int rank, size_t n) {
  std::mt19937 rng(1000 + rank);
  std::normal_distribution<float> g(0, 1e-2f);
  std::vector<float> v(n);
  for (float &x : v)
    x = g(rng);
  return v;
}

TEST(GradWireMpi, EveryRankGetsTheSameAverage) {
  if (!launchedByMpi())
    GTEST_SKIP() << "run under mpirun (test/runtime/grad-wire-mpi.test)";
  std::string error;
  std::unique_ptr<Communicator> comm =
      createMpiCommunicator(nullptr, nullptr, error);
  ASSERT_TRUE(comm) << error;
  const int p = comm->size(), rank = comm->rank();
  const size_t n = 100003;
  for (GradWire w : {GradWire::BF16, GradWire::F16})
    for (bool sleeping : {false, true}) {
      comm->setSleepingWait(sleeping);
      std::vector<float> data = gradients(rank, n);
      std::vector<uint16_t> scratch(n);
      comm->allreduceGradients(data.data(), n, DType::F32, w, scratch.data());
      std::vector<char> all;
      std::vector<size_t> counts;
      comm->gatherBytes(data.data(), n * sizeof(float), 0, all, counts);
      if (rank != 0)
        continue;
      // The reference: rounded inputs summed in rank order (commutative for
      // 2 ranks), back to f32, times 1/P.
      std::vector<uint16_t> sum(n), other(n);
      std::vector<float> g0 = gradients(0, n);
      toWire(w, g0.data(), sum.data(), n);
      for (int r = 1; r < p; ++r) {
        std::vector<float> gr = gradients(r, n);
        toWire(w, gr.data(), other.data(), n);
        wireSum(w, other.data(), sum.data(), n);
      }
      std::vector<float> expect(n);
      fromWire(w, sum.data(), expect.data(), n, 1.0f / float(p));
      ASSERT_EQ(all.size(), n * sizeof(float) * size_t(p));
      for (int r = 0; r < p; ++r) {
        const float *got =
            reinterpret_cast<const float *>(all.data()) + size_t(r) * n;
        EXPECT_EQ(std::memcmp(got, all.data(), n * sizeof(float)), 0)
            << "rank " << r << " differs from rank 0 (" << gradWireName(w)
            << ")";
        if (p == 2)
          EXPECT_EQ(std::memcmp(got, expect.data(), n * sizeof(float)), 0)
              << "rank " << r << " differs from the reference ("
              << gradWireName(w) << ", sleeping " << sleeping << ")";
      }
    }
  comm->finalize();
}

TEST(CollectivesMpi, RingReduceScatterAndAllGather) {
  if (!launchedByMpi())
    GTEST_SKIP() << "run under mpirun (test/runtime/collectives-mpi.test)";
  std::string error;
  std::unique_ptr<Communicator> comm =
      createMpiCommunicator(nullptr, nullptr, error);
  ASSERT_TRUE(comm) << error;
  const size_t p = size_t(comm->size()), rank = size_t(comm->rank());
  const size_t n = 40001; // per rank's block: 3 messages of the eager size
  for (bool sleeping : {false, true}) {
    comm->setSleepingWait(sleeping);
    std::vector<float> send = gradients(int(rank), n * p), block(n);
    comm->reduceScatterAverage(send.data(), block.data(), n);
    // Block b is summed around the ring from rank b + 1 to rank b itself.
    auto reference = [&](size_t b) {
      std::vector<float> sum(n, 0.0f);
      for (size_t k = 1; k <= p; ++k) {
        std::vector<float> v = gradients(int((b + k) % p), n * p);
        for (size_t i = 0; i < n; ++i)
          sum[i] = k == 1 ? v[b * n + i] : sum[i] + v[b * n + i];
      }
      for (float &x : sum)
        x *= 1.0f / float(p);
      return sum;
    };
    EXPECT_EQ(block, reference(rank)) << "rank " << rank;
    std::vector<float> all(n * p, -1.0f);
    comm->allGather(block.data(), all.data(), n);
    for (size_t b = 0; b < p; ++b) {
      std::vector<float> want = reference(b);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), all.begin() + b * n))
          << "block " << b << " on rank " << rank;
    }
  }
  comm->finalize();
}

TEST(TiersMpi, TwoLevelAllreduce) {
  if (!launchedByMpi())
    GTEST_SKIP() << "run under mpirun (test/runtime/two-level.test)";
  std::string error;
  std::unique_ptr<Communicator> comm =
      createMpiCommunicator(nullptr, nullptr, error);
  ASSERT_TRUE(comm) << error;
  const int p = comm->size(), rank = comm->rank();
  ASSERT_EQ(p, 4) << "run on 4 ranks";
  // One host: the library's nodes hold every rank; 3 does not divide 4.
  EXPECT_EQ(comm->setUpTiers(0), "every rank is on one node");
  EXPECT_EQ(comm->setUpTiers(3),
            "--ranks-per-node=3 does not divide the job's 4 ranks");
  EXPECT_EQ(comm->ranksPerNode(), 0);
  ASSERT_EQ(comm->setUpTiers(2), "");
  EXPECT_EQ(comm->ranksPerNode(), 2);
  // An odd count: the node's two shares differ by one element. Values
  // whose sums and quarter are exact, so every order gives the average.
  const size_t n = 100001;
  auto value = [](int r, size_t i) { return float((r + 1) * int(i % 7)); };
  for (bool sleeping : {false, true}) {
    comm->setSleepingWait(sleeping);
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i)
      data[i] = value(rank, i);
    comm->allreduceGradients(data.data(), n, DType::F32, GradWire::F32, nullptr,
                             /*twoLevel=*/true);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      float sum = 0;
      for (int r = 0; r < p; ++r)
        sum += value(r, i);
      wrong += data[i] != sum * 0.25f;
    }
    EXPECT_EQ(wrong, 0u) << "rank " << rank << " sleeping " << sleeping;
    Communicator::TierSeconds t = comm->lastTwoLevelSeconds();
    EXPECT_GT(t.intra, 0);
    EXPECT_GT(t.inter, 0);
  }
  // A bf16 wire: the node sums its ranks' f32 values in f32, and only its
  // share's sum is rounded to bf16 to cross (ZeRO++'s form); with two
  // nodes the crossing sum is one bf16 addition, then 1/4 in f32.
  auto ragged = [](int r, size_t i) {
    return 1.0009765f * float(r + 1) * float(i % 13) - 0.37f * float(i % 5);
  };
  auto bf16 = [](float x) { return bf16ToFloat(floatToBF16(x)); };
  std::vector<float> data(n);
  std::vector<uint16_t> scratch(n);
  for (size_t i = 0; i < n; ++i)
    data[i] = ragged(rank, i);
  comm->allreduceGradients(data.data(), n, DType::F32, GradWire::BF16,
                           scratch.data(), /*twoLevel=*/true);
  size_t wrong = 0, narrowed = 0;
  for (size_t i = 0; i < n; ++i) {
    float node0 = ragged(0, i) + ragged(1, i),
          node1 = ragged(2, i) + ragged(3, i);
    float want = bf16(bf16(node0) + bf16(node1)) * 0.25f;
    wrong += data[i] != want;
    // Rounding each rank's value before the node's sum would differ here.
    narrowed += want != bf16(bf16(bf16(ragged(0, i)) + bf16(ragged(1, i))) +
                             bf16(bf16(ragged(2, i)) + bf16(ragged(3, i)))) *
                            0.25f;
  }
  EXPECT_EQ(wrong, 0u) << "rank " << rank << " bf16 wire";
  EXPECT_GT(narrowed, 0u);
  comm->finalize();
}

} // namespace
