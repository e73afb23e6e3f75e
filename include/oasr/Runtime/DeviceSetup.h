//===- DeviceSetup.h - A rank's kernel backend and communicator -*- C++ -*-===//
//
// Where a training rank runs: the --device backend (oneDNN on the CPU, or
// a CUDA device per rank), and on GPUs the communicator that wraps the MPI
// one: NCCL, or MPI staged through host memory. The policy lives here, not
// in the launcher: which communicator averages which memory, one rank per
// GPU under NCCL while ranks may share one under MPI, and that NCCL's
// collective set-up starts only when every rank has its GPU.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_DEVICESETUP_H
#define OASR_RUNTIME_DEVICESETUP_H

#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/Kernel.h"

#include <cstdio>
#include <memory>
#include <string>

namespace oasr::rt {

/// What a rank runs on.
struct DeviceOptions {
  std::string device = "cpu"; ///< cpu | cuda
  /// mpi | nccl; empty: nccl for cuda on several ranks, else mpi.
  std::string commBackend;
  /// The training algorithm (only sync-sgd runs on a GPU).
  std::string algorithm = "sync-sgd";
  int threads = 1; ///< CPU kernel threads
  bool quiet = false;
};

/// Ranks of this job on this host (Open MPI's or MPICH's environment), 1
/// when it does not say.
int localRankCount();
/// This process' rank among them (0 when unknown).
int localRankIndex();

/// Prints the kernel backends this build can run on here, one per line
/// ("cpu: oneDNN", "cuda:0: NAME ...", or why there is none).
void printDevices(std::FILE *out);

/// The kernel backend of this rank. With NCCL, `comm` becomes the NCCL
/// communicator wrapping it; with --device=cuda and MPI on several ranks,
/// the host-staged one (its chunk from OASR_STAGED_CHUNK_BYTES). Ranks
/// on a host with fewer GPUs than ranks share them under MPI (local rank
/// modulo the GPUs) and are refused under NCCL. Call before the
/// CommEngine starts, on every rank alike (NCCL's set-up is collective).
/// Returns null with `error` set (naming the option, and the rank where it
/// is the rank's own problem).
std::unique_ptr<KernelBackend> setUpDevice(std::unique_ptr<Communicator> &comm,
                                           const DeviceOptions &options,
                                           std::string &error);

} // namespace oasr::rt

#endif // OASR_RUNTIME_DEVICESETUP_H
