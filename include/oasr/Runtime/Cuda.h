//===- Cuda.h - CUDA devices and the device communicators -------*- C++ -*-===//
//
// What tools need besides createCudaBackend() (Kernel.h) to run on GPUs:
// probing and picking the device of a rank, and the communicators that
// average gradients in device memory (NCCL; MPI staged through the host).
// Declared only in builds with the CUDA backend (OASR_ENABLE_CUDA in
// oasr/Config.h).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_CUDA_H
#define OASR_RUNTIME_CUDA_H

#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/Kernel.h"

#include <memory>
#include <string>

#if OASR_ENABLE_CUDA
namespace oasr::rt {

/// CUDA devices this process sees. 0 with `error` set to the CUDA runtime's
/// reason when there are none (no driver, no GPU, CUDA_VISIBLE_DEVICES).
int cudaDeviceCount(std::string &error);
/// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)".
std::string cudaDeviceDescription(int device);
/// Makes `device` current for the calling thread; backends and the NCCL
/// communicator created afterwards use it.
bool selectCudaDevice(int device, std::string &error);

/// The NCCL communicator of the ranks of `mpi` (a collective: every rank
/// calls it; rank 0's ncclUniqueId is broadcast over `mpi`). Gradients are
/// averaged in device memory on NCCL's own stream, ordered after the work
/// issued so far on `cuda`'s compute stream by an event; the call returns
/// once the average is complete, so kernels issued afterwards (the
/// optimizer) see it. `broadcast` moves device memory too; metrics,
/// barriers, gathers and abort go through `mpi`. On success the NCCL
/// communicator takes `mpi` over; on failure it returns null, sets `error`
/// and leaves `mpi` alone.
std::unique_ptr<Communicator>
createNcclCommunicator(std::unique_ptr<Communicator> &mpi, KernelBackend &cuda,
                       std::string &error);

/// The host-staged MPI communicator of --device=cuda --comm-backend=mpi on
/// several ranks ("mpi-staged"; StagedAllreduce.h): gradients in device
/// memory are copied to pinned host memory in chunks of `chunkBytes`,
/// averaged by `mpi` as it averages host memory, and copied back, the
/// copies on streams of its own ordered after `cuda`'s compute stream by
/// an event per group, overlapping the MPI calls; broadcasts of device
/// memory are staged the same way, and host memory goes to `mpi` as it is.
/// Not collective: ranks may share a GPU. On success it takes `mpi` over;
/// on failure (no current device, pinned memory refused) it returns null,
/// sets `error` and leaves `mpi` alone.
std::unique_ptr<Communicator>
createStagedCommunicator(std::unique_ptr<Communicator> &mpi,
                         KernelBackend &cuda, size_t chunkBytes,
                         std::string &error);

} // namespace oasr::rt
#endif // OASR_ENABLE_CUDA

#endif // OASR_RUNTIME_CUDA_H
