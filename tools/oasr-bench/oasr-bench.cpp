//===- oasr-bench.cpp - Measures what the planner models ----------------===//
//
//   mpirun -np P oasr-bench comm [--min-bytes=4] [--max-bytes=268435456]
//                                [--burst-us=U] [--working-set-bytes=B]
//                                [--compute-threads=N]
//                                [--comm-priority=auto|idle|normal|sleep]
//                                [--overlap-bytes=B] [--out=calibration.json]
//                                [--collectives=allreduce,reduce-scatter,...]
//
// `comm` times the runtime's allreduce (sum and average over ranks, in place,
// through the same Communicator oasr-run uses) for message sizes from
// --min-bytes to --max-bytes in powers of two, fits T(M) = alpha + beta * M
// by least squares on relative error, and writes the `oasr-comm-v1`
// calibration JSON that oasr-plan, the passes and oasr-run accept. The two
// halves of an allreduce, reduce-scatter and all-gather (--collectives;
// all three by default), are swept the same way at the same sizes (bytes:
// the whole buffer) and recorded as 'reduce_scatter' and 'all_gather'
// objects with their own alpha, beta and points, which the steady-state
// planner's DeAR forms use (oasr-plan --steady).
//
// It then measures the overlap rate (Schedule.h): how fast an allreduce of
// --overlap-bytes progresses on oasr-run's communication thread (same
// priority) while every rank keeps --compute-threads threads busy, relative
// to its speed alone. 1 means communication has a channel of its own; 0
// means it waits for compute to stop (ranks fill the cores and the thread
// runs at idle priority). It does so for each way the thread can compete
// for a CPU (idle, sleep, normal, realtime: CommEngine::Priority) and records
// the one that keeps more work going (Overlap::score: the overlap rate and,
// with --latency-bytes, a small call's rate beside compute, plus the compute
// rate meanwhile) as `comm_priority`, which oasr-run --comm=FILE uses; the
// allreduce sweep then runs at that priority. Idle is a candidate only where
// the process may raise the thread while it is waited on (as oasr-run's
// default), realtime only where it may use SCHED_FIFO.
//
// This file parses and checks the options; the measuring is the runtime's
// calibrateCommunication (runtime/comm/Calibration.cpp).
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Runtime/Calibration.h"
#include "oasr/Runtime/Communicator.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace oasr::rt;
namespace cl = llvm::cl;

static cl::OptionCategory benchCat("oasr-bench options");
static cl::opt<std::string> command(cl::Positional, cl::Required,
                                    cl::desc("<comm>"), cl::cat(benchCat));
static cl::opt<uint64_t> minBytes("min-bytes", cl::desc("Smallest message"),
                                  cl::init(4), cl::cat(benchCat));
static cl::opt<uint64_t> maxBytes("max-bytes",
                                  cl::desc("Largest message (256 MiB)"),
                                  cl::init(uint64_t(256) << 20),
                                  cl::cat(benchCat));
static cl::opt<double> budget("seconds-per-size",
                              cl::desc("Measuring time per size (s)"),
                              cl::init(0.2), cl::cat(benchCat));
static cl::opt<std::string> outPath("out", cl::desc("Calibration JSON"),
                                    cl::init("comm-calibration.json"),
                                    cl::cat(benchCat));
static cl::opt<unsigned>
    loadThreads("compute-threads",
                cl::desc("Compute threads per rank while measuring the overlap "
                         "rate (use oasr-run's --threads)"),
                cl::init(1), cl::cat(benchCat));
enum class PriorityOpt { Auto, Idle, Normal, Sleep, Realtime };
static cl::opt<PriorityOpt> commPriority(
    "comm-priority",
    cl::desc("Communication thread priority (as oasr-run's --comm-priority)"),
    cl::values(clEnumValN(PriorityOpt::Auto, "auto",
                          "measure the overlap at both and use the better "
                          "(default; normal alone where the process may not "
                          "raise an idle thread)"),
               clEnumValN(PriorityOpt::Idle, "idle",
                          "SCHED_IDLE (runs where compute leaves a CPU free)"),
               clEnumValN(PriorityOpt::Normal, "normal", "an ordinary thread"),
               clEnumValN(PriorityOpt::Sleep, "sleep",
                          "an ordinary thread that sleeps between MPI tests "
                          "while an allreduce waits on the network"),
               clEnumValN(PriorityOpt::Realtime, "realtime",
                          "sleep's waiting at SCHED_FIFO priority (needs "
                          "CAP_SYS_NICE or `ulimit -r 1`)")),
    cl::init(PriorityOpt::Auto), cl::cat(benchCat));
static cl::opt<int>
    commCpu("comm-cpu",
            cl::desc("Pin the communication thread to this CPU (as oasr-run's "
                     "--comm-cpu)"),
            cl::init(-1), cl::cat(benchCat));
static cl::opt<uint64_t> overlapBytes(
    "overlap-bytes",
    cl::desc("Allreduce size for the overlap rate (0: do not measure it)"),
    cl::init(uint64_t(16) << 20), cl::cat(benchCat));
static cl::opt<double> burstUs(
    "burst-us",
    cl::desc("Compute burst before each timed allreduce (microseconds; 0: "
             "back to back), as training issues allreduces right after "
             "backward or an optimizer update"),
    cl::init(0), cl::cat(benchCat));
static cl::opt<uint64_t> workingSetBytes(
    "working-set-bytes",
    cl::desc("Memory each busy compute thread sweeps (bursts and overlap "
             "load)"),
    cl::init(uint64_t(64) << 20), cl::cat(benchCat));
static cl::opt<bool> quiet("quiet", cl::desc("No table"), cl::init(false),
                           cl::cat(benchCat));
static cl::opt<bool> compressRate(
    "compress-rate",
    cl::desc("Also time PowerSGD's compression on one thread (a 1024x1024 "
             "matrix at ranks 1 and 8) and record its rates, which plans "
             "with --compress then charge"),
    cl::init(true), cl::cat(benchCat));
static cl::opt<uint64_t> latencyBytes(
    "latency-bytes",
    cl::desc("Also time an allreduce of this many bytes and take its time as "
             "alpha, fitting beta with alpha fixed (0: fit both): for links "
             "whose small messages no line through the large ones fits, such "
             "as a token bucket, where the fit from large sizes alone gives "
             "alpha = 0"),
    cl::init(0), cl::cat(benchCat));
static cl::opt<int> ranksPerNode(
    "ranks-per-node",
    cl::desc("Nodes of the two-level allreduce: consecutive ranks, this "
             "many a node (default 0: where MPI reports ranks sharing "
             "memory; -1: do not measure it)"),
    cl::init(0), cl::cat(benchCat));
static cl::list<std::string> collectives(
    "collectives", cl::CommaSeparated,
    cl::desc("Collectives to calibrate: allreduce (always), reduce-scatter, "
             "all-gather (default: all three; the steady-state planner's "
             "DeAR forms use the last two)"),
    cl::cat(benchCat));

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(benchCat);
  cl::ParseCommandLineOptions(argc, argv,
                              "oasr-bench: measurements for the planner\n\n"
                              "  comm  allreduce time over message sizes -> "
                              "alpha/beta calibration JSON\n");
  // While MPI waits on the wire the communication thread yields its CPU
  // (Open MPI otherwise spins, and at normal priority that takes half a
  // shared core from compute); oasr-run does the same. A value the user set
  // stays.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  if (command != "comm") {
    llvm::errs() << "oasr-bench: error: unknown command '" << command
                 << "' (expected: comm)\n";
    return 1;
  }
  if (!(burstUs >= 0) || !std::isfinite(burstUs)) {
    llvm::errs() << "oasr-bench: error: --burst-us must be >= 0\n";
    return 1;
  }
  if (loadThreads < 1) {
    llvm::errs() << "oasr-bench: error: --compute-threads must be >= 1\n";
    return 1;
  }
  if (minBytes > maxBytes || maxBytes < 4) {
    llvm::errs() << "oasr-bench: error: need 4 <= --min-bytes <= "
                    "--max-bytes\n";
    return 1;
  }
  if (latencyBytes > 0 && latencyBytes < 4) {
    llvm::errs() << "oasr-bench: error: --latency-bytes=" << latencyBytes
                 << ": at least 4 (one f32), or 0 to fit alpha\n";
    return 1;
  }
  if (collectives.empty())
    for (const char *c : {"allreduce", "reduce-scatter", "all-gather"})
      collectives.push_back(c);
  for (const std::string &c : collectives)
    if (c != "allreduce" && c != "reduce-scatter" && c != "all-gather") {
      llvm::errs() << "oasr-bench: error: --collectives=" << c
                   << ": expected allreduce, reduce-scatter or all-gather\n";
      return 1;
    }
  std::unique_ptr<Communicator> comm;
  if (launchedByMpi()) {
    std::string error;
    comm = createMpiCommunicator(&argc, &argv, error);
    if (!comm) {
      llvm::errs() << "oasr-bench: error: " << error << "\n";
      return 1;
    }
  } else {
    comm = createSelfCommunicator();
  }
  CalibrationOptions opts;
  opts.minBytes = minBytes;
  opts.maxBytes = maxBytes;
  opts.secondsPerSize = budget;
  opts.outPath = outPath;
  opts.computeThreads = loadThreads;
  switch (commPriority) {
  case PriorityOpt::Auto:
    break;
  case PriorityOpt::Idle:
    opts.priority = CommEngine::Priority::Idle;
    break;
  case PriorityOpt::Sleep:
    opts.priority = CommEngine::Priority::Sleep;
    break;
  case PriorityOpt::Normal:
    opts.priority = CommEngine::Priority::Normal;
    break;
  case PriorityOpt::Realtime:
    opts.priority = CommEngine::Priority::Realtime;
    break;
  }
  if (commCpu.getNumOccurrences())
    opts.commCpu = int(commCpu);
  opts.overlapBytes = overlapBytes;
  opts.burstUs = burstUs;
  opts.workingSetBytes = workingSetBytes;
  opts.quiet = quiet;
  opts.compressRate = compressRate;
  opts.latencyBytes = latencyBytes;
  opts.collectives.assign(collectives.begin(), collectives.end());
  if (ranksPerNode < -1 || ranksPerNode == 1) {
    if (comm->rank() == 0)
      llvm::errs() << "oasr-bench: error: --ranks-per-node=" << ranksPerNode
                   << ": expected 0 (the nodes MPI reports), -1 (none) or at "
                      "least 2 ranks a node\n";
    comm->finalize();
    return 2;
  }
  opts.ranksPerNode = ranksPerNode;
  opts.version = OASR_VERSION;
  int rc = calibrateCommunication(*comm, opts);
  comm->finalize();
  return rc;
}
