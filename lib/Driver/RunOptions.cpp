//===- RunOptions.cpp - What a run decides from its options ---------------===//
//
// oasr-run's options checked (checkRunOptions), and the choices made from
// them before anything runs: threads, the communication priority,
// re-planning, checkpoints, data shards and output paths.
//
//===----------------------------------------------------------------------===//

#include "oasr/Driver/Run.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/DeviceSetup.h"
#include "oasr/Runtime/Report.h"
#include "oasr/Runtime/Training.h"
#include "oasr/Schedule/Schedule.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// The decisions
//===----------------------------------------------------------------------===//

std::string numberText(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

static std::string restartProblem(std::optional<int> maxRestarts,
                                  llvm::StringRef checkpointDir);

static std::string runOptionsProblem(const RunOptions &o) {
  auto finiteAtLeast = [](const std::optional<double> &v, double low) {
    return !v || (std::isfinite(*v) && *v >= low);
  };
  auto name = [](const char *flag, const std::string &value) {
    return std::string("--") + flag + "=" + value + ": ";
  };
  if (o.batch && *o.batch <= 0)
    return name("batch", std::to_string(*o.batch)) +
           "expected a positive per-rank batch";
  if (o.steps < 1)
    return name("steps", std::to_string(o.steps)) +
           "expected a positive number of steps";
  if (o.ranksPerNode < 0 || o.ranksPerNode == 1)
    return name("ranks-per-node", std::to_string(o.ranksPerNode)) +
           "expected 0 (the nodes MPI reports) or at least 2 ranks a node";
  if (o.timeoutS && !(std::isfinite(*o.timeoutS) && *o.timeoutS > 0))
    return name("timeout", numberText(*o.timeoutS)) +
           "expected a positive number of seconds (the watchdog's limit on a "
           "collective without progress)";
  if (!finiteAtLeast(o.lr, 0))
    return name("lr", numberText(*o.lr)) +
           "expected a finite learning rate >= 0";
  if (!finiteAtLeast(o.momentum, 0) || (o.momentum && *o.momentum > 1))
    return name("momentum", numberText(*o.momentum)) +
           "expected a finite momentum in [0, 1]";
  if (!finiteAtLeast(o.alpha, 0))
    return name("alpha", numberText(*o.alpha)) +
           "expected a finite start-up latency >= 0 (seconds)";
  if (!finiteAtLeast(o.beta, 0))
    return name("beta", numberText(*o.beta)) +
           "expected a finite per-byte time >= 0 (seconds/byte)";
  if (!finiteAtLeast(o.overlapRate, 0) || (o.overlapRate && *o.overlapRate > 1))
    return name("overlap-rate", numberText(*o.overlapRate)) +
           "must be in [0, 1] (the rate communication progresses while "
           "backward computes)";
  if (o.vocab && *o.vocab < 1)
    return name("vocab", std::to_string(*o.vocab)) +
           "expected a positive vocabulary size";
  if (o.logEvery < 1)
    return name("log-every", std::to_string(o.logEvery)) +
           "expected a positive number of steps";
  if (!(o.labelSmoothing >= 0 && o.labelSmoothing < 1))
    return name("label-smoothing", numberText(o.labelSmoothing)) +
           "must be in [0, 1)";
  if (o.evalEvery && *o.evalEvery < 1)
    return name("eval-every", std::to_string(*o.evalEvery)) +
           "expected a positive number of steps";
  if (o.commCpu && *o.commCpu < 0)
    return name("comm-cpu", std::to_string(*o.commCpu)) +
           "expected a CPU number >= 0";
  if (o.checkpointEvery && *o.checkpointEvery < 1)
    return name("checkpoint-every", std::to_string(*o.checkpointEvery)) +
           "expected a positive number of steps";
  if (o.keepCheckpoints && *o.keepCheckpoints < 0)
    return name("keep-checkpoints", std::to_string(*o.keepCheckpoints)) +
           "expected a number of checkpoints >= 0 (0 keeps all)";
  if (!o.replanProfile.empty() && o.replan == "off")
    return "--replan-profile needs re-planning (not --replan=off)";
  if (o.cudaGraph && o.device != "cuda")
    return "--cuda-graph replays the step's GPU kernels as CUDA graphs; it "
           "needs --device=cuda (--device=" +
           o.device + " runs each kernel as it is called)";
  if ((o.checkpointEvery || o.keepCheckpoints) && o.checkpointDir.empty())
    return "--checkpoint-every/--keep-checkpoints need --checkpoint=DIR";
  if (o.keepGlobalBatch && !o.allowResize)
    return "--keep-global-batch changes the per-rank batch of a resized "
           "resume; it needs --allow-resize";
  if (o.keepGlobalBatch && o.batch)
    return name("batch", std::to_string(*o.batch)) +
           "--keep-global-batch chooses the per-rank batch (the "
           "checkpoint's global batch over this run's ranks); give one of "
           "them";
  if (o.allowResize && o.resumeDir.empty() && o.checkpointDir.empty())
    return "--allow-resize lets --resume=DIR (or a --max-restarts restart "
           "from --checkpoint=DIR) continue on another number of ranks; it "
           "needs one of them";
  if (o.allowResize && !algorithmResizes(o.algorithm))
    return "--allow-resize: --algo=" + o.algorithm +
           " cannot resume on another number of ranks (each worker's "
           "exchanges with the parameter server are its own); sync-sgd and "
           "sync-easgd can";
  if (std::string bad = restartProblem(o.maxRestarts, o.checkpointDir);
      !bad.empty())
    return bad;
  if (o.maxRestarts)
    return name("max-restarts", std::to_string(*o.maxRestarts)) +
           "restarts are made by the launcher that `oasr-run --np P` (or "
           "scripts/cluster.sh run) starts, which runs mpirun again; ranks "
           "that mpirun started directly cannot restart the job";
  return "";
}

static std::string restartProblem(std::optional<int> maxRestarts,
                                  llvm::StringRef checkpointDir) {
  if (!maxRestarts)
    return "";
  std::string name = "--max-restarts=" + std::to_string(*maxRestarts) + ": ";
  if (*maxRestarts < 0)
    return name + "expected a number of restarts >= 0";
  if (checkpointDir.empty())
    return name + "needs --checkpoint=DIR (a failed job restarts from the "
                  "newest complete checkpoint in DIR)";
  return "";
}

int boundCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return 0;
  return CPU_COUNT(&set);
}

int defaultThreads(int onlineCpus, int boundCpus, int localRanks) {
  if (boundCpus > 0 && boundCpus < onlineCpus)
    return boundCpus;
  return std::max(1, onlineCpus / std::max(1, localRanks));
}

int defaultThreads() {
  return defaultThreads(int(std::thread::hardware_concurrency()), boundCpus(),
                        localRankCount());
}

llvm::Expected<std::string> communicatorKind(const RunOptions &o,
                                             bool underMpirun) {
  if (o.communicator.empty())
    return underMpirun ? "mpi" : "self";
  if (o.communicator == "mpi" || o.communicator == "self")
    return o.communicator;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--communicator=" + o.communicator +
                                     ": expected mpi or self");
}

llvm::Expected<std::string> calibratedCommPriority(const RunOptions &o) {
  if (!o.commPriority.empty() || o.commFile.empty() || o.device != "cpu")
    return "";
  llvm::Expected<std::string> p =
      oasr::schedule::readCalibrationPriority(o.commFile);
  if (!p)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--comm: " + llvm::toString(p.takeError()));
  return *p;
}

std::string CommPriorityChoice::error() const {
  if (realtimeOnDevice)
    return "--comm-priority=realtime: applies to the CPU's MPI "
           "communicator, whose waits sleep between tests; with a GPU the "
           "thread waits inside NCCL and CUDA, which may spin at real-time "
           "priority (use normal)";
  if (realtimeRefused)
    return "--comm-priority=realtime: this process may not run a thread at "
           "SCHED_FIFO (needs CAP_SYS_NICE or `ulimit -r 1`); "
           "--comm-priority=sleep waits the same way at normal priority";
  if (name == "idle" || name == "normal" || name == "sleep" ||
      name == "realtime")
    return "";
  return "--comm-priority=" + name +
         ": expected idle, normal, sleep or realtime";
}

CommPriorityChoice chooseCommPriority(const RunOptions &o,
                                      llvm::StringRef calibrated,
                                      bool idleRaisable, bool realtimePermitted,
                                      bool acrossHosts) {
  CommPriorityChoice c;
  // Idle by default with the CPU backend on one host, where allreduces are
  // CPU work -- unless this process could not raise the thread while
  // compute waits: then other load on the host would starve it. Across
  // hosts the wire does the work and the thread sleeps (docs/runtime.md).
  const bool cpu = o.device == "cpu";
  const bool byDefault = o.commPriority.empty() && calibrated.empty();
  c.acrossHosts = byDefault && cpu && acrossHosts;
  c.name = !o.commPriority.empty() ? o.commPriority
           : !calibrated.empty()   ? calibrated.str()
           : c.acrossHosts         ? "sleep"
           : cpu                   ? (idleRaisable ? "idle" : "normal")
                                   : "normal";
  c.calibrated = o.commPriority.empty() && !calibrated.empty();
  c.idleFellBack = byDefault && cpu && !c.acrossHosts && !idleRaisable;
  c.realtimeOnDevice = c.name == "realtime" && !cpu;
  if (c.name == "realtime" && !realtimePermitted && cpu) {
    c.realtimeFellBack = c.calibrated;
    c.realtimeRefused = !c.calibrated;
    if (c.calibrated)
      c.name = "sleep";
  }
  c.priority = c.name == "idle"       ? CommEngine::Priority::Idle
               : c.name == "sleep"    ? CommEngine::Priority::Sleep
               : c.name == "realtime" ? CommEngine::Priority::Realtime
                                      : CommEngine::Priority::Normal;
  return c;
}

static llvm::Error runError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<ReplanOptions> replanFor(const RunOptions &o, int ranks,
                                        llvm::StringRef planStrategy,
                                        llvm::StringRef fixedForms,
                                        bool compresses) {
  ReplanOptions r;
  const bool modelStrategy =
      oasr::schedule::strategyNeedsCommModel(planStrategy);
  if (!o.replan.empty()) {
    auto parsed = parseReplanOption(o.replan);
    if (!parsed)
      return runError("--replan=" + o.replan + ": " +
                      llvm::toString(parsed.takeError()));
    r = *parsed;
    if (r.mode != ReplanOptions::Mode::Off && o.algorithm != "sync-sgd")
      return runError("--replan=" + o.replan + ": --algo=" + o.algorithm +
                      " does not run the planned allreduces (sync-sgd does)");
    if (r.mode != ReplanOptions::Mode::Off &&
        oasr::schedule::isSteadyStrategy(planStrategy))
      return runError("--replan=" + o.replan + ": the plan's strategy '" +
                      planStrategy +
                      "' plans the steady-state step, which is not "
                      "re-planned from the run; give --replan=off");
    if (r.mode != ReplanOptions::Mode::Off && !fixedForms.empty())
      return runError("--replan=" + o.replan + ": the plan " + fixedForms +
                      ", and re-planning does not choose routes yet; give "
                      "--replan=off");
    if (r.mode != ReplanOptions::Mode::Off && compresses && o.device != "cpu")
      return runError("--replan=" + o.replan + ": a re-plan may send a " +
                      "compressed matrix plain with its error feedback, " +
                      "which PowerSGD keeps in host memory; with --device=" +
                      o.device + " give --replan=off");
    if (r.mode != ReplanOptions::Mode::Off && !modelStrategy)
      return runError(
          "--replan=" + o.replan + ": the plan's strategy '" +
          (planStrategy.empty() ? llvm::StringRef("?") : planStrategy) +
          "' groups without an allreduce model; re-planning "
          "applies to mgwfbp, optimal and oasr");
  } else if (o.algorithm == "sync-sgd" && ranks > 1 && o.device == "cpu" &&
             modelStrategy && fixedForms.empty() && !compresses) {
    // Not by default on a GPU: per-op times there measure kernel launches,
    // not the kernels (docs/runtime.md).
    r.mode = ReplanOptions::Mode::Once;
  }
  if (!o.replanProfile.empty() && r.mode == ReplanOptions::Mode::Off)
    return runError("--replan-profile=" + o.replanProfile +
                    ": nothing is re-planned in this run (sync-sgd on "
                    "several ranks with mgwfbp, optimal or oasr re-plans)");
  return r;
}

CheckpointOptions checkpointOptionsFor(const RunOptions &o) {
  CheckpointOptions c;
  c.dir = o.checkpointDir;
  c.every = o.checkpointDir.empty()                       ? 0
            : o.checkpointEvery && *o.checkpointEvery > 0 ? *o.checkpointEvery
                                                          : o.steps;
  c.keep = o.keepCheckpoints.value_or(2);
  // Where the center variable lives is part of what must match.
  c.algorithm = o.psServer == "dedicated"
                    ? o.algorithm + " --ps-server=dedicated"
                    : o.algorithm;
  c.dataSource = o.dataSpec;
  c.seed = o.seed;
  c.allowResize = o.allowResize;
  return c;
}

DataShard dataShardFor(const RunOptions &o, int rank, int ranks) {
  const bool dedicated = o.psServer == "dedicated" && ranks > 1;
  DataShard s;
  s.count = dedicated ? ranks - 1 : ranks;
  s.index = rank < s.count ? rank : 0;
  return s;
}

std::string unwritable(llvm::StringRef path) {
  if (llvm::sys::fs::is_directory(path))
    return "is a directory";
  if (llvm::sys::fs::exists(path)) {
    std::error_code ec =
        llvm::sys::fs::access(path, llvm::sys::fs::AccessMode::Write);
    return ec ? ec.message() : "";
  }
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::openFileForWrite(
          path, fd, llvm::sys::fs::CD_CreateNew))
    return ec.message();
  ::close(fd);
  llvm::sys::fs::remove(path);
  return "";
}

static std::string outputPathProblem(const RunOptions &o) {
  for (auto [name, path] :
       {std::pair<const char *, const std::string *>{"--trace", &o.tracePath},
        {"--profile", &o.profilePath},
        {"--replan-profile", &o.replanProfile},
        {"--dump-grads", &o.dumpGrads},
        {"--save", &o.savePath},
        {"--save-ort", &o.saveOrtPath},
        {"--emit-mlir", &o.emitMlir}})
    if (!path->empty())
      if (std::string why = unwritable(*path); !why.empty())
        return std::string(name) + "=" + *path + ": cannot write: " + why;
  return "";
}

std::vector<std::string> cpuWarnings(const RunOptions &o, int threads,
                                     int boundCpus, int onlineCpus,
                                     int localRanks) {
  std::vector<std::string> warnings;
  if (boundCpus > 0 && threads > boundCpus)
    warnings.push_back(llvm::formatv(
        "oasr-run: warning: {0} compute threads per rank, but rank 0 may run "
        "on {1} CPU(s) only (its affinity mask, e.g. mpirun's default "
        "--bind-to core); the threads will share them. Launch with `mpirun "
        "--bind-to none` or `--map-by slot:PE={0}`, or use --threads={1}",
        threads, boundCpus));
  // Ranks whose compute threads fill the host leave communication no CPU
  // of its own: the plan should know (oasr-bench comm measures the overlap
  // rate), and with more threads than CPUs the ranks take turns on them,
  // which the timeline model does not describe.
  if (o.device == "cpu" && onlineCpus > 0 && localRanks * threads > onlineCpus)
    warnings.push_back(llvm::formatv(
        "oasr-run: warning: {0} rank(s) x {1} compute thread(s) on this "
        "host's {2} CPU(s): the ranks oversubscribe the host, take turns on "
        "its CPUs and cannot overlap communication with backward; expect the "
        "measured iteration to exceed the prediction (docs/runtime.md)",
        localRanks, threads, onlineCpus));
  return warnings;
}

} // namespace oasr::rt

namespace oasr::rt {

/// "" as success, anything else as the error it says.
static llvm::Error problemError(const std::string &why) {
  if (why.empty())
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

llvm::Error checkRunOptions(const RunOptions &o) {
  return problemError(runOptionsProblem(o));
}

llvm::Error checkRestartOptions(std::optional<int> maxRestarts,
                                llvm::StringRef checkpointDir) {
  return problemError(restartProblem(maxRestarts, checkpointDir));
}

llvm::Error checkOutputPaths(const RunOptions &o) {
  return problemError(outputPathProblem(o));
}

} // namespace oasr::rt
