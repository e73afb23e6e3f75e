//===- DeviceSetup.cpp - A rank's kernel backend and communicator ---------===//

#include "oasr/Runtime/DeviceSetup.h"

#include "oasr/Config.h"
#include "oasr/Runtime/Cuda.h"
#include "oasr/Runtime/Kernel.h"
#include "oasr/Runtime/StagedAllreduce.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>

namespace oasr::rt {

int localRankCount() {
  for (const char *v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char *s = std::getenv(v))
      return std::max(1, std::atoi(s));
  return 1;
}

int localRankIndex() {
  for (const char *v :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *s = std::getenv(v))
      return std::max(0, std::atoi(s));
  return 0;
}

void printDevices(std::FILE *out) {
  std::fprintf(out, "cpu: %s\n", describeCpu().c_str());
#if OASR_ENABLE_CUDA
  std::string why;
  int count = cudaDeviceCount(why);
  for (int d = 0; d < count; ++d)
    std::fprintf(out, "cuda:%d: %s\n", d, cudaDeviceDescription(d).c_str());
  if (count == 0)
    std::fprintf(out, "cuda: no device visible (%s)\n", why.c_str());
#else
  std::fprintf(out, "cuda: not built (this oasr-run was built without CUDA)\n");
#endif
}

std::unique_ptr<KernelBackend> setUpDevice(std::unique_ptr<Communicator> &comm,
                                           const DeviceOptions &options,
                                           std::string &error) {
  const std::string &dev = options.device;
  const std::string cb = !options.commBackend.empty() ? options.commBackend
                         : dev == "cuda" && comm->size() > 1 ? "nccl"
                                                             : "mpi";
  if (dev != "cpu" && dev != "cuda")
    error = "--device=" + dev + ": expected cpu or cuda";
  else if (cb != "mpi" && cb != "nccl")
    error = "--comm-backend=" + cb + ": expected mpi or nccl";
  else if (!OASR_ENABLE_CUDA && (dev == "cuda" || cb == "nccl"))
    error = "--" +
            std::string(dev == "cuda" ? "device=cuda" : "comm-backend=nccl") +
            ": this oasr-run was built without CUDA (configure with the CUDA "
            "toolkit in /usr/local/cuda and -DOASR_ENABLE_CUDA=ON)";
  else if (cb == "nccl" && dev != "cuda")
    error = "--comm-backend=nccl averages GPU memory; it needs --device=cuda";
  else if (dev == "cuda" && options.algorithm != "sync-sgd")
    error = "--algo=" + options.algorithm +
            " updates the parameters on the host; it needs --device=cpu";
  // MPI averages a GPU's gradients through host memory (the staged path);
  // its chunk is checked before a GPU is touched.
  size_t chunkBytes = 0;
  if (error.empty() && dev == "cuda" && cb == "mpi")
    chunkBytes = stagedChunkBytesFromEnv(error);
  if (!error.empty())
    return nullptr;
  if (dev == "cpu") {
    std::unique_ptr<KernelBackend> backend = createCpuBackend();
    backend->setNumThreads(options.threads);
    return backend;
  }
#if OASR_ENABLE_CUDA
  std::string where =
      "rank " + std::to_string(comm->rank()) + " (host " + comm->host() + ")";
  std::string why;
  std::unique_ptr<KernelBackend> backend;
  int count = cudaDeviceCount(why);
  int local = localRankIndex(),
      ranksHere = std::max(localRankCount(), local + 1);
  // NCCL refuses two ranks on one device; under MPI ranks share the GPUs
  // (local rank modulo their number), each with its own streams.
  int device = count > 0 ? local % count : 0;
  if (count == 0)
    error = "--device=cuda: no CUDA device visible on " + where + ": " + why;
  else if (ranksHere > count && cb == "nccl")
    error = llvm::formatv("--device=cuda: {0} ranks on host {1} but {2} CUDA "
                          "device(s) visible; NCCL runs one rank per GPU "
                          "(--comm-backend=mpi lets ranks share a GPU, "
                          "averaging through host memory)",
                          ranksHere, comm->host(), count)
                .str();
  else if (!selectCudaDevice(device, why) ||
           !(backend = createCudaBackend(why)))
    error = "--device=cuda: " + where + ": " + why;
  if (error.empty() && ranksHere > count && local == 0)
    std::fprintf(stderr,
                 "oasr-run: note: %d ranks on host %s share %d CUDA "
                 "device(s) (local rank modulo %d), each rank with its own "
                 "streams: their kernels take turns on a GPU\n",
                 ranksHere, comm->host().c_str(), count, count);
  if (error.empty() && cb == "mpi" && comm->size() > 1) {
    std::unique_ptr<Communicator> staged =
        createStagedCommunicator(comm, *backend, chunkBytes, why);
    if (staged)
      comm = std::move(staged);
    else
      error = "--comm-backend=mpi: " + where + ": " + why;
  }
  if (cb == "nccl") {
    // NCCL's set-up is collective: start it only if every rank has a GPU.
    double failed = error.empty() ? 0 : 1;
    comm->allreduceMax(&failed, 1);
    if (failed == 0) {
      std::unique_ptr<Communicator> nccl =
          createNcclCommunicator(comm, *backend, why);
      if (nccl)
        comm = std::move(nccl);
      else
        error = "--comm-backend=nccl: " + where + ": " + why;
    }
  }
  if (!error.empty())
    return nullptr;
  if (comm->rank() == 0 && !options.quiet)
    std::printf("oasr-run: device cuda:%d %s, gradients averaged with %s\n",
                device, cudaDeviceDescription(device).c_str(), comm->name());
  return backend;
#else
  (void)chunkBytes;
  return nullptr;
#endif
}

} // namespace oasr::rt
