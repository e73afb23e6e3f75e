//===- DeviceCommunicator.cpp - Communicators of GPU memory ---------------===//

#include "DeviceCommunicator.h"
#include "CudaKernels.h"

#include <cstdlib>

namespace oasr::rt::cuda {

void DeviceCommunicator::abort(const std::string &message, int code) {
  mpi->abort(message, code);
  std::abort(); // not reached: a virtual call does not carry [[noreturn]]
}

DeviceCommunicator::~DeviceCommunicator() {
  if (copyStream)
    cudaStreamDestroy(copyStream);
}

bool DeviceCommunicator::onDevice(const void *p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError(); // an unregistered host pointer on old runtimes
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

void DeviceCommunicator::copyAndWait(void *to, const void *from, size_t bytes,
                                     cudaMemcpyKind kind, const char *what) {
  cudaError_t s = cudaMemcpyAsync(to, from, bytes, kind, copyStream);
  if (s == cudaSuccess)
    s = cudaStreamSynchronize(copyStream);
  if (s != cudaSuccess)
    mpi->abort("oasr: rank " + std::to_string(rank()) + " (host " + host() +
                   "): " + what + ": " + cudaGetErrorString(s),
               1);
}

void DeviceCommunicator::copyGradientsToHost(void *host, const void *device,
                                             size_t bytes) {
  check(cudaSetDevice(this->device), "cudaSetDevice");
  if (!copyStream)
    check(cudaStreamCreateWithFlags(&copyStream, cudaStreamNonBlocking),
          "create the gradient copy stream");
  marks.waitOldest(copyStream);
  copyAndWait(host, device, bytes, cudaMemcpyDeviceToHost,
              "copy a gradient group to the host");
}

void DeviceCommunicator::copyGradientsToDevice(void *device, const void *host,
                                               size_t bytes) {
  check(cudaSetDevice(this->device), "cudaSetDevice");
  copyAndWait(device, host, bytes, cudaMemcpyHostToDevice,
              "copy a gradient group back to the device");
}

ComputeMarks::ComputeMarks(int device, cudaStream_t computeStream)
    : device(device), computeStream(computeStream) {
  check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
        "create the gradient event");
}

ComputeMarks::~ComputeMarks() {
  cudaEventDestroy(ready);
  for (cudaEvent_t e : freeEvents)
    cudaEventDestroy(e);
  for (cudaEvent_t e : marked)
    cudaEventDestroy(e);
}

void ComputeMarks::mark() {
  std::lock_guard<std::mutex> lock(mu);
  cudaEvent_t e;
  if (freeEvents.empty()) {
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
          "create a gradient-group event");
  } else {
    e = freeEvents.back();
    freeEvents.pop_back();
  }
  check(cudaEventRecord(e, computeStream), "cudaEventRecord");
  marked.push_back(e);
}

void ComputeMarks::waitAll(cudaStream_t stream) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaEventRecord(ready, computeStream), "cudaEventRecord");
  check(cudaStreamWaitEvent(stream, ready, 0), "cudaStreamWaitEvent");
}

void ComputeMarks::waitOldest(cudaStream_t stream) {
  cudaEvent_t e = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!marked.empty()) {
      e = marked.front();
      marked.pop_front();
    }
  }
  if (!e)
    return waitAll(stream);
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaStreamWaitEvent(stream, e, 0), "cudaStreamWaitEvent");
  // Safe to re-record once the stream has taken its dependency.
  std::lock_guard<std::mutex> lock(mu);
  freeEvents.push_back(e);
}

} // namespace oasr::rt::cuda
