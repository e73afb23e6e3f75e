//===- DeviceCommunicator.cpp - Communicators of GPU memory ---------------===//

#include "DeviceCommunicator.h"
#include "CudaKernels.h"

#include <cstdlib>

namespace oasr::rt::cuda {

void DeviceCommunicator::abort(const std::string &message, int code) {
  mpi->abort(message, code);
  std::abort(); // not reached: a virtual call does not carry [[noreturn]]
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
