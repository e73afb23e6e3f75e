//===- Training.h - Training algorithms and the training loop ---*- C++ -*-===//
//
// A TrainingAlgorithm decides what communication a step needs. Synchronous
// SGD averages gradients with the fused allreduces the compiler planned: it
// enqueues each group on the CommEngine when the executor reaches its
// allreduce_start and blocks at its allreduce_wait.
//
// The EASGD family plugs in through the same hooks: its ranks run the
// module's local steps with `gradientsReady`/`gradientsNeeded` as no-ops (no
// gradient averaging), and `afterStep` performs the exchange -- synchronous
// EASGD as an allreduce of the parameters on the CommEngine, the
// asynchronous and Hogwild variants as requests to server threads on rank 0
// through the Communicator's point-to-point messages. The executor does not
// change for them.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_TRAINING_H
#define OASR_RUNTIME_TRAINING_H

#include "oasr/Runtime/Checkpoint.h"
#include "oasr/Runtime/Communicator.h"
#include "oasr/Runtime/DataLoader.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Runtime/GradientDump.h"
#include "oasr/Runtime/LrSchedule.h"
#include "oasr/Runtime/Replan.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace oasr::rt {

/// What a training algorithm does around and inside each step.
class TrainingAlgorithm : public StepHooks {
public:
  ~TrainingAlgorithm() override;
  /// "sync-sgd", "easgd", ...
  virtual const char *name() const = 0;
  /// Once, before the first step: every rank must start from the same
  /// weights (SyncSGD broadcasts rank 0's parameters and state).
  virtual void setup(Executor &exec, CommEngine &engine) = 0;
  /// After every step (EASGD: elastic averaging every tau steps).
  virtual void afterStep(Executor &exec, CommEngine &engine, int64_t step) {
    (void)exec, (void)engine, (void)step;
  }
  /// Once, after the last step and before evaluation (collective).
  virtual void finish(Executor &exec, CommEngine &engine) {
    (void)exec, (void)engine;
  }
  /// Microseconds the compute thread spent blocked on communication since
  /// the last call (the exposed, non-overlapped communication).
  double takeBlockedUs() {
    double us = double(blockedNs) * 1e-3;
    blockedNs = 0;
    return us;
  }
  /// Whether `rank` trains (a dedicated parameter server does not: it skips
  /// the steps, and evaluation counts no samples on it).
  virtual bool trainsOn(int rank) const {
    (void)rank;
    return true;
  }
  /// Whether ranks step together. Progress lines of an asynchronous
  /// algorithm report rank 0 alone: summing over ranks would synchronize them.
  virtual bool lockstep() const { return true; }
  /// For the next step: hold every allreduce until the first is needed
  /// (after backward), so the step's compute runs with nothing beside it
  /// (re-planning measures the compute rate so). False where the algorithm
  /// has no such allreduces (it then ignores the request).
  virtual bool holdCommunication(bool hold) {
    (void)hold;
    return false;
  }
  /// A line for the run's summary (what the algorithm did), or empty.
  virtual std::string report() const { return ""; }
  /// An evaluation during training (--eval-every) sees the weights the
  /// end-of-run evaluation sees: `beginEvaluation` puts them in place and
  /// `endEvaluation` gives the rank its own back. Collective. Default: the
  /// rank's own weights, nothing to do (the parameter-server family: the
  /// center variable).
  virtual void beginEvaluation(Executor &exec, CommEngine &engine) {
    (void)exec, (void)engine;
  }
  virtual void endEvaluation(Executor &exec, CommEngine &engine) {
    (void)exec, (void)engine;
  }

  /// What a checkpoint must hold: nothing (the algorithm cannot be
  /// checkpointed), one copy of the executor's tensors (they are the same on
  /// every rank after each step), or every rank's own copy.
  enum class CheckpointKind { None, Shared, PerRank };
  virtual CheckpointKind checkpointKind() const { return CheckpointKind::None; }
  /// State of the algorithm itself that a checkpoint holds (the EASGD
  /// family: the center variable), returned the same on every rank; empty
  /// when there is none. Collective: every rank calls it at the same
  /// checkpoint (a parameter server's ranks meet there, and the server's
  /// center variable is sent to every rank).
  virtual std::vector<float> saveAlgorithmState() { return {}; }
  /// Restores it before `setup`, and marks the run as resumed: `setup` then
  /// keeps the restored tensors instead of starting every rank from rank
  /// 0's. Errors name what does not fit.
  virtual llvm::Error restoreAlgorithmState(const std::vector<float> &state) {
    resumed = true;
    if (state.empty())
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s keeps no algorithm state, the "
                                   "checkpoint holds %zu value(s)",
                                   name(), state.size());
  }

  /// On a rank that a resized resume added (--allow-resize), after
  /// restoreAlgorithmState: it holds rank 0's restored tensors. Default:
  /// keep them (sync-sgd's weights are the same on every rank); the EASGD
  /// family starts the new worker from the center variable.
  virtual void joinResized() {}

  /// State of this rank's own that a checkpoint holds (PowerSGD's error
  /// feedback), saved and restored on each rank; the same size on every
  /// rank. Restored after restoreAlgorithmState.
  virtual std::vector<float> saveRankState() { return {}; }
  virtual llvm::Error restoreRankState(const std::vector<float> &state) {
    if (state.empty())
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s keeps no state per rank, the "
                                   "checkpoint holds %zu value(s)",
                                   name(), state.size());
  }

protected:
  bool resumed = false; ///< restoreAlgorithmState was called
  /// Nanoseconds blocked on communication since takeBlockedUs (the hooks
  /// and afterStep add to it).
  int64_t blockedNs = 0;
};

/// Synchronous SGD over the planned fused allreduces. Groups the plan
/// compresses (GradGroup::powerSgdRank) travel plain for the first
/// `compressStart` steps, then as PowerSGD factors (PowerSGD.h; `seed`
/// draws the first Q).
std::unique_ptr<TrainingAlgorithm> createSyncSGD(Executor &exec,
                                                 CommEngine &engine,
                                                 int64_t compressStart = 0,
                                                 uint64_t seed = 0);

/// Synchronous Elastic Averaging SGD (Zhang, Choromanska, LeCun, 2015): every
/// rank takes local steps on its own gradients (the planned allreduces are
/// skipped), and every `tau` steps the ranks exchange with the center
/// variable x~: x_i <- x_i - alpha (x_i - x~), x~ <- x~ + alpha sum_i
/// (x_i - x~), one allreduce of the parameters on the CommEngine. BN state is
/// averaged at the same time.
std::unique_ptr<TrainingAlgorithm>
createSyncEASGD(Executor &exec, CommEngine &engine, int64_t tau, double alpha);

/// The parameter-server family of You, Bulu\c{c} and Demmel (SC'17): every
/// rank trains on its own shard; rank 0 also runs one server thread per
/// rank, which holds the center variable x~ and serves that rank's requests
/// first come, first served, without waiting for the other ranks.
///  - Elastic (EASGD): every `tau` steps a rank sends its weights x_i and
///    gets back e = alpha (x_i - x~); the server adds e to x~, the rank
///    subtracts it from x_i.
///  - Not elastic (SGD): every step a rank sends the change its optimizer
///    made since the last exchange; the server adds it to x~ and returns x~,
///    which the rank continues from (asynchronous SGD: gradients computed on
///    stale weights).
/// `hogwild` drops the server's lock: the threads read and write x~ at the
/// same time, element by element, so updates may interleave and be lost
/// (Hogwild). With the lock, one request updates x~ at a time. With
/// `dedicated` the server threads run on the last rank, which trains
/// nothing (SC'17's master); the other ranks split the data. Momentum
/// variants (Async MSGD/MEASGD) are these with a momentum optimizer in the
/// module. At the end every rank's weights become x~. BN statistics travel
/// with the weights. Needs a communicator with point-to-point messages.
///
/// A checkpoint is a meeting point: every rank (the dedicated server too)
/// waits there until all have taken the step, so no request is in flight;
/// it then holds every rank's own weights, optimizer state and data
/// position, and the center variable. A resumed run continues from exactly
/// that state (the server from the saved center, not from rank 0's
/// weights). With one worker the run is deterministic and a resumed run
/// equals an uninterrupted one bit for bit; with several, the order in which
/// the server serves them depends on timing, in a resumed run as in any
/// other. The exchange counts of the summary count the resumed run only.
struct ParameterServerOptions {
  bool elastic = true;
  bool hogwild = false;
  bool dedicated = false; ///< the last rank only serves
  /// SC'17's original EASGD: one server thread takes the ranks' requests in
  /// a fixed cyclic order (rank 0, 1, ..., P-1, 0, ...) instead of first
  /// come, first served, so a rank waits for its turn. The run is then
  /// deterministic on any number of ranks.
  bool roundRobin = false;
  int64_t tau = 1;    ///< steps between exchanges (elastic)
  double alpha = 0.5; ///< elastic moving rate
};
std::unique_ptr<TrainingAlgorithm>
createParameterServer(Executor &exec, CommEngine &engine,
                      const ParameterServerOptions &options, std::string name);

/// How oasr-run's --algo, --ps-server, --easgd-tau and --easgd-alpha
/// choose and configure a training algorithm.
struct AlgorithmOptions {
  std::string server = "shared"; ///< shared | dedicated (parameter servers)
  int64_t easgdTau = 1;          ///< steps between elastic exchanges
  double easgdAlpha = 0; ///< > 0: the elastic rate; else 0.9 / training ranks
  /// --compress-start: steps whose groups travel plain before the plan's
  /// PowerSGD groups compress (PyTorch's start_powerSGD_iter).
  int64_t compressStart = 0;
  uint64_t seed = 0; ///< draws PowerSGD's first Q
};

/// Every algorithm name, in the order the help lists them: sync-sgd,
/// sync-easgd, then the parameter-server family.
std::vector<std::string> trainingAlgorithmNames();
/// Whether `name` exchanges with a parameter server (point-to-point
/// messages; --ps-server applies).
bool usesParameterServer(llvm::StringRef name);
/// Whether a checkpoint of `name` resumes on another number of ranks
/// (--allow-resize): sync-sgd and sync-easgd.
bool algorithmResizes(llvm::StringRef name);
/// Checks an algorithm and its options against this run before anything
/// trains; the error names the option at fault. `exec` may be null (the
/// module failed to load), which skips the checks that need it.
llvm::Error checkTrainingAlgorithm(llvm::StringRef name,
                                   const AlgorithmOptions &options,
                                   Communicator &comm, Executor *exec);
/// Builds the algorithm `name` (checked by checkTrainingAlgorithm).
std::unique_ptr<TrainingAlgorithm>
createTrainingAlgorithm(llvm::StringRef name, Executor &exec,
                        CommEngine &engine, const AlgorithmOptions &options);

/// What an evaluation measured, summed over the ranks.
struct EvalResult {
  int64_t samples = 0, batches = 0;
  double loss = 0; ///< the model's loss, mean over the batches
  /// Top-1 counts: per sample, or per position for token models.
  int64_t correct = 0, labels = 0;
  bool tokens = false;
  double accuracy() const;   ///< -1 without labels
  double perplexity() const; ///< exp(loss) for token models, else -1
};

/// Where evaluation reads. `data` (--eval-data; null: the training data's
/// held-out split) evaluates on its held-out split when it has one, else on
/// every sample of this rank's shard, read from `startState` (its
/// saveState() when it was opened).
struct EvalOptions {
  DataLoader *data = nullptr;
  std::string startState;
};

/// Options of the training loop.
/// How the steps train beyond what the compiled step fixes (docs/runtime.md,
/// "Recipes"): per-step host scalars and what is recorded.
struct TrainRecipe {
  /// The learning rate of each step; none: the compiled rate throughout.
  std::optional<LrSchedule> schedule;
  /// > 0: the averaged gradients are clipped to this global L2 norm before
  /// any update (torch.nn.utils.clip_grad_norm_).
  double clipGradNorm = 0;
  /// JSON lines, one per logged step and evaluation (rank 0 writes; a
  /// resumed run drops the lines after its checkpoint's step).
  std::string metricsPath;
  /// Micro-batches per optimizer step (Executor::runMicroBatch): the
  /// gradients are their mean, exchanged once per step.
  int64_t accumulate = 1;
};

struct TrainOptions {
  int64_t steps = 10;
  int64_t logEvery = 1;    ///< progress line every N steps (rank 0)
  bool quiet = false;      ///< no progress lines
  std::string tracePath;   ///< Chrome trace JSON (rank 0 writes)
  int64_t traceSteps = 20; ///< steps recorded in the trace
  std::string profilePath; ///< oasr-profile-v1 JSON (rank 0 writes)
  int64_t failAtStep = -1; ///< testing: rank failRank aborts at this step
  int failRank = -1;
  int failSignal = 0;   ///< testing: die by this signal instead of aborting
  bool evaluate = true; ///< test accuracy at the end when data has a test split
  /// > 0: after every N-th step, the evaluation the end of the run makes,
  /// one line from rank 0 (also when quiet).
  int64_t evalEvery = 0;
  EvalOptions eval;
  /// Steps already completed (a resumed run continues at this step; `steps`
  /// stays the total).
  int64_t startStep = 0;
  /// Checkpoints every `checkpoint.every` steps (collective; rank 0 writes).
  CheckpointOptions checkpoint;
  /// A loss that is NaN or Inf stops the run (an error naming the step and
  /// the first non-finite tensor) unless this is set.
  bool allowNonFinite = false;
  /// Re-plan the fused allreduces from this run's measurements (sync SGD).
  ReplanOptions replan;
  /// Where rank 0 writes the last re-plan's profile and model, if anywhere.
  std::string replanProfilePath;
  /// When set, every step records |this rank's gradient| of each
  /// parameter as its group becomes ready, before averaging (the last
  /// step's stays): --dump-grads' magnitudes.
  GradientMagnitudes *magnitudes = nullptr;
  TrainRecipe recipe;
};

/// What the run measured (rank 0's view; times in microseconds).
struct TrainSummary {
  int64_t steps = 0;
  double meanIterationUs = 0; ///< wall time per step (first step excluded)
  double computeUs = 0;       ///< kernels + updates + copies per step
  double exposedCommUs = 0;   ///< blocked in allreduce_wait per step
  double commBusyUs = 0;      ///< communication thread busy per step
  /// `commBusyUs` split: the communication thread running (communicating)
  /// and runnable without a CPU inside the calls; and, before the calls,
  /// the time jobs waited for the idle thread to wake and get a CPU.
  double commRunningUs = 0, commCpuWaitUs = 0, commDispatchUs = 0;
  bool cpuWaitMeasured = false; ///< the kernel reports run-queue delays
  /// After a re-plan that fitted a model: the steps' allreduces at that
  /// model's time each, alpha + beta * bytes (what communicating with the
  /// CPU took, by this run's fit); -1 when nothing was fitted.
  double commFittedUs = -1;
  double medianIterationUs = 0, minIterationUs = 0, maxIterationUs = 0;
  /// The steps before the last re-plan (the plan compiled in, or the
  /// previous re-plan's), measured the same way; 0 steps when none.
  int64_t beforeSteps = 0;
  double beforeMedianIterationUs = 0;
  double initialPredictedUs = -1; ///< the compiled plan's prediction
  std::vector<ReplanEvent> replans;
  double forwardUs = 0;
  double predictedUs = -1; ///< the plan's prediction, -1 if unknown
  /// The timeline model replayed on this run's measured profile with the
  /// plan's groups and allreduce model (-1 when the module has no model).
  double replayedUs = -1;
  /// A call's start on the compute thread (schedule::CommModel::
  /// callComputeUs, which the replay charges): the median over the
  /// `callStarts` measured starts that found the communication thread idle.
  double callComputeUs = 0;
  unsigned callStarts = 0;
  /// The replayed (and --profile's) compute was scaled by this: the
  /// slowest rank of each measured step against this rank's median
  /// (stragglerFactor; sync SGD on several ranks, else 1).
  double stragglerFactor = 1;
  double lastLoss = 0;
  /// f16 loss scaling: the scale at the end (-1: the step scales no loss)
  /// and the steps skipped for non-finite gradients.
  double lossScale = -1;
  int64_t skippedSteps = 0;
  /// --clip-grad-norm: the median global gradient norm before clipping,
  /// and how many of the run's steps were clipped (-1: not measured).
  double medianGradNorm = -1;
  int64_t clippedSteps = 0, normSteps = 0;
  double clipGradNorm = 0;
  /// --accumulate: micro-batches per step, and the median time per step of
  /// the ones before the last (which exchange nothing).
  int64_t accumulate = 1;
  double microBatchesUs = 0;
  double trainAccuracy = -1; ///< over the last logging interval
  double testAccuracy = -1;  ///< -1 when there is no test split
  int64_t testSamples = 0;
  double testLoss = -1, perplexity = -1; ///< -1 when not evaluated
};

/// Runs `options.steps` training steps on every rank. Collective: every rank
/// calls it with the same options. Errors are local to the calling rank.
llvm::Error train(Executor &exec, DataLoader &data, TrainingAlgorithm &algo,
                  CommEngine &engine, const TrainOptions &options,
                  TrainSummary &summary);

/// Evaluates the current weights in eval mode on this rank's shard of the
/// evaluation samples (full batches) and sums over ranks. Collective; a rank
/// with `mine` false only joins the sum.
EvalResult evaluate(Executor &exec, DataLoader &data, CommEngine &engine,
                    const EvalOptions &options, bool mine = true);

/// When this rank is ended by a signal (mpirun's SIGTERM after another
/// rank died, a batch scheduler's, Ctrl-C), prints one line before dying:
/// which ranks are gone (a rank's process that no longer exists on its host,
/// or a rank on another host, which cannot be checked from here), the last
/// completed step and the newest checkpoint. Only the lowest rank still
/// alive on this host prints. With `reportFile` (a launcher's: it prints the
/// file's lines once the job has ended) the line is appended there instead
/// of to stderr, which mpirun may stop forwarding before a loaded rank's
/// handler runs. Collective: every rank's host and pid are exchanged; call
/// once on every rank before training.
void installFailureReport(CommEngine &engine,
                          const std::string &reportFile = "");
/// Rank 0: opens `path` for appending and writes "start `startStep`"; from
/// then on noteProgress appends each completed step. Nothing when `path`
/// is empty or cannot be opened (the launcher then knows less). The
/// --max-restarts launcher reads it (Run.h).
void startProgressLog(const std::string &path, int64_t startStep);
/// Appends "setup-error" to `path` (any rank; nothing when empty).
void noteSetupError(const std::string &path);
/// What that report says: steps completed, the newest checkpoint.
void noteProgress(int64_t completedSteps);
void noteCheckpoint(const std::string &path);
/// This rank is ending the job with its own error message: the report would
/// only repeat it.
void silenceFailureReport();

/// "rank R (host)" for messages.
std::string rankName(const Communicator &comm);

/// The job tag of an algorithm's parameter exchange (EASGD averaging, a
/// parameter-server round trip) in the CommEngine's event log; allreduces of
/// gradient groups use the group's index.
constexpr uint32_t kExchangeJob = 0xFFFFFFFFu;
/// Set in the tag of a reduce-scatter group's all-gather (the group's id in
/// the other bits), so traces tell the two halves apart.
constexpr uint32_t kGatherJobBit = 0x40000000u;

/// The failure report's account of progress: "last completed step N; last
/// checkpoint DIR (resume with --resume=DIR)" or that none was written.
std::string progressReport();

} // namespace oasr::rt

#endif // OASR_RUNTIME_TRAINING_H
