//===- OpenMpiTuning.cpp - Open MPI's collectives across hosts ------------===//
//
// Open MPI's fixed allreduce choice for large messages between 2 ranks
// (ring, Rabenseifner) reached half the link's rate in about half the calls
// on the emulated cluster (docs/cluster.md), where recursive doubling moves
// each rank's buffer at once at the link's rate; and libnbc's non-blocking
// allreduce between 2 ranks (binomial: a reduce, then a broadcast) moves
// the data one way at a time. scripts/cluster.sh passed the better choices
// with --mca; a user launching `mpirun -H a,b oasr-run ...` got Open MPI's.
// So a rank of a job across hosts sets them itself before MPI_Init, through
// the environment Open MPI reads its parameters from, unless the user set
// them (mpirun's --mca reaches the ranks as the same variables).
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace oasr::rt {

namespace {

/// coll/tuned's dynamic rules (collective 2 is allreduce): recursive
/// doubling (algorithm 3) between 2 ranks at every size, Open MPI's own
/// choice from 3 ranks up.
constexpr const char *kAllreduceRules = "1       # collectives: allreduce\n"
                                        "2       # collective id: allreduce\n"
                                        "2       # communicator sizes\n"
                                        "2       # 2 ranks\n"
                                        "1       # message sizes\n"
                                        "0 3 0 0 # recursive doubling\n"
                                        "3       # 3 ranks and more\n"
                                        "1       # message sizes\n"
                                        "0 0 0 0 # Open MPI decides\n";

int envInt(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

} // namespace

std::string tuneOpenMpiAcrossHosts(std::string &rulesPath) {
  // Open MPI's launcher tells each rank its job's size and how many of its
  // ranks share this host before MPI_Init.
  int size = envInt("OMPI_COMM_WORLD_SIZE"),
      local = envInt("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (size < 2 || local < 1 || local >= size)
    return "";
  if (std::getenv("OMPI_MCA_coll_tuned_use_dynamic_rules") ||
      std::getenv("OMPI_MCA_coll_tuned_dynamic_rules_filename") ||
      std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm"))
    return "oasr-run: collectives: the launch sets Open MPI's allreduce "
           "choices (OMPI_MCA_coll_*); oasr-run keeps them";
  const char *tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") +
                     "/oasr-coll-rules-" + std::to_string(getuid()) + "-" +
                     std::to_string(getpid()) + ".conf";
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (!f || std::fputs(kAllreduceRules, f) < 0 || std::fclose(f) != 0)
    return "oasr-run: note: ranks on several hosts: cannot write " + path +
           ", so Open MPI chooses its allreduce algorithms itself";
  rulesPath = path;
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
  setenv("OMPI_MCA_coll_tuned_dynamic_rules_filename", path.c_str(), 0);
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
  return "oasr-run: collectives: ranks on several hosts: allreduce by "
         "recursive doubling between 2 ranks and libnbc's Rabenseifner "
         "(set by oasr-run; --mca coll_tuned_use_dynamic_rules or "
         "coll_libnbc_iallreduce_algorithm on mpirun overrides)";
}

} // namespace oasr::rt
