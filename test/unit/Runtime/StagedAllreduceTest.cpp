//===- StagedAllreduceTest.cpp - The host-staged allreduce's chunk pipeline
//===//
//
// The pipeline of --device=cuda --comm-backend=mpi (StagedAllreduce.h) run
// on host memory: copies that land late and in order per slot, as a
// device's streams do, on odd sizes and chunk boundaries; and, under
// mpirun (StagedAllreduceMpi, test/runtime/staged-allreduce-mpi.test),
// MPI's averages through the slots equal to the MPI communicator's average
// of the whole buffer.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/StagedAllreduce.h"
#include "oasr/Runtime/Communicator.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

using namespace oasr::rt;

namespace {

/// Slots in host memory whose copies run late: a copy in lands when the
/// pipeline waits for it, or when a later copy needs the slot; copies out
/// land at the next copy in of their slot or at waitOut, as a device's
/// copy streams order them. Counts what the pipeline asked for.
class LateCopies final : public StagingCopies {
public:
  LateCopies(std::vector<char> &buffer, size_t slots, size_t slotBytes)
      : buffer(buffer), slots(slots), bytes(slotBytes),
        memory(slots * slotBytes), pendingIn(slots), pendingOut(slots) {}
  size_t slotCount() const override { return slots; }
  size_t slotBytes() const override { return bytes; }
  void *slot(size_t s) override { return memory.data() + s * bytes; }
  void copyIn(size_t s, size_t offset, size_t n) override {
    EXPECT_LE(n, bytes);
    EXPECT_LE(offset + n, buffer.size());
    EXPECT_FALSE(pendingIn[s].active) << "slot " << s << " copied in twice";
    landOut(s); // the stream waits for the slot's copy out
    pendingIn[s] = {true, offset, n};
    ++copiesIn;
    size_t inFlight = 0;
    for (const Copy &c : pendingIn)
      inFlight += c.active;
    maxInFlight = std::max(maxInFlight, inFlight);
  }
  void waitIn(size_t s) override {
    ASSERT_TRUE(pendingIn[s].active) << "waited on slot " << s << " twice";
    Copy &c = pendingIn[s];
    std::memcpy(slot(s), buffer.data() + c.offset, c.bytes);
    c.active = false;
    waited = s;
  }
  void copyOut(size_t s, size_t offset, size_t n) override {
    EXPECT_EQ(waited, s) << "copied out a slot not just reduced";
    pendingOut[s] = {true, offset, n};
    ++copiesOut;
  }
  void waitOut() override {
    for (size_t s = 0; s < slots; ++s)
      landOut(s);
    for (const Copy &c : pendingIn)
      EXPECT_FALSE(c.active) << "a copy in was never waited on";
  }

  size_t copiesIn = 0, copiesOut = 0, maxInFlight = 0;

private:
  struct Copy {
    bool active = false;
    size_t offset = 0, bytes = 0;
  };
  void landOut(size_t s) {
    Copy &c = pendingOut[s];
    if (!c.active)
      return;
    std::memcpy(buffer.data() + c.offset, slot(s), c.bytes);
    c.active = false;
  }
  std::vector<char> &buffer;
  size_t slots, bytes;
  std::vector<char> memory;
  std::vector<Copy> pendingIn, pendingOut;
  size_t waited = size_t(-1);
};

/// Synchronous memcpy slots: what a device's copies do, on host memory.
class MemcpyCopies final : public StagingCopies {
public:
  MemcpyCopies(void *buffer, size_t slots, size_t slotBytes)
      : buffer(static_cast<char *>(buffer)), slots(slots), bytes(slotBytes),
        memory(slots * slotBytes) {}
  size_t slotCount() const override { return slots; }
  size_t slotBytes() const override { return bytes; }
  void *slot(size_t s) override { return memory.data() + s * bytes; }
  void copyIn(size_t s, size_t offset, size_t n) override {
    std::memcpy(slot(s), buffer + offset, n);
  }
  void waitIn(size_t) override {}
  void copyOut(size_t s, size_t offset, size_t n) override {
    std::memcpy(buffer + offset, slot(s), n);
  }
  void waitOut() override {}

private:
  char *buffer;
  size_t slots, bytes;
  std::vector<char> memory;
};

TEST(StagedAllreduce, EveryChunkReducedOnceInOrder) {
  // Slots of 12 bytes: 3 floats a chunk; and 10 bytes: 2 floats (a slot
  // need not hold whole elements only).
  for (size_t slotBytes : {12u, 10u, 4u})
    for (size_t slots : {1u, 2u, 4u})
      for (size_t count : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 23u, 24u, 25u}) {
        const size_t per = slotBytes / sizeof(float);
        std::vector<char> buffer(count * sizeof(float));
        float *x = reinterpret_cast<float *>(buffer.data());
        for (size_t i = 0; i < count; ++i)
          x[i] = float(i) + 0.5f;
        LateCopies copies(buffer, slots, slotBytes);
        size_t next = 0, calls = 0;
        stagedAllreduce(copies, count, sizeof(float), [&](void *p, size_t n) {
          // Chunks arrive whole, in order, at most `per` elements.
          ASSERT_EQ(n, std::min(per, count - next));
          float *y = static_cast<float *>(p);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(y[i], float(next + i) + 0.5f)
                << "slot read before its copy landed";
            y[i] = 3 * y[i] + 1;
          }
          next += n;
          ++calls;
        });
        const size_t chunks = (count + per - 1) / per;
        SCOPED_TRACE("slot " + std::to_string(slotBytes) + " B x " +
                     std::to_string(slots) + ", " + std::to_string(count) +
                     " elements");
        EXPECT_EQ(next, count);
        EXPECT_EQ(calls, chunks);
        EXPECT_EQ(copies.copiesIn, chunks);
        EXPECT_EQ(copies.copiesOut, chunks);
        EXPECT_EQ(copies.maxInFlight, std::min(slots, chunks));
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(x[i], 3 * (float(i) + 0.5f) + 1) << "element " << i;
      }
}

TEST(StagedAllreduce, ChunkFromTheEnvironment) {
  std::string error;
  ::unsetenv("OASR_STAGED_CHUNK_BYTES");
  EXPECT_EQ(stagedChunkBytesFromEnv(error), kDefaultStagedChunkBytes);
  ::setenv("OASR_STAGED_CHUNK_BYTES", "65536", 1);
  EXPECT_EQ(stagedChunkBytesFromEnv(error), 65536u);
  EXPECT_EQ(error, "");
  for (const char *bad : {"", "4k", "-4096", "4095", "1073741825", "x"}) {
    ::setenv("OASR_STAGED_CHUNK_BYTES", bad, 1);
    error.clear();
    EXPECT_EQ(stagedChunkBytesFromEnv(error), 0u) << bad;
    EXPECT_EQ(error, std::string("OASR_STAGED_CHUNK_BYTES='") + bad +
                         "': expected a number of bytes from 4096 to "
                         "1073741824");
  }
  ::unsetenv("OASR_STAGED_CHUNK_BYTES");
}

std::vector<float> values(int rank, size_t n, bool integral) {
  std::vector<float> v(n);
  std::mt19937 rng(1234 + unsigned(rank));
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i)
    v[i] = integral ? float(int(i % 997) - 400 + 1000 * rank) : g(rng);
  return v;
}

TEST(StagedAllreduceMpi, SameAveragesAsTheMpiCommunicator) {
  if (!launchedByMpi())
    GTEST_SKIP() << "run under mpirun (test/runtime/staged-allreduce-mpi.test)";
  std::string error;
  std::unique_ptr<Communicator> comm =
      createMpiCommunicator(nullptr, nullptr, error);
  ASSERT_TRUE(comm) << error;
  const int p = comm->size(), rank = comm->rank();
  const float scale = 1.0f / float(p);
  // Odd counts around the chunks of 1 KiB (256 floats) and one chunk.
  for (size_t n : {1u, 255u, 256u, 257u, 4099u, 100003u})
    for (bool integral : {true, false})
      for (bool sleeping : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + " elements, integral " +
                     std::to_string(integral) + ", sleeping " +
                     std::to_string(sleeping));
        comm->setSleepingWait(sleeping);
        std::vector<float> staged = values(rank, n, integral), whole = staged;
        MemcpyCopies copies(staged.data(), 3, 1024);
        stagedAllreduce(copies, n, sizeof(float), [&](void *chunk, size_t k) {
          comm->allreduceAverage(chunk, k, DType::F32);
        });
        comm->allreduceAverage(whole.data(), n, DType::F32);
        if (integral) {
          // Sums of small integers are exact in any order.
          std::vector<std::vector<float>> all;
          for (int r = 0; r < p; ++r)
            all.push_back(values(r, n, true));
          for (size_t i = 0; i < n; ++i) {
            float sum = 0;
            for (int r = 0; r < p; ++r)
              sum += all[r][i];
            ASSERT_EQ(staged[i], sum * scale) << "element " << i;
          }
        }
        // Two values sum alike in any order: the CPU MPI path's bits.
        if (integral || p == 2) {
          EXPECT_EQ(std::memcmp(staged.data(), whole.data(), n * sizeof(float)),
                    0);
        }
        // 16-bit wire: rounded, summed in 16 bits, back to f32 x 1/P.
        std::vector<float> wire = values(rank, n, integral), wholeWire = wire;
        std::vector<uint16_t> scratch(1024 / 2), wholeScratch(n);
        MemcpyCopies wireCopies(wire.data(), 2, 1024);
        stagedAllreduce(wireCopies, n, sizeof(float), [&](void *c, size_t k) {
          comm->allreduceAverageWire(static_cast<float *>(c), k, GradWire::BF16,
                                     scratch.data());
        });
        comm->allreduceAverageWire(wholeWire.data(), n, GradWire::BF16,
                                   wholeScratch.data());
        if (p == 2) {
          EXPECT_EQ(
              std::memcmp(wire.data(), wholeWire.data(), n * sizeof(float)), 0);
        }
        // i64 (counters): divided by P as the MPI communicator divides.
        std::vector<int64_t> ints(n), expect(n);
        for (size_t i = 0; i < n; ++i) {
          ints[i] = int64_t(i) * (rank + 1);
          expect[i] = int64_t(i) * (int64_t(p) * (p + 1) / 2) / p;
        }
        MemcpyCopies intCopies(ints.data(), 2, 1024);
        stagedAllreduce(intCopies, n, sizeof(int64_t), [&](void *c, size_t k) {
          comm->allreduceAverage(c, k, DType::I64);
        });
        EXPECT_EQ(ints, expect);
      }
  comm->finalize();
}

} // namespace
