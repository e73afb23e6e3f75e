//===- StagedCommunicator.cpp - MPI averaging of GPU memory via the host --===//
//
// The "mpi-staged" communicator of --device=cuda --comm-backend=mpi on
// several ranks: gradients in device memory averaged by the MPI
// communicator it wraps, through pinned host memory. It is what a cluster
// without NCCL or GPUDirect uses, and it lets ranks share a GPU, which NCCL
// refuses. Each fused group runs the chunk pipeline of StagedAllreduce.h on
// the communication thread: a stream of its own copies the group to host
// slots chunk by chunk (after the compute stream's event for the group,
// DeviceCommunicator.h), MPI averages each chunk as soon as it has landed,
// exactly as the MPI communicator averages host memory (the same call: sums in
// MPI's order, then x 1/P in f32; a 16-bit wire rounds on the host), and a
// second stream copies it back while the next chunk is averaged. The call
// returns once the last chunk is back, so the optimizer kernels the compute
// thread issues after its CommEngine::wait read the averages. Host memory
// (metrics, a few exchanges) goes to MPI directly.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "DeviceCommunicator.h"
#include "oasr/Runtime/Cuda.h"
#include "oasr/Runtime/StagedAllreduce.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace oasr::rt {
namespace {

/// Host slots of pinned memory and the two copy streams.
class CudaStaging final : public StagingCopies {
public:
  explicit CudaStaging(size_t chunkBytes) : chunk(chunkBytes) {
    cuda::check(cudaStreamCreateWithFlags(&inStream, cudaStreamNonBlocking),
                "create the staging stream (device to host)");
    cuda::check(cudaStreamCreateWithFlags(&outStream, cudaStreamNonBlocking),
                "create the staging stream (host to device)");
    for (size_t s = 0; s < kSlots; ++s) {
      cuda::check(cudaEventCreateWithFlags(&landed[s], cudaEventDisableTiming),
                  "create a staging event");
      cuda::check(cudaEventCreateWithFlags(&read[s], cudaEventDisableTiming),
                  "create a staging event");
    }
    cuda::check(cudaEventCreateWithFlags(&outDone, cudaEventDisableTiming),
                "create a staging event");
  }
  ~CudaStaging() override {
    if (host)
      cudaFreeHost(host);
    for (size_t s = 0; s < kSlots; ++s) {
      cudaEventDestroy(landed[s]);
      cudaEventDestroy(read[s]);
    }
    cudaEventDestroy(outDone);
    cudaStreamDestroy(inStream);
    cudaStreamDestroy(outStream);
  }
  /// Pins the slots; false with `error` set when the host refuses.
  bool allocate(std::string &error) {
    if (cudaError_t s = cudaHostAlloc(&host, kSlots * chunk, 0);
        s != cudaSuccess) {
      host = nullptr;
      error = "cannot pin " + std::to_string(kSlots * chunk) +
              " bytes of host memory for the staged allreduce: " +
              cudaGetErrorString(s);
      return false;
    }
    return true;
  }

  /// The device buffer the next pipeline copies from and to.
  void setBuffer(void *data) { buffer = static_cast<char *>(data); }
  cudaStream_t copyInStream() const { return inStream; }
  void setSleepingWait(bool on, int capUs) {
    sleeping.store(on, std::memory_order_relaxed);
    sleepCapUs.store(std::max(1, capUs), std::memory_order_relaxed);
  }

  size_t slotCount() const override { return kSlots; }
  size_t slotBytes() const override { return chunk; }
  void *slot(size_t s) override {
    return static_cast<char *>(host) + s * chunk;
  }
  void copyIn(size_t s, size_t offset, size_t bytes) override {
    // Not before the slot's last copy out has read it (an event never
    // recorded is no dependency).
    cuda::check(cudaStreamWaitEvent(inStream, read[s], 0),
                "cudaStreamWaitEvent");
    cuda::check(cudaMemcpyAsync(slot(s), buffer + offset, bytes,
                                cudaMemcpyDeviceToHost, inStream),
                "stage gradients to the host");
    cuda::check(cudaEventRecord(landed[s], inStream), "cudaEventRecord");
  }
  void waitIn(size_t s) override { wait(landed[s]); }
  void copyOut(size_t s, size_t offset, size_t bytes) override {
    cuda::check(cudaMemcpyAsync(buffer + offset, slot(s), bytes,
                                cudaMemcpyHostToDevice, outStream),
                "copy averaged gradients to the device");
    cuda::check(cudaEventRecord(read[s], outStream), "cudaEventRecord");
  }
  void waitOut() override {
    cuda::check(cudaEventRecord(outDone, outStream), "cudaEventRecord");
    wait(outDone);
  }

private:
  /// Blocks until `e` has happened: inside CUDA, or under the sleeping wait
  /// (CommEngine::Priority::Sleep) by tests backing off from the first
  /// sleep to the cap, as the MPI communicator waits on the network.
  void wait(cudaEvent_t e) {
    if (!sleeping.load(std::memory_order_relaxed)) {
      cuda::check(cudaEventSynchronize(e), "staged allreduce");
      return;
    }
    const int cap = sleepCapUs.load(std::memory_order_relaxed);
    for (int us = Communicator::firstSleepFor(cap);;
         us = std::min(2 * us, cap)) {
      cudaError_t s = cudaEventQuery(e);
      if (s == cudaSuccess)
        return;
      if (s != cudaErrorNotReady)
        cuda::check(s, "staged allreduce");
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
  }

  /// Slots: one being averaged, the next ones landing meanwhile.
  static constexpr size_t kSlots = 4;
  size_t chunk = 0;
  void *host = nullptr;
  char *buffer = nullptr;
  cudaStream_t inStream = nullptr, outStream = nullptr;
  cudaEvent_t landed[kSlots] = {}, read[kSlots] = {};
  cudaEvent_t outDone = nullptr;
  std::atomic<bool> sleeping{false};
  std::atomic<int> sleepCapUs{Communicator::kSleepingWaitUs};
};

class StagedCommunicator final : public cuda::DeviceCommunicator {
public:
  StagedCommunicator(std::unique_ptr<Communicator> mpi,
                     std::unique_ptr<CudaStaging> staging, int device,
                     cudaStream_t computeStream)
      : DeviceCommunicator(std::move(mpi), device, computeStream),
        staging(std::move(staging)) {}

  const char *name() const override { return "mpi-staged"; }

  void allreduceAverage(void *data, size_t count, DType dtype) override {
    if (!onDevice(data))
      return mpi->allreduceAverage(data, count, dtype);
    if (dtype != DType::F32 && dtype != DType::I64 && dtype != DType::I32)
      return mpi->abort("oasr-run: rank " + std::to_string(rank()) +
                            ": error: allreduce of " + dtypeName(dtype) +
                            " gradients is not supported by the " + name() +
                            " communicator",
                        1);
    marks.waitOldest(staging->copyInStream());
    stage(data, count, dtypeSize(dtype), [&](void *chunk, size_t n) {
      mpi->allreduceAverage(chunk, n, dtype);
    });
  }
  void allreduceAverageWire(float *data, size_t count, GradWire wire,
                            void *scratch) override {
    if (!onDevice(data))
      return mpi->allreduceAverageWire(data, count, wire, scratch);
    if (wire == GradWire::F32)
      return allreduceAverage(data, count, DType::F32);
    // The f32 chunk crosses to the host and MPI's 16-bit average runs on
    // it there (rounded to the wire, summed in 16 bits, back to f32 x 1/P):
    // the CPU's results bit for bit; the device's 16-bit scratch is unused.
    marks.waitOldest(staging->copyInStream());
    wireScratch.resize(staging->slotBytes() / sizeof(float));
    stage(data, count, sizeof(float), [&](void *chunk, size_t n) {
      mpi->allreduceAverageWire(static_cast<float *>(chunk), n, wire,
                                wireScratch.data());
    });
  }
  void broadcast(void *data, size_t bytes, int root) override {
    if (!onDevice(data))
      return mpi->broadcast(data, bytes, root);
    marks.waitAll(staging->copyInStream());
    stage(data, bytes, 1,
          [&](void *chunk, size_t n) { mpi->broadcast(chunk, n, root); });
  }
  void setSleepingWait(bool on, int maxSleepUs) override {
    mpi->setSleepingWait(on, maxSleepUs);
    staging->setSleepingWait(on, maxSleepUs);
  }

private:
  void stage(void *data, size_t count, size_t elemBytes,
             const std::function<void(void *, size_t)> &reduce) {
    cuda::check(cudaSetDevice(device), "cudaSetDevice");
    staging->setBuffer(data);
    stagedAllreduce(*staging, count, elemBytes, reduce);
  }

  std::unique_ptr<CudaStaging> staging;
  std::vector<uint16_t> wireScratch; ///< a chunk's 16-bit copy, reused
};

} // namespace

std::unique_ptr<Communicator>
createStagedCommunicator(std::unique_ptr<Communicator> &mpi,
                         KernelBackend &cuda, size_t chunkBytes,
                         std::string &error) {
  int device = 0;
  if (cudaError_t s = cudaGetDevice(&device); s != cudaSuccess) {
    error = std::string("no current CUDA device: ") + cudaGetErrorString(s);
    return nullptr;
  }
  auto staging = std::make_unique<CudaStaging>(chunkBytes);
  if (!staging->allocate(error))
    return nullptr;
  return std::make_unique<StagedCommunicator>(
      std::move(mpi), std::move(staging), device, cuda::computeStream(cuda));
}

} // namespace oasr::rt
