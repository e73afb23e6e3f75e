//===- NcclCommunicator.cpp - Gradient averaging with NCCL ----------------===//
//
// The "nccl" communicator: allreduceAverage and broadcast on device memory
// with NCCL, on a stream of their own; everything on host memory (metrics,
// barriers, gathers, abort) through the MPI communicator it wraps. The
// CommEngine calls it from its communication thread; each collective first
// makes the NCCL stream wait on an event recorded on the compute stream, so
// it reads gradients only after the kernels that wrote them, and returns
// once NCCL is done, so the optimizer kernels the compute thread issues
// after its CommEngine::wait read the averaged values. The event of a
// gradient group is recorded by markComputeReady on the compute thread at
// the group's allreduce_start, with no host synchronization: recorded later,
// on the communication thread, it would also cover the backward kernels
// enqueued since, and the allreduce would wait for them.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "oasr/Runtime/Cuda.h"

#include <nccl.h>

#include <cstdlib>
#include <deque>
#include <mutex>

namespace oasr::rt {
namespace {

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(std::unique_ptr<Communicator> mpi, ncclComm_t comm,
                   int device, cudaStream_t computeStream)
      : mpi(std::move(mpi)), comm(comm), device(device),
        computeStream(computeStream) {
    cuda::check(cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking),
                "create the NCCL stream");
    cuda::check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
                "create the gradient event");
  }
  ~NcclCommunicator() override {
    if (comm)
      ncclCommDestroy(comm);
    cudaEventDestroy(ready);
    for (cudaEvent_t e : freeEvents)
      cudaEventDestroy(e);
    for (cudaEvent_t e : marked)
      cudaEventDestroy(e);
    cudaStreamDestroy(commStream);
  }

  bool ordersAfterCompute() const override { return true; }
  void markComputeReady() override {
    std::lock_guard<std::mutex> lock(eventsMutex);
    cudaEvent_t e;
    if (freeEvents.empty()) {
      cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                  "create a gradient-group event");
    } else {
      e = freeEvents.back();
      freeEvents.pop_back();
    }
    cuda::check(cudaEventRecord(e, computeStream), "cudaEventRecord");
    marked.push_back(e);
  }

  const char *name() const override { return "nccl"; }
  int rank() const override { return mpi->rank(); }
  int size() const override { return mpi->size(); }
  std::string host() const override { return mpi->host(); }

  void allreduceAverage(void *data, size_t count, DType dtype) override {
    ncclDataType_t type = ncclFloat32;
    switch (dtype) {
    case DType::F32:
      type = ncclFloat32;
      break;
    case DType::F16:
      type = ncclFloat16;
      break;
    case DType::BF16:
      type = ncclBfloat16;
      break;
    case DType::I64:
      type = ncclInt64;
      break;
    case DType::I32:
      type = ncclInt32;
      break;
    case DType::Bool:
      fail("allreduceAverage of booleans", ncclInvalidArgument);
    }
    afterMarkedCompute();
    // ncclAvg (NCCL >= 2.10): the sum over ranks divided by their number.
    done(ncclAllReduce(data, data, count, type, ncclAvg, comm, commStream),
         "ncclAllReduce");
  }
  void allreduceAverageWire(float *data, size_t count, GradWire wire,
                            void *scratch) override {
    if (wire == GradWire::F32)
      return allreduceAverage(data, count, DType::F32);
    // On the NCCL stream, after the group's kernels: round into the
    // executor's 16-bit copy, sum it natively in NCCL's bf16/f16 (each step
    // adds in f32 and rounds back, as the MPI communicator's operation),
    // then back to f32 times 1/P. The sum, not the average, travels, so the
    // f32 scaling matches the f32 path and small gradients do not lose f16
    // range to a division first.
    const bool bf16 = wire == GradWire::BF16;
    afterMarkedCompute();
    cuda::launchToWire(bf16, data, scratch, int64_t(count), commStream);
    ncclResult_t r = ncclAllReduce(scratch, scratch, count,
                                   bf16 ? ncclBfloat16 : ncclFloat16, ncclSum,
                                   comm, commStream);
    if (r != ncclSuccess)
      fail("ncclAllReduce", r);
    cuda::launchFromWire(bf16, scratch, data, int64_t(count),
                         1.0f / float(size()), commStream);
    done(ncclSuccess, "ncclAllReduce");
  }
  void reduceScatterAverage(const float *send, float *recv, size_t n) override {
    // A reduce-scatter of gradients pairs with a markComputeReady, as an
    // allreduce does; the all-gather after it reads the shard on this
    // stream and pairs with none.
    afterMarkedCompute();
    done(ncclReduceScatter(send, recv, n, ncclFloat32, ncclAvg, comm,
                           commStream),
         "ncclReduceScatter");
  }
  void allGather(const float *send, float *recv, size_t n) override {
    done(ncclAllGather(send, recv, n, ncclFloat32, comm, commStream),
         "ncclAllGather");
  }
  void broadcast(void *data, size_t bytes, int root) override {
    afterCompute();
    done(ncclBroadcast(data, data, bytes, ncclUint8, root, comm, commStream),
         "ncclBroadcast");
  }
  void allreduceSum(double *data, size_t count) override {
    mpi->allreduceSum(data, count);
  }
  void allreduceMax(double *data, size_t count) override {
    mpi->allreduceMax(data, count);
  }
  void barrier() override { mpi->barrier(); }
  void gatherBytes(const void *data, size_t bytes, int root,
                   std::vector<char> &out,
                   std::vector<size_t> &counts) override {
    mpi->gatherBytes(data, bytes, root, out, counts);
  }
  [[noreturn]] void abort(const std::string &message, int code) override {
    mpi->abort(message, code);
    std::abort(); // not reached: a virtual call does not carry [[noreturn]]
  }
  void finalize() override {
    if (comm) {
      ncclCommDestroy(comm);
      comm = nullptr;
    }
    mpi->finalize();
  }

private:
  /// The NCCL stream waits for the compute stream's work so far.
  void afterCompute() {
    cuda::check(cudaSetDevice(device), "cudaSetDevice");
    cuda::check(cudaEventRecord(ready, computeStream), "cudaEventRecord");
    cuda::check(cudaStreamWaitEvent(commStream, ready, 0),
                "cudaStreamWaitEvent");
  }
  /// The NCCL stream waits for the event of the oldest markComputeReady not
  /// yet consumed (or, with none, for the compute stream's work so far).
  void afterMarkedCompute() {
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lock(eventsMutex);
      if (!marked.empty()) {
        e = marked.front();
        marked.pop_front();
      }
    }
    if (!e)
      return afterCompute();
    cuda::check(cudaSetDevice(device), "cudaSetDevice");
    cuda::check(cudaStreamWaitEvent(commStream, e, 0), "cudaStreamWaitEvent");
    // Safe to re-record once the stream has taken its dependency.
    std::lock_guard<std::mutex> lock(eventsMutex);
    freeEvents.push_back(e);
  }
  /// Checks the enqueue and waits for the collective.
  void done(ncclResult_t r, const char *what) {
    if (r != ncclSuccess)
      fail(what, r);
    cudaError_t s = cudaStreamSynchronize(commStream);
    if (s != cudaSuccess)
      mpi->abort("oasr: rank " + std::to_string(rank()) + " (host " + host() +
                     "): " + what + ": " + cudaGetErrorString(s),
                 1);
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
        async != ncclSuccess)
      fail(what, async);
  }
  [[noreturn]] void fail(const char *what, ncclResult_t r) {
    mpi->abort("oasr: rank " + std::to_string(rank()) + " (host " + host() +
                   "): " + what + " failed: " + ncclGetErrorString(r),
               1);
    std::abort(); // not reached
  }

  std::unique_ptr<Communicator> mpi;
  std::mutex eventsMutex;
  std::deque<cudaEvent_t> marked;      ///< recorded, not yet waited on
  std::vector<cudaEvent_t> freeEvents; ///< reusable
  ncclComm_t comm = nullptr;
  int device = 0;
  cudaStream_t computeStream = nullptr, commStream = nullptr;
  cudaEvent_t ready = nullptr;
};

} // namespace

std::unique_ptr<Communicator>
createNcclCommunicator(std::unique_ptr<Communicator> &mpi, KernelBackend &cuda,
                       std::string &error) {
  int device = 0;
  if (cudaError_t s = cudaGetDevice(&device); s != cudaSuccess) {
    error = std::string("no current CUDA device: ") + cudaGetErrorString(s);
    return nullptr;
  }
  // Rank 0 makes the id; every rank learns it, and whether it exists, over
  // MPI (a rank that fails alone would leave the others waiting in NCCL).
  struct {
    int ok;
    ncclUniqueId id;
  } boot{};
  ncclResult_t r = ncclSuccess;
  if (mpi->rank() == 0) {
    r = ncclGetUniqueId(&boot.id);
    boot.ok = r == ncclSuccess;
  }
  mpi->broadcast(&boot, sizeof boot, 0);
  if (!boot.ok) {
    error = std::string("ncclGetUniqueId failed on rank 0") +
            (mpi->rank() == 0 ? std::string(": ") + ncclGetErrorString(r) : "");
    return nullptr;
  }
  ncclComm_t comm = nullptr;
  r = ncclCommInitRank(&comm, mpi->size(), boot.id, mpi->rank());
  if (r != ncclSuccess) {
    error = std::string("ncclCommInitRank failed: ") + ncclGetErrorString(r);
    return nullptr;
  }
  return std::make_unique<NcclCommunicator>(std::move(mpi), comm, device,
                                            cuda::computeStream(cuda));
}

} // namespace oasr::rt
