//===- ExecutorImpl.h - The executor's plan, shared by its files *- C++ -*-===//
//
// Private to the runtime: the plan Executor::create builds and the other
// executor files run, regroup and inspect (Executor::Impl: value storage,
// instructions, group buffers, the deferred updates and graphs). Plain C++
// and LLVM Support: the lowering from MLIR to a Program is lib/Lower.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_EXECUTORIMPL_H
#define OASR_RUNTIME_EXECUTORIMPL_H

#include "oasr/Runtime/ArenaPlan.h"
#include "oasr/Runtime/Executor.h"
#include "oasr/Runtime/Program.h"

#include "StepGraphs.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>

#include <sys/sysinfo.h>

using llvm::Expected;

namespace oasr::rt {

/// An instruction as the executor runs it: the compiled one, its kernel
/// and the views bound to its operands' storage.
struct Instr : ProgramInstr {
  std::unique_ptr<Kernel> kernel;
  std::vector<TensorRef> inRefs, outRefs;
  /// A forward node's inference form (inferenceForm), which evaluation
  /// runs in its place on the first `evalIns` / `evalOuts` views.
  std::unique_ptr<Kernel> evalKernel;
  size_t evalIns = 0, evalOuts = 0;
  // Kernel scratch in the arena.
  size_t workspaceBytes = 0, workspaceOffset = 0;
};

struct GroupBuf {
  size_t bytes = 0;
  void *ptr = nullptr;
  DType dtype = DType::F32;
  void *shard = nullptr; ///< a reduce-scatter group's block of this rank
};

struct Executor::Impl {
  KernelBackend *backend = nullptr;
  bool hostMemory = true;
  /// --cuda-graph: wanted, and the step's runs (built at the first step,
  /// dropped when the instructions change).
  bool deviceGraphs = false;
  std::unique_ptr<StepGraphs> graphs;
  /// The runs of the instruction list as it is now.
  void planGraphs() {
    std::vector<char> replayable(instrs.size()), cut(instrs.size());
    for (size_t k = 0; k < instrs.size(); ++k) {
      uint64_t position;
      const Instr &in = instrs[k];
      replayable[k] =
          in.op == InstrOp::Copy ||
          (in.op == InstrOp::Kernel && !in.kernel->randomPosition(position));
      cut[k] = k < updatesBefore.size() && !updatesBefore[k].empty();
    }
    graphs = std::make_unique<StepGraphs>(replayable, cut);
  }
  std::vector<ValueInfo> values;
  std::vector<Instr> instrs;
  std::vector<PersistBuf> persist;
  std::vector<GroupBuf> groupBufs;
  /// One allocation holds every group buffer, back to back, so a regroup
  /// lays the new groups out in the same memory (no allocation, no page
  /// faults in the next step).
  void *gradSlab = nullptr;
  /// The reduce-scatter groups' shards, back to back; the ranks they are
  /// scattered over.
  void *shardSlab = nullptr;
  int ranks = 1;
  size_t gradSlabBytes = 0;
  /// The 16-bit copy of a group on its way over the wire (bf16/f16), as
  /// large as the largest group; groups take turns on the one
  /// communication thread, so one copy serves them all.
  void *wireSlab = nullptr;
  size_t wireSlabBytes = 0;
  std::vector<GradSlot> gradSlots; ///< every grouped gradient, in order
  void *arena = nullptr;
  size_t arenaBytes = 0;
  int lossValue = -1, scoresValue = -1, labelValue = -1, inputValue = -1;
  int64_t inputVocab = 0;
  unsigned forwardEnd = 0; ///< instructions [0, forwardEnd) are the forward
  /// Forward nodes whose inference form the backend could not build: they
  /// evaluate in their training form ("node: reason").
  std::vector<std::string> evalFallbacks;
  std::map<std::string, int> gradOfParam; ///< param name -> averaged value
  int64_t updatesDone = 0;                ///< optimizer steps so far (ONNX's T)
  /// Steady plans with per-layer forward waits (SteadyExecution): each
  /// step's waits and updates run in the next step. `updatesBefore[k]`:
  /// the Update instructions to run right before instruction k (those of
  /// the parameters it is the first to read); `updateGroup[u]` the group
  /// whose wait an Update instruction needs, `waitInstr[g]` the Wait of
  /// group g (for its timing).
  bool deferUpdates = false;
  bool updatesPending = false;
  /// Dynamic loss scaling (f16): the Constant seeding backward, where each
  /// step writes the scale (-1: none); the scaler; this step's decision
  /// (made at its first update, once every group is averaged) and which
  /// groups it waited for to make it.
  int lossScaleValue = -1;
  LossScaler scaler;
  bool stepDecided = false, stepSkipped = false;
  std::vector<char> stepWaited;
  /// The host's per-step scalars (Executor::setStepScalars) and the last
  /// step's gradient norm (-1: not measured).
  Executor::StepScalars scalars;
  double gradNorm = -1;
  /// Whether this step decides at its first update, once every group is
  /// averaged (loss scaling, clipping).
  bool decidesStep() const {
    return lossScaleValue >= 0 || scalars.clipNorm > 0;
  }
  /// Gradient accumulation: the sum of the step's earlier micro-batches'
  /// group buffers, laid out as the gradient slab (`accBytes` long), and
  /// how many it holds.
  void *accSlab = nullptr;
  size_t accBytes = 0;
  int64_t microBatches = 0;
  /// Adds the group buffers into accSlab (the first micro-batch copies).
  void accumulateGroups();
  /// Group `g` becomes the mean of its accumulated and current gradients.
  void foldAccumulated(unsigned g);
  /// `rule` with the step's learning-rate factor.
  UpdateRule scaledRule(const UpdateRule &rule) const {
    UpdateRule r = rule;
    r.lr *= scalars.lrScale;
    return r;
  }
  /// The global L2 norm of the averaged gradients and, when above
  /// `scalars.clipNorm`, their scaling to it.
  void clipGradients();
  /// Waits for every group and checks the averaged gradients for Inf/NaN:
  /// sets stepSkipped, or divides the gradients by the scale (once, where
  /// every update and `gradient()` read them); then clips them.
  void decideScaledStep(StepHooks &hooks);
  int64_t pendingT = 0; ///< the update count the pending updates use
  std::vector<std::vector<unsigned>> updatesBefore;
  std::vector<int> updateGroup, waitInstr;
  std::vector<char> waited;
  /// Waits for the group of Update instruction `u` (once per step) and
  /// applies it with the pending update count.
  void runDeferredUpdate(StepHooks &hooks, unsigned u, OpTiming *timings,
                         const std::function<double()> *now);
  /// Device backends: the batch is written here (host memory) and uploaded
  /// at the start of each step.
  std::vector<char> hostInput, hostLabel;

  /// Binds an instruction's operand and result views to their storage.
  void bindRefs(Instr &instr) {
    instr.inRefs.clear();
    instr.outRefs.clear();
    for (int v : instr.ins)
      instr.inRefs.push_back(ref(v));
    instr.inRefs = instr.withAbsent(instr.inRefs, TensorRef{});
    for (int v : instr.outs)
      instr.outRefs.push_back(ref(v));
    if (instr.weightCopy >= 0)
      instr.outRefs.push_back(ref(instr.weightCopy));
  }
  /// Mixed precision: the Casts of parameters to the 16-bit copies the
  /// forward reads, taken out of the step because the updates keep the
  /// copies (Instr::weightCopy). They run before a step when the
  /// parameters were written from outside (loaded, initialised, averaged
  /// by an algorithm): Executor::persistent() marks the copies stale.
  std::vector<Instr> copyCasts;
  bool copiesStale = true;
  void refreshCopies() {
    if (!copiesStale)
      return;
    for (Instr &c : copyCasts)
      c.kernel->run(c.inRefs, c.outRefs);
    copiesStale = false;
  }
  /// A zeroed buffer of `bytes` on the backend (null when it cannot).
  void *zeroedBuffer(size_t bytes) {
    void *p = backend->allocate(bytes);
    if (p)
      zero(p, bytes);
    return p;
  }

  ~Impl() {
    if (!backend)
      return;
    instrs.clear(); // kernels before their memory
    if (arena)
      backend->deallocate(arena);
    for (PersistBuf &p : persist)
      if (p.ptr)
        backend->deallocate(p.ptr);
    if (gradSlab)
      backend->deallocate(gradSlab);
    if (shardSlab)
      backend->deallocate(shardSlab);
    if (wireSlab)
      backend->deallocate(wireSlab);
    if (accSlab)
      backend->deallocate(accSlab);
  }
  /// Makes the wire copy hold at least `bytes`; false when it cannot.
  bool reserveWire(size_t bytes) {
    if (bytes <= wireSlabBytes)
      return true;
    void *p = backend->allocate(bytes);
    if (!p)
      return false;
    if (wireSlab)
      backend->deallocate(wireSlab);
    wireSlab = p;
    wireSlabBytes = bytes;
    return true;
  }
  /// Bytes of the wire copy the groups need: 2 per f32 element of the
  /// largest group buffer (0 when gradients travel as f32).
  static size_t wireBytesFor(GradWire wire, const std::vector<GroupBuf> &bufs) {
    size_t most = 0;
    if (wire != GradWire::F32)
      for (const GroupBuf &b : bufs)
        most = std::max(most, b.bytes / sizeof(float) * sizeof(uint16_t));
    return most;
  }
  /// Zeroes `bytes` at `p` (group buffer padding) in backend memory.
  void zero(void *p, size_t bytes) {
    if (!bytes)
      return;
    if (hostMemory)
      std::memset(p, 0, bytes);
    else {
      std::vector<char> zeros(bytes, 0);
      backend->copyToDevice(p, zeros.data(), bytes);
    }
  }

  int root(int v) const {
    while (values[v].where == Where::Alias)
      v = values[v].aliasOf;
    return v;
  }
  TensorRef ref(int v) const {
    return TensorRef{values[v].ptr, values[v].desc};
  }
  void copy(int dst, int src) {
    size_t n = values[dst].desc.bytes();
    if (values[dst].ptr == values[src].ptr)
      return;
    if (hostMemory) {
      std::memcpy(values[dst].ptr, values[src].ptr, n);
      return;
    }
    backend->copyWithin(values[dst].ptr, values[src].ptr, n);
  }
  /// Device backends: uploads the batch the loader wrote to host memory.
  void uploadBatch() {
    if (hostMemory)
      return;
    backend->copyToDevice(values[size_t(inputValue)].ptr, hostInput.data(),
                          hostInput.size());
    if (labelValue >= 0)
      backend->copyToDevice(values[size_t(labelValue)].ptr, hostLabel.data(),
                            hostLabel.size());
  }
};

/// The kernel layer's failure `status` as an llvm::Error, its message after
/// `context`: where the executor calls into a backend, the one place a
/// Status (oasr/Runtime/Status.h) becomes an llvm::Error.
inline llvm::Error toError(const Status &status,
                           const llvm::Twine &context = "") {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 (context + status.message()).str());
}

/// FNV-1a of `s` from `seed`: per-parameter seeds of the initial weights.
uint64_t hashName(const std::string &s, uint64_t seed);

/// The Update instructions' places under per-layer forward waits
/// (Executor.cpp).
llvm::Error planDeferredUpdates(Executor::Impl &I,
                                const std::vector<PlanStepInfo> &steps);

} // namespace oasr::rt

#endif // OASR_RUNTIME_EXECUTORIMPL_H
