//===- DeviceCommunicator.h - Communicators of GPU memory -------*- C++ -*-===//
//
// Private to runtime/cuda: what the communicators of device memory (NCCL,
// MPI staged through the host) share. They wrap the MPI communicator, which
// carries everything in host memory (metrics, barriers, gathers, abort).
// And ComputeMarks: the events by which they read a gradient group only
// after the kernels that wrote it. The compute thread records one event per
// group on the compute stream at the group's allreduce_start
// (Communicator::markComputeReady), with no host synchronization; the
// communication thread makes its own stream wait on the oldest event not yet
// consumed when it gets to that group's collective. Recorded later, on the
// communication thread, an event would also cover the backward kernels enqueued
// since, and the collective would wait for them. Events come from a small pool
// and are reused once a stream has taken its dependency.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CUDA_DEVICECOMMUNICATOR_H
#define OASR_RUNTIME_CUDA_DEVICECOMMUNICATOR_H

#include "oasr/Runtime/Communicator.h"

#include <cuda_runtime_api.h>

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace oasr::rt::cuda {

class ComputeMarks {
public:
  ComputeMarks(int device, cudaStream_t computeStream);
  ~ComputeMarks();
  ComputeMarks(const ComputeMarks &) = delete;
  ComputeMarks &operator=(const ComputeMarks &) = delete;

  /// On the compute thread: records an event after the work issued so far
  /// on the compute stream.
  void mark();
  /// On the communication thread: `stream` waits for the oldest mark not
  /// yet consumed, or, with none, for the compute stream's work so far.
  void waitOldest(cudaStream_t stream);
  /// `stream` waits for the compute stream's work so far (and makes this
  /// thread's device the communicator's).
  void waitAll(cudaStream_t stream);

private:
  int device = 0;
  cudaStream_t computeStream = nullptr;
  cudaEvent_t ready = nullptr; ///< waitAll's
  std::mutex mu;
  std::deque<cudaEvent_t> marked;      ///< recorded, not yet waited on
  std::vector<cudaEvent_t> freeEvents; ///< reusable
};

/// A communicator of device memory over the MPI communicator `mpi`, which
/// it forwards host-memory calls to, ordered after the compute stream by
/// `marks` (ordersAfterCompute).
class DeviceCommunicator : public Communicator {
public:
  DeviceCommunicator(std::unique_ptr<Communicator> mpi, int device,
                     cudaStream_t computeStream)
      : mpi(std::move(mpi)), marks(device, computeStream), device(device) {}

  int rank() const override { return mpi->rank(); }
  int size() const override { return mpi->size(); }
  std::string host() const override { return mpi->host(); }
  bool ordersAfterCompute() const override { return true; }
  void markComputeReady() override { marks.mark(); }
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
  [[noreturn]] void abort(const std::string &message, int code) override;
  void finalize() override { mpi->finalize(); }
  /// PowerSGD's groups: copied on a stream of their own, the copy to the
  /// host after the group's compute mark.
  bool copiesDeviceGradients() const override { return true; }
  void copyGradientsToHost(void *host, const void *device,
                           size_t bytes) override;
  void copyGradientsToDevice(void *device, const void *host,
                             size_t bytes) override;
  ~DeviceCommunicator() override;

protected:
  /// Whether `p` is device (or managed) memory; host memory, pinned or
  /// not, is not. Host memory given to a collective goes to `mpi`.
  static bool onDevice(const void *p);

  std::unique_ptr<Communicator> mpi;
  ComputeMarks marks;
  int device = 0; ///< the CUDA device of this rank

private:
  void copyAndWait(void *to, const void *from, size_t bytes,
                   cudaMemcpyKind kind, const char *what);
  cudaStream_t copyStream = nullptr; ///< created at the first copy
};

} // namespace oasr::rt::cuda

#endif // OASR_RUNTIME_CUDA_DEVICECOMMUNICATOR_H
