//===- Executor.h - Runs a compiled training step ---------------*- C++ -*-===//
//
// The executor reads the compiled module (docs/IR.md section 3) once and
// builds an execution plan: one step per op with its kernel (from a
// KernelBackend), buffers assigned by liveness with reuse, fused gradient
// groups laid out in one contiguous buffer each (the gradient producers write
// straight into it), parameters, BN state and optimizer state as persistent
// buffers updated in place. Steps then run with no IR access.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_EXECUTOR_H
#define OASR_RUNTIME_EXECUTOR_H

#include "oasr/Runtime/GradWire.h"
#include "oasr/Runtime/Kernel.h"
#include "oasr/Runtime/LossScale.h"
#include "oasr/Schedule/Steady.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace oasr::rt {

struct Program;

/// What the executor asks of the training algorithm inside a step: a fused
/// group's gradients are complete (`allreduce_start`), and the averaged
/// gradients are needed now (`allreduce_wait`).
class StepHooks {
public:
  virtual ~StepHooks();
  virtual void gradientsReady(unsigned group) = 0;
  virtual void gradientsNeeded(unsigned group) = 0;
  /// True when what gradientsReady starts waits for the device work issued
  /// so far by itself (NCCL on an event); else the executor synchronizes
  /// the device before calling it.
  virtual bool ordersAfterDevice() const { return false; }
};

/// A tensor that lives across steps: a parameter, BN state, optimizer state.
struct PersistentTensor {
  enum Kind { Param, State, OptState } kind = Param;
  /// How seeded random init fills it when the model has no initializer.
  enum Init { HeNormal, Zeros, Ones } init = Zeros;
  std::string name; ///< ONNX initializer name (opt state: the param's name)
  TensorRef ref;
  int64_t fanIn = 1; ///< inputs per output unit (He init)
};

/// One fused gradient group: a contiguous buffer averaged in place.
struct GradGroup {
  unsigned index = 0; ///< position in communication order
  /// Unique over every grouping of the run (`Executor::regroup` numbers the
  /// new groups after the old ones): the communication job's tag.
  unsigned id = 0;
  TensorRef buffer;                ///< the whole buffer (f32 elements, padded)
  size_t bytes = 0;                ///< gradient bytes (without padding)
  std::vector<std::string> params; ///< parameters whose gradients it holds
  std::string layer;               ///< layer whose backward closes the group
  /// The element type the group travels in (`wire_type` of its start) and,
  /// when narrower than f32, room for `buffer.numel()` 16-bit elements in
  /// the backend's memory for the converted copy. Every group shares the
  /// same room: the communication thread runs one allreduce at a time.
  GradWire wire = GradWire::F32;
  void *wireScratch = nullptr;
  /// A steady plan's reduce-scatter group (`SteadyExecution::scatter`):
  /// the ranks it is scattered over (0 for an allreduce group) and this
  /// rank's shard, `buffer.numel() / scatterRanks` f32 elements (the
  /// buffer is padded to a multiple of 16 x ranks elements, zeros).
  unsigned scatterRanks = 0;
  void *shard = nullptr;
  /// `powersgd_rank` of its start: send its matrices as PowerSGD factors of
  /// this rank (runtime/comm/PowerSGD.cpp); 0: plain.
  unsigned powerSgdRank = 0;
  /// `two_level` of its start: sent as a two-level allreduce where the
  /// communicator has tiers (Communicator::allreduceAverageTwoLevel).
  bool twoLevel = false;
  /// Each gradient's place in `buffer`: f32 elements from its start, and
  /// its shape. In buffer order.
  struct Span {
    std::string param;
    size_t offset = 0;
    std::vector<int64_t> shape;
  };
  std::vector<Span> spans;
};

/// Whether any of `groups` travels as PowerSGD factors.
inline bool anyCompressed(const std::vector<GradGroup> &groups) {
  for (const GradGroup &g : groups)
    if (g.powerSgdRank)
      return true;
  return false;
}

/// Elements [first, first + second) of `g.buffer` that piece `piece` of
/// `pieces` covers: equal parts, the last taking the rest; for a
/// reduce-scatter group each a multiple of 16 x ranks elements, so every
/// rank's block of every piece is whole and 64-byte aligned.
std::pair<size_t, size_t> pieceSpan(const GradGroup &g, unsigned piece,
                                    unsigned pieces);

/// Kind of a planned step, for traces and profiles.
enum class StepKind : uint8_t { Forward, Backward, Update, Comm, Copy };

/// One entry of the execution plan.
struct PlanStepInfo {
  std::string name; ///< node name (location) or "allreduce_start #k"
  std::string opType;
  std::string layer; ///< forward layer the op belongs to
  StepKind kind = StepKind::Forward;
};

/// Options of plan building.
struct ExecutorOptions {
  uint64_t seed = 0;        ///< dropout seeds and random init
  double lrOverride = -1;   ///< >= 0: replaces every optimizer_update's lr
  bool reuseBuffers = true; ///< liveness-based reuse of activation memory
  /// Elementwise ops (Relu, Add, ...) write over an operand that dies there.
  bool inPlace = true;
  /// Data-parallel ranks the plan's reduce-scatter groups are split over.
  int ranks = 1;
  /// --cuda-graph: replay the step's runs of kernels as captured graphs
  /// from the second step on (KernelBackend::beginCapture).
  bool deviceGraphs = false;
  /// Mixed precision: the optimizer updates keep the parameters' 16-bit
  /// copies where the backend can (KernelBackend::updatesWeightCopies)
  /// instead of the forward casting them every step. Off: the casts run.
  bool weightCopies = true;
};

/// What --cuda-graph did: the step's runs of two or more kernels and
/// copies, how many became graphs (and their instructions), and why the
/// others could not be captured.
struct GraphStats {
  size_t runs = 0, graphs = 0, graphInstrs = 0, instrs = 0;
  std::vector<std::string> failures;
};

/// Statistics of the plan's memory.
struct MemoryStats {
  size_t arenaBytes = 0;      ///< activations after reuse
  size_t unsharedBytes = 0;   ///< what the activations need without reuse
  size_t persistentBytes = 0; ///< params, state, optimizer state, constants
  size_t gradBytes = 0;       ///< fused group buffers (and RS shards)
  size_t wireBytes = 0;       ///< 16-bit copy of the largest group (bf16/f16)
  /// Activations forward writes and backward reads (kept between the two),
  /// and how many of those bytes are bf16/f16 (mixed precision).
  size_t savedBytes = 0, savedLowBytes = 0;
};

/// How a steady-state plan runs (`oasr.plan`'s `steady`; docs/runtime.md,
/// "Steady-state plans"). Empty for today's plans.
struct SteadyExecution {
  /// The next step's forward waits per layer: each step leaves its waits
  /// and updates to the next, which waits for a group and applies its
  /// updates right before the first instruction reading one of its
  /// parameters.
  bool forwardWaits = false;
  /// Per group (groups() order): allreduces of equal parts it is cut into.
  std::vector<unsigned> pieces;
  /// Per group: 1 when it reduce-scatters during backward and all-gathers
  /// the averaged gradients afterwards (DeAR's form) instead of one
  /// allreduce; its update then runs as an allreduce group's.
  std::vector<uint8_t> scatter;
  /// A unit of communication: piece `piece` of group `group`, its
  /// allreduce or reduce-scatter, or (`gather`) its all-gather -- the
  /// planner's lowered unit.
  using Unit = schedule::LoweredUnit;
  /// The order the communication thread runs the units in, each step the
  /// same on every rank.
  std::vector<Unit> order;
  bool hasScatter() const {
    for (uint8_t s : scatter)
      if (s)
        return true;
    return false;
  }
};

/// Timing of one executed plan step (microseconds since an epoch).
struct OpTiming {
  double startUs = 0, endUs = 0;
};

class Executor {
public:
  ~Executor();

  /// Builds the plan for `@train_step` of `module`: lowerToProgram, then
  /// the program's create (the lowering library, OASRLower). Errors name
  /// the op (its location) and the reason; a module without a training step
  /// or without optimizer updates is rejected as "not compiled for
  /// training".
  static llvm::Expected<std::unique_ptr<Executor>>
  create(mlir::ModuleOp module, KernelBackend &backend,
         const ExecutorOptions &options);
  /// Builds the plan of a compiled program (Program.h) on `backend`: its
  /// kernels, memory and public views. A program whose indices do not hold
  /// together (a damaged file) is refused as "invalid program".
  static llvm::Expected<std::unique_ptr<Executor>>
  create(Program program, KernelBackend &backend,
         const ExecutorOptions &options);

  /// Model input (the batch) and labels, written by the data loader before
  /// each step. `label` has a null `data` when the model has no label.
  const TensorRef &input() const { return inputRef; }
  const TensorRef &label() const { return labelRef; }
  /// Batch size (first dimension of the input).
  int64_t batch() const;
  /// Classes of the loss' scores (0 when unknown).
  int64_t numClasses() const;
  /// Rows of the embedding table an integer input indexes (the first Gather
  /// reading the input), or 0 when there is none.
  int64_t inputVocab() const;

  /// The backend the plan's kernels and buffers belong to.
  KernelBackend &backend() const;

  /// Persistent tensors, in argument order. Writable: the parameters'
  /// 16-bit copies (mixed precision) are made again before the next step.
  std::vector<PersistentTensor> &persistent();
  const std::vector<PersistentTensor> &persistent() const {
    return persistentTensors;
  }
  const std::vector<GradGroup> &groups() const { return gradGroups; }
  const MemoryStats &memory() const { return memStats; }
  /// Parameter gradients in ready order: parameter, producing layer, bytes.
  struct GradInfo {
    std::string param, layer;
    size_t bytes = 0;
    uint64_t rows = 0; ///< first dimension of a matrix (rank >= 2), else 0
  };
  const std::vector<GradInfo> &gradients() const { return gradInfos; }
  /// The plan in execution order.
  const std::vector<PlanStepInfo> &steps() const { return stepInfos; }

  /// Module attributes the runtime reports: `oasr.source`, `oasr.model`,
  /// `oasr.plan` (strategy, predicted iteration time in us; -1 if absent).
  const std::string &sourcePath() const { return source; }
  const std::string &modelName() const { return model; }
  const std::string &planStrategy() const { return strategy; }
  double predictedIterationUs() const { return predictedUs; }
  /// The plan's allreduce model (`alpha_s`, `beta_s_per_byte`,
  /// `group_overhead_us` of `oasr.plan`); alpha is -1 when absent. Beta is
  /// per gradient (f32) byte: with `grad_dtype` bf16/f16 it is half the
  /// calibrated beta, so a replay of the plan charges what travels.
  double planAlphaS() const { return alphaS; }
  double planBetaSPerByte() const { return betaS; }
  /// The plan's second tier (`two_level` of `oasr.plan`): the ranks it
  /// planned for, L ranks a node, and the intra- and inter-node lines
  /// (seconds, seconds per byte); ranksPerNode 0 when absent. The inter
  /// line's beta is per gradient byte, as planBetaSPerByte's.
  struct PlanTier {
    int ranks = 0, ranksPerNode = 0;
    double intraAlphaS = 0, intraBetaS = 0, interAlphaS = 0, interBetaS = 0;
  };
  const PlanTier &planTier() const { return tier; }
  double planGroupOverheadUs() const { return groupOverheadUs; }
  /// The plan's communication rate during backward (1 when not planned).
  double planOverlapRate() const { return overlapRate; }
  /// What the plan charged PowerSGD's compute, per multiply-add and per
  /// element of a compressed matrix, in microseconds (0 when absent).
  double planCompressUsPerMac() const { return compressUsPerMac; }
  double planCompressUsPerElement() const { return compressUsPerElement; }
  /// The compression policy the plan's forms were chosen under ("" off).
  const std::string &planCompress() const { return compressPolicy; }
  /// The steady-state plan's execution (empty for today's plans).
  const SteadyExecution &steady() const { return steadyExec; }
  /// Under `steady().forwardWaits` a step leaves its waits and updates to
  /// the next step; this runs what is left (calls `hooks.gradientsNeeded`).
  /// Call before reading the weights: evaluation, checkpoints, `--save`,
  /// the end of training. A no-op otherwise.
  void completeUpdates(StepHooks &hooks);
  /// The element type the gradient groups travel in (f32 unless compiled
  /// with `grad-dtype`).
  GradWire gradWire() const { return wire; }
  /// The step's precision (`oasr.precision`: "f32", "tf32", "bf16" or
  /// "f16") and the backend's warning about it (empty when none).
  const std::string &precision() const { return precisionName; }
  const std::string &precisionWarning() const { return precisionWarn; }
  /// Dynamic loss scaling (f16 steps): whether the step scales its loss,
  /// the scaler's state (checkpoints save and restore it), and whether the
  /// last step was skipped for non-finite gradients.
  bool scalesLoss() const;
  /// What --cuda-graph did so far (all zero without it).
  GraphStats graphStats() const;
  LossScaler &lossScaler();
  bool lastStepSkipped() const;

  /// Scalars the next steps' updates take from the host: changing them
  /// never recompiles (a schedule's rate, a clipping bound).
  struct StepScalars {
    double lrScale = 1; ///< every update's learning rate times this
    /// > 0: before the first update, the averaged gradients are scaled to
    /// a global L2 norm of at most this (torch.nn.utils.clip_grad_norm_:
    /// by max_norm / (norm + 1e-6) when above it).
    double clipNorm = 0;
  };
  void setStepScalars(const StepScalars &s);
  /// Gradient accumulation (--accumulate=K): runs the forward and backward
  /// of one micro-batch, without communication or updates, and adds its
  /// gradients to the step's sum. The next runStep is the last micro-batch:
  /// each group's gradients become the mean over the step's micro-batches
  /// before the algorithm exchanges them (one exchange per step, as
  /// DDP's no_sync). Refused under per-layer forward waits (the step's
  /// updates then run inside the next forward); an error names why.
  llvm::Error runMicroBatch();
  /// Micro-batches accumulated since the last step (0: none).
  int64_t accumulatedMicroBatches() const;
  /// The last step's global L2 norm of the averaged gradients, before
  /// clipping; -1 when the step did not measure it (no clipping).
  double lastGradNorm() const;
  /// The learning rate the first update was compiled with (what a
  /// schedule's factor multiplies); 0 without updates.
  double baseLearningRate() const;
  /// Where the compiler's per-op costs came from (`oasr.cost_model`'s
  /// source and file: "roofline", "profile p.json"); empty when unknown.
  const std::string &costSource() const { return costs; }

  /// Replaces the fused groups by a new partition of the gradients
  /// (`gradients()` order, which is the communication order): group k holds
  /// gradients [groupEnds[k-1], groupEnds[k]). The gradients get a new
  /// layout (one contiguous buffer per group, written directly by their
  /// producers as before), each group's start moves right after the
  /// instruction completing its last gradient and its wait before the first
  /// update reading one; `steps()` and `groups()` change accordingly. Only
  /// between steps, with no communication in flight. Gradients are
  /// recomputed every step, so nothing is copied.
  /// `powerSgdRanks`, one per new group (empty: none compressed), gives
  /// each group's PowerSGD rank (0: plain).
  llvm::Error regroup(llvm::ArrayRef<unsigned> groupEnds,
                      llvm::ArrayRef<unsigned> powerSgdRanks = {});
  /// Records the model of a plan installed by `regroup`: its predicted
  /// iteration and its allreduce model (what `plan*()` return).
  void setPlanModel(double predictedIterationUs, double alphaS,
                    double betaSPerByte, double groupOverheadUs,
                    double overlapRate);

  /// Runs one training step. `timings`, when non-null, points to one entry
  /// per plan step (see `steps()`), filled with times in microseconds since
  /// `epochNs` on the steady clock.
  void runStep(StepHooks &hooks, OpTiming *timings, int64_t epochNs);
  /// Runs the forward ops only (no weight or optimizer state written).
  /// `Training`: every node as the step runs it (batch statistics, Dropout
  /// drawing; BatchNormalization writes its running statistics). `Eval`:
  /// each node that has one in its inference form (inferenceForm, Kernel.h),
  /// as PyTorch's `model.eval()`: nothing but activations is written.
  enum class ForwardMode { Training, Eval };
  void runForward(ForwardMode mode = ForwardMode::Training);
  /// Forward nodes that evaluate in their training form because the
  /// backend has no kernel for their inference form ("node: reason").
  const std::vector<std::string> &evalFallbacks() const;

  /// Optimizer updates applied so far (ONNX's update count T, which Adam's
  /// bias correction, Adagrad's decay and momentum's dampening read).
  int64_t updateCount() const;
  void setUpdateCount(int64_t t);
  /// The model's initializer holding T (an ONNX training model's optimizer
  /// input), which `--save` advances; empty when the model has none.
  const std::string &updateCountName() const { return countName; }
  /// The optimizer rules the plan's updates apply ("sgd", "adam",
  /// "momentum+nesterov", ...), distinct, joined by ','.
  std::string optimizerName() const;
  /// The random-sequence positions of the kernels that draw random numbers
  /// (Dropout), in plan order; a checkpoint saves them, a resumed run
  /// restores them (the vector must have the same length).
  std::vector<uint64_t> randomPositions() const;
  llvm::Error setRandomPositions(const std::vector<uint64_t> &positions);
  /// Names the first non-finite f32 tensor of the current state: a parameter
  /// or BN statistic, else the input batch, else (running the forward ops
  /// again, one by one) the first op result that holds NaN or Inf. Empty when
  /// every one is finite. Diagnostic only: it runs kernels (Dropout draws).
  std::string firstNonFinite();

  /// The loss of the last step (or forward) and its scores per sample.
  float loss() const;
  /// Number of samples whose argmax score equals the label, last step.
  int64_t correct() const;

  /// Gradient of parameter `name` as seen by the optimizer in the last step
  /// (the averaged gradient), or a null ref when unknown.
  TensorRef gradient(const std::string &name) const;

  struct Impl;
  friend class ExecutorLoader;

private:
  Executor();
  llvm::Error checkSteady();
  std::unique_ptr<Impl> impl;
  TensorRef inputRef, labelRef;
  std::vector<PersistentTensor> persistentTensors;
  std::vector<GradGroup> gradGroups;
  MemoryStats memStats;
  std::vector<PlanStepInfo> stepInfos;
  std::vector<GradInfo> gradInfos;
  std::string source, model, strategy, countName, costs;
  std::string precisionName = "f32", precisionWarn;
  unsigned nextGroupId = 0;
  double predictedUs = -1;
  double alphaS = -1, betaS = 0, groupOverheadUs = 0, overlapRate = 1;
  double compressUsPerMac = 0, compressUsPerElement = 0;
  std::string compressPolicy;
  PlanTier tier;
  GradWire wire = GradWire::F32;
  SteadyExecution steadyExec;
};

/// Fills parameters and state: from the ONNX initializers of the same name
/// when a loader is given and finds them (it fills a host tensor of the
/// destination's type; the bytes are then copied to the backend's memory),
/// otherwise seeded random init
/// (He-normal for weights of rank >= 2, zeros for biases, ones for BN scales,
/// running means 0 and variances 1); optimizer state starts at zero. Returns
/// the number of tensors loaded from the file.
using InitializerLoader = std::function<bool(
    const std::string &name, const TensorRef &dst, std::string &error)>;
llvm::Expected<unsigned> initializeWeights(Executor &exec,
                                           const InitializerLoader &loader,
                                           uint64_t seed);

} // namespace oasr::rt

#endif // OASR_RUNTIME_EXECUTOR_H
