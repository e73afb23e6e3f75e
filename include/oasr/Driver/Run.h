//===- Run.h - A training run from its options to its exit code -*- C++ -*-===//
//
// What `oasr-run` does once its command line is parsed: check the options,
// pick the communicator and the communication thread's priority, set up the
// device, load the module and the weights, agree on every rank's set-up
// failures, resume from a checkpoint, train, and report. The decisions are
// separate functions so they are tested without MPI; runTraining strings
// them together. The compiler side (compiling an .onnx, the ONNX source of
// the weights) comes in through RunModelHooks: the runtime does not link
// lib/Compile, which sits above it.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_DRIVER_RUN_H
#define OASR_DRIVER_RUN_H

#include "oasr/Runtime/Checkpoint.h"
#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Runtime/Program.h"
#include "oasr/Runtime/Replan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace oasr::rt {

/// oasr-run's options as plain data, named after their flags. An empty
/// optional is a flag not given (a given value is checked even where it
/// equals the default's sentinel: `--lr=-1` is an error).
struct RunOptions {
  std::string modelPath;
  // Compiling an .onnx input (the model hook reads these).
  std::string strategy;
  std::optional<double> alpha, beta, overlapRate;
  std::string commFile; ///< --comm: oasr-bench comm calibration
  std::vector<std::string> dims;
  std::string planProfile;
  std::string gradDtype; ///< f32 | bf16 | f16; empty: not given (f32)
  std::string compress;  ///< off | powersgd:R | auto[:R[-M]]; empty: not given
  int64_t compressStart = 0; ///< --compress-start
  std::string twoLevel; ///< auto | flat | two-level; empty: not given (auto)
  /// --ranks-per-node: the nodes the two-level allreduce reduces inside (0:
  /// the MPI library's shared-memory nodes).
  int ranksPerNode = 0;
  std::string precision; ///< f32 | tf32 | bf16 | f16; empty: not given
  bool allowInferenceGraph = false; ///< train a folded-BN export anyway
  bool fuseAttention = true;        ///< --fuse-attention (oasr-fuse-attention)
  /// --timeout: seconds a collective may go without progress before every
  /// rank stops (unset: 10x the predicted step, at least 60 s).
  std::optional<double> timeoutS;
  std::string optimizer;
  std::optional<double> momentum;
  int64_t ignoreIndex = -1;
  double labelSmoothing = 0; ///< --label-smoothing
  // Training.
  std::optional<int64_t> batch; ///< per rank; must match the module
  std::string dataSpec = "synthetic";
  /// --augment, --normalize: how image data becomes samples.
  rt::ImageOptions images;
  std::optional<int64_t> vocab;
  int64_t steps = 10;
  std::optional<double> lr;
  /// The recipe's per-step options, as given (Run parses them into
  /// TrainRecipe once the step's base rate is known).
  struct Recipe {
    std::string lrSchedule = "constant";
    int64_t warmup = 0;
    double warmupStart = 0, minLr = 0, clipGradNorm = 0;
    int64_t accumulate = 1; ///< --accumulate
    std::string metricsPath;
  } recipe;
  uint64_t seed = 1;
  int threads = 0; ///< compute threads per rank; 0: defaultThreads()
  int64_t logEvery = 1;
  /// --eval-every: the evaluation after every N-th step.
  std::optional<int64_t> evalEvery;
  /// --eval-data: what evaluation reads (empty: --data's held-out split).
  std::string evalDataSpec;
  bool quiet = false;
  bool allowNonFinite = false;
  // Outputs (rank 0 writes them).
  std::string tracePath, profilePath, savePath, dumpGrads, emitMlir;
  /// --save-ort: write the trained state as an ONNX Runtime checkpoint.
  std::string saveOrtPath;
  // Device and communication.
  std::string communicator; ///< mpi | self; empty: mpi under mpirun
  std::string device = "cpu";
  bool cudaGraph = false; ///< --cuda-graph
  std::string commBackend;
  std::string commPriority; ///< idle | normal | sleep; empty: chosen
  std::optional<int> commCpu;
  // The training algorithm.
  std::string algorithm = "sync-sgd";
  std::string psServer = "shared";
  int64_t easgdTau = 4;
  std::optional<double> easgdAlpha;
  // Checkpoints.
  std::string checkpointDir;
  std::optional<int64_t> checkpointEvery;
  std::optional<int64_t> keepCheckpoints; ///< default 2
  std::string resumeDir;
  /// --allow-resize: resume a checkpoint written by another number of ranks
  /// (sync-sgd, sync-easgd); --keep-global-batch: and change the per-rank
  /// batch so that the global batch stays the checkpoint's.
  bool allowResize = false, keepGlobalBatch = false;
  /// --max-restarts: given to a rank only when mpirun started it directly,
  /// where nothing can restart the job (an error; the launcher that
  /// `oasr-run --np P` starts takes it out of the ranks' arguments).
  std::optional<int> maxRestarts;
  /// --progress-file (hidden): where rank 0 tells a --max-restarts
  /// launcher how far training got (startProgressLog).
  std::string progressFile;
  /// $OASR_REPORT_FILE: where a launcher collects the ranks' failure
  /// reports (installFailureReport).
  std::string reportFile;
  // Re-planning.
  std::string replan; ///< off | once | every:N; empty: replanFor's default
  std::string replanProfile;
  // Testing and debugging.
  bool debugMemory = false; ///< print the RSS after each set-up phase
  int64_t failAtStep = -1;
  int failRank = -1;
  int failSignal = 0;
};

/// The first option given out of its range, or given without the option it
/// needs, as an error naming it ("--steps=0: expected a positive number of
/// steps"); success when every one is valid.
llvm::Error checkRunOptions(const RunOptions &options);
/// `v` as the command line would spell it (-1, 0.5, nan, inf), for
/// messages that name an option's value.
std::string numberText(double v);

/// --max-restarts=N: a number >= 0, with --checkpoint=DIR to restart from;
/// the error naming both.
llvm::Error checkRestartOptions(std::optional<int> maxRestarts,
                                llvm::StringRef checkpointDir);

/// CPUs this process may run on (its affinity mask: mpirun's --bind-to,
/// taskset, a batch scheduler's cgroup), 0 if unknown.
int boundCpus();
/// Compute threads per rank when --threads is not given: the CPUs the rank
/// is bound to when a launcher bound it to fewer than the host's, else the
/// host's `onlineCpus` shared by its `localRanks` (at least 1).
int defaultThreads(int onlineCpus, int boundCpus, int localRanks);
/// The same for this process.
int defaultThreads();

/// Rank 0's warnings about its compute threads and the CPUs, one line
/// each: more `threads` than the `boundCpus` of its affinity mask (0:
/// unknown), and on the CPU device the host's `localRanks` ranks with more
/// compute threads in all than its `onlineCpus`.
std::vector<std::string> cpuWarnings(const RunOptions &options, int threads,
                                     int boundCpus, int onlineCpus,
                                     int localRanks);

/// The communicator --communicator asks for: mpi or self, by default mpi
/// when `underMpirun`, else self.
llvm::Expected<std::string> communicatorKind(const RunOptions &options,
                                             bool underMpirun);

/// The priority the calibration file measured to overlap better
/// (`oasr-bench comm` records it), when it decides: --comm=FILE on the CPU
/// and no --comm-priority; "" otherwise. Errors name --comm.
llvm::Expected<std::string> calibratedCommPriority(const RunOptions &options);

/// The communication thread's priority and why.
struct CommPriorityChoice {
  /// idle | normal | sleep | realtime, or what --comm-priority said
  std::string name;
  CommEngine::Priority priority = CommEngine::Priority::Normal;
  bool calibrated = false; ///< the calibration's comm_priority
  /// The CPU default (idle) fell back to normal: this process may not raise
  /// an idle thread while compute waits.
  bool idleFellBack = false;
  /// The calibration's realtime fell back to sleep: this process may not
  /// run a thread at SCHED_FIFO (the calibration was made where it could).
  bool realtimeFellBack = false;
  /// --comm-priority=realtime where this process may not use SCHED_FIFO.
  bool realtimeRefused = false;
  /// The CPU default chose sleep because ranks run on several hosts.
  bool acrossHosts = false;
  /// --comm-priority=realtime with a GPU: its communicator waits inside
  /// NCCL and CUDA, which may spin, and a spinning SCHED_FIFO thread would
  /// hold the core the compute thread launches kernels from.
  bool realtimeOnDevice = false;
  /// The error naming --comm-priority when `name` is none of the four or
  /// realtime is refused.
  std::string error() const;
};
/// --comm-priority, else the calibration's (`calibrated`, may be empty),
/// else idle on the CPU, where allreduces are CPU work (normal when the
/// process could not raise an idle thread: `idleRaisable`), else normal.
/// Realtime needs `realtimePermitted` (CommEngine::realtimeIsPermitted):
/// without it the calibration's falls back to sleep and the option's is an
/// error.
/// Ranks on several hosts (`acrossHosts`) make the CPU default sleep: the
/// network does the allreduce's work, and an idle thread starves behind
/// compute.
CommPriorityChoice chooseCommPriority(const RunOptions &options,
                                      llvm::StringRef calibrated,
                                      bool idleRaisable,
                                      bool realtimePermitted = true,
                                      bool acrossHosts = false);

/// Whether and when the run re-plans: --replan, checked against the
/// algorithm and the plan's strategy, else once for sync-sgd on several CPU
/// ranks with a strategy that plans with a model (mgwfbp, optimal, oasr)
/// whose groups the re-planner can route (`fixedForms` says how some
/// travel otherwise, e.g. "sends groups as two-level allreduces
/// (--two-level)": refused). A plan that `compresses` re-plans its groups
/// and forms on request only: a re-plan changes what a step learns
/// (docs/compression.md). Errors name --replan or --replan-profile.
llvm::Expected<ReplanOptions> replanFor(const RunOptions &options, int ranks,
                                        llvm::StringRef planStrategy,
                                        llvm::StringRef fixedForms = {},
                                        bool compresses = false);

/// The checkpoint schedule (--checkpoint-every, else once after the last
/// step) and what a resumed run must match.
CheckpointOptions checkpointOptionsFor(const RunOptions &options);

/// The data shard of `rank` among `ranks`: a dedicated parameter server
/// trains on nothing, the other ranks split the data (the server gets a
/// valid, unused shard).
struct DataShard {
  int index = 0, count = 1;
};
DataShard dataShardFor(const RunOptions &options, int rank, int ranks);

/// Why `path` cannot be written ("" when it can), checked without
/// truncating an existing file: outputs are only written after training.
std::string unwritable(llvm::StringRef path);
/// The first output file option (--trace, --profile, --replan-profile,
/// --dump-grads, --save, --emit-mlir) that cannot be written, as an error
/// naming it; success when all can.
llvm::Error checkOutputPaths(const RunOptions &options);

/// A compiled training module and where its allreduce model came from.
struct RunModule {
  /// The compiled module, or (an .oasrprog input) the program read.
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::optional<Program> program;
  /// For the summary's "predicted from" (empty for a .mlir module).
  std::string commSource;
  /// The plan used the default allreduce model, these alpha (s) and beta
  /// (s/B): the user should calibrate.
  bool usedDefaultComm = false;
  double defaultAlphaS = 0, defaultBetaSPerByte = 0;
  /// The compiler's remarks (fused attention), printed before training.
  std::vector<std::string> remarks;
};

/// The ONNX model the weights start from and --save writes back.
class RunSourceModel {
public:
  virtual ~RunSourceModel();
  virtual InitializerLoader loader() const = 0;
  /// Returns the number of initializers updated.
  virtual llvm::Expected<size_t> save(Executor &exec,
                                      llvm::StringRef path) const = 0;
  /// The ONNX Runtime checkpoint the weights come from, or "".
  virtual std::string ortCheckpoint() const { return ""; }
  /// After the weights: the optimizer state of an ONNX Runtime checkpoint
  /// (Adam's moments, the step). Returns the step restored (0: none).
  virtual llvm::Expected<int64_t> restoreOptimizerState(Executor &) {
    return 0;
  }
  /// `--save-ort`: the trained state as an ONNX Runtime checkpoint.
  /// Returns the number of parameters written.
  virtual llvm::Expected<size_t> saveORT(Executor &exec, llvm::StringRef path,
                                         double learningRate) const = 0;
};

/// What a run needs from the compiler side (lib/Compile).
struct RunModelHooks {
  /// Parses or compiles `options.modelPath` into a training module.
  std::function<llvm::Expected<RunModule>(mlir::MLIRContext &,
                                          const RunOptions &)>
      load;
  /// The executor's ONNX source, or null when it has none.
  std::function<llvm::Expected<std::unique_ptr<RunSourceModel>>(
      const Executor &)>
      openSource;
};

/// Runs the training `options` describe on this process' rank and returns
/// the exit code. Collective: every rank calls it with the same options.
/// `argc`/`argv` go to MPI_Init. Errors are printed ("oasr-run: error:
/// ..."): set-up failures by the lowest failing rank after every rank
/// agrees, failures while training by the rank that has them, which ends
/// the job.
int runTraining(const RunOptions &options, const RunModelHooks &hooks,
                int *argc, char ***argv);

//===----------------------------------------------------------------------===//
// Restarts (oasr-run --max-restarts=N)
//===----------------------------------------------------------------------===//
//
// The launcher that `oasr-run --np P` (or scripts/cluster.sh run) starts
// runs the job under mpirun; when the job fails, it runs it again from the
// newest complete checkpoint in --checkpoint=DIR (--resume=DIR, whose
// --steps stays the total), up to N times. Rank 0 of each attempt appends
// to a progress file the launcher names (--progress-file): "start S T" when
// training begins after S completed steps, "step S T" after each step,
// "setup-error T" when the ranks agreed on a set-up error (a bad option or
// model: not restarted, it would fail again); T is seconds since the epoch.

// startProgressLog and noteSetupError (Training.h) write that file.

/// Takes every occurrence of option `name` (without dashes) out of
/// command-line `args`: `-name` or `--name`, with `=VALUE` or, when
/// `takesValue`, the next argument as its value. Arguments after "--" stay.
void dropOption(std::vector<std::string> &args, llvm::StringRef name,
                bool takesValue = true);

/// The oasr-run arguments of attempt `attempt` (0: the first) from the
/// launcher's own `args` (without --np and --max-restarts): every attempt
/// writes `progressFile`; a restarted one resumes from `resumeDir` in place
/// of any --resume given (unless `resumeDir` is empty: no checkpoint yet, so
/// the run starts again as given), and drops the failure injection
/// (--fail-at-step, --fail-rank, --fail-signal: an injected failure happens
/// in the first attempt only, or every restart would fail again).
std::vector<std::string> attemptArguments(std::vector<std::string> args,
                                          int attempt,
                                          llvm::StringRef resumeDir,
                                          llvm::StringRef progressFile);

/// What rank 0 wrote to one attempt's progress file.
struct AttemptProgress {
  bool setupError = false;
  std::optional<int64_t> startStep; ///< training began after these steps
  double startS = 0;                ///< when (seconds since the epoch)
  /// (completed steps, when), in order.
  std::vector<std::pair<int64_t, double>> steps;
  /// When the attempt had completed `step` steps: its start when it began
  /// there, else the step's line; none when it never got there.
  std::optional<double> reached(int64_t step) const;
  /// The last step completed (the start step before any), if known.
  std::optional<int64_t> lastStep() const;
};
AttemptProgress parseProgress(llvm::StringRef text);

/// One attempt as the launcher saw it.
struct Attempt {
  double launchedS = 0, endedS = 0; ///< seconds since the epoch
  int exitCode = 0;                 ///< 128 + N when ended by signal N
  AttemptProgress progress;
};

/// What the restart after `failed` cost, measured by the launcher from the
/// attempts' progress: `reachedStep` L (the failed attempt's last completed
/// step), `fromStep` C (where `next` resumed), detection (from step L, or
/// the failed attempt's start, to its end), restart (from there to `next`'s
/// first step: mpirun, set-up, reading the checkpoint) and redone steps
/// (`next` from step C back to step L). Their sum is the time lost: `next`
/// reached step L that much later than `failed` had.
struct RestartCost {
  std::optional<int64_t> reachedStep, fromStep;
  std::optional<double> detectionS, restartS, redoneS;
  std::optional<double> lostS() const;
};
RestartCost restartCost(const Attempt &failed, const Attempt &next);

/// The launcher's closing lines about `attempts` (each but the last
/// failed): "restarts: R of at most N; time lost T s" and a line per
/// restart.
std::string formatRestarts(const std::vector<Attempt> &attempts,
                           int maxRestarts);

/// What the launcher runs.
struct RestartPlan {
  /// The command every attempt's arguments follow (its program a path):
  /// `mpirun -np P ... oasr-run`, or oasr-run alone for one process.
  std::vector<std::string> command;
  /// oasr-run's arguments without --np and --max-restarts.
  std::vector<std::string> args;
  int maxRestarts = 0;
  std::string checkpointDir;
};
/// Runs attempts until one succeeds, N restarts have failed, set-up failed
/// (every rank agreed on an error) or the launcher was told to stop
/// (SIGINT, SIGTERM, SIGHUP: passed on to the attempt); says on stderr why
/// each restart happens, and on stdout at the end where each happened and
/// what it cost. Returns the last attempt's exit code.
int runWithRestarts(const RestartPlan &plan);

/// The environment variable that names the launcher's report file to the
/// ranks (installFailureReport; oasr-run reads it).
constexpr const char *kReportFileVariable = "OASR_REPORT_FILE";

/// `oasr-run --np P` without restarts: runs `argv` (mpirun and the ranks)
/// once, passing SIGINT, SIGTERM and SIGHUP on, then prints the failure
/// reports the ranks wrote (their lines may never reach mpirun's stderr
/// when the job ends under load). Returns its exit code.
int runLaunched(const std::vector<std::string> &argv);

} // namespace oasr::rt

#endif // OASR_DRIVER_RUN_H
