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
// the group's allreduce_start (DeviceCommunicator.h).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "DeviceCommunicator.h"
#include "oasr/Runtime/Cuda.h"

#include <nccl.h>

#include <cstdlib>

namespace oasr::rt {
namespace {

class NcclCommunicator final : public cuda::DeviceCommunicator {
public:
  NcclCommunicator(std::unique_ptr<Communicator> mpi, ncclComm_t comm,
                   int device, cudaStream_t computeStream)
      : DeviceCommunicator(std::move(mpi), device, computeStream), comm(comm) {
    cuda::check(cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking),
                "create the NCCL stream");
  }
  ~NcclCommunicator() override {
    if (comm)
      ncclCommDestroy(comm);
    cudaStreamDestroy(commStream);
  }

  const char *name() const override { return "nccl"; }

  void allreduceAverage(void *data, size_t count, DType dtype) override {
    // Host memory (PowerSGD's factors) is MPI's.
    if (!onDevice(data))
      return mpi->allreduceAverage(data, count, dtype);
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
    if (!onDevice(data))
      return mpi->allreduceAverageWire(data, count, wire, scratch);
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
  void finalize() override {
    if (comm) {
      ncclCommDestroy(comm);
      comm = nullptr;
    }
    DeviceCommunicator::finalize();
  }

private:
  /// The NCCL stream waits for the compute stream's work so far.
  void afterCompute() { marks.waitAll(commStream); }
  /// The NCCL stream waits for the event of the oldest markComputeReady not
  /// yet consumed (or, with none, for the compute stream's work so far).
  void afterMarkedCompute() { marks.waitOldest(commStream); }
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

  ncclComm_t comm = nullptr;
  cudaStream_t commStream = nullptr;
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
