//===- oasr-run.cpp - Runs a compiled training step on MPI ranks ---------===//
//
//   mpirun -np P oasr-run MODEL.(mlir|onnx) [--data=...] [--steps=N] ...
//   oasr-run --np P MODEL ...          (re-launches itself under mpirun)
//
// Every rank parses the module, builds the execution plan, loads the same
// weights, and trains with the planned fused allreduces overlapping
// backward. Rank 0 prints progress and a summary.
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Runtime/Checkpoint.h"
#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/Cuda.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/DeviceSetup.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Runtime/GradientDump.h"
#include "oasr/Runtime/Report.h"
#include "oasr/Runtime/Training.h"
#include "oasr/Schedule/Schedule.h"

#include "oasr/Compile/SourceModel.h"
#if OASR_HAVE_PASSES
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "oasr/Compile/Compile.h"
#include "oasr/Passes/Passes.h"
#endif

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sched.h>
#include <thread>
#include <unistd.h>

using namespace oasr::rt;
namespace cl = llvm::cl;

static cl::OptionCategory runCat("oasr-run options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir | model.onnx>"),
                                      cl::cat(runCat));
static cl::opt<int> np("np", cl::desc("Re-launch under `mpirun -np N`"),
                       cl::init(0), cl::cat(runCat));
static cl::opt<std::string>
    strategy("strategy",
             cl::desc("Allreduce plan for an .onnx input (wfbp, single, "
                      "bucket:<bytes>, mgwfbp, oasr, optimal)"),
             cl::init(""), cl::cat(runCat));
static cl::opt<double> alpha("alpha", cl::desc("Start-up latency (s)"),
                             cl::init(-1), cl::cat(runCat));
static cl::opt<double> beta("beta", cl::desc("Per-byte time (s/B)"),
                            cl::init(-1), cl::cat(runCat));
static cl::opt<double> overlapRate(
    "overlap-rate",
    cl::desc("Plan with communication progressing at this rate in [0, 1] "
             "while backward computes (default: the calibration's, else 1)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<std::string> gradDtype(
    "grad-dtype",
    cl::desc("Element type gradients travel in for an .onnx input: f32 "
             "(default), bf16 or f16 (half the bytes; docs/runtime.md)"),
    cl::init("f32"), cl::cat(runCat));
static cl::opt<std::string>
    commFile("comm", cl::desc("Calibration JSON from `oasr-bench comm`"),
             cl::init(""), cl::cat(runCat));
static cl::list<std::string>
    dims("dim",
         cl::desc("Symbolic dimension of an .onnx input: name=value "
                  "(repeatable)"),
         cl::cat(runCat));
static cl::opt<std::string>
    planProfile("plan-profile",
                cl::desc("Measured oasr-profile-v1 the .onnx plan uses for "
                         "its costs (e.g. from an earlier --profile)"),
                cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    optimizer("optimizer",
              cl::desc("sgd | momentum | adagrad | adam, for an .onnx input"),
              cl::init(""), cl::cat(runCat));
static cl::opt<double> momentum("momentum",
                                cl::desc("Momentum, for an .onnx input"),
                                cl::init(-1), cl::cat(runCat));
static cl::opt<std::string>
    dataSpec("data",
             cl::desc("synthetic | tokens:FILE[:u16|:u32] | mnist:DIR | "
                      "cifar10:DIR"),
             cl::init("synthetic"), cl::cat(runCat));
static cl::opt<int64_t>
    vocab("vocab",
          cl::desc("Token ids lie in [0, N) (default: the rows of the "
                   "embedding table the input indexes)"),
          cl::init(0), cl::cat(runCat));
static cl::opt<int64_t> ignoreIndex(
    "ignore-index",
    cl::desc("Label value the appended loss ignores (padding; compiling an "
             ".onnx only)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<int> batch("batch",
                          cl::desc("Per-rank batch (must match the module)"),
                          cl::init(0), cl::cat(runCat));
static cl::opt<int64_t> steps("steps", cl::desc("Training steps"), cl::init(10),
                              cl::cat(runCat));
static cl::opt<double> lr("lr",
                          cl::desc("Learning rate (overrides the "
                                   "module's)"),
                          cl::init(-1), cl::cat(runCat));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed for data and init"),
                              cl::init(1), cl::cat(runCat));
// `--threads=N` is taken out of argv before llvm::cl sees it: libLLVM
// already registers a global option of that name.
static int threads = 0;
static cl::opt<std::string> tracePath("trace",
                                      cl::desc("Write a Chrome trace JSON"),
                                      cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    profilePath("profile", cl::desc("Write the measured oasr-profile-v1"),
                cl::init(""), cl::cat(runCat));
static cl::opt<std::string> savePath("save",
                                     cl::desc("Write the trained ONNX model"),
                                     cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    dumpGrads("dump-grads",
              cl::desc("Write the loss, parameters and averaged gradients of "
                       "the last step (FILE.npz: NumPy arrays; else JSON)"),
              cl::init(""), cl::cat(runCat));
static cl::opt<int64_t> logEvery("log-every",
                                 cl::desc("Progress line every N steps"),
                                 cl::init(1), cl::cat(runCat));
static cl::opt<std::string>
    commKind("communicator",
             cl::desc("mpi | self (default: mpi under mpirun, else self)"),
             cl::init(""), cl::cat(runCat));
static cl::opt<std::string>
    device("device",
           cl::desc("Kernel backend: cpu (oneDNN) | cuda (cuDNN/cuBLAS, one "
                    "GPU per rank); --list-devices shows what is visible"),
           cl::init("cpu"), cl::cat(runCat));
static cl::opt<std::string>
    commBackend("comm-backend",
                cl::desc("Gradient averaging: mpi | nccl (default: nccl with "
                         "--device=cuda on several ranks, else mpi)"),
                cl::init(""), cl::cat(runCat));
static cl::opt<std::string> commPriority(
    "comm-priority",
    cl::desc("Communication thread against compute for a CPU: idle (runs "
             "only where compute leaves a CPU free; default with --device=cpu, "
             "whose allreduces are CPU work, where the process may raise it "
             "while compute waits) | normal (default with cuda) | sleep (an "
             "ordinary thread that sleeps between MPI tests while an "
             "allreduce waits on the network); with --comm=FILE on the CPU, "
             "default: the calibration's measured comm_priority"),
    cl::init(""), cl::cat(runCat));
static cl::opt<int> commCpu(
    "comm-cpu",
    cl::desc("Pin the communication thread to this CPU (a core left free for "
             "it, e.g. `taskset -c 0 oasr-run --comm-cpu=1`)"),
    cl::init(-1), cl::cat(runCat));
static cl::opt<std::string>
    algoName("algo",
             cl::desc("Training algorithm: sync-sgd (planned allreduces) | "
                      "sync-easgd (local steps, elastic averaging) | "
                      "async-easgd, async-measgd, hogwild-easgd (elastic "
                      "exchanges with a center variable on a parameter "
                      "server, see --ps-server) | roundrobin-easgd (SC'17's "
                      "original EASGD: the server takes the ranks in turn) | "
                      "async-sgd, async-msgd, hogwild-sgd (their SGD "
                      "baselines); the m- forms need a momentum optimizer"),
             cl::init("sync-sgd"), cl::cat(runCat));
static cl::opt<std::string> psServer(
    "ps-server",
    cl::desc("Parameter-server algorithms: shared (rank 0 trains and serves "
             "the center variable) | dedicated (the last rank only serves, "
             "the others split the data)"),
    cl::init("shared"), cl::cat(runCat));
static cl::opt<int64_t>
    easgdTau("easgd-tau",
             cl::desc("EASGD: steps between exchanges "
                      "(the SGD forms exchange every step)"),
             cl::init(4), cl::cat(runCat));
static cl::opt<double> easgdAlpha("easgd-alpha",
                                  cl::desc("EASGD: elastic moving rate"),
                                  cl::init(-1), cl::cat(runCat));
static cl::opt<bool> quiet("quiet", cl::desc("No progress lines"),
                           cl::init(false), cl::cat(runCat));
static cl::opt<std::string>
    emitMlir("emit-mlir", cl::desc("Write the compiled module (rank 0)"),
             cl::init(""), cl::cat(runCat));
static cl::opt<std::string> checkpointDir(
    "checkpoint",
    cl::desc("Write checkpoints (parameters, optimizer and BN state, step, "
             "data order, random state) into DIR/step-NNNNNNNN/"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(runCat));
static cl::opt<int64_t>
    checkpointEvery("checkpoint-every",
                    cl::desc("Checkpoint after every N-th step (with "
                             "--checkpoint; default: only after the last)"),
                    cl::init(0), cl::cat(runCat));
static cl::opt<int64_t>
    keepCheckpoints("keep-checkpoints",
                    cl::desc("Keep the newest K checkpoints (0: all)"),
                    cl::init(2), cl::cat(runCat));
static cl::opt<std::string> resumeDir(
    "resume",
    cl::desc("Continue from the newest complete checkpoint in DIR (or the "
             "step directory DIR); --steps stays the total"),
    cl::value_desc("DIR"), cl::init(""), cl::cat(runCat));
static cl::opt<bool> allowNonFinite(
    "allow-nonfinite",
    cl::desc("Keep training when the loss becomes NaN or Inf (default: stop, "
             "naming the step and the first non-finite tensor)"),
    cl::init(false), cl::cat(runCat));
static cl::opt<std::string> replan(
    "replan",
    cl::desc("Re-plan the fused allreduces from this run's measurements: "
             "off | once (after 1 + 3 steps; the default for sync-sgd on "
             "several CPU ranks with a strategy that plans with a model: "
             "mgwfbp, optimal, oasr) | every:N (every N steps)"),
    cl::init(""), cl::cat(runCat));
static cl::opt<std::string> replanProfile(
    "replan-profile",
    cl::desc("Write the last re-plan's agreed profile and fitted allreduce "
             "model (oasr-profile-v1 with `comm`; as --plan-profile it plans "
             "the same groups from the start)"),
    cl::init(""), cl::cat(runCat));
static cl::opt<bool> debugMemory("debug-memory", cl::Hidden, cl::init(false),
                                 cl::desc("Print RSS at each setup phase"));
// Testing only.
static cl::opt<int64_t> failAtStep("fail-at-step", cl::Hidden, cl::init(-1));
static cl::opt<int> failRank("fail-rank", cl::Hidden, cl::init(-1));
static cl::opt<int> failSignal("fail-signal", cl::Hidden, cl::init(0));

namespace {
/// The failure of one rank's setup, agreed on collectively.
struct Failure {
  bool failed = false;
  std::string message;
  void set(const llvm::Twine &m) {
    if (!failed) {
      failed = true;
      message = m.str();
    }
  }
  void set(llvm::Error err) { set(llvm::toString(std::move(err))); }
};

/// Re-executes under mpirun: `mpirun -np P --oversubscribe --bind-to none
/// <self> args...`.
int relaunch(int argc, char **argv) {
  std::string self = llvm::sys::fs::getMainExecutable(argv[0], (void *)&np);
  auto mpirun = llvm::sys::findProgramByName("mpirun");
  if (!mpirun) {
    llvm::errs() << "oasr-run: error: --np needs `mpirun` on PATH\n";
    return 1;
  }
  // Unbound ranks: mpirun's default (--bind-to core for up to 2 ranks) would
  // put each rank's compute threads and communication thread on one core.
  std::vector<std::string> args = {
      *mpirun, "-np", std::to_string(np), "--oversubscribe", "--bind-to",
      "none",  self};
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a(argv[i]);
    if (a == "--np" || a == "-np") {
      ++i;
      continue;
    }
    if (a.starts_with("--np=") || a.starts_with("-np="))
      continue;
    args.push_back(a.str());
  }
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execv(cargs[0], cargs.data());
  llvm::errs() << "oasr-run: error: cannot execute " << *mpirun << ": "
               << std::strerror(errno) << "\n";
  return 1;
}

/// Why `path` cannot be written ("" when it can), checked without
/// truncating an existing file: outputs are only written after training.
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

/// Prints this process' current and peak RSS (--debug-memory).
void memoryPoint(const char *phase) {
  if (!debugMemory)
    return;
  std::ifstream status("/proc/self/status");
  std::string line, rss, hwm;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0)
      rss = line.substr(6);
    if (line.rfind("VmHWM:", 0) == 0)
      hwm = line.substr(6);
  }
  llvm::errs() << "memory after " << phase << ": rss" << rss << ", peak" << hwm
               << "\n";
}

/// CPUs this process may run on (its affinity mask: mpirun's --bind-to,
/// taskset, a batch scheduler's cgroup), 0 if unknown.
int boundCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return 0;
  return CPU_COUNT(&set);
}

/// Compute threads per rank when --threads is not given: the CPUs the rank
/// is bound to when a launcher bound it, else this host's CPUs shared by its
/// ranks.
int defaultThreads() {
  int online = int(std::thread::hardware_concurrency());
  int bound = boundCpus();
  if (bound > 0 && bound < online)
    return bound;
  return std::max(1, online / localRankCount());
}

bool usedDefaultComm = false;
/// Where an .onnx plan's allreduce model came from, for the summary.
std::string commSource;

/// Parses or compiles the model into a training module
/// (mlir::oasr::compileForTraining).
mlir::OwningOpRef<mlir::ModuleOp> loadModule(mlir::MLIRContext &ctx,
                                             Failure &failure) {
#if OASR_HAVE_PASSES
  mlir::oasr::TrainingCompileOptions o;
  o.batch = batch;
  o.dims.assign(dims.begin(), dims.end());
  o.ignoreIndex = ignoreIndex;
  o.strategy = strategy;
  o.alpha = alpha;
  o.beta = beta;
  o.commFile = commFile;
  if (overlapRate.getNumOccurrences())
    o.overlapRate = overlapRate.getValue();
  o.profile = planProfile;
  if (gradDtype.getNumOccurrences())
    o.gradDtype = gradDtype;
  o.optimizer = optimizer;
  o.momentum = momentum;
  o.lr = lr;
  auto compiled = mlir::oasr::compileForTraining(ctx, modelPath, o);
  if (!compiled) {
    failure.set(compiled.takeError());
    return nullptr;
  }
  commSource = compiled->commSource;
  usedDefaultComm = compiled->usedDefaultComm;
  return std::move(compiled->module);
#else
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(modelPath, &ctx);
  if (!module)
    failure.set(modelPath + ": cannot parse (this oasr-run was built without "
                            "the passes; .onnx inputs need oasr-opt first)");
  return module;
#endif
}

/// Ends the job with this rank's own error message (the failure report of
/// the other ranks says the rest).
[[noreturn]] void abortRun(Communicator &comm, const std::string &message,
                           int code) {
  silenceFailureReport();
  comm.abort(message, code);
  std::_Exit(code); // not reached: abort ends the job
}

/// `v` as the command line would spell it (-1, 0.5, nan, inf).
std::string numberText(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// The first numeric option given out of its range, as an error naming it
/// ("" when every one is valid).
std::string checkNumericOptions() {
  auto given = [](const cl::Option &o) { return o.getNumOccurrences() > 0; };
  auto finiteAtLeast = [&](const cl::opt<double> &o, double low) {
    return !given(o) || (std::isfinite(double(o)) && double(o) >= low);
  };
  auto name = [](const cl::Option &o, const std::string &value) {
    return "--" + o.ArgStr.str() + "=" + value + ": ";
  };
  if (given(batch) && batch <= 0)
    return name(batch, std::to_string(batch)) +
           "expected a positive per-rank batch";
  if (given(steps) && steps < 1)
    return name(steps, std::to_string(steps)) +
           "expected a positive number of steps";
  if (!finiteAtLeast(lr, 0))
    return name(lr, numberText(lr)) + "expected a finite learning rate >= 0";
  if (!finiteAtLeast(momentum, 0) || (given(momentum) && momentum > 1))
    return name(momentum, numberText(momentum)) +
           "expected a finite momentum in [0, 1]";
  if (!finiteAtLeast(alpha, 0))
    return name(alpha, numberText(alpha)) +
           "expected a finite start-up latency >= 0 (seconds)";
  if (!finiteAtLeast(beta, 0))
    return name(beta, numberText(beta)) +
           "expected a finite per-byte time >= 0 (seconds/byte)";
  if (!finiteAtLeast(overlapRate, 0) || (given(overlapRate) && overlapRate > 1))
    return name(overlapRate, numberText(overlapRate)) +
           "must be in [0, 1] (the rate communication progresses while "
           "backward computes)";
  if (given(vocab) && vocab < 1)
    return name(vocab, std::to_string(vocab)) +
           "expected a positive vocabulary size";
  if (given(logEvery) && logEvery < 1)
    return name(logEvery, std::to_string(logEvery)) +
           "expected a positive number of steps";
  if (given(commCpu) && commCpu < 0)
    return name(commCpu, std::to_string(commCpu)) +
           "expected a CPU number >= 0";
  if (given(checkpointEvery) && checkpointEvery < 1)
    return name(checkpointEvery, std::to_string(checkpointEvery)) +
           "expected a positive number of steps";
  if (given(keepCheckpoints) && keepCheckpoints < 0)
    return name(keepCheckpoints, std::to_string(keepCheckpoints)) +
           "expected a number of checkpoints >= 0 (0 keeps all)";
  if (given(replanProfile) && replan == "off")
    return "--replan-profile needs re-planning (not --replan=off)";
  if ((given(checkpointEvery) || given(keepCheckpoints)) &&
      checkpointDir.empty())
    return "--checkpoint-every/--keep-checkpoints need --checkpoint=DIR";
  return "";
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(runCat);
  cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << "oasr-run " << OASR_VERSION << "\n"; });
  std::vector<char *> args;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef a(argv[i]);
    if (i > 0 && (a == "--list-devices" || a == "-list-devices")) {
      printDevices(stdout);
      return 0;
    }
    if (i > 0 && (a.starts_with("--threads=") || a.starts_with("-threads="))) {
      if (a.split('=').second.getAsInteger(10, threads) || threads < 1) {
        llvm::errs() << "oasr-run: error: " << a
                     << ": expected a positive number of threads\n";
        return 1;
      }
      continue;
    }
    if (i > 0 && (a == "--threads" || a == "-threads") && i + 1 < argc) {
      if (llvm::StringRef(argv[i + 1]).getAsInteger(10, threads) ||
          threads < 1) {
        llvm::errs() << "oasr-run: error: --threads " << argv[i + 1]
                     << ": expected a positive number of threads\n";
        return 1;
      }
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  cl::ParseCommandLineOptions(
      int(args.size()), args.data(),
      "oasr-run: train a compiled model on MPI ranks\n\n"
      "  --threads=N  compute threads per rank "
      "(default: cores / ranks on this host)\n");
  if (np.getNumOccurrences() && np < 1) {
    llvm::errs() << "oasr-run: error: --np=" << np
                 << ": expected a positive number of ranks\n";
    return 1;
  }
  if (np > 0 && !launchedByMpi())
    return relaunch(argc, argv);

  // The communication thread's priority on the CPU: --comm-priority, else
  // the one the calibration measured to overlap better (`oasr-bench comm`
  // records it), else the default below.
  std::string calibratedPriority;
  if (commPriority.empty() && !commFile.empty() && device == "cpu") {
    llvm::Expected<std::string> p =
        oasr::schedule::readCalibrationPriority(commFile);
    if (!p) {
      llvm::errs() << "oasr-run: error: --comm: "
                   << llvm::toString(p.takeError()) << "\n";
      return 1;
    }
    calibratedPriority = *p;
  }
  // While MPI waits on the wire the communication thread yields its CPU
  // (Open MPI otherwise spins, and at normal priority that takes half a
  // shared core from compute), as in oasr-bench comm's calibration. A value
  // the user set stays.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);

  // Communicator.
  std::unique_ptr<Communicator> comm;
  std::string kind = commKind.empty() ? (launchedByMpi() ? "mpi" : "self")
                                      : std::string(commKind);
  int nthreads = threads > 0 ? int(threads) : defaultThreads();
  if (kind == "mpi") {
    std::string error;
    comm = createMpiCommunicator(&argc, &argv, error);
    if (!comm) {
      llvm::errs() << "oasr-run: error: " << error << "\n";
      return 1;
    }
  } else if (kind == "self") {
    comm = createSelfCommunicator();
  } else {
    llvm::errs() << "oasr-run: error: --communicator=" << kind
                 << ": expected mpi or self\n";
    return 1;
  }
  // Kernel backend (and NCCL) before the communication engine takes `comm`.
  std::string backendError;
  DeviceOptions deviceOptions;
  deviceOptions.device = device;
  deviceOptions.commBackend = commBackend;
  deviceOptions.algorithm = algoName;
  deviceOptions.threads = nthreads;
  deviceOptions.quiet = quiet;
  std::unique_ptr<KernelBackend> backend =
      setUpDevice(comm, deviceOptions, backendError);

  const int rank = comm->rank(), size = comm->size();
  // Idle by default with the CPU backend, where allreduces are CPU work --
  // unless this process could not raise the thread while compute waits:
  // then other load on the host would starve it (docs/runtime.md).
  const bool idleRaisable = CommEngine::idleIsRaisable();
  std::string priorityName = !commPriority.empty() ? std::string(commPriority)
                             : !calibratedPriority.empty() ? calibratedPriority
                             : device == "cpu"
                                 ? (idleRaisable ? "idle" : "normal")
                                 : "normal";
  const bool idleFellBack = commPriority.empty() &&
                            calibratedPriority.empty() && device == "cpu" &&
                            !idleRaisable;
  CommEngine engine(*comm, priorityName == "idle" ? CommEngine::Priority::Idle
                           : priorityName == "sleep"
                               ? CommEngine::Priority::Sleep
                               : CommEngine::Priority::Normal);

  // Setup on every rank; failures are agreed on before training.
  Failure failure;
  if (!backend)
    failure.set(backendError);
  if (priorityName != "idle" && priorityName != "normal" &&
      priorityName != "sleep")
    failure.set("--comm-priority=" + priorityName +
                ": expected idle, normal or sleep");
  if (commCpu.getNumOccurrences())
    if (std::string why = engine.pinToCpu(commCpu); !why.empty())
      failure.set("--comm-cpu=" + std::to_string(commCpu) + ": " + why);
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::oasr::OASRDialect>();
#if OASR_HAVE_PASSES
  mlir::oasr::registerAllPasses();
#endif
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  if (std::string bad = checkNumericOptions(); !bad.empty())
    failure.set(bad);
  if (!checkpointDir.empty() && rank == 0 && !failure.failed)
    if (std::error_code ec = llvm::sys::fs::create_directories(checkpointDir))
      failure.set("--checkpoint=" + checkpointDir +
                  ": cannot create: " + ec.message());
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (!failure.failed)
    module = loadModule(ctx, failure);
  memoryPoint("module");

  // Rank 0 writes every output file: refuse paths it cannot write before
  // training instead of after it.
  if (rank == 0 && !failure.failed)
    for (auto [name, path] :
         {std::pair<const char *, std::string>{"--trace", tracePath},
          {"--profile", profilePath},
          {"--replan-profile", replanProfile},
          {"--dump-grads", dumpGrads},
          {"--save", savePath},
          {"--emit-mlir", emitMlir}})
      if (!path.empty())
        if (std::string why = unwritable(path); !why.empty())
          failure.set(llvm::Twine(name) + "=" + path +
                      ": cannot write: " + why);

  std::unique_ptr<Executor> exec;
  if (module && backend && !failure.failed) {
    if (rank == 0 && !emitMlir.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(emitMlir, ec);
      if (ec)
        failure.set("--emit-mlir=" + emitMlir +
                    ": cannot write: " + ec.message());
      else
        module->print(os);
    }
    ExecutorOptions eo;
    eo.seed = seed;
    eo.lrOverride = lr;
    auto created = Executor::create(*module, *backend, eo);
    if (!created)
      failure.set(llvm::Twine(modelPath) + ": " +
                  llvm::toString(created.takeError()));
    else
      exec = std::move(*created);
  }
  memoryPoint("plan");
  if (exec && batch > 0 && exec->batch() != batch)
    failure.set(llvm::formatv("--batch={0} does not match the model: {1} was "
                              "compiled for a per-rank batch of {2}",
                              batch.getValue(), modelPath.getValue(),
                              exec->batch())
                    .str());
  // The ONNX source: the initial weights, and what --save writes back.
  std::unique_ptr<oasr::SourceModel> onnxModel;
  if (exec && !failure.failed) {
    InitializerLoader loader;
    auto source = oasr::SourceModel::open(*exec);
    if (!source)
      failure.set(source.takeError());
    else if ((onnxModel = std::move(*source)))
      loader = onnxModel->loader();
    if (!failure.failed) {
      auto loaded = initializeWeights(*exec, loader, seed);
      if (!loaded)
        // Only the ONNX source's initializers can fail to load: name it.
        failure.set(exec->sourcePath() + ": " +
                    llvm::toString(loaded.takeError()));
      else if (rank == 0 && !quiet) {
        size_t weights = 0;
        for (const PersistentTensor &t : exec->persistent())
          weights += t.kind != PersistentTensor::OptState;
        std::printf("oasr-run: %s: %zu parameter/state tensors, %u loaded "
                    "from %s%s\n",
                    modelPath.c_str(), weights, *loaded,
                    onnxModel ? exec->sourcePath().c_str() : "(no ONNX source)",
                    *loaded < weights ? ", the rest seeded random" : "");
      }
    }
  }
  memoryPoint("weights");
  std::unique_ptr<DataLoader> data;
  if (exec && !failure.failed) {
    SampleShape shape;
    shape.features =
        exec->input().numel() / std::max<int64_t>(exec->batch(), 1);
    shape.classes = exec->numClasses();
    DType inType = exec->input().desc.dtype;
    shape.tokens = inType == DType::I64 || inType == DType::I32;
    shape.vocab = vocab > 0 ? vocab.getValue() : exec->inputVocab();
    if (exec->label().data)
      shape.labelsPerSample =
          exec->label().numel() / std::max<int64_t>(exec->batch(), 1);
    // A dedicated parameter server trains on nothing: the other ranks split
    // the data (the server's loader is a valid, unused shard).
    const bool dedicated = psServer == "dedicated" && size > 1;
    const int workers = dedicated ? size - 1 : size;
    auto loader = createDataLoader(dataSpec, shape, rank < workers ? rank : 0,
                                   workers, seed);
    if (!loader)
      failure.set(loader.takeError());
    else
      data = std::move(*loader);
  }
  AlgorithmOptions algoOptions;
  algoOptions.server = psServer;
  algoOptions.easgdTau = easgdTau;
  algoOptions.easgdAlpha = easgdAlpha;
  if (llvm::Error err =
          checkTrainingAlgorithm(algoName, algoOptions, *comm, exec.get()))
    failure.set(std::move(err));
  if (easgdAlpha.getNumOccurrences() && !(easgdAlpha > 0 && easgdAlpha <= 1))
    failure.set("--easgd-alpha=" + std::to_string(double(easgdAlpha)) +
                ": must be in (0, 1]");
  if (!savePath.empty() && !failure.failed && !onnxModel)
    failure.set("--save needs the model's ONNX source (module attribute "
                "oasr.source naming an existing .onnx file)");

  // Re-planning: by default once for sync SGD on several ranks when the
  // strategy plans with a model (the others group by layer or size).
  ReplanOptions replanOptions;
  if (!replan.empty()) {
    if (auto r = parseReplanOption(replan))
      replanOptions = *r;
    else
      failure.set("--replan=" + replan + ": " + llvm::toString(r.takeError()));
    if (replanOptions.mode != ReplanOptions::Mode::Off && !failure.failed) {
      if (algoName != "sync-sgd")
        failure.set("--replan=" + replan + ": --algo=" + algoName +
                    " does not run the planned allreduces (sync-sgd does)");
      else if (exec &&
               !oasr::schedule::strategyNeedsCommModel(exec->planStrategy()))
        failure.set("--replan=" + replan + ": the plan's strategy '" +
                    (exec->planStrategy().empty() ? std::string("?")
                                                  : exec->planStrategy()) +
                    "' groups without an allreduce model; re-planning "
                    "applies to mgwfbp, optimal and oasr");
    }
  } else if (algoName == "sync-sgd" && size > 1 && exec &&
             device.getValue() == "cpu" &&
             oasr::schedule::strategyNeedsCommModel(exec->planStrategy())) {
    // Not by default on a GPU: per-op times there measure kernel launches,
    // not the kernels (docs/runtime.md).
    replanOptions.mode = ReplanOptions::Mode::Once;
  }
  if (!replanProfile.empty() && !failure.failed &&
      replanOptions.mode == ReplanOptions::Mode::Off)
    failure.set("--replan-profile=" + replanProfile +
                ": nothing is re-planned in this run (sync-sgd on several "
                "ranks with mgwfbp, optimal or oasr re-plans)");

  // Checkpoints: what must match on resume; rank 0 reads and checks the
  // newest one now, every rank restores it after the agreement.
  CheckpointOptions checkpointOptions;
  checkpointOptions.dir = checkpointDir;
  checkpointOptions.every = checkpointDir.empty() ? 0
                            : checkpointEvery > 0 ? int64_t(checkpointEvery)
                                                  : int64_t(steps);
  checkpointOptions.keep = keepCheckpoints;
  // Where the center variable lives is part of what must match.
  checkpointOptions.algorithm =
      psServer == "dedicated" ? algoName + " --ps-server=dedicated" : algoName;
  checkpointOptions.dataSource = dataSpec;
  checkpointOptions.seed = seed;
  CheckpointBytes resumeBytes;
  if (!resumeDir.empty() && exec && data && !failure.failed && rank == 0) {
    auto latest = findLatestCheckpoint(resumeDir);
    if (!latest)
      failure.set(latest.takeError());
    else if (auto read =
                 readCheckpoint(*latest, *exec, size, checkpointOptions))
      resumeBytes = std::move(*read);
    else
      failure.set(read.takeError());
  }
  if (data && !failure.failed && rank == 0 && data->trainSize() > 0 && exec &&
      data->trainSize() < exec->batch())
    llvm::errs() << llvm::formatv(
        "oasr-run: warning: --data={0}: rank 0's shard holds {1} training "
        "sample(s), fewer than one batch of {2}: every batch repeats "
        "samples\n",
        dataSpec.getValue(), data->trainSize(), exec->batch());

  // Agree: the lowest failing rank reports, everyone exits non-zero.
  double lowestFailing = failure.failed ? -double(rank) : -1e9;
  engine.run([&](Communicator &c) { c.allreduceMax(&lowestFailing, 1); });
  if (lowestFailing > -1e9) {
    int who = int(-lowestFailing);
    if (rank == who) {
      std::string prefix = size > 1 && rank != 0
                               ? "oasr-run: " + rankName(*comm) + ": error: "
                               : "oasr-run: error: ";
      std::fprintf(stderr, "%s%s\n", prefix.c_str(), failure.message.c_str());
      std::fflush(stderr);
    }
    engine.drain();
    comm->finalize();
    return 1;
  }

  if (int bound = boundCpus(); rank == 0 && bound > 0 && nthreads > bound)
    llvm::errs() << llvm::formatv(
        "oasr-run: warning: {0} compute threads per rank, but rank 0 may run "
        "on {1} CPU(s) only (its affinity mask, e.g. mpirun's default "
        "--bind-to core); the threads will share them. Launch with `mpirun "
        "--bind-to none` or `--map-by slot:PE={0}`, or use --threads={1}\n",
        nthreads, bound);
  // Ranks whose compute threads fill the host leave communication no CPU
  // of its own: the plan should know (oasr-bench comm measures the overlap
  // rate), and with more threads than CPUs the ranks take turns on them,
  // which the timeline model does not describe.
  if (int online = int(std::thread::hardware_concurrency());
      rank == 0 && device.getValue() == "cpu" && online > 0 &&
      localRankCount() * nthreads > online)
    llvm::errs() << llvm::formatv(
        "oasr-run: warning: {0} rank(s) x {1} compute thread(s) on this "
        "host's {2} CPU(s): the ranks oversubscribe the host, take turns on "
        "its CPUs and cannot overlap communication with backward; expect the "
        "measured iteration to exceed the prediction (docs/runtime.md)\n",
        localRankCount(), nthreads, online);
  if (rank == 0 && !quiet && !calibratedPriority.empty())
    std::printf("oasr-run: communication thread at %s priority (%s's "
                "comm_priority, measured by oasr-bench comm)\n",
                priorityName.c_str(), commFile.c_str());
  if (rank == 0 && !quiet && idleFellBack)
    llvm::errs() << "oasr-run: note: the communication thread runs at normal "
                    "priority: this process may not raise an idle-priority "
                    "one while compute waits (needs CAP_SYS_NICE or `ulimit "
                    "-e 20`), and other load on the host would starve it; "
                    "--comm-priority=idle forces idle priority\n";
  if (rank == 0 && !quiet && priorityName == "idle" &&
      !engine.raisesWhileWaited())
    llvm::errs() << "oasr-run: note: the communication thread runs at idle "
                    "priority and this process may not raise it while compute "
                    "waits (needs CAP_SYS_NICE or `ulimit -e 20`): other load "
                    "on the host will starve communication; there, pass "
                    "--comm-priority=normal\n";
  if (rank == 0 && !quiet && usedDefaultComm)
    std::printf("oasr-run: planned with the default allreduce model alpha=%g s "
                "beta=%g s/B (give --comm=FILE from `oasr-bench comm`, or "
                "--alpha/--beta)\n",
                mlir::oasr::kDefaultAllreduceAlpha,
                mlir::oasr::kDefaultAllreduceBeta);
  if (rank == 0 && !quiet) {
    const MemoryStats &m = exec->memory();
    int bound = boundCpus(), online = int(std::thread::hardware_concurrency());
    std::string binding =
        bound > 0 && bound < online
            ? llvm::formatv(" (rank 0 bound to {0} of {1} CPUs)", bound, online)
                  .str()
            : "";
    std::printf(
        "oasr-run: %d rank(s) [%s], %d thread(s)/rank%s, batch %lld/rank, "
        "data %s, plan %s with %zu fused group(s); memory: "
        "activations %.1f MiB (%.1f MiB without reuse), weights+state "
        "%.1f MiB, gradients %.1f MiB\n",
        size, comm->name(), nthreads, binding.c_str(), (long long)exec->batch(),
        data->describe().c_str(),
        exec->planStrategy().empty() ? "?" : exec->planStrategy().c_str(),
        exec->groups().size(), m.arenaBytes / 1048576.0,
        m.unsharedBytes / 1048576.0, m.persistentBytes / 1048576.0,
        m.gradBytes / 1048576.0);
    std::fflush(stdout);
  }

  int64_t startStep = 0;
  std::vector<float> resumedAlgorithmState;
  if (!resumeDir.empty()) {
    broadcastCheckpoint(resumeBytes, engine);
    auto resumed = restoreCheckpoint(resumeBytes, *exec, *data, rank);
    if (!resumed)
      abortRun(*comm,
               "oasr-run: " + rankName(*comm) +
                   ": error: --resume: " + llvm::toString(resumed.takeError()),
               1);
    startStep = resumed->step;
    resumedAlgorithmState = std::move(resumed->algorithmState);
    noteProgress(startStep);
    noteCheckpoint(resumed->path);
    if (rank == 0 && !quiet)
      std::printf("oasr-run: resumed from %s: step %lld of %lld\n",
                  resumed->path.c_str(), (long long)startStep,
                  (long long)steps.getValue());
    // Nothing left to train: the run still evaluates and writes --save and
    // --dump-grads from the checkpoint's weights (a checkpoint to ONNX).
    if (rank == 0 && startStep >= steps)
      llvm::errs() << llvm::formatv(
          "oasr-run: note: {0} holds step {1}, --steps={2}: no step left to "
          "train (--steps is the total, not the steps to add)\n",
          resumed->path, startStep, steps.getValue());
  }
  installFailureReport(engine);

  std::unique_ptr<TrainingAlgorithm> algo =
      createTrainingAlgorithm(algoName, *exec, engine, algoOptions);
  if (!resumeDir.empty())
    if (llvm::Error err = algo->restoreAlgorithmState(resumedAlgorithmState))
      abortRun(*comm,
               "oasr-run: " + rankName(*comm) +
                   ": error: --resume: " + llvm::toString(std::move(err)),
               1);
  TrainOptions to;
  to.steps = steps;
  to.logEvery = logEvery;
  to.quiet = quiet;
  to.tracePath = tracePath;
  to.profilePath = profilePath;
  to.failAtStep = failAtStep;
  to.failRank = failRank;
  to.failSignal = failSignal;
  to.startStep = startStep;
  to.checkpoint = checkpointOptions;
  to.allowNonFinite = allowNonFinite;
  to.replan = replanOptions;
  to.replanProfilePath = replanProfile;
  TrainSummary summary;
  if (auto err = train(*exec, *data, *algo, engine, to, summary))
    abortRun(*comm,
             "oasr-run: " + rankName(*comm) +
                 ": error: " + llvm::toString(std::move(err)),
             1);

  memoryPoint("training");
  if (rank == 0) {
    SummaryContext sc;
    sc.ranks = size;
    sc.strategy = exec->planStrategy();
    sc.groups = exec->groups().size();
    sc.algorithm = algo->name();
    sc.algorithmReport = algo->report();
    sc.planned = algoName == "sync-sgd";
    std::string costs = exec->costSource().empty()
                            ? std::string("the module's plan")
                            : exec->costSource() + " costs";
    sc.predictedFrom = commSource.empty() ? costs : costs + ", " + commSource;
    printSummary(stdout, summary, sc);

    if (!dumpGrads.empty())
      if (auto err = writeGradientDump(dumpGrads, *exec))
        abortRun(*comm, "oasr-run: error: " + llvm::toString(std::move(err)),
                 1);
    if (!savePath.empty()) {
      auto saved = onnxModel->save(*exec, savePath);
      if (!saved)
        abortRun(
            *comm,
            "oasr-run: error: --save: " + llvm::toString(saved.takeError()), 1);
      std::printf("saved %s (%zu initializers updated)\n", savePath.c_str(),
                  *saved);
    }
  }
  engine.run([](Communicator &c) { c.barrier(); });
  engine.drain();
  comm->finalize();
  return 0;
}
