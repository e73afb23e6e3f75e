//===- Communicator.cpp - MPI and self communicators, the comm engine ----===//
//
// The MPI communicator wraps MPI_COMM_WORLD; the self communicator is the
// one-process identity. The CommEngine runs every collective on one thread
// in FIFO order so they progress while compute runs.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/Communicator.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <unistd.h>

namespace oasr::rt {

Communicator::~Communicator() = default;

void Communicator::send(const void *, size_t, int, int) {
  abort("oasr-run: error: " + pointToPointUnavailable(), 1);
}

size_t Communicator::receive(void *, size_t, int, int) {
  abort("oasr-run: error: " + pointToPointUnavailable(), 1);
  return 0; // abort() does not return
}

void Communicator::allreduceAverageWire(float *data, size_t count,
                                        GradWire wire, void *) {
  if (wire == GradWire::F32)
    return allreduceAverage(data, count, DType::F32);
  abort(std::string("oasr-run: rank ") + std::to_string(rank()) +
            ": error: the " + name() +
            " communicator cannot send gradients "
            "as " +
            gradWireName(wire),
        1);
}

std::string Communicator::setUpTiers(int) {
  return std::string("the ") + name() + " communicator has one tier";
}

void Communicator::copyGradientsToHost(void *, const void *, size_t) {
  abort(std::string("oasr: error: the ") + name() +
            " communicator has no device memory to copy gradients from",
        1);
}

void Communicator::copyGradientsToDevice(void *, const void *, size_t) {
  abort(std::string("oasr: error: the ") + name() +
            " communicator has no device memory to copy gradients to",
        1);
}

void Communicator::reduceScatterAverage(const float *, float *, size_t) {
  abort(std::string("oasr: error: the ") + name() +
            " communicator has no reduce-scatter",
        1);
}

void Communicator::allGather(const float *, float *, size_t) {
  abort(std::string("oasr: error: the ") + name() +
            " communicator has no all-gather",
        1);
}

std::string Communicator::host() const {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0)
    return "?";
  return buf;
}

bool launchedByMpi() {
  for (const char *v :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v))
      return true;
  return false;
}

//===----------------------------------------------------------------------===//
// Self
//===----------------------------------------------------------------------===//

namespace {
class SelfCommunicator final : public Communicator {
public:
  const char *name() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  // The average of one rank reads and writes nothing, so an allreduce need
  // not wait for the device (a GPU step would otherwise stall once per
  // group). Its reduce-scatter and all-gather copy host memory, which only
  // the CPU backend's groups live in, and its kernels have returned.
  bool ordersAfterCompute() const override { return true; }
  void allreduceAverage(void *, size_t, DType) override {}
  // One rank: nothing travels, so nothing is rounded.
  void allreduceAverageWire(float *, size_t, GradWire, void *) override {}
  void reduceScatterAverage(const float *send, float *recv, size_t n) override {
    std::copy(send, send + n, recv);
  }
  void allGather(const float *send, float *recv, size_t n) override {
    std::copy(send, send + n, recv);
  }
  void allreduceSum(double *, size_t) override {}
  void allreduceMax(double *, size_t) override {}
  void broadcast(void *, size_t, int) override {}
  void barrier() override {}
  void gatherBytes(const void *data, size_t bytes, int, std::vector<char> &out,
                   std::vector<size_t> &counts) override {
    const char *p = static_cast<const char *>(data);
    out.assign(p, p + bytes);
    counts.assign(1, bytes);
  }
  [[noreturn]] void abort(const std::string &message, int code) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code ? code : 1);
  }
};

//===----------------------------------------------------------------------===//
// MPI
//===----------------------------------------------------------------------===//

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(size_t chunkBytes) : chunkBytes(chunkBytes) {
    MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
    MPI_Comm_size(MPI_COMM_WORLD, &mySize);
  }
  ~MpiCommunicator() override { finalize(); }
  const char *name() const override { return "mpi"; }
  int rank() const override { return myRank; }
  int size() const override { return mySize; }

  void allreduceAverage(void *data, size_t count, DType dtype) override {
    if (mySize == 1 || count == 0)
      return;
    switch (dtype) {
    case DType::F32: {
      // Pieces of at most chunkBytes, each scaled while it is in cache.
      // Multiplying by 1/P is exact for power-of-two P and the same on every
      // rank and in every grouping otherwise.
      float *p = static_cast<float *>(data);
      const float scale = 1.0f / float(mySize);
      const size_t piece = std::max<size_t>(1, chunkBytes / sizeof(float));
      for (size_t done = 0; done < count;) {
        size_t n = std::min(piece, count - done);
        allreduceChunks(p + done, n, MPI_FLOAT);
        for (size_t i = done; i < done + n; ++i)
          p[i] *= scale;
        done += n;
      }
      return;
    }
    case DType::I64:
    case DType::I32: {
      MPI_Datatype t = dtype == DType::I64 ? MPI_INT64_T : MPI_INT32_T;
      allreduceChunks(data, count, t);
      if (dtype == DType::I64)
        for (size_t i = 0; i < count; ++i)
          static_cast<int64_t *>(data)[i] /= mySize;
      else
        for (size_t i = 0; i < count; ++i)
          static_cast<int32_t *>(data)[i] /= mySize;
      return;
    }
    default:
      abort("oasr-run: rank " + std::to_string(myRank) +
                ": error: allreduce of " + dtypeName(dtype) +
                " gradients is not supported by the MPI communicator",
            1);
    }
  }
  void allreduceAverageWire(float *data, size_t count, GradWire wire,
                            void *scratch) override {
    if (wire == GradWire::F32)
      return allreduceAverage(data, count, DType::F32);
    if (mySize == 1 || count == 0)
      return;
    // MPI has no bf16/f16: the 16-bit elements travel as MPI_UINT16_T and
    // a commutative user operation sums them (wireSum: f32 addition,
    // rounded back). f32 addition of two values is commutative bit for bit,
    // so every rank computes the same sums whichever side an algorithm puts
    // each operand on. Pieces of chunkBytes on the wire, each converted
    // while it is in cache; 1/P is applied in f32 after converting back, as
    // for f32 gradients.
    uint16_t *w = static_cast<uint16_t *>(scratch);
    const float scale = 1.0f / float(mySize);
    const size_t piece = std::max<size_t>(1, chunkBytes / sizeof(uint16_t));
    MPI_Op op = wireSumOp(wire);
    for (size_t done = 0; done < count;) {
      size_t n = std::min(piece, count - done);
      toWire(wire, data + done, w + done, n);
      allreduceChunks(w + done, n, MPI_UINT16_T, op);
      fromWire(wire, w + done, data + done, n, scale);
      done += n;
    }
  }
  // Reduce-scatter and all-gather as rings of point-to-point messages:
  // P - 1 steps, each rank sending one block to the next rank while
  // receiving one from the previous, so every link carries (P - 1) / P of
  // the buffer each way at once. Open MPI's non-blocking reduce-scatter
  // (libnbc, which the sleeping wait needs) reduces the whole buffer to one
  // rank and scatters it back, moving it one way at a time: on the emulated
  // cluster's 200 Mbit/s links a reduce-scatter took 2.5x the time of an
  // allreduce of the same buffer (docs/runtime.md).
  void reduceScatterAverage(const float *send, float *recv, size_t n) override {
    checkCount(n * size_t(mySize), "reduce-scatter");
    const size_t P = size_t(mySize), r = size_t(myRank);
    if (P == 1 || n == 0) {
      std::copy(send, send + n, recv);
      return;
    }
    // Step s sends the partial sum of block (r - 1 - s) mod P and receives
    // block (r - 2 - s) mod P, adding this rank's own; after P - 1 steps the
    // block received is r, summed over every rank (each block summed in
    // ring order on the rank that owns it, so every rank gets the same).
    std::vector<float> &out = ringOut, &in = ringIn;
    out.assign(send + ((r + P - 1) % P) * n, send + ((r + P - 1) % P) * n + n);
    in.resize(n);
    for (size_t s = 0; s + 1 < P; ++s) {
      exchange(out.data(), in.data(), n, kReduceScatterTag);
      const float *own = send + ((r + 2 * P - 2 - s) % P) * n;
      for (size_t i = 0; i < n; ++i)
        out[i] = in[i] + own[i];
    }
    const float scale = 1.0f / float(mySize);
    for (size_t i = 0; i < n; ++i)
      recv[i] = out[i] * scale;
  }
  void allGather(const float *send, float *recv, size_t n) override {
    checkCount(n * size_t(mySize), "all-gather");
    const size_t P = size_t(mySize), r = size_t(myRank);
    if (send != recv + r * n)
      std::copy(send, send + n, recv + r * n);
    // Step s passes block (r - s) mod P on and receives (r - 1 - s) mod P.
    for (size_t s = 0; s + 1 < P; ++s)
      exchange(recv + ((r + P - s) % P) * n,
               recv + ((r + 2 * P - 1 - s) % P) * n, n, kAllGatherTag);
  }
  void allreduceSum(double *data, size_t count) override {
    MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  void allreduceMax(double *data, size_t count) override {
    MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
  }
  void broadcast(void *data, size_t bytes, int root) override {
    char *p = static_cast<char *>(data);
    while (bytes) {
      size_t n = std::min<size_t>(bytes, size_t(1) << 30);
      MPI_Bcast(p, int(n), MPI_BYTE, root, MPI_COMM_WORLD);
      p += n;
      bytes -= n;
    }
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  std::string pointToPointUnavailable() const override {
    int level = 0;
    MPI_Query_thread(&level);
    return level == MPI_THREAD_MULTIPLE
               ? ""
               : "the MPI library does not provide MPI_THREAD_MULTIPLE, "
                 "which the parameter server's threads need";
  }
  void send(const void *data, size_t bytes, int dest, int tag) override {
    if (bytes > size_t(INT32_MAX))
      abort("oasr-run: rank " + std::to_string(myRank) + ": error: a " +
                std::to_string(bytes) + "-byte message exceeds MPI's int count",
            1);
    MPI_Send(data, int(bytes), MPI_BYTE, dest, tag, MPI_COMM_WORLD);
  }
  size_t receive(void *data, size_t bytes, int source, int tag) override {
    // MPI_Recv spins a core while it waits; the server threads on rank 0
    // wait most of the time beside that rank's compute, so poll instead,
    // backing off to 100 us between tests.
    MPI_Request request;
    MPI_Irecv(data, int(std::min<size_t>(bytes, INT32_MAX)), MPI_BYTE, source,
              tag, MPI_COMM_WORLD, &request);
    MPI_Status status;
    testUntilDone(request, &status, [] { return 100; });
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    return size_t(got);
  }
  void gatherBytes(const void *data, size_t bytes, int root,
                   std::vector<char> &out,
                   std::vector<size_t> &counts) override {
    int n = int(bytes);
    std::vector<int> sizes(mySize), displs(mySize);
    MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, MPI_COMM_WORLD);
    int total = 0;
    if (myRank == root)
      for (int r = 0; r < mySize; ++r) {
        displs[r] = total;
        total += sizes[r];
      }
    std::vector<char> recv(myRank == root ? size_t(total) : 0);
    MPI_Gatherv(data, n, MPI_BYTE, recv.data(), sizes.data(), displs.data(),
                MPI_BYTE, root, MPI_COMM_WORLD);
    if (myRank == root) {
      out = std::move(recv);
      counts.assign(sizes.begin(), sizes.end());
    }
  }
  [[noreturn]] void abort(const std::string &message, int code) override {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
    std::_Exit(code ? code : 1);
  }
  void finalize() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    for (MPI_Op &op : wireOps)
      if (op != MPI_OP_NULL)
        MPI_Op_free(&op);
    freeTiers();
    MPI_Finalize();
  }

  void setSleepingWait(bool on, int maxSleepUs) override {
    sleepingWait = on;
    sleepCapUs.store(std::max(1, maxSleepUs), std::memory_order_relaxed);
  }

  std::string setUpTiers(int perNode) override {
    freeTiers();
    MPI_Comm node = MPI_COMM_NULL;
    if (perNode > 0) {
      if (mySize % perNode != 0)
        return "--ranks-per-node=" + std::to_string(perNode) +
               " does not divide the job's " + std::to_string(mySize) +
               " ranks";
      MPI_Comm_split(MPI_COMM_WORLD, myRank / perNode, myRank, &node);
    } else {
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, myRank,
                          MPI_INFO_NULL, &node);
    }
    int local = 0, localRank = 0;
    MPI_Comm_size(node, &local);
    MPI_Comm_rank(node, &localRank);
    int sizes[2] = {local, -local};
    MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    std::string why;
    if (sizes[0] != -sizes[1])
      why = "the nodes hold " + std::to_string(-sizes[1]) + " to " +
            std::to_string(sizes[0]) + " ranks, not the same number";
    else if (local == 1)
      why = "every rank is alone on its node";
    else if (local == mySize)
      why = "every rank is on one node";
    if (!why.empty()) {
      MPI_Comm_free(&node);
      return why;
    }
    nodeComm = node;
    // One communicator between the nodes per local rank: the shares
    // travel between the nodes at once.
    MPI_Comm_split(MPI_COMM_WORLD, localRank, myRank, &crossComm);
    tierRanks = local;
    tierRank = localRank;
    return "";
  }
  int ranksPerNode() const override { return tierRanks; }

  void allreduceAverageTwoLevel(float *data, size_t count, GradWire wire,
                                void *scratch) override {
    if (!tierRanks)
      return allreduceAverageWire(data, count, wire, scratch);
    if (count == 0)
      return;
    checkCount(count, "two-level allreduce");
    // Share b of the buffer: count / L elements, the first count % L
    // shares one more.
    const int L = tierRanks;
    tierCounts.resize(L);
    tierDispls.resize(L);
    for (int b = 0, at = 0; b < L; ++b) {
      tierCounts[b] = int(count / L) + (size_t(b) < count % L);
      tierDispls[b] = at;
      at += tierCounts[b];
    }
    const int mine = tierCounts[tierRank];
    tierShare.resize(size_t(mine));
    const double bytes = double(count) * sizeof(float);
    const double t0 = MPI_Wtime();
    MPI_Request request;
    MPI_Ireduce_scatter(data, tierShare.data(), tierCounts.data(), MPI_FLOAT,
                        MPI_SUM, nodeComm, &request);
    complete(request, bytes);
    const double t1 = MPI_Wtime();
    const float scale = 1.0f / float(mySize);
    if (wire == GradWire::F32) {
      allreduceChunks(tierShare.data(), size_t(mine), MPI_FLOAT, MPI_SUM,
                      crossComm);
      for (float &x : tierShare)
        x *= scale;
    } else {
      uint16_t *w = static_cast<uint16_t *>(scratch);
      toWire(wire, tierShare.data(), w, size_t(mine));
      allreduceChunks(w, size_t(mine), MPI_UINT16_T, wireSumOp(wire),
                      crossComm);
      fromWire(wire, w, tierShare.data(), size_t(mine), scale);
    }
    const double t2 = MPI_Wtime();
    MPI_Iallgatherv(tierShare.data(), mine, MPI_FLOAT, data, tierCounts.data(),
                    tierDispls.data(), MPI_FLOAT, nodeComm, &request);
    complete(request, bytes);
    lastTiers = {(t1 - t0) + (MPI_Wtime() - t2), t2 - t1};
  }
  TierSeconds lastTwoLevelSeconds() const override { return lastTiers; }

private:
  /// Waits for `request`: sleeping between tests when the thread is to
  /// leave its CPU (setSleepingWait), else inside MPI.
  void complete(MPI_Request &request, double bytes) {
    if (!sleepingWait) {
      MPI_Wait(&request, MPI_STATUS_IGNORE);
      return;
    }
    testUntilDone(
        request, MPI_STATUS_IGNORE,
        [this, bytes] { return sleepCapFor(bytes); }, firstSleepUs());
  }
  void freeTiers() {
    for (MPI_Comm *c : {&nodeComm, &crossComm})
      if (*c != MPI_COMM_NULL)
        MPI_Comm_free(c);
    tierRanks = tierRank = 0;
  }
  /// Calls `done()` until it says so, sleeping between calls from
  /// `firstSleepUs` doubling to `maxSleepUs()`, read before each sleep (the
  /// engine shortens it while a thread waits on it).
  template <class Done, class Cap>
  static void sleepUntil(Done done, Cap maxSleepUs, int firstSleepUs = 1) {
    for (int sleepUs = std::max(1, firstSleepUs); !done();
         sleepUs = std::min(2 * sleepUs, maxSleepUs()))
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
  }
  /// Tests `request` until it completes, sleeping between tests.
  template <class Cap>
  static void testUntilDone(MPI_Request &request, MPI_Status *status,
                            Cap maxSleepUs, int firstSleepUs = 1) {
    sleepUntil(
        [&] {
          int done = 0;
          MPI_Test(&request, &done, status);
          return done != 0;
        },
        maxSleepUs, firstSleepUs);
  }

  /// The MPI_Op summing 16-bit `wire` elements (created on first use, on
  /// the communication thread; freed before MPI_Finalize).
  MPI_Op wireSumOp(GradWire wire) {
    MPI_Op &op = wireOps[wire == GradWire::BF16 ? 0 : 1];
    if (op == MPI_OP_NULL)
      MPI_Op_create(wire == GradWire::BF16 ? &sumBF16 : &sumF16,
                    /*commute=*/1, &op);
    return op;
  }
  static void sumBF16(void *in, void *inout, int *len, MPI_Datatype *) {
    wireSum(GradWire::BF16, static_cast<const uint16_t *>(in),
            static_cast<uint16_t *>(inout), size_t(*len));
  }
  static void sumF16(void *in, void *inout, int *len, MPI_Datatype *) {
    wireSum(GradWire::F16, static_cast<const uint16_t *>(in),
            static_cast<uint16_t *>(inout), size_t(*len));
  }

  /// MPI counts are ints; a reduce-scatter or all-gather is not split.
  void checkCount(size_t total, const char *what) {
    if (total >= (size_t(1) << 31))
      abort("oasr: rank " + std::to_string(myRank) + ": error: a " + what +
                " of " + std::to_string(total) +
                " elements exceeds MPI's int counts",
            1);
  }
  static constexpr int kReduceScatterTag = 7201, kAllGatherTag = 7202;
  /// One ring step: `n` floats to the next rank, `n` from the previous, as
  /// messages of at most the eager size, all posted at once. One large
  /// message each way goes by rendezvous: the receiver's go-ahead can queue
  /// behind the receiver's own outgoing data on the same connection, and the
  /// two directions then run one after the other (measured on the emulated
  /// cluster: reduce-scatters and all-gathers between 2 ranks took 2x the
  /// calibration's time, allreduces of the same bytes did not). Eager
  /// messages need no go-ahead, so both directions stream at once.
  void exchange(const float *out, float *in, size_t n, int tag) {
    int next = (myRank + 1) % mySize, prev = (myRank + mySize - 1) % mySize;
    const size_t piece = kEagerBytes / sizeof(float);
    const size_t messages = (n + piece - 1) / piece;
    requests.resize(2 * messages);
    for (size_t k = 0; k < messages; ++k) {
      size_t first = k * piece, count = std::min(piece, n - first);
      MPI_Irecv(in + first, int(count), MPI_FLOAT, prev, tag, MPI_COMM_WORLD,
                &requests[k]);
    }
    for (size_t k = 0; k < messages; ++k) {
      size_t first = k * piece, count = std::min(piece, n - first);
      MPI_Isend(out + first, int(count), MPI_FLOAT, next, tag, MPI_COMM_WORLD,
                &requests[messages + k]);
    }
    waitAll(requests, double(n) * sizeof(float));
  }
  /// Payload of a message Open MPI's TCP transport sends eagerly (its
  /// default eager limit is 64 KiB including the header).
  static constexpr size_t kEagerBytes = 65536 - 256;
  std::vector<MPI_Request> requests; ///< exchange's, reused
  /// reduceScatterAverage's partial sums and received block, reused.
  std::vector<float> ringOut, ringIn;
  /// Waits for every request of a ring step: sleeping between tests of them
  /// all when the thread is to leave its CPU, one back-off for the step (a
  /// back-off per message woke a realtime thread ten times per 64 KiB, and
  /// compute beside a reduce-scatter of ResNet-50's gradients ran 16 %
  /// slower), else inside MPI.
  void waitAll(std::vector<MPI_Request> &rs, double bytes) {
    if (!sleepingWait) {
      MPI_Waitall(int(rs.size()), rs.data(), MPI_STATUSES_IGNORE);
      return;
    }
    sleepUntil(
        [&] {
          int done = 0;
          MPI_Testall(int(rs.size()), rs.data(), &done, MPI_STATUSES_IGNORE);
          return done != 0;
        },
        [&] { return sleepCapFor(bytes); }, firstSleepUs());
  }
  int sleepCap() const { return sleepCapUs.load(std::memory_order_relaxed); }
  int firstSleepUs() const { return firstSleepFor(sleepCap()); }
  int sleepCapFor(double bytes) const {
    return callSleepCapUs(sleepCap(), bytes);
  }

  /// MPI counts are ints: split very large buffers.
  void allreduceChunks(void *data, size_t count, MPI_Datatype t,
                       MPI_Op op = MPI_SUM, MPI_Comm comm = MPI_COMM_WORLD) {
    int elemSize = 0;
    MPI_Type_size(t, &elemSize);
    char *p = static_cast<char *>(data);
    const size_t maxCount = size_t(1) << 30;
    while (count) {
      size_t n = std::min(count, maxCount);
      if (sleepingWait) {
        // 50 us (the default) is 12.5 KB at 2 Gbit/s: far less than the
        // socket buffers a TCP transfer keeps busy between tests.
        MPI_Request request;
        MPI_Iallreduce(MPI_IN_PLACE, p, int(n), t, op, comm, &request);
        const double bytes = double(n) * elemSize;
        testUntilDone(
            request, MPI_STATUS_IGNORE,
            [this, bytes] { return sleepCapFor(bytes); }, firstSleepUs());
      } else {
        MPI_Allreduce(MPI_IN_PLACE, p, int(n), t, op, comm);
      }
      p += n * size_t(elemSize);
      count -= n;
    }
  }

  int myRank = 0, mySize = 1;
  size_t chunkBytes;
  std::atomic<bool> sleepingWait{false};
  std::atomic<int> sleepCapUs{kSleepingWaitUs};   ///< the sleeping wait's cap
  MPI_Op wireOps[2] = {MPI_OP_NULL, MPI_OP_NULL}; ///< bf16, f16 sums
  /// The two-level allreduce's tiers (setUpTiers): this rank's node, and
  /// the ranks of the same local rank on every node; the node's size and
  /// this rank's place in it (0 without tiers); each share's count and
  /// offset, and this rank's share, reused.
  MPI_Comm nodeComm = MPI_COMM_NULL, crossComm = MPI_COMM_NULL;
  int tierRanks = 0, tierRank = 0;
  std::vector<int> tierCounts, tierDispls;
  std::vector<float> tierShare;
  TierSeconds lastTiers; ///< the last two-level allreduce's
};
} // namespace

std::unique_ptr<Communicator> createSelfCommunicator() {
  return std::make_unique<SelfCommunicator>();
}

static std::string gCollectiveNote;
const std::string &collectiveTuningNote() { return gCollectiveNote; }

std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv,
                                                    std::string &error) {
  std::string rulesPath;
  gCollectiveNote = tuneOpenMpiAcrossHosts(rulesPath);
  int provided = 0;
  int initialized = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (!rulesPath.empty()) // coll/tuned read it while MPI_Init opened it
    std::remove(rulesPath.c_str());
  if (initialized != MPI_SUCCESS) {
    error = "MPI_Init_thread failed";
    return nullptr;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    error = "the MPI library provides thread level " +
            std::to_string(provided) +
            ", the runtime needs at least MPI_THREAD_SERIALIZED";
    MPI_Finalize();
    return nullptr;
  }
  // Large allreduces run in pieces: Open MPI's shared-memory allreduce slows
  // from ~4.5 to ~1.8 GB/s above 32 MiB (bench/results/runtime-ranks*.md).
  size_t chunkBytes = size_t(16) << 20;
  if (const char *env = std::getenv("OASR_ALLREDUCE_CHUNK_BYTES")) {
    char *end = nullptr;
    unsigned long long v = std::strtoull(env, &end, 10);
    if (!*env || *end || v < 4 || env[0] == '-') {
      error = std::string("OASR_ALLREDUCE_CHUNK_BYTES='") + env +
              "': expected a number of bytes >= 4";
      MPI_Finalize();
      return nullptr;
    }
    chunkBytes = size_t(v);
  }
  return std::make_unique<MpiCommunicator>(chunkBytes);
}

//===----------------------------------------------------------------------===//
// CommEngine
//===----------------------------------------------------------------------===//

static int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

CommEngine::CommEngine(Communicator &comm, Priority priority)
    : comm(comm), priority(priority) {
  setPollCapUs(pollCapUs(priority, 0));
  epochNs = steadyNs();
  recorded.reserve(4096);
  thread = std::thread([this] { loop(); });
  if (priority == Priority::Idle) {
    // Best effort: without SCHED_IDLE the thread keeps its normal priority.
    // Leaving SCHED_IDLE needs CAP_SYS_NICE or RLIMIT_NICE 20; probe it now
    // so `wait` knows whether it can raise the thread.
    raisable = setIdle(true) && setIdle(false) && setIdle(true);
  }
  if (priority == Priority::Realtime) {
    // Callers check realtimeIsPermitted first; refused, the thread stays an
    // ordinary one that sleeps between tests (Sleep).
    sched_param param{};
    param.sched_priority = sched_get_priority_min(SCHED_FIFO);
    pthread_setschedparam(thread.native_handle(), SCHED_FIFO, &param);
  }
}

int Communicator::callSleepCapUs(int capUs, double bytes) {
  if (capUs <= kSleepingWaitUs)
    return capUs;
  return std::max(kSleepingWaitUs,
                  int(capUs * std::clamp(bytes / double(1 << 20), 0.0, 1.0)));
}

int Communicator::firstSleepFor(int capUs) {
  return capUs > kSleepingWaitUs ? std::min(capUs, kFirstSleepBesideComputeUs)
                                 : 1;
}

int CommEngine::pollCapUs(Priority priority, double betaSPerByte) {
  if (priority != Priority::Realtime)
    return Communicator::kSleepingWaitUs;
  if (!(betaSPerByte > 0) || !std::isfinite(betaSPerByte))
    return 1000;
  const double us = 131072.0 * betaSPerByte * 1e6;
  return int(std::clamp(us, double(Communicator::kSleepingWaitUs), 5000.0));
}

void CommEngine::setPollCapUs(int us) {
  std::lock_guard<std::mutex> lock(mu);
  pollCap = us;
  if (waiters == 0 || priority != Priority::Realtime)
    comm.setSleepingWait(
        priority == Priority::Sleep || priority == Priority::Realtime, us);
}

bool CommEngine::realtimeIsPermitted() {
  bool ok = false;
  std::thread probe([&] {
    sched_param param{};
    param.sched_priority = sched_get_priority_min(SCHED_FIFO);
    ok = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
  });
  probe.join();
  return ok;
}

bool CommEngine::idleIsRaisable() {
  bool ok = false;
  std::thread probe([&] {
    sched_param param{};
    param.sched_priority = 0;
    ok = pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0 &&
         pthread_setschedparam(pthread_self(), SCHED_OTHER, &param) == 0;
  });
  probe.join();
  return ok;
}

bool CommEngine::setIdle(bool idle) {
  sched_param param{};
  param.sched_priority = 0;
  return pthread_setschedparam(thread.native_handle(),
                               idle ? SCHED_IDLE : SCHED_OTHER, &param) == 0;
}

CommEngine::~CommEngine() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  queued.notify_all();
  watchdogWake.notify_all();
  thread.join();
  if (watchdog.joinable())
    watchdog.join();
}

void CommEngine::setWatchdog(double seconds,
                             std::function<void(const Stall &)> stalled) {
  if (!(seconds > 0) || watchdog.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mu);
    stallS = seconds;
    onStall = std::move(stalled);
  }
  watchdog = std::thread([this] { watch(); });
}

void CommEngine::watch() {
  const auto tick = std::chrono::milliseconds(
      std::clamp(int64_t(stallS * 250), int64_t(50), int64_t(1000)));
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    watchdogWake.wait_for(lock, tick);
    if (stopping || waiters == 0)
      continue;
    int64_t since = std::max(waitSinceNs, lastDoneNs);
    double idle = double(steadyNs() - since) * 1e-9;
    if (idle < stallS)
      continue;
    Stall stall;
    stall.seconds = idle;
    stall.running = jobRunning;
    stall.tag = jobRunning ? runningTag : queue.empty() ? 0 : queue.front().tag;
    std::function<void(const Stall &)> report = std::move(onStall);
    lock.unlock();
    if (report)
      report(stall); // ends the process; if it returns, stop watching
    return;
  }
}

CommEngine::JobId CommEngine::enqueue(std::function<void(Communicator &)> fn,
                                      uint32_t tag, bool record) {
  JobId id;
  {
    std::lock_guard<std::mutex> lock(mu);
    id = nextId++;
    queue.push_back(Job{id, std::move(fn), tag, record, steadyNs()});
  }
  queued.notify_one();
  return id;
}

void CommEngine::wait(JobId id) {
  std::unique_lock<std::mutex> lock(mu);
  if (doneUpTo >= id)
    return;
  // A thread that waits leaves its CPU to the job: an idle-priority
  // communication thread runs at normal priority until no one waits, or
  // other processes on a busy host would starve it (SCHED_IDLE yields to all).
  // The CPU the waiter leaves lets a realtime thread test as often as a
  // sleeping one, at no cost to compute.
  const bool realtime = priority == Priority::Realtime;
  if (waiters++ == 0) {
    waitSinceNs = steadyNs();
    if (raisable)
      setIdle(false);
    if (realtime)
      comm.setSleepingWait(true, Communicator::kSleepingWaitUs);
  }
  finished.wait(lock, [&] { return doneUpTo >= id; });
  if (--waiters == 0) {
    if (raisable)
      setIdle(true);
    if (realtime)
      comm.setSleepingWait(true, pollCap);
  }
}

void CommEngine::drain() {
  JobId last;
  {
    std::lock_guard<std::mutex> lock(mu);
    last = nextId - 1;
  }
  wait(last);
}

std::string CommEngine::pinToCpu(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE)
    return "CPU " + std::to_string(cpu) + " is out of range";
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (int err =
          pthread_setaffinity_np(thread.native_handle(), sizeof(set), &set))
    return "cannot pin the communication thread to CPU " + std::to_string(cpu) +
           ": " + std::strerror(err);
  return "";
}

int64_t CommEngine::resetEpoch() {
  std::lock_guard<std::mutex> lock(mu);
  epochNs = steadyNs();
  lastEndUs = 0;
  return epochNs;
}

double CommEngine::nowUs() const { return double(steadyNs() - epochNs) * 1e-3; }

std::vector<CommEvent> CommEngine::eventsSince(size_t from) {
  std::lock_guard<std::mutex> lock(mu);
  if (from >= recorded.size())
    return {};
  return std::vector<CommEvent>(recorded.begin() + long(from), recorded.end());
}

/// The calling thread's run-queue delay so far (nanoseconds runnable but not
/// running), the second field of /proc/thread-self/schedstat; -1 when the
/// kernel does not report it. `fd` is that file, opened by the thread.
static int64_t runQueueNs(int fd) {
  if (fd < 0)
    return -1;
  char buf[96];
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0)
    return -1;
  buf[n] = 0;
  unsigned long long onCpu = 0, waiting = 0;
  if (std::sscanf(buf, "%llu %llu", &onCpu, &waiting) != 2)
    return -1;
  return int64_t(waiting);
}

void CommEngine::loop() {
  // Each recorded job is split into the time the thread ran (communicated)
  // and the time it was runnable but had no CPU: the run-queue delay the
  // scheduler accounts per thread, read before and after the call.
  int schedstat = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  cpuWaitMeasured = runQueueNs(schedstat) >= 0;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu);
      queued.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        break;
      job = std::move(queue.front());
      queue.pop_front();
      jobRunning = true;
      runningTag = job.tag;
    }
    double start = job.record ? nowUs() : 0;
    int64_t waited0 = job.record ? runQueueNs(schedstat) : -1;
    job.fn(comm);
    double end = nowUs();
    int64_t waited1 = job.record ? runQueueNs(schedstat) : -1;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (job.record) {
        CommEvent e;
        e.job = job.tag;
        e.startUs = start;
        e.endUs = end;
        e.enqueuedUs = double(job.enqueuedNs - epochNs) * 1e-3;
        e.cpuWaitUs =
            waited0 >= 0 && waited1 >= waited0
                ? std::min(end - start, double(waited1 - waited0) * 1e-3)
                : 0;
        e.dispatchUs = std::max(0.0, start - std::max(e.enqueuedUs, lastEndUs));
        e.queuedIdle = lastEndUs <= e.enqueuedUs;
        recorded.push_back(e);
      }
      lastEndUs = end;
      doneUpTo = job.id;
      jobRunning = false;
      lastDoneNs = steadyNs();
    }
    finished.notify_all();
  }
  if (schedstat >= 0)
    ::close(schedstat);
}

//===----------------------------------------------------------------------===//
// The calibration's priority
//===----------------------------------------------------------------------===//

std::vector<CommEngine::Priority>
calibrationCandidates(std::optional<CommEngine::Priority> given,
                      bool idleRaisable, bool realtimePermitted) {
  using P = CommEngine::Priority;
  if (given)
    return {*given};
  std::vector<P> c;
  if (idleRaisable)
    c.push_back(P::Idle);
  c.push_back(P::Sleep);
  c.push_back(P::Normal);
  if (realtimePermitted)
    c.push_back(P::Realtime);
  return c;
}

bool calibrationComparable(const std::vector<double> &aloneS) {
  return !aloneS.empty() && std::all_of(aloneS.begin(), aloneS.end(),
                                        [](double s) { return s >= 1e-3; });
}

size_t
chooseCalibratedPriority(const std::vector<CommEngine::Priority> &candidates,
                         const std::vector<double> &scores,
                         const std::vector<double> &aloneS) {
  using P = CommEngine::Priority;
  const bool comparable = scores.size() == candidates.size() &&
                          aloneS.size() == candidates.size() &&
                          calibrationComparable(aloneS);
  if (!comparable) {
    for (P want : {P::Idle, P::Normal})
      for (size_t i = 0; i < candidates.size(); ++i)
        if (candidates[i] == want)
          return i;
    return 0;
  }
  size_t best = 0;
  for (size_t i = 1; i < scores.size(); ++i)
    if (scores[i] > scores[best] + 0.05)
      best = i;
  return best;
}

} // namespace oasr::rt
