//===- SetupTests.cpp - Device set-up and algorithm choice, outside oasr-run
//===//
//
// The decisions oasr-run delegates: which kernel backend and communicator a
// rank gets (setUpDevice) and which training algorithm a name builds, with
// which checks (checkTrainingAlgorithm, createTrainingAlgorithm).
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Runtime/DeviceSetup.h"
#include "oasr/Runtime/Training.h"

#include "gtest/gtest.h"

#include <cstdlib>

using namespace oasr::rt;

namespace {

std::string setUpError(DeviceOptions o) {
  auto comm = createSelfCommunicator();
  std::string error;
  std::unique_ptr<KernelBackend> backend = setUpDevice(comm, o, error);
  EXPECT_EQ(bool(backend), error.empty());
  return error;
}

TEST(DeviceSetup, CpuGetsOneDnnWithTheThreadsAsked) {
  DeviceOptions o;
  o.threads = 2;
  auto comm = createSelfCommunicator();
  std::string error;
  std::unique_ptr<KernelBackend> backend = setUpDevice(comm, o, error);
  ASSERT_TRUE(backend) << error;
  EXPECT_STREQ(backend->name(), "cpu");
  EXPECT_STREQ(comm->name(), "self");
}

TEST(DeviceSetup, ErrorsNameTheOption) {
  DeviceOptions o;
  o.device = "tpu";
  EXPECT_EQ(setUpError(o), "--device=tpu: expected cpu or cuda");
  o = DeviceOptions();
  o.commBackend = "gloo";
  EXPECT_EQ(setUpError(o), "--comm-backend=gloo: expected mpi or nccl");
#if OASR_ENABLE_CUDA
  o = DeviceOptions();
  o.commBackend = "nccl";
  EXPECT_EQ(setUpError(o),
            "--comm-backend=nccl averages GPU memory; it needs --device=cuda");
  o = DeviceOptions();
  o.device = "cuda";
  o.algorithm = "async-easgd";
  EXPECT_EQ(setUpError(o), "--algo=async-easgd updates the parameters on the "
                           "host; it needs --device=cpu");
  // MPI stages a GPU's gradients through host memory in chunks, checked
  // before a GPU is touched.
  o = DeviceOptions();
  o.device = "cuda";
  o.commBackend = "mpi";
  ::setenv("OASR_STAGED_CHUNK_BYTES", "1k", 1);
  EXPECT_EQ(setUpError(o), "OASR_STAGED_CHUNK_BYTES='1k': expected a number "
                           "of bytes from 4096 to 1073741824");
  ::unsetenv("OASR_STAGED_CHUNK_BYTES");
#else
  o = DeviceOptions();
  o.device = "cuda";
  EXPECT_NE(setUpError(o).find("built without CUDA"), std::string::npos);
#endif
}

TEST(DeviceSetup, LocalRanksComeFromTheLauncher) {
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  EXPECT_EQ(localRankCount(), 3);
  EXPECT_EQ(localRankIndex(), 2);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("MPI_LOCALNRANKS");
  ::unsetenv("MPI_LOCALRANKID");
  ::unsetenv("SLURM_LOCALID");
  EXPECT_EQ(localRankCount(), 1);
  EXPECT_EQ(localRankIndex(), 0);
}

std::string algorithmError(const std::string &name, AlgorithmOptions o = {}) {
  auto comm = createSelfCommunicator();
  llvm::Error err = checkTrainingAlgorithm(name, o, *comm, nullptr);
  return err ? llvm::toString(std::move(err)) : "";
}

TEST(TrainingAlgorithms, NamesAndTheServerFamily) {
  std::vector<std::string> names = trainingAlgorithmNames();
  ASSERT_GE(names.size(), 9u);
  EXPECT_EQ(names[0], "sync-sgd");
  EXPECT_EQ(names[1], "sync-easgd");
  for (size_t k = 2; k < names.size(); ++k)
    EXPECT_TRUE(usesParameterServer(names[k])) << names[k];
  EXPECT_FALSE(usesParameterServer("sync-sgd"));
  EXPECT_FALSE(usesParameterServer("sync-easgd"));
  EXPECT_TRUE(usesParameterServer("roundrobin-easgd"));
}

TEST(TrainingAlgorithms, ChecksNameTheOption) {
  EXPECT_EQ(algorithmError("sync-sgd"), "");
  EXPECT_EQ(algorithmError("sync-easgd"), "");
  EXPECT_EQ(algorithmError("hogwild"),
            "--algo=hogwild: expected sync-sgd, sync-easgd, async-sgd, "
            "async-msgd, hogwild-sgd, async-easgd, async-measgd, "
            "hogwild-easgd or roundrobin-easgd");
  // The self communicator has no point-to-point messages.
  EXPECT_NE(algorithmError("async-easgd")
                .find("--algo=async-easgd exchanges with a parameter server"),
            std::string::npos);
  AlgorithmOptions o;
  o.server = "remote";
  EXPECT_EQ(algorithmError("sync-sgd", o),
            "--ps-server=remote: expected shared or dedicated");
  o.server = "dedicated";
  EXPECT_EQ(algorithmError("sync-easgd", o),
            "--ps-server=dedicated: --algo=sync-easgd has no parameter server "
            "(the async-* and hogwild-* algorithms do)");
  o = AlgorithmOptions();
  o.easgdTau = 0;
  EXPECT_EQ(algorithmError("sync-easgd", o), "--easgd-tau=0: must be >= 1");
}

} // namespace
