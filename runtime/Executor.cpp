//===- Executor.cpp - Execution plan of a compiled training step ---------===//
//
// Walks @train_step once: assigns every SSA value a storage (activation
// arena slot with liveness-based reuse, persistent tensor, fused group
// buffer, or an alias of another value), asks the kernel backend for one
// kernel per node, and records a flat list of instructions. Steps then run
// that list without touching IR.
//
//===----------------------------------------------------------------------===//

#include "oasr/Runtime/Executor.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Ops/OpRegistry.h"
#include "oasr/Runtime/ArenaPlan.h"

#include "StepGraphs.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
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

using namespace mlir;
using llvm::Expected;

namespace oasr::rt {

StepHooks::~StepHooks() = default;

namespace {

constexpr size_t kAlign = 64;
size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// Where a value lives.
enum class Where : uint8_t { Arena, Persistent, Group, Alias };

struct ValueInfo {
  TensorDesc desc;
  Where where = Where::Arena;
  int aliasOf = -1;    ///< Where::Alias: the value whose storage it shares
  int persistent = -1; ///< Where::Persistent: index into Impl::persist
  int group = -1;      ///< Where::Group
  size_t offset = 0;   ///< arena or group byte offset
  int def = -1;        ///< defining instruction (-1: argument / constant)
  int lastUse = -1;    ///< last instruction reading it (after aliasing)
  bool used = false;   ///< read by anything (incl. returns)
  bool kernelOutput = false;
  void *ptr = nullptr; ///< resolved address
};

enum class InstrOp : uint8_t { Kernel, Copy, Start, Wait, Update };

struct Instr {
  InstrOp op = InstrOp::Kernel;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> ins, outs;
  std::vector<TensorRef> inRefs, outRefs;
  unsigned group = 0;
  // Copy: pairs of (dst, src) values.
  std::vector<std::pair<int, int>> copies;
  // Update on the host (oasr.optimizer_update's attributes).
  std::string algo;
  double lr = 0, momentum = 0, weightDecay = 0, dampening = 0, lrDecay = 0,
         beta1 = 0, beta2 = 0, epsilon = 0, weightDecayPost = 0;
  bool nesterov = false;
  UpdateRule rule; ///< the same, for backends that update device memory
  // Kernel scratch in the arena.
  size_t workspaceBytes = 0, workspaceOffset = 0;
  bool elementwise = false; ///< may write its result over a dying input
  bool pack = false;        ///< Copy: gradients into their group buffer
  /// ONNX positions of optional operands left out in the middle
  /// (oasr.absent_inputs): the kernel sees them as TensorRefs without data.
  std::vector<int64_t> absent;

  /// `items` (one per operand in `ins`) with `hole` at the absent positions.
  template <typename T>
  std::vector<T> withAbsent(std::vector<T> items, const T &hole) const {
    for (int64_t pos : absent)
      if (pos <= int64_t(items.size()))
        items.insert(items.begin() + pos, hole);
    return items;
  }
};

struct PersistBuf {
  TensorDesc desc;
  void *ptr = nullptr;
  std::vector<char> init; ///< constants: bytes to upload
};

struct GroupBuf {
  size_t bytes = 0;
  void *ptr = nullptr;
  DType dtype = DType::F32;
  void *shard = nullptr; ///< a reduce-scatter group's block of this rank
};

/// Where one gradient (in communication order) lives in the fused groups:
/// the value stored in the group buffer (the producer's output itself, or
/// the slot a pack copy fills) and the allreduce_wait result the optimizer
/// reads (both at the same bytes).
struct GradSlot {
  int slot = -1, wait = -1;
  int readyInstr = -1; ///< the instruction after which it is in the buffer
};

} // namespace

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
  /// Waits for every group and checks the averaged gradients for Inf/NaN:
  /// sets stepSkipped, or divides the gradients by the scale (once, where
  /// every update and `gradient()` read them).
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

Executor::Executor() : impl(std::make_unique<Impl>()) {}
Executor::~Executor() = default;

//===----------------------------------------------------------------------===//
// IR -> plan helpers
//===----------------------------------------------------------------------===//

static std::string locName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations()) {
      std::string s = locName(l);
      if (!s.empty())
        return s;
    }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return llvm::formatv("{0}:{1}:{2}", file.getFilename().getValue(),
                         file.getLine(), file.getColumn())
        .str();
  return "";
}

static std::string opName(Operation *op) {
  std::string s = locName(op->getLoc());
  if (!s.empty())
    return s;
  if (auto node = dyn_cast<mlir::oasr::NodeOp>(op))
    return node.getOpType().str();
  return op->getName().getStringRef().str();
}

static llvm::Error opError(Operation *op, const llvm::Twine &msg) {
  std::string where = locName(op->getLoc());
  std::string kind;
  if (auto node = dyn_cast<mlir::oasr::NodeOp>(op))
    kind = ("'" + node.getOpType() + "'").str();
  else
    kind = ("'" + op->getName().getStringRef() + "'").str();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      (kind + (where.empty() ? "" : " at " + where) + ": " + msg).str());
}

static Expected<TensorDesc> descOf(Type type, Operation *op,
                                   StringRef argument = "") {
  // Errors name the node, or for a function argument, its tag's value.
  auto fail = [&](const llvm::Twine &msg) {
    if (argument.empty())
      return opError(op, msg);
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        ("@train_step argument '" + argument + "': " + msg).str());
  };
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return fail("needs statically shaped tensors, got a value of type " +
                llvm::formatv("{0}", type).str());
  TensorDesc d;
  Type e = t.getElementType();
  if (e.isF32())
    d.dtype = DType::F32;
  else if (e.isF16())
    d.dtype = DType::F16;
  else if (e.isBF16())
    d.dtype = DType::BF16;
  else if (e.isInteger(64))
    d.dtype = DType::I64;
  else if (e.isInteger(32))
    d.dtype = DType::I32;
  else if (e.isInteger(1))
    d.dtype = DType::Bool;
  else
    return fail("unsupported element type " + llvm::formatv("{0}", e).str());
  d.shape.assign(t.getShape().begin(), t.getShape().end());
  // Sizes are int64/size_t products everywhere below (and in every kernel
  // library): refuse a shape whose element or byte count overflows.
  uint64_t elements = 1;
  for (int64_t dim : d.shape) {
    if (dim < 0 || (dim && elements > uint64_t(INT64_MAX) / uint64_t(dim)))
      return fail("cannot allocate a value of type " +
                  llvm::formatv("{0}", type).str() +
                  ": its element count overflows 64 bits");
    elements *= uint64_t(dim);
  }
  if (elements > uint64_t(INT64_MAX) / dtypeSize(d.dtype))
    return fail("cannot allocate a value of type " +
                llvm::formatv("{0}", type).str() +
                ": its size in bytes overflows 64 bits");
  // cuDNN and cuBLAS take 32-bit dimensions; oneDNN's primitive creation
  // dies with SIGFPE from 2^32 rows. No kernel is created for such a value.
  for (auto [i, dim] : llvm::enumerate(d.shape))
    if (dim > INT32_MAX)
      return fail(llvm::formatv("cannot allocate a value of type {0}: "
                                "dimension {1} ({2}) is 2^31 or more, "
                                "beyond what the kernel libraries "
                                "take",
                                type, i, dim)
                      .str());
  return d;
}

/// Bytes of RAM plus swap of this machine (0 when unknown).
static uint64_t hostMemoryBytes() {
  struct sysinfo info;
  if (::sysinfo(&info) != 0)
    return 0;
  return (uint64_t(info.totalram) + uint64_t(info.totalswap)) *
         uint64_t(info.mem_unit);
}

/// ONNX attribute -> runtime attribute. Returns false for attributes the
/// runtime does not pass to kernels.
static bool convertAttr(Attribute a, AttrValue &out) {
  if (auto i = dyn_cast<IntegerAttr>(a)) {
    out = int64_t(i.getValue().getSExtValue());
    return true;
  }
  if (auto f = dyn_cast<FloatAttr>(a)) {
    out = f.getValueAsDouble();
    return true;
  }
  if (auto s = dyn_cast<StringAttr>(a)) {
    out = s.getValue().str();
    return true;
  }
  if (auto arr = dyn_cast<DenseI64ArrayAttr>(a)) {
    out =
        std::vector<int64_t>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<DenseI32ArrayAttr>(a)) {
    out =
        std::vector<int64_t>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<DenseF32ArrayAttr>(a)) {
    out = std::vector<double>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<DenseF64ArrayAttr>(a)) {
    out = std::vector<double>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<ArrayAttr>(a)) {
    bool allInt = true, allNum = true, allStr = true;
    for (Attribute e : arr) {
      allInt &= isa<IntegerAttr>(e);
      allNum &= isa<IntegerAttr, FloatAttr>(e);
      allStr &= isa<StringAttr>(e);
    }
    if (allStr && !arr.empty()) {
      std::vector<std::string> v;
      for (Attribute e : arr)
        v.push_back(cast<StringAttr>(e).getValue().str());
      out = std::move(v);
      return true;
    }
    if (allInt) {
      std::vector<int64_t> v;
      for (Attribute e : arr)
        v.push_back(cast<IntegerAttr>(e).getValue().getSExtValue());
      out = std::move(v);
      return true;
    }
    if (allNum) {
      std::vector<double> v;
      for (Attribute e : arr)
        v.push_back(
            isa<FloatAttr>(e)
                ? cast<FloatAttr>(e).getValueAsDouble()
                : double(cast<IntegerAttr>(e).getValue().getSExtValue()));
      out = std::move(v);
      return true;
    }
    return false;
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(a)) {
    Type e = dense.getElementType();
    if (isa<FloatType>(e)) {
      std::vector<double> v;
      for (APFloat f : dense.getValues<APFloat>())
        v.push_back(f.convertToDouble());
      out = std::move(v);
      return true;
    }
    if (isa<IntegerType>(e)) {
      std::vector<int64_t> v;
      for (APInt i : dense.getValues<APInt>())
        v.push_back(e.isInteger(1) ? int64_t(i.getZExtValue())
                                   : i.getSExtValue());
      out = std::move(v);
      return true;
    }
  }
  return false;
}

/// Bytes of a dense constant in the runtime's layout.
static llvm::Error materialize(DenseElementsAttr dense, const TensorDesc &desc,
                               std::vector<char> &bytes, Operation *op) {
  bytes.assign(desc.bytes(), 0);
  int64_t n = desc.numel();
  auto at = [&](int64_t i) { return dense.isSplat() ? 0 : i; };
  switch (desc.dtype) {
  case DType::F32: {
    auto vals = llvm::to_vector(dense.getValues<APFloat>());
    for (int64_t i = 0; i < n; ++i)
      reinterpret_cast<float *>(bytes.data())[i] =
          float(vals[at(i)].convertToDouble());
    return llvm::Error::success();
  }
  case DType::F16:
  case DType::BF16: {
    auto vals = llvm::to_vector(dense.getValues<APFloat>());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = uint16_t(vals[at(i)].bitcastToAPInt().getZExtValue());
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    return llvm::Error::success();
  }
  case DType::I64:
  case DType::I32:
  case DType::Bool: {
    auto vals = llvm::to_vector(dense.getValues<APInt>());
    for (int64_t i = 0; i < n; ++i) {
      const APInt &v = vals[at(i)];
      if (desc.dtype == DType::I64)
        reinterpret_cast<int64_t *>(bytes.data())[i] = v.getSExtValue();
      else if (desc.dtype == DType::I32)
        reinterpret_cast<int32_t *>(bytes.data())[i] =
            int32_t(v.getSExtValue());
      else
        bytes[i] = char(v.getZExtValue() != 0);
    }
    return llvm::Error::success();
  }
  }
  return opError(op, "cannot materialise this constant");
}

/// Views alias their result to operand 0 (the op registry's View trait).
static bool isView(StringRef opType) {
  return ::oasr::ops::OpRegistry::get().hasTrait(opType, ::oasr::ops::View);
}

static uint64_t hashName(const std::string &s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : s) {
    h ^= uint8_t(c);
    h *= 1099511628211ull;
  }
  return h;
}

//===----------------------------------------------------------------------===//
// Executor::create
//===----------------------------------------------------------------------===//

static llvm::Error planDeferredUpdates(Executor::Impl &I,
                                       const std::vector<PlanStepInfo> &steps);

/// Executor::create in phases; each reads what the earlier ones built.
class ExecutorBuilder {
public:
  ExecutorBuilder(ModuleOp module, KernelBackend &backend,
                  const ExecutorOptions &options)
      : module(module), backend(backend), options(options),
        exec(new Executor()), I(*exec->impl) {
    I.backend = &backend;
    I.hostMemory = backend.hostAddressable();
    I.ranks = std::max(options.ranks, 1);
    I.deviceGraphs = options.deviceGraphs;
  }

  llvm::Expected<std::unique_ptr<Executor>> build() {
    using Phase = llvm::Error (ExecutorBuilder::*)();
    for (Phase phase :
         {&ExecutorBuilder::checkModule, &ExecutorBuilder::readAttributes,
          &ExecutorBuilder::readArguments, &ExecutorBuilder::buildInstructions,
          &ExecutorBuilder::computeLiveness, &ExecutorBuilder::checkMemory,
          &ExecutorBuilder::createKernels, &ExecutorBuilder::planMemory,
          &ExecutorBuilder::allocate, &ExecutorBuilder::publish})
      if (llvm::Error err = (this->*phase)())
        return std::move(err);
    return std::move(exec);
  }

private:
  using Impl = Executor::Impl;

  static llvm::Error notTraining(const llvm::Twine &why) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the module was not compiled for training: " + why +
            "; compile it with `oasr-opt --oasr-train-pipeline` (or pass the "
            ".onnx model to oasr-run)");
  }

  /// @train_step exists, has one block and updates the parameters.
  llvm::Error checkModule() {
    fn = module.lookupSymbol<func::FuncOp>("train_step");
    if (!fn) {
      if (module.lookupSymbol<func::FuncOp>("forward"))
        return notTraining("it has @forward but no @train_step");
      return notTraining("it has no function @train_step");
    }
    if (fn.getBody().getBlocks().size() != 1)
      return notTraining("@train_step must have exactly one block");
    bool hasUpdate = false;
    fn.walk([&](mlir::oasr::OptimizerUpdateOp) { hasUpdate = true; });
    if (!hasUpdate)
      return notTraining("@train_step has no oasr.optimizer_update");
    return llvm::Error::success();
  }

  /// The module's attributes: source, model, update count, plan, costs.
  llvm::Error readAttributes() {
    // Module attributes.
    if (auto s = module->getAttrOfType<StringAttr>(mlir::oasr::kSourceAttr))
      exec->source = s.getValue().str();
    if (auto s = module->getAttrOfType<StringAttr>(mlir::oasr::kModelAttr))
      exec->model = s.getValue().str();
    if (auto s = module->getAttrOfType<StringAttr>(mlir::oasr::kPrecisionAttr))
      exec->precisionName = s.getValue().str();
    std::string error;
    if (!backend.setPrecision(exec->precisionName, error, exec->precisionWarn))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--precision=" + exec->precisionName +
                                         ": " + error);
    // An ONNX training model's update count T: the first update is number T.
    if (auto opt =
            module->getAttrOfType<DictionaryAttr>(mlir::oasr::kOptimizerAttr))
      if (auto t = opt.getAs<IntegerAttr>("update_count")) {
        std::string name = "T";
        if (auto n = opt.getAs<StringAttr>("update_count_name")) {
          name = "'" + n.str() + "'";
          exec->countName = n.str();
        }
        if (t.getInt() < 0)
          return llvm::createStringError(
              llvm::inconvertibleErrorCode(),
              "the model's update count %s is %lld; ONNX counts updates from 0",
              name.c_str(), (long long)t.getInt());
        I.updatesDone = t.getInt();
      }
    if (auto plan =
            module->getAttrOfType<DictionaryAttr>(mlir::oasr::kPlanAttr)) {
      if (auto s = plan.getAs<StringAttr>("strategy"))
        exec->strategy = s.getValue().str();
      if (auto f = plan.getAs<FloatAttr>("predicted_iteration_us"))
        exec->predictedUs = f.getValueAsDouble();
      else if (auto i = plan.getAs<IntegerAttr>("predicted_iteration_us"))
        exec->predictedUs = double(i.getInt());
      auto number = [&](StringRef key, double &out) {
        if (auto f = plan.getAs<FloatAttr>(key))
          out = f.getValueAsDouble();
      };
      number("alpha_s", exec->alphaS);
      number("beta_s_per_byte", exec->betaS);
      number("group_overhead_us", exec->groupOverheadUs);
      number("overlap_rate", exec->overlapRate);
      if (auto st = plan.getAs<DictionaryAttr>("steady")) {
        SteadyExecution &se = exec->steadyExec;
        if (auto w = st.getAs<BoolAttr>("forward_waits"))
          se.forwardWaits = w.getValue();
        if (auto p = st.getAs<DenseI64ArrayAttr>("pieces"))
          for (int64_t v : p.asArrayRef())
            se.pieces.push_back(unsigned(std::clamp<int64_t>(v, 0, 1 << 20)));
        if (auto p = st.getAs<DenseI64ArrayAttr>("scatter"))
          for (int64_t v : p.asArrayRef())
            se.scatter.push_back(v != 0);
        if (auto o = st.getAs<DenseI64ArrayAttr>("order")) {
          llvm::ArrayRef<int64_t> v = o.asArrayRef();
          if (v.size() % 3)
            return llvm::createStringError(
                llvm::inconvertibleErrorCode(),
                "oasr.plan's steady 'order' must hold (group, piece, "
                "all-gather) triples");
          for (size_t k = 0; k + 2 < v.size(); k += 3)
            se.order.push_back({unsigned(std::max<int64_t>(v[k], 0)),
                                unsigned(std::max<int64_t>(v[k + 1], 0)),
                                v[k + 2] != 0});
        }
      }
    }
    if (auto costs =
            module->getAttrOfType<DictionaryAttr>(mlir::oasr::kCostModelAttr)) {
      if (auto s = costs.getAs<StringAttr>("source"))
        exec->costs = s.getValue().str();
      if (auto f = costs.getAs<StringAttr>("file"))
        exec->costs += " " + f.getValue().str();
    }
    return llvm::Error::success();
  }

  Expected<int> newValue(Value v, Operation *where) {
    // A function argument is named by its tag (oasr.input = "x", ...).
    std::string argument;
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (DictionaryAttr attrs = fn.getArgAttrDict(arg.getArgNumber()))
        for (NamedAttribute a : attrs)
          if (auto s = dyn_cast<StringAttr>(a.getValue()))
            argument = s.getValue().str();
    auto d = descOf(v.getType(), where, argument);
    if (!d)
      return d.takeError();
    int id = int(I.values.size());
    I.values.push_back(ValueInfo{});
    I.values.back().desc = *d;
    idOf[v] = id;
    return id;
  }
  /// The bytes of value `v` when it is a small constant of the program (a
  /// Constant, or a view of one), which no step writes; else empty.
  std::vector<char> constantBytes(int v) const {
    constexpr size_t kMaxFolded = 256;
    while (v >= 0 && I.values[v].where == Where::Alias)
      v = I.values[v].aliasOf;
    if (v < 0 || I.values[v].where != Where::Persistent ||
        v == I.lossScaleValue)
      return {};
    const std::vector<char> &init = I.persist[I.values[v].persistent].init;
    return init.size() <= kMaxFolded ? init : std::vector<char>{};
  }
  void newPersistent(int id) {
    I.values[id].where = Where::Persistent;
    I.values[id].persistent = int(I.persist.size());
    I.persist.push_back(PersistBuf{I.values[id].desc, nullptr, {}});
  }

  /// The function's arguments: input, label, parameters, state.
  llvm::Error readArguments() {
    // Arguments.
    Block &body = fn.getBody().front();
    for (BlockArgument arg : body.getArguments()) {
      auto id = newValue(arg, fn);
      if (!id)
        return id.takeError();
      newPersistent(*id);
      auto tag = [&](StringRef name) -> std::string {
        if (auto s = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), name))
          return s.getValue().str();
        return "";
      };
      std::string name;
      if (!(name = tag(mlir::oasr::kInputAttr)).empty()) {
        if (I.inputValue >= 0)
          return llvm::createStringError(
              llvm::inconvertibleErrorCode(),
              "@train_step has more than one oasr.input; the runtime feeds one "
              "input tensor");
        I.inputValue = *id;
      } else if (!(name = tag(mlir::oasr::kLabelAttr)).empty()) {
        I.labelValue = *id;
      } else if (!(name = tag(mlir::oasr::kParamAttr)).empty()) {
        paramArg[name] = *id;
        persistMeta.push_back({PersistentTensor::Param, name});
        persistValue.push_back(*id);
      } else if (!(name = tag(mlir::oasr::kStateAttr)).empty()) {
        stateArg[name] = *id;
        persistMeta.push_back({PersistentTensor::State, name});
        persistValue.push_back(*id);
      } else if (!(name = tag(mlir::oasr::kOptStateAttr)).empty()) {
        optStateArg[name] = *id;
        persistMeta.push_back({PersistentTensor::OptState, name});
        persistValue.push_back(*id);
      } else {
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "@train_step argument #%u has none of the tags oasr.input, "
            "oasr.label, oasr.param, oasr.state, oasr.opt_state",
            arg.getArgNumber());
      }
    }
    if (I.inputValue < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "@train_step has no argument tagged "
                                     "oasr.input");
    return llvm::Error::success();
  }

  /// Ops to instructions, gradient groups and the state write-back.
  llvm::Error buildInstructions() {
    // Ops -> instructions.
    Block &body = fn.getBody().front();
    std::vector<int> copyBack; // pairs flattened: dst, src
    bool seenBackward = false;

    llvm::DenseMap<int, std::pair<unsigned, unsigned>> waitResult; // id -> g, k

    llvm::DenseMap<Operation *, unsigned> groupOfStart;
    std::map<std::string, std::string> layerOfGradValue;

    for (Operation &opRef : body) {
      Operation *op = &opRef;
      std::vector<int> ins;
      for (Value v : op->getOperands()) {
        auto it = idOf.find(v);
        if (it == idOf.end()) {
          if (isa<mlir::oasr::TokenType>(v.getType()))
            continue;
          return opError(op, "uses a value the runtime does not know");
        }
        ins.push_back(it->second);
      }

      if (auto node = dyn_cast<mlir::oasr::NodeOp>(op)) {
        // A custom domain's op runs when the registry gives it kernels
        // (com.microsoft::FusedMatMul, which the compiler emits).
        const ::oasr::ops::OpDef *def =
            node.getDomain().empty()
                ? nullptr
                : ::oasr::ops::OpRegistry::get().lookup(node);
        if (!node.getDomain().empty() &&
            (!def || def->kernels == ::oasr::ops::Kernels::None))
          return opError(op, "custom domain '" + node.getDomain() +
                                 "' is not supported by the runtime");
        StringRef opType = node.getOpType();
        std::string layer;
        if (auto l = op->getAttrOfType<StringAttr>(mlir::oasr::kLayerAttr))
          layer = l.getValue().str();
        if (opType == "Constant") {
          if (op->getNumResults() != 1)
            return opError(op, "a Constant has one result");
          auto id = newValue(op->getResult(0), op);
          if (!id)
            return id.takeError();
          newPersistent(*id);
          if (op->hasAttr(mlir::oasr::kLossScaleAttr)) {
            if (I.values[*id].desc.dtype != DType::F32 ||
                I.values[*id].desc.numel() != 1)
              return opError(op, "the loss-scale seed must be one f32");
            I.lossScaleValue = *id;
          }
          // Big constants (Swin's relative-position index) arrive as resource
          // blobs holding the raw little-endian elements.
          if (auto blobAttr =
                  op->getAttrOfType<DenseResourceElementsAttr>("value")) {
            AsmResourceBlob *blob = blobAttr.getRawHandle().getBlob();
            if (!blob)
              return opError(op, "its resource blob is missing (was the module "
                                 "printed with elided resources?)");
            ArrayRef<char> data = blob->getData();
            if (data.size() != I.values[*id].desc.bytes())
              return opError(
                  op, "its resource blob has " + std::to_string(data.size()) +
                          " bytes; the type needs " +
                          std::to_string(I.values[*id].desc.bytes()));
            I.persist.back().init.assign(data.begin(), data.end());
            continue;
          }
          auto dense = op->getAttrOfType<DenseElementsAttr>("value");
          if (!dense)
            return opError(op, "needs a dense or resource `value` attribute");
          if (auto err = materialize(dense, I.values[*id].desc,
                                     I.persist.back().init, op))
            return std::move(err);
          continue;
        }
        if (isView(opType) && op->getNumResults() == 1 && !ins.empty()) {
          auto id = newValue(op->getResult(0), op);
          if (!id)
            return id.takeError();
          if (I.values[*id].desc.bytes() != I.values[ins[0]].desc.bytes())
            return opError(op, "view changes the number of bytes");
          I.values[*id].where = Where::Alias;
          I.values[*id].aliasOf = ins[0];
          I.values[ins[0]].used = true;
          // The view reads its input when its own readers run: handled by the
          // liveness pass through `root`.
          continue;
        }
        Instr instr;
        instr.op = InstrOp::Kernel;
        instr.ins = ins;
        if (auto absent = op->getAttrOfType<DenseI64ArrayAttr>(
                mlir::oasr::kAbsentInputsAttr))
          instr.absent.assign(absent.asArrayRef().begin(),
                              absent.asArrayRef().end());
        // Kernel.h: these may alias their result to a same-shaped operand
        // (the op registry's InPlace trait).
        instr.elementwise = ::oasr::ops::OpRegistry::get().hasTrait(
            opType, ::oasr::ops::InPlace);
        std::string name = opName(op);
        for (Value r : op->getResults()) {
          auto id = newValue(r, op);
          if (!id)
            return id.takeError();
          I.values[*id].def = int(I.instrs.size());
          I.values[*id].kernelOutput = true;
          instr.outs.push_back(*id);
        }
        bool backward = !layer.empty();
        if (backward)
          seenBackward = true;
        if (opType == "Gather" && ins.size() == 2 && ins[1] == I.inputValue &&
            !I.inputVocab && I.values[ins[0]].desc.rank() >= 1)
          I.inputVocab = I.values[ins[0]].desc.shape[0];
        if (opType == "SoftmaxCrossEntropyLoss") {
          I.lossValue = instr.outs.empty() ? -1 : instr.outs[0];
          I.scoresValue = ins.empty() ? -1 : ins[0];
          I.forwardEnd = unsigned(I.instrs.size()) + 1;
        }
        if (!seenBackward && I.lossValue < 0)
          I.forwardEnd = unsigned(I.instrs.size()) + 1;
        exec->stepInfos.push_back(
            PlanStepInfo{name, opType.str(), backward ? layer : name,
                         backward ? StepKind::Backward : StepKind::Forward});
        instrOf[op] = int(I.instrs.size());
        // Kernels are created after buffer planning, when outputUsed is known.
        I.instrs.push_back(std::move(instr));
        continue;
      }

      if (auto start = dyn_cast<mlir::oasr::AllreduceStartOp>(op)) {
        PendingGroup g;
        g.index = unsigned(groups.size());
        // The wire type (f32 gradients only, as the verifier checks); one
        // for the whole step, so that a regroup keeps it.
        GradWire wire = GradWire::F32;
        if (std::optional<Type> t = start.getWireType())
          wire = t->isBF16()  ? GradWire::BF16
                 : t->isF16() ? GradWire::F16
                              : GradWire::F32;
        if (groups.empty())
          exec->wire = wire;
        else if (wire != exec->wire)
          return opError(op, llvm::formatv("sends its gradients as {0} but "
                                           "the first group as {1}; a step's "
                                           "groups travel in one type",
                                           gradWireName(wire),
                                           gradWireName(exec->wire))
                                 .str());
        std::optional<ArrayRef<int64_t>> offs = start.getOffsets();
        size_t end = 0;
        for (auto [k, v] : llvm::enumerate(ins)) {
          size_t off = offs ? size_t((*offs)[k]) : alignUp(end);
          g.grads.push_back(v);
          g.offsets.push_back(off);
          end = off + I.values[v].desc.bytes();
          if (I.values[v].desc.dtype != I.values[ins[0]].desc.dtype)
            return opError(op, "a fused group must hold one element type");
          std::string gl;
          if (Operation *p = start.getGrads()[k].getDefiningOp())
            if (auto l = p->getAttrOfType<StringAttr>(mlir::oasr::kLayerAttr))
              gl = l.getValue().str();
          g.gradLayers.push_back(gl);
        }
        g.bytes =
            start.getBufferBytes() ? size_t(*start.getBufferBytes()) : end;
        Operation *producer = start.getGrads().front().getDefiningOp();
        for (Value v : start.getGrads())
          if (Operation *p = v.getDefiningOp())
            if (!producer || (p->getBlock() == producer->getBlock() &&
                              producer->isBeforeInBlock(p)))
              producer = p;
        if (producer)
          if (auto l =
                  producer->getAttrOfType<StringAttr>(mlir::oasr::kLayerAttr))
            g.layer = l.getValue().str();
        groupOfStart[op] = g.index;
        // Place each gradient straight into the group buffer when nothing else
        // reads it; otherwise copy it in at this point.
        Instr copyIn;
        copyIn.op = InstrOp::Copy;
        for (auto [k, v] : llvm::enumerate(g.grads)) {
          ValueInfo &vi = I.values[v];
          Value irValue = start.getGrads()[k];
          bool onlyStart = llvm::all_of(irValue.getUsers(),
                                        [&](Operation *u) { return u == op; });
          bool inOtherGroup = vi.where == Where::Group;
          if (vi.where == Where::Arena && vi.kernelOutput && onlyStart &&
              !inOtherGroup && !vi.used) {
            vi.where = Where::Group;
            vi.group = int(g.index);
            vi.offset = g.offsets[k];
            g.slots.push_back(GradSlot{v, -1, vi.def});
          } else {
            int slot = int(I.values.size());
            I.values.push_back(ValueInfo{});
            I.values[slot].desc = vi.desc;
            I.values[slot].where = Where::Group;
            I.values[slot].group = int(g.index);
            I.values[slot].offset = g.offsets[k];
            copyIn.copies.push_back({slot, v});
            copyIn.ins.push_back(v);
            copyIn.outs.push_back(slot);
            g.slots.push_back(GradSlot{slot, -1, int(I.instrs.size())});
          }
        }
        copyIn.pack = true;
        if (!copyIn.copies.empty()) {
          exec->stepInfos.push_back(
              PlanStepInfo{llvm::formatv("pack group {0}", g.index).str(),
                           "Copy", g.layer, StepKind::Copy});
          I.instrs.push_back(std::move(copyIn));
        }
        Instr s;
        s.op = InstrOp::Start;
        s.group = g.index;
        s.ins = ins;
        exec->stepInfos.push_back(
            PlanStepInfo{llvm::formatv("allreduce_start {0}", g.index).str(),
                         "allreduce_start", g.layer, StepKind::Comm});
        I.instrs.push_back(std::move(s));
        groups.push_back(std::move(g));
        continue;
      }

      if (auto wait = dyn_cast<mlir::oasr::AllreduceWaitOp>(op)) {
        auto it = groupOfStart.find(wait.getStart().getOperation());
        if (it == groupOfStart.end())
          return opError(op, "waits for an allreduce that was not started");
        PendingGroup &g = groups[it->second];
        Instr w;
        w.op = InstrOp::Wait;
        w.group = g.index;
        for (auto [k, r] : llvm::enumerate(op->getResults())) {
          auto id = newValue(r, op);
          if (!id)
            return id.takeError();
          I.values[*id].where = Where::Group;
          I.values[*id].group = int(g.index);
          I.values[*id].offset = g.offsets[k];
          I.values[*id].def = int(I.instrs.size());
          waitResult[*id] = {g.index, unsigned(k)};
          g.slots[k].wait = *id;
          w.outs.push_back(*id);
        }
        exec->stepInfos.push_back(
            PlanStepInfo{llvm::formatv("allreduce_wait {0}", g.index).str(),
                         "allreduce_wait", g.layer, StepKind::Comm});
        I.instrs.push_back(std::move(w));
        continue;
      }

      if (auto upd = dyn_cast<mlir::oasr::OptimizerUpdateOp>(op)) {
        Instr u;
        u.op = InstrOp::Update;
        u.algo = upd.getAlgo().str();
        u.lr = options.lrOverride >= 0 ? options.lrOverride
                                       : upd.getLr().convertToDouble();
        u.momentum = upd.getMomentum().convertToDouble();
        u.weightDecay = upd.getWeightDecay().convertToDouble();
        u.dampening = upd.getDampening().convertToDouble();
        u.nesterov = upd.getNesterov();
        u.lrDecay = upd.getLrDecay().convertToDouble();
        u.beta1 = upd.getBeta1().convertToDouble();
        u.beta2 = upd.getBeta2().convertToDouble();
        u.epsilon = upd.getEpsilon().convertToDouble();
        u.weightDecayPost = upd.getWeightDecayPost().convertToDouble();
        u.rule = UpdateRule{
            u.algo,    u.lr,    u.momentum, u.weightDecay, u.dampening,
            u.lrDecay, u.beta1, u.beta2,    u.epsilon,     u.weightDecayPost,
            u.nesterov};
        u.ins = ins;
        if (I.values[ins[0]].desc.dtype != DType::F32)
          return opError(
              op, std::string("the parameter is ") +
                      dtypeName(I.values[ins[0]].desc.dtype) +
                      " (a model exported after .half()?): the runtime updates "
                      "f32 master weights only; export the model in f32 and "
                      "train it with --precision=f16 or bf16 "
                      "(docs/precision.md)");
        // New parameter / state in place when the old value is an argument
        // and nothing reads it after this update.
        for (auto [k, r] : llvm::enumerate(op->getResults())) {
          Value old = k == 0 ? upd.getParam() : upd.getState()[k - 1];
          int oldId = idOf[old];
          bool inPlace = I.values[oldId].where == Where::Persistent &&
                         isa<BlockArgument>(old) &&
                         llvm::all_of(old.getUsers(), [&](Operation *user) {
                           return user == op || user->isBeforeInBlock(op);
                         });
          // Views of the old value read it too.
          for (Operation *user : old.getUsers())
            if (auto n = dyn_cast<mlir::oasr::NodeOp>(user))
              if (isView(n.getOpType()))
                for (Operation *vu : n->getResult(0).getUsers())
                  if (vu != op && !vu->isBeforeInBlock(op))
                    inPlace = false;
          auto id = newValue(r, op);
          if (!id)
            return id.takeError();
          if (inPlace) {
            I.values[*id].where = Where::Alias;
            I.values[*id].aliasOf = oldId;
          } else {
            I.values[*id].def = int(I.instrs.size());
            I.values[*id].kernelOutput = true;
            if (isa<BlockArgument>(old)) {
              copyBack.push_back(oldId);
              copyBack.push_back(*id);
            }
          }
          u.outs.push_back(*id);
        }
        // The averaged gradient of this parameter, for --dump-grads.
        if (auto arg = dyn_cast<BlockArgument>(upd.getParam()))
          if (auto s = fn.getArgAttrOfType<StringAttr>(
                  arg.getArgNumber(), mlir::oasr::kParamAttr)) {
            I.gradOfParam[s.getValue().str()] = ins[1];
            auto wr = waitResult.find(ins[1]);
            if (wr != waitResult.end())
              gradOrder.push_back(
                  {wr->second, s.getValue().str(),
                   groups[wr->second.first].gradLayers[wr->second.second],
                   I.values[ins[1]].desc.bytes()});
          }
        exec->stepInfos.push_back(PlanStepInfo{
            "update " + opName(op), "optimizer_update", "", StepKind::Update});
        I.instrs.push_back(std::move(u));
        continue;
      }

      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        // Results tagged new_* (or produced by BN training outputs) overwrite
        // the argument of the same name at the end of the step.
        for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
          int id = ins[k];
          I.values[id].used = true;
          auto tagged = [&](StringRef tag) -> std::string {
            if (auto s = fn.getResultAttrOfType<StringAttr>(unsigned(k), tag))
              return s.getValue().str();
            return "";
          };
          int target = -1;
          std::string n;
          if (!(n = tagged(mlir::oasr::kNewParamAttr)).empty() &&
              paramArg.count(n))
            target = paramArg[n];
          else if (!(n = tagged(mlir::oasr::kNewOptStateAttr)).empty() &&
                   optStateArg.count(n))
            target = optStateArg[n];
          else if (!(n = tagged(mlir::oasr::kNewStateAttr)).empty() &&
                   stateArg.count(n))
            target = stateArg[n];
          else if (auto res = dyn_cast<OpResult>(v)) {
            auto node = dyn_cast<mlir::oasr::NodeOp>(res.getOwner());
            if (node && node.is("BatchNormalization") &&
                (res.getResultNumber() == 1 || res.getResultNumber() == 2)) {
              Value old = node.getInputs()[res.getResultNumber() + 2];
              if (isa<BlockArgument>(old))
                target = idOf[old];
            }
          }
          if (target >= 0 && I.root(id) != I.root(target) &&
              std::find(copyBack.begin(), copyBack.end(), id) ==
                  copyBack.end()) {
            copyBack.push_back(target);
            copyBack.push_back(id);
          }
          if (k == 0 && I.lossValue < 0)
            I.lossValue = id;
        }
        continue;
      }
      return opError(op, "is not an op the runtime executes");
    }
    if (I.lossValue < 0)
      return notTraining("@train_step computes no loss");

    if (!copyBack.empty()) {
      Instr c;
      c.op = InstrOp::Copy;
      for (size_t k = 0; k < copyBack.size(); k += 2) {
        c.copies.push_back({copyBack[k], copyBack[k + 1]});
        c.ins.push_back(copyBack[k + 1]);
      }
      exec->stepInfos.push_back(
          PlanStepInfo{"write back state", "Copy", "", StepKind::Copy});
      I.instrs.push_back(std::move(c));
    }
    return llvm::Error::success();
  }

  /// The last instruction reading each value.
  llvm::Error computeLiveness() {
    // Liveness: last instruction reading each root value.
    end = int(I.instrs.size());
    for (auto [k, instr] : llvm::enumerate(I.instrs))
      for (int v : instr.ins) {
        int r = I.root(v);
        I.values[v].used = true;
        I.values[r].used = true;
        I.values[r].lastUse = std::max(I.values[r].lastUse, int(k));
      }
    for (auto [k, instr] : llvm::enumerate(I.instrs))
      for (auto [dst, src] : instr.copies)
        I.values[I.root(dst)].lastUse =
            std::max(I.values[I.root(dst)].lastUse, int(k));
    for (int keep : {I.lossValue, I.scoresValue})
      if (keep >= 0)
        I.values[I.root(keep)].lastUse = end;
    // Values returned by the function stay valid until the end of the step.
    for (ValueInfo &vi : I.values)
      if (vi.used && vi.lastUse < 0)
        vi.lastUse = end;
    // Aliases extend their root's life to their own readers.
    for (size_t v = 0; v < I.values.size(); ++v)
      if (I.values[v].where == Where::Alias) {
        int r = I.root(int(v));
        I.values[r].lastUse =
            std::max(I.values[r].lastUse, I.values[v].lastUse);
      }
    return llvm::Error::success();
  }

  /// Refuse sizes no machine holds before any kernel sees them.
  llvm::Error checkMemory() {
    Block &body = fn.getBody().front();
    // Before any kernel is created (kernel libraries fail on sizes no
    // machine holds: oneDNN's primitive creation died with SIGFPE on a batch
    // of 2^32): host memory must at least hold the parameters, state and
    // gradient buffers plus the largest single activation.
    auto saturatingAdd = [](uint64_t &sum, uint64_t bytes) {
      sum = sum > UINT64_MAX - bytes ? UINT64_MAX : sum + bytes;
    };
    persistentBytes = 0;
    for (const PersistBuf &p : I.persist)
      saturatingAdd(persistentBytes, p.desc.bytes());
    for (const PendingGroup &g : groups)
      saturatingAdd(persistentBytes, g.bytes);
    availableBytes = I.hostMemory ? hostMemoryBytes() : 0;
    if (availableBytes) {
      uint64_t persistent = persistentBytes, largest = 0;
      Operation *largestAt = nullptr;
      for (Operation &opRef : body)
        for (Value r : opRef.getResults()) {
          auto it = idOf.find(r);
          if (it == idOf.end() || I.values[it->second].where != Where::Arena)
            continue;
          uint64_t bytes = I.values[it->second].desc.bytes();
          if (bytes > largest)
            largest = bytes, largestAt = &opRef;
        }
      uint64_t needed = persistent;
      saturatingAdd(needed, largest);
      uint64_t available = availableBytes;
      if (needed > available) {
        std::string what = llvm::formatv("{0} bytes of parameters, state and "
                                         "gradient buffers",
                                         persistent)
                               .str();
        if (auto node = dyn_cast_or_null<mlir::oasr::NodeOp>(largestAt))
          what += llvm::formatv(" and {0} bytes for the largest activation, "
                                "the output of '{1}' ({2})",
                                largest, opName(largestAt), node.getOpType())
                      .str();
        else if (largestAt)
          what += llvm::formatv(" and {0} bytes for the largest activation, "
                                "the output of '{1}'",
                                largest, opName(largestAt))
                      .str();
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("cannot allocate {0} bytes ({1}): more than this "
                          "machine's memory ({2} bytes of RAM and swap)",
                          needed, what, available)
                .str());
      }
    }
    return llvm::Error::success();
  }

  /// One backend kernel per node.
  llvm::Error createKernels() {
    // Kernels, now that every output's use is known; their workspaces join
    // the arena plan below.
    Block &body = fn.getBody().front();
    std::vector<char> readViaAlias(I.values.size(), 0);
    for (const ValueInfo &vi : I.values)
      if (vi.where == Where::Alias && vi.used)
        readViaAlias[size_t(vi.aliasOf)] = 1;
    for (Operation &opRef : body) {
      auto node = dyn_cast<mlir::oasr::NodeOp>(&opRef);
      if (!node || !instrOf.count(&opRef))
        continue;
      Instr &instr = I.instrs[size_t(instrOf[&opRef])];
      OpSpec spec;
      spec.opType = node.getOpType().str();
      spec.name = opName(&opRef);
      spec.seed = hashName(spec.name, options.seed);
      for (NamedAttribute a : opRef.getDiscardableAttrs()) {
        if (a.getName().getValue().starts_with("oasr."))
          continue;
        AttrValue v;
        if (convertAttr(a.getValue(), v))
          spec.attrs.set(a.getName().str(), std::move(v));
      }
      for (int v : instr.ins) {
        spec.inputs.push_back(I.values[v].desc);
        spec.inputValues.push_back(constantBytes(v));
      }
      spec.inputs = instr.withAbsent(spec.inputs, TensorDesc{});
      spec.inputValues = instr.withAbsent(spec.inputValues, {});
      for (int v : instr.outs) {
        spec.outputs.push_back(I.values[v].desc);
        bool used = I.values[v].used || readViaAlias[size_t(v)];
        spec.outputUsed.push_back(used || I.values[v].where == Where::Group);
      }
      std::string error;
      instr.kernel = backend.create(spec, error);
      if (!instr.kernel)
        return opError(&opRef, error.empty()
                                   ? "the " + std::string(backend.name()) +
                                         " backend has no kernel for it"
                                   : error);
      instr.workspaceBytes = instr.kernel->workspaceBytes();
    }
    return llvm::Error::success();
  }

  /// Where every activation and workspace lives (planArena).
  llvm::Error planMemory() {
    // Arena planning (planArena, ArenaPlan.h): every arena value and kernel
    // workspace in step order, freed after its last use.
    {
      std::vector<ArenaBuffer> buffers;
      std::vector<int> bufferOf(I.values.size(), -1);
      // Which value or instruction each buffer places.
      std::vector<std::pair<bool, int>> placed; // (workspace?, value or instr)
      std::vector<char> donated(I.values.size(), 0);
      for (size_t k = 0; k < I.instrs.size(); ++k) {
        for (int v : I.instrs[k].outs) {
          ValueInfo &vi = I.values[v];
          if (vi.where != Where::Arena || vi.def != int(k))
            continue;
          ArenaBuffer buf;
          buf.def = int(k);
          int last = vi.lastUse < 0 ? vi.def : vi.lastUse;
          // Saved for backward: forward writes it, backward reads it last.
          if (k < exec->stepInfos.size() &&
              size_t(last) < exec->stepInfos.size() &&
              exec->stepInfos[k].kind == StepKind::Forward &&
              exec->stepInfos[size_t(last)].kind == StepKind::Backward) {
            exec->memStats.savedBytes += vi.desc.bytes();
            if (isLowFloat(vi.desc.dtype))
              exec->memStats.savedLowBytes += vi.desc.bytes();
          }
          buf.lastUse = last < end ? last : ArenaBuffer::kLive;
          buf.bytes = vi.desc.bytes();
          // In place: an elementwise op writes over an operand of its shape
          // that dies here (e.g. Relu over the BatchNormalization output).
          if (options.inPlace && options.reuseBuffers &&
              I.instrs[k].elementwise && I.instrs[k].outs.size() == 1)
            for (int in : I.instrs[k].ins) {
              int r = I.root(in);
              const ValueInfo &ri = I.values[size_t(r)];
              if (ri.where == Where::Arena && ri.def >= 0 &&
                  ri.lastUse == int(k) && !donated[size_t(r)] &&
                  I.values[size_t(in)].desc.shape == vi.desc.shape &&
                  ri.desc.dtype == vi.desc.dtype &&
                  ri.desc.bytes() == vi.desc.bytes()) {
                donated[size_t(r)] = 1;
                buf.donor = bufferOf[size_t(r)];
                break;
              }
            }
          bufferOf[size_t(v)] = int(buffers.size());
          buffers.push_back(buf);
          placed.push_back({false, v});
        }
        if (I.instrs[k].workspaceBytes) {
          ArenaBuffer scratch;
          scratch.def = scratch.lastUse = int(k);
          scratch.bytes = I.instrs[k].workspaceBytes;
          scratch.scratch = true;
          buffers.push_back(scratch);
          placed.push_back({true, int(k)});
        }
      }
      ArenaPlan arena = planArena(buffers, kAlign, options.reuseBuffers);
      for (size_t b = 0; b < buffers.size(); ++b) {
        auto [workspace, index] = placed[b];
        if (workspace)
          I.instrs[size_t(index)].workspaceOffset = arena.offsets[b];
        else
          I.values[size_t(index)].offset = arena.offsets[b];
      }
      I.arenaBytes = arena.bytes;
      exec->memStats.arenaBytes = arena.bytes;
      exec->memStats.unsharedBytes = arena.unsharedBytes;
    }
    return llvm::Error::success();
  }

  /// The arena, persistent tensors and group buffers.
  llvm::Error allocate() {
    // Memory. The arena is as large as the plan says, however much of it the
    // first steps touch: refuse what the machine cannot hold instead of being
    // killed by the kernel's out-of-memory killer part-way through a step.
    if (availableBytes &&
        I.arenaBytes >
            availableBytes - std::min(availableBytes, persistentBytes))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv(
              "cannot allocate {0} bytes of activations: with {1} "
              "bytes of parameters, state and gradient buffers, more "
              "than this machine's memory ({2} bytes of RAM and swap)",
              I.arenaBytes, persistentBytes, availableBytes)
              .str());
    if (I.arenaBytes) {
      I.arena = backend.allocate(I.arenaBytes);
      if (!I.arena)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot allocate %zu bytes of activations", I.arenaBytes);
    }
    for (PersistBuf &p : I.persist) {
      p.ptr = backend.allocate(std::max<size_t>(p.desc.bytes(), 1));
      if (!p.init.empty())
        backend.copyToDevice(p.ptr, p.init.data(), p.init.size());
      else if (I.hostMemory)
        std::memset(p.ptr, 0, p.desc.bytes());
      exec->memStats.persistentBytes += p.desc.bytes();
    }
    for (PendingGroup &g : groups)
      I.gradSlabBytes += groupBufferBytes(g.index, g.bytes);
    if (I.gradSlabBytes) {
      I.gradSlab = I.zeroedBuffer(I.gradSlabBytes);
      if (!I.gradSlab)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "cannot allocate %zu bytes of gradients",
                                       I.gradSlabBytes);
    }
    for (PendingGroup &g : groups) {
      GroupBuf b;
      b.bytes = groupBufferBytes(g.index, g.bytes);
      b.dtype = I.values[g.grads[0]].desc.dtype;
      b.ptr = static_cast<char *>(I.gradSlab) + exec->memStats.gradBytes;
      exec->memStats.gradBytes += b.bytes;
      I.groupBufs.push_back(b);
    }
    // Each reduce-scatter group's shard: 1/ranks of its buffer.
    size_t shardBytes = 0;
    for (size_t g = 0; g < I.groupBufs.size(); ++g)
      if (scatters(unsigned(g)))
        shardBytes += I.groupBufs[g].bytes / size_t(I.ranks);
    if (shardBytes) {
      I.shardSlab = I.zeroedBuffer(shardBytes);
      if (!I.shardSlab)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot allocate %zu bytes for the reduce-scatter shards",
            shardBytes);
      size_t at = 0;
      for (size_t g = 0; g < I.groupBufs.size(); ++g)
        if (scatters(unsigned(g))) {
          I.groupBufs[g].shard = static_cast<char *>(I.shardSlab) + at;
          at += I.groupBufs[g].bytes / size_t(I.ranks);
        }
      exec->memStats.gradBytes += shardBytes;
    }
    if (size_t w = Impl::wireBytesFor(exec->wire, I.groupBufs)) {
      if (!I.reserveWire(w))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot allocate %zu bytes for gradients sent as %s", w,
            gradWireName(exec->wire));
      exec->memStats.wireBytes = w;
    }
    for (size_t v = 0; v < I.values.size(); ++v) {
      ValueInfo &vi = I.values[v];
      switch (vi.where) {
      case Where::Arena:
        vi.ptr = static_cast<char *>(I.arena) + vi.offset;
        break;
      case Where::Persistent:
        vi.ptr = I.persist[size_t(vi.persistent)].ptr;
        break;
      case Where::Group:
        vi.ptr =
            static_cast<char *>(I.groupBufs[size_t(vi.group)].ptr) + vi.offset;
        break;
      case Where::Alias:
        break;
      }
    }
    for (size_t v = 0; v < I.values.size(); ++v)
      if (I.values[v].where == Where::Alias)
        I.values[v].ptr = I.values[I.root(int(v))].ptr;

    for (Instr &instr : I.instrs) {
      if (instr.workspaceBytes)
        instr.kernel->setWorkspace(static_cast<char *>(I.arena) +
                                   instr.workspaceOffset);
      I.bindRefs(instr);
      if (instr.op == InstrOp::Update && !I.hostMemory &&
          !backend.supportsUpdate(instr.algo))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "optimizer '%s' updates on the '%s' backend are not implemented",
            instr.algo.c_str(), backend.name());
    }
    if (I.lossScaleValue >= 0 && !I.hostMemory)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "f16 loss scaling runs on host-memory backends; the '%s' backend "
          "has none",
          backend.name());
    return llvm::Error::success();
  }

  /// Public views, init hints, groups and gradient order.
  llvm::Error publish() {
    // Public views; device backends get the batch in host memory.
    Block &body = fn.getBody().front();
    exec->inputRef = I.ref(I.inputValue);
    if (I.labelValue >= 0)
      exec->labelRef = I.ref(I.labelValue);
    if (!I.hostMemory) {
      I.hostInput.assign(exec->inputRef.bytes(), 0);
      exec->inputRef.data = I.hostInput.data();
      if (I.labelValue >= 0) {
        I.hostLabel.assign(exec->labelRef.bytes(), 0);
        exec->labelRef.data = I.hostLabel.data();
      }
    }
    for (size_t k = 0; k < persistMeta.size(); ++k) {
      PersistentTensor t;
      t.kind = persistMeta[k].first;
      t.name = persistMeta[k].second;
      t.ref = I.ref(persistValue[k]);
      exec->persistentTensors.push_back(std::move(t));
    }
    // Init hints from how each tensor is used.
    for (PersistentTensor &t : exec->persistentTensors) {
      const TensorDesc &d = t.ref.desc;
      if (t.kind == PersistentTensor::OptState)
        t.init = PersistentTensor::Zeros;
      else if (t.kind == PersistentTensor::State)
        t.init = llvm::StringRef(t.name).contains("var")
                     ? PersistentTensor::Ones
                     : PersistentTensor::Zeros;
      else if (d.rank() >= 2) {
        t.init = PersistentTensor::HeNormal;
        t.fanIn = d.numel() / std::max<int64_t>(d.shape[0], 1);
      } else
        t.init = PersistentTensor::Zeros;
    }
    for (BlockArgument arg : body.getArguments()) {
      for (OpOperand &use : arg.getUses()) {
        auto node = dyn_cast<mlir::oasr::NodeOp>(use.getOwner());
        if (!node || !node.is("BatchNormalization"))
          continue;
        unsigned k = use.getOperandNumber();
        int id = idOf[arg];
        for (PersistentTensor &t : exec->persistentTensors)
          if (t.ref.data == I.values[id].ptr)
            t.init = (k == 1 || k == 4) ? PersistentTensor::Ones
                                        : PersistentTensor::Zeros;
      }
    }
    for (PendingGroup &g : groups) {
      GradGroup gg;
      gg.index = g.index;
      gg.buffer.data = I.groupBufs[g.index].ptr;
      gg.buffer.desc.dtype = I.groupBufs[g.index].dtype;
      gg.buffer.desc.shape = {int64_t(I.groupBufs[g.index].bytes /
                                      dtypeSize(I.groupBufs[g.index].dtype))};
      gg.id = g.index;
      gg.bytes = g.bytes;
      gg.layer = g.layer;
      gg.wire = exec->wire;
      gg.wireScratch = exec->wire == GradWire::F32 ? nullptr : I.wireSlab;
      if (scatters(g.index)) {
        gg.scatterRanks = unsigned(I.ranks);
        gg.shard = I.groupBufs[g.index].shard;
      }
      exec->gradGroups.push_back(std::move(gg));
      I.gradSlots.insert(I.gradSlots.end(), g.slots.begin(), g.slots.end());
    }
    exec->nextGroupId = unsigned(groups.size());
    // The plan's beta is per byte on the wire; per gradient byte a 16-bit
    // wire carries half (what the planner charged).
    if (exec->wire != GradWire::F32)
      exec->betaS *= 0.5;
    for (auto &[name, v] : I.gradOfParam)
      if (I.values[v].where == Where::Group)
        exec->gradGroups[size_t(I.values[v].group)].params.push_back(name);
    std::stable_sort(
        gradOrder.begin(), gradOrder.end(),
        [](const GradOrder &a, const GradOrder &b) { return a.at < b.at; });
    for (GradOrder &g : gradOrder)
      exec->gradInfos.push_back(Executor::GradInfo{g.param, g.layer, g.bytes});
    if (I.forwardEnd == 0)
      I.forwardEnd = unsigned(I.instrs.size());
    return checkSteady();
  }

  /// Whether group `g` reduce-scatters (the plan's steady `scatter`).
  bool scatters(unsigned g) const {
    const std::vector<uint8_t> &s = exec->steadyExec.scatter;
    return g < s.size() && s[g];
  }
  /// A group buffer's bytes: 64-byte aligned; a reduce-scatter group's
  /// padded to 16 x ranks f32 elements, so each rank's block is whole.
  size_t groupBufferBytes(unsigned g, size_t bytes) const {
    size_t unit = kAlign * (scatters(g) ? size_t(I.ranks) : 1);
    return (std::max<size_t>(bytes, 4) + unit - 1) / unit * unit;
  }

  /// A steady plan's pieces and order must fit the groups; per-layer
  /// forward waits need the updates at the end of the step.
  llvm::Error checkSteady() {
    SteadyExecution &se = exec->steadyExec;
    const size_t G = exec->gradGroups.size();
    auto bad = [](const llvm::Twine &why) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "oasr.plan's steady execution: " + why);
    };
    if (se.pieces.empty() && se.order.empty() && !se.forwardWaits &&
        se.scatter.empty())
      return llvm::Error::success();
    if (se.pieces.size() != G)
      return bad(llvm::formatv("{0} piece count(s) for {1} group(s)",
                               se.pieces.size(), G));
    if (se.scatter.empty())
      se.scatter.assign(G, 0);
    if (se.scatter.size() != G)
      return bad(llvm::formatv("{0} collective form(s) for {1} group(s)",
                               se.scatter.size(), G));
    if (se.hasScatter() && exec->wire != GradWire::F32)
      return bad(llvm::formatv("reduce-scatter groups travel in f32; the "
                               "plan sends gradients as {0}",
                               gradWireName(exec->wire)));
    for (size_t g = 0; g < G; ++g)
      if (se.scatter[g] && I.groupBufs[g].dtype != DType::F32)
        return bad(llvm::formatv("group {0} reduce-scatters {1} gradients; "
                                 "only f32 ones are",
                                 g, dtypeName(I.groupBufs[g].dtype)));
    std::set<std::pair<unsigned, unsigned>> seen;
    size_t units = 0;
    for (unsigned p : se.pieces) {
      if (p == 0)
        return bad("a group is cut into 0 pieces");
      units += p;
    }
    std::set<std::pair<unsigned, unsigned>> gathered;
    for (const SteadyExecution::Unit &u : se.order) {
      if (u.group >= G || u.piece >= se.pieces[u.group] ||
          (u.gather && !se.scatter[u.group]) ||
          (u.gather && !seen.count({u.group, u.piece})) ||
          !(u.gather ? gathered : seen).insert({u.group, u.piece}).second)
        return bad(llvm::formatv("the order names group {0} piece {1}{2} "
                                 "twice, out of range or before its "
                                 "reduce-scatter",
                                 u.group, u.piece,
                                 u.gather ? " (all-gather)" : ""));
    }
    size_t gathers = 0;
    for (size_t g = 0; g < G; ++g)
      gathers += se.scatter[g] ? se.pieces[g] : 0;
    if (gathered.size() != gathers)
      return bad(llvm::formatv("the order has {0} of the {1} all-gathers",
                               gathered.size(), gathers));
    if (seen.size() != units)
      return bad(llvm::formatv("the order has {0} of the {1} pieces",
                               seen.size(), units));
    if (se.forwardWaits) {
      if (I.lossScaleValue >= 0)
        return bad("its next forward waits per layer, and an f16 step's loss "
                   "scaling decides the whole step's updates on every "
                   "gradient first; plan it with a backward-only strategy "
                   "(--strategy=oasr) or use --precision=bf16");
      I.deferUpdates = true;
      return planDeferredUpdates(I, exec->stepInfos);
    }
    return llvm::Error::success();
  }

  // Inputs.
  ModuleOp module;
  KernelBackend &backend;
  const ExecutorOptions &options;
  // What is built.
  std::unique_ptr<Executor> exec;
  Impl &I;
  func::FuncOp fn;
  // Arguments and values.
  llvm::DenseMap<Value, int> idOf;
  std::map<std::string, int> paramArg, stateArg, optStateArg;
  std::vector<std::pair<PersistentTensor::Kind, std::string>> persistMeta;
  std::vector<int> persistValue;
  // Instructions.
  llvm::DenseMap<Operation *, int> instrOf;
  struct PendingGroup {
    unsigned index;
    std::vector<int> grads;
    std::vector<size_t> offsets;
    std::vector<std::string> gradLayers;
    size_t bytes;
    std::string layer;
    std::vector<GradSlot> slots;
  };
  std::vector<PendingGroup> groups;
  struct GradOrder {
    std::pair<unsigned, unsigned> at;
    std::string param, layer;
    size_t bytes;
  };
  std::vector<GradOrder> gradOrder;
  // Liveness and memory.
  int end = 0; ///< one past the last instruction
  uint64_t persistentBytes = 0, availableBytes = 0;
};

Expected<std::unique_ptr<Executor>>
Executor::create(ModuleOp module, KernelBackend &backend,
                 const ExecutorOptions &options) {
  return ExecutorBuilder(module, backend, options).build();
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

KernelBackend &Executor::backend() const { return *impl->backend; }

int64_t Executor::batch() const {
  return inputRef.desc.rank() ? inputRef.desc.shape[0] : 1;
}

int64_t Executor::inputVocab() const { return impl->inputVocab; }

int64_t Executor::numClasses() const {
  if (impl->scoresValue < 0)
    return 0;
  const TensorDesc &d = impl->values[size_t(impl->scoresValue)].desc;
  return d.rank() == 2 ? d.shape[1] : 0;
}

/// One optimizer step on the host, oasr.optimizer_update's rules (the
/// ONNX preview-training optimizers); `t` is the number of earlier updates.
/// Arithmetic in float, as the reference implementations do.
static void hostUpdate(const Instr &u, int64_t t) {
  float *p = u.inRefs[0].as<float>();
  const float *g = u.inRefs[1].as<float>();
  float *np = u.outRefs[0].as<float>();
  const int64_t n = u.inRefs[0].numel();
  const float lr = float(u.lr), wd = float(u.weightDecay);
  if (u.algo == "sgd") {
    if (wd == 0.0f)
      for (int64_t i = 0; i < n; ++i)
        np[i] = p[i] - lr * g[i];
    else
      for (int64_t i = 0; i < n; ++i)
        np[i] = p[i] - lr * (g[i] + wd * p[i]);
    return;
  }
  const float *v = u.inRefs[2].as<float>();
  float *nv = u.outRefs[1].as<float>();
  if (u.algo == "momentum") {
    // v' = m v + c g_r, c = 1 - dampening after the first update;
    // p' = p - lr v' or, Nesterov, p - lr (g_r + m v').
    const float m = float(u.momentum);
    const float c = t > 0 ? float(1.0 - u.dampening) : 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      float gr = g[i] + wd * p[i];
      float vi = m * v[i] + c * gr;
      nv[i] = vi;
      np[i] = p[i] - lr * (u.nesterov ? gr + m * vi : vi);
    }
    return;
  }
  const float eps = float(u.epsilon);
  if (u.algo == "adagrad") {
    // h' = h + g_r^2; p' = p - lr / (1 + t lr_decay) g_r / (sqrt(h') + eps)
    const float r = float(u.lr / (1.0 + double(t) * u.lrDecay));
    for (int64_t i = 0; i < n; ++i) {
      float gr = g[i] + wd * p[i];
      float hi = v[i] + gr * gr;
      nv[i] = hi;
      np[i] = p[i] - r * gr / (std::sqrt(hi) + eps);
    }
    return;
  }
  // adam: v' = b1 v + (1 - b1) g_r; h' = b2 h + (1 - b2) g_r^2;
  // r = lr sqrt(1 - b2^t) / (1 - b1^t) after the first update;
  // p' = (1 - wd_post) (p - r v' / (sqrt(h') + eps)).
  const float *h = u.inRefs[3].as<float>();
  float *nh = u.outRefs[2].as<float>();
  const float b1 = float(u.beta1), b2 = float(u.beta2);
  const float r =
      t > 0 ? float(u.lr * std::sqrt(1.0 - std::pow(u.beta2, double(t))) /
                    (1.0 - std::pow(u.beta1, double(t))))
            : lr;
  const float keep = float(1.0 - u.weightDecayPost);
  for (int64_t i = 0; i < n; ++i) {
    float gr = g[i] + wd * p[i];
    float vi = b1 * v[i] + (1.0f - b1) * gr;
    float hi = b2 * h[i] + (1.0f - b2) * gr * gr;
    nv[i] = vi;
    nh[i] = hi;
    np[i] = keep * (p[i] - r * vi / (std::sqrt(hi) + eps));
  }
}

/// A skipped update (non-finite scaled gradients): every result keeps its
/// operand's value.
static void keepState(const Instr &u) {
  for (size_t k = 0; k < u.outRefs.size(); ++k) {
    size_t in = k == 0 ? 0 : k + 1; // param, grad, state...
    if (in < u.inRefs.size() && u.outRefs[k].data != u.inRefs[in].data)
      std::memcpy(u.outRefs[k].data, u.inRefs[in].data, u.outRefs[k].bytes());
  }
}

void Executor::Impl::decideScaledStep(StepHooks &hooks) {
  for (size_t g = 0; g < groupBufs.size(); ++g)
    if (!stepWaited[g]) {
      hooks.gradientsNeeded(unsigned(g));
      stepWaited[g] = 1;
    }
  bool finite = true;
  for (const GroupBuf &b : groupBufs) {
    const float *f = static_cast<const float *>(b.ptr);
    for (size_t i = 0, n = b.bytes / sizeof(float); i < n; ++i)
      finite &= std::isfinite(f[i]);
  }
  stepDecided = true;
  stepSkipped = !finite;
  if (stepSkipped)
    return;
  const float unscale = float(1.0 / scaler.scale);
  for (const GroupBuf &b : groupBufs) {
    float *f = static_cast<float *>(b.ptr);
    for (size_t i = 0, n = b.bytes / sizeof(float); i < n; ++i)
      f[i] *= unscale;
  }
}

std::pair<size_t, size_t> pieceSpan(const GradGroup &g, unsigned piece,
                                    unsigned pieces) {
  size_t total = size_t(g.buffer.numel());
  size_t unit = g.scatterRanks ? kAlign / sizeof(float) * g.scatterRanks : 1;
  pieces = std::max(pieces, 1u);
  size_t each = total / unit / pieces * unit;
  size_t first = each * piece;
  return {first, piece + 1 == pieces ? total - first : each};
}

void Executor::completeUpdates(StepHooks &hooks) {
  Impl &I = *impl;
  if (!I.updatesPending)
    return;
  for (size_t u = 0; u < I.instrs.size(); ++u)
    if (I.instrs[u].op == InstrOp::Update)
      I.runDeferredUpdate(hooks, unsigned(u), nullptr, nullptr);
  I.updatesPending = false;
  I.backend->synchronize();
}

void Executor::runStep(StepHooks &hooks, OpTiming *timings, int64_t epochNs) {
  Impl &I = *impl;
  auto now = [&] {
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count() -
                  epochNs) *
           1e-3;
  };
  I.uploadBatch();
  const bool defer = I.deferUpdates;
  const bool scaling = I.lossScaleValue >= 0;
  if (scaling) {
    float s = float(I.scaler.scale);
    I.backend->copyToDevice(I.ref(I.lossScaleValue).data, &s, sizeof s);
    I.stepDecided = false;
    I.stepWaited.assign(I.groupBufs.size(), 0);
  }
  if (defer && timings) {
    // The first step has no updates left over: its waits and updates take
    // no time.
    double t = now();
    for (size_t k = 0; k < I.instrs.size(); ++k)
      if (I.instrs[k].op == InstrOp::Wait || I.instrs[k].op == InstrOp::Update)
        timings[k] = {t, t};
  }
  std::function<double()> clock = now;
  if (I.deviceGraphs && !I.graphs)
    I.planGraphs();
  if (I.graphs)
    I.graphs->beginStep();
  auto runOne = [&](size_t j) {
    Instr &in = I.instrs[j];
    if (in.op == InstrOp::Kernel)
      in.kernel->run(in.inRefs, in.outRefs);
    else
      for (auto [dst, src] : in.copies)
        I.copy(dst, src);
  };
  for (size_t k = 0; k < I.instrs.size(); ++k) {
    Instr &instr = I.instrs[k];
    if (defer && I.updatesPending)
      for (unsigned u : I.updatesBefore[k])
        I.runDeferredUpdate(hooks, u, timings, &clock);
    if (defer && (instr.op == InstrOp::Wait || instr.op == InstrOp::Update))
      continue; // the next step runs them
    double t0 = timings ? now() : 0;
    if (I.graphs) {
      size_t end = I.graphs->run(k, *I.backend, runOne);
      if (end != k) { // replayed [k, end): its launch time on the first
        if (timings) {
          double t1 = now();
          timings[k] = {t0, t1};
          for (size_t j = k + 1; j < end; ++j)
            timings[j] = {t1, t1};
        }
        k = end - 1;
        continue;
      }
    }
    switch (instr.op) {
    case InstrOp::Kernel:
    case InstrOp::Copy:
      runOne(k);
      break;
    case InstrOp::Start:
      // A device communicator that waits on an event needs no host sync
      // here: one per group would stall the GPU 40-100 times a step.
      if (!hooks.ordersAfterDevice())
        I.backend->synchronize();
      hooks.gradientsReady(instr.group);
      break;
    case InstrOp::Wait:
      if (scaling && I.stepWaited[instr.group])
        break; // waited for to decide the step
      hooks.gradientsNeeded(instr.group);
      if (scaling)
        I.stepWaited[instr.group] = 1;
      break;
    case InstrOp::Update:
      if (scaling) {
        if (!I.stepDecided)
          I.decideScaledStep(hooks);
        if (I.stepSkipped)
          keepState(instr);
        else
          hostUpdate(instr, I.updatesDone);
      } else if (I.hostMemory)
        hostUpdate(instr, I.updatesDone);
      else
        I.backend->update(instr.rule, I.updatesDone, instr.inRefs,
                          instr.outRefs);
      break;
    }
    if (timings) {
      timings[k].startUs = t0;
      timings[k].endUs = now();
    }
  }
  if (defer) {
    I.updatesPending = true;
    I.pendingT = I.updatesDone;
    std::fill(I.waited.begin(), I.waited.end(), 0);
  }
  // A skipped step is no optimizer step (Adam's bias correction counts the
  // updates applied); the scaler backs off or grows.
  if (scaling && I.stepDecided) {
    I.scaler.update(!I.stepSkipped);
    if (I.stepSkipped) {
      I.backend->synchronize();
      return;
    }
  }
  ++I.updatesDone;
  I.backend->synchronize();
}

bool Executor::scalesLoss() const { return impl->lossScaleValue >= 0; }

GraphStats Executor::graphStats() const {
  GraphStats g;
  g.instrs = impl->instrs.size();
  if (!impl->graphs)
    return g;
  const StepGraphs::Stats &s = impl->graphs->stats();
  g.runs = s.runs;
  g.graphs = s.graphs;
  g.graphInstrs = s.graphInstrs;
  g.failures = s.failures;
  return g;
}
LossScaler &Executor::lossScaler() { return impl->scaler; }
bool Executor::lastStepSkipped() const {
  return impl->lossScaleValue >= 0 && impl->stepDecided && impl->stepSkipped;
}

void Executor::Impl::runDeferredUpdate(StepHooks &hooks, unsigned u,
                                       OpTiming *timings,
                                       const std::function<double()> *now) {
  const int g = updateGroup[u];
  if (g >= 0 && !waited[size_t(g)]) {
    double t0 = timings ? (*now)() : 0;
    hooks.gradientsNeeded(unsigned(g));
    waited[size_t(g)] = 1;
    if (timings && waitInstr[size_t(g)] >= 0)
      timings[waitInstr[size_t(g)]] = {t0, (*now)()};
  }
  double t0 = timings ? (*now)() : 0;
  Instr &instr = instrs[u];
  if (hostMemory)
    hostUpdate(instr, pendingT);
  else
    backend->update(instr.rule, pendingT, instr.inRefs, instr.outRefs);
  if (timings)
    timings[u] = {t0, (*now)()};
}

/// Where each step's deferred updates run under per-layer forward waits:
/// before the first instruction that reads the parameter or state they
/// write (byte ranges: views and aliases count), else before the step's
/// first instruction.
static llvm::Error planDeferredUpdates(Executor::Impl &I,
                                       const std::vector<PlanStepInfo> &steps) {
  const size_t n = I.instrs.size();
  I.updatesBefore.assign(n, {});
  I.updateGroup.assign(n, -1);
  I.waitInstr.assign(I.groupBufs.size(), -1);
  I.waited.assign(I.groupBufs.size(), 0);
  auto overlaps = [](const void *a, size_t an, const void *b, size_t bn) {
    auto pa = reinterpret_cast<uintptr_t>(a),
         pb = reinterpret_cast<uintptr_t>(b);
    return an && bn && pa < pb + bn && pb < pa + an;
  };
  auto groupOf = [&](const TensorRef &r) {
    for (size_t g = 0; g < I.groupBufs.size(); ++g)
      if (overlaps(r.data, r.bytes(), I.groupBufs[g].ptr, I.groupBufs[g].bytes))
        return int(g);
    return -1;
  };
  // What each instruction reads, as byte ranges.
  auto reads = [&](const Instr &instr, const void *p, size_t bytes) {
    if (instr.op == InstrOp::Copy) {
      for (auto [dst, src] : instr.copies)
        if (overlaps(I.values[size_t(src)].ptr,
                     I.values[size_t(src)].desc.bytes(), p, bytes))
          return true;
      return false;
    }
    for (const TensorRef &r : instr.inRefs)
      if (overlaps(r.data, r.bytes(), p, bytes))
        return true;
    return false;
  };
  bool afterWait = false;
  for (size_t k = 0; k < n; ++k) {
    const Instr &instr = I.instrs[k];
    if (instr.op == InstrOp::Wait) {
      I.waitInstr[instr.group] = int(k);
      afterWait = true;
      continue;
    }
    // After the waits only updates read what the allreduces and updates
    // wrote; anything else (the BN statistics' write-back) stays in place.
    auto readsGradientsOrUpdated = [&] {
      for (const GroupBuf &b : I.groupBufs)
        if (reads(instr, b.ptr, b.bytes))
          return true;
      for (const Instr &u : I.instrs)
        if (u.op == InstrOp::Update)
          for (const TensorRef &w : u.outRefs)
            if (reads(instr, w.data, w.bytes()))
              return true;
      return false;
    };
    if (afterWait && instr.op != InstrOp::Update && readsGradientsOrUpdated())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "per-layer forward waits: '%s' (%s, after the step's first "
          "allreduce_wait) is not an optimizer update, so the step cannot "
          "leave its updates to the next step",
          k < steps.size() ? steps[k].name.c_str() : "?",
          k < steps.size() ? steps[k].opType.c_str() : "?");
    if (instr.op != InstrOp::Update)
      continue;
    for (const TensorRef &r : instr.inRefs)
      if (int g = groupOf(r); g >= 0) {
        I.updateGroup[k] = g;
        break;
      }
    size_t at = 0;
    bool found = false;
    for (size_t j = 0; j < n && !found; ++j) {
      const Instr &reader = I.instrs[j];
      if (reader.op != InstrOp::Kernel && reader.op != InstrOp::Copy)
        continue;
      for (const TensorRef &w : instr.outRefs)
        if (reads(reader, w.data, w.bytes())) {
          at = j;
          found = true;
          break;
        }
    }
    I.updatesBefore[at].push_back(unsigned(k));
  }
  return llvm::Error::success();
}

void Executor::runForward() {
  Impl &I = *impl;
  I.uploadBatch();
  for (unsigned k = 0; k < I.forwardEnd && k < I.instrs.size(); ++k) {
    Instr &instr = I.instrs[k];
    if (instr.op == InstrOp::Kernel)
      instr.kernel->run(instr.inRefs, instr.outRefs);
  }
  I.backend->synchronize();
}

llvm::Error Executor::regroup(llvm::ArrayRef<unsigned> groupEnds) {
  Impl &I = *impl;
  auto fail = [](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot regroup the gradients: " + why);
  };
  const size_t n = I.gradSlots.size();
  if (n != gradInfos.size())
    return fail(llvm::formatv("{0} grouped gradient(s) but {1} with an "
                              "optimizer update",
                              n, gradInfos.size()));
  for (size_t g = 0; g < groupEnds.size(); ++g)
    if (groupEnds[g] <= (g ? groupEnds[g - 1] : 0) || groupEnds[g] > n)
      return fail("group ends must increase strictly up to the number of "
                  "gradients");
  if (n && (groupEnds.empty() || groupEnds.back() != n))
    return fail("the groups must cover every gradient");
  if (steadyExec.hasScatter())
    return fail("the plan reduce-scatters; its groups are not regrouped");

  // Layout: each new group one buffer, gradients in order, 64-byte aligned,
  // the buffers back to back in the gradient slab.
  std::vector<GroupBuf> bufs;
  std::vector<std::pair<int, size_t>> at(n); // gradient -> (group, offset)
  std::vector<size_t> dataBytes, slabAt;
  size_t slabBytes = 0;
  for (size_t g = 0, i = 0; g < groupEnds.size(); ++g) {
    size_t end = 0, data = 0;
    GroupBuf b;
    b.dtype = I.values[size_t(I.gradSlots[i].slot)].desc.dtype;
    for (; i < groupEnds[g]; ++i) {
      const ValueInfo &vi = I.values[size_t(I.gradSlots[i].slot)];
      if (vi.desc.dtype != b.dtype)
        return fail("a fused group must hold one element type");
      end = alignUp(end);
      at[i] = {int(g), end};
      end += vi.desc.bytes();
      data += vi.desc.bytes();
    }
    b.bytes = alignUp(std::max<size_t>(end, 4));
    slabAt.push_back(slabBytes);
    slabBytes += b.bytes;
    bufs.push_back(b);
    dataBytes.push_back(data);
  }
  // Room for the largest new group on a 16-bit wire, before anything
  // changes (a failure leaves the old groups as they were).
  const size_t wireBytes = Impl::wireBytesFor(wire, bufs);
  if (!I.reserveWire(wireBytes))
    return fail(llvm::formatv("cannot allocate {0} bytes for gradients sent "
                              "as {1}",
                              wireBytes, gradWireName(wire)));
  // The same memory when it fits (the usual case: the same gradients with
  // different padding); its padding, which held gradients, is zeroed.
  const bool reuse = slabBytes <= I.gradSlabBytes;
  void *slab = reuse ? I.gradSlab : I.zeroedBuffer(slabBytes);
  if (!slab)
    return fail(llvm::formatv("cannot allocate {0} bytes", slabBytes));
  for (size_t g = 0; g < bufs.size(); ++g)
    bufs[g].ptr = static_cast<char *>(slab) + slabAt[g];
  if (reuse) {
    size_t covered = 0; // slab bytes known to hold a gradient or zeroed
    for (size_t i = 0; i < n; ++i) {
      size_t begin = slabAt[size_t(at[i].first)] + at[i].second;
      I.zero(static_cast<char *>(slab) + covered, begin - covered);
      covered = begin + I.values[size_t(I.gradSlots[i].slot)].desc.bytes();
    }
    I.zero(static_cast<char *>(slab) + covered, slabBytes - covered);
  } else {
    I.backend->deallocate(I.gradSlab);
    I.gradSlab = slab;
    I.gradSlabBytes = slabBytes;
  }

  // Repoint the gradients' slots and the wait results at the new buffers.
  I.groupBufs = std::move(bufs);
  for (size_t i = 0; i < n; ++i)
    for (int v : {I.gradSlots[i].slot, I.gradSlots[i].wait}) {
      ValueInfo &vi = I.values[size_t(v)];
      vi.group = at[i].first;
      vi.offset = at[i].second;
      vi.ptr =
          static_cast<char *>(I.groupBufs[size_t(vi.group)].ptr) + vi.offset;
    }
  for (size_t v = 0; v < I.values.size(); ++v)
    if (I.values[v].where == Where::Alias)
      I.values[v].ptr = I.values[size_t(I.root(int(v)))].ptr;

  // The instructions without the old starts and waits. Pack copies stay
  // where they were (their sources' lifetimes were planned with them).
  std::vector<Instr> kept;
  std::vector<PlanStepInfo> keptInfo;
  std::vector<int> newIndex(I.instrs.size(), -1);
  for (size_t k = 0; k < I.instrs.size(); ++k) {
    InstrOp op = I.instrs[k].op;
    if (op == InstrOp::Start || op == InstrOp::Wait)
      continue;
    newIndex[k] = int(kept.size());
    kept.push_back(std::move(I.instrs[k]));
    keptInfo.push_back(stepInfos[k]);
  }
  int forwardLast = I.forwardEnd ? newIndex[I.forwardEnd - 1] : -1;
  for (GradSlot &s : I.gradSlots)
    s.readyInstr = s.readyInstr >= 0 ? newIndex[size_t(s.readyInstr)] : -1;
  // A group starts after the instruction that completes its last gradient;
  // it is waited for before the first update that reads one of them.
  std::vector<int> startAfter(groupEnds.size(), -1),
      waitBefore(groupEnds.size(), int(kept.size()));
  std::vector<int> groupOfWait(I.values.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    int g = at[i].first;
    startAfter[size_t(g)] =
        std::max(startAfter[size_t(g)], I.gradSlots[i].readyInstr);
    groupOfWait[size_t(I.gradSlots[i].wait)] = g;
  }
  for (size_t k = 0; k < kept.size(); ++k)
    if (kept[k].op == InstrOp::Update)
      for (int v : kept[k].ins)
        if (int g = groupOfWait[size_t(v)]; g >= 0)
          waitBefore[size_t(g)] = std::min(waitBefore[size_t(g)], int(k));

  std::vector<GradGroup> newGroups;
  for (size_t g = 0, i = 0; g < groupEnds.size(); ++g) {
    GradGroup gg;
    gg.index = unsigned(g);
    gg.id = nextGroupId + unsigned(g);
    gg.buffer.data = I.groupBufs[g].ptr;
    gg.buffer.desc.dtype = I.groupBufs[g].dtype;
    gg.buffer.desc.shape = {
        int64_t(I.groupBufs[g].bytes / dtypeSize(I.groupBufs[g].dtype))};
    gg.bytes = dataBytes[g];
    int last = -1;
    for (; i < groupEnds[g]; ++i) {
      gg.params.push_back(gradInfos[i].param);
      if (I.gradSlots[i].readyInstr >= last) {
        last = I.gradSlots[i].readyInstr;
        gg.layer = gradInfos[i].layer;
      }
    }
    newGroups.push_back(std::move(gg));
  }
  nextGroupId += unsigned(groupEnds.size());

  I.instrs.clear();
  stepInfos.clear();
  auto emit = [&](Instr instr, PlanStepInfo info) {
    I.instrs.push_back(std::move(instr));
    stepInfos.push_back(std::move(info));
  };
  // Starts after, waits before the kept instruction at `position`.
  auto emitComm = [&](InstrOp op, const std::vector<int> &at, int position) {
    const char *what =
        op == InstrOp::Start ? "allreduce_start" : "allreduce_wait";
    for (size_t g = 0; g < newGroups.size(); ++g)
      if (at[g] == position) {
        Instr c;
        c.op = op;
        c.group = unsigned(g);
        emit(std::move(c),
             PlanStepInfo{llvm::formatv("{0} {1}", what, g).str(), what,
                          newGroups[g].layer, StepKind::Comm});
      }
  };
  auto emitWaits = [&](int k) { emitComm(InstrOp::Wait, waitBefore, k); };
  auto emitStarts = [&](int k) { emitComm(InstrOp::Start, startAfter, k); };
  std::vector<int> finalIndex(kept.size());
  emitStarts(-1);
  for (size_t k = 0; k < kept.size(); ++k) {
    emitWaits(int(k));
    finalIndex[k] = int(I.instrs.size());
    emit(std::move(kept[k]), std::move(keptInfo[k]));
    emitStarts(int(k));
  }
  emitWaits(int(kept.size()));
  if (forwardLast >= 0)
    I.forwardEnd = unsigned(finalIndex[size_t(forwardLast)]) + 1;
  for (GradSlot &s : I.gradSlots)
    s.readyInstr = s.readyInstr >= 0 ? finalIndex[size_t(s.readyInstr)] : -1;
  for (Instr &instr : I.instrs)
    I.bindRefs(instr);

  memStats.gradBytes = 0;
  for (const GroupBuf &b : I.groupBufs)
    memStats.gradBytes += b.bytes;
  for (GradGroup &g : newGroups) {
    g.wire = wire;
    g.wireScratch = wire == GradWire::F32 ? nullptr : I.wireSlab;
  }
  memStats.wireBytes = wireBytes;
  gradGroups = std::move(newGroups);
  // The graphs recorded the old groups' buffers: capture again.
  I.graphs.reset();
  return llvm::Error::success();
}

void Executor::setPlanModel(double predictedIterationUs, double alpha,
                            double beta, double overheadUs, double rate) {
  predictedUs = predictedIterationUs;
  alphaS = alpha;
  betaS = beta;
  groupOverheadUs = overheadUs;
  overlapRate = rate;
}

int64_t Executor::updateCount() const { return impl->updatesDone; }

void Executor::setUpdateCount(int64_t t) { impl->updatesDone = t; }

std::string Executor::optimizerName() const {
  std::vector<std::string> names;
  for (const Instr &instr : impl->instrs) {
    if (instr.op != InstrOp::Update)
      continue;
    std::string n = instr.algo + (instr.nesterov ? "+nesterov" : "");
    if (!llvm::is_contained(names, n))
      names.push_back(n);
  }
  return llvm::join(names, ",");
}

std::vector<uint64_t> Executor::randomPositions() const {
  std::vector<uint64_t> positions;
  for (const Instr &instr : impl->instrs) {
    uint64_t p = 0;
    if (instr.op == InstrOp::Kernel && instr.kernel->randomPosition(p))
      positions.push_back(p);
  }
  return positions;
}

llvm::Error
Executor::setRandomPositions(const std::vector<uint64_t> &positions) {
  size_t k = 0;
  for (Instr &instr : impl->instrs) {
    uint64_t p = 0;
    if (instr.op != InstrOp::Kernel || !instr.kernel->randomPosition(p))
      continue;
    if (k < positions.size())
      instr.kernel->setRandomPosition(positions[k]);
    ++k;
  }
  if (k != positions.size())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%zu random-number position(s) given, the model has %zu kernel(s) "
        "that draw random numbers",
        positions.size(), k);
  return llvm::Error::success();
}

/// Index of the first NaN or Inf among the f32 elements of `t` (host or
/// device memory), or -1.
static int64_t firstNonFiniteElement(KernelBackend &backend, bool hostMemory,
                                     const TensorRef &t) {
  if (!t.data || t.desc.dtype != DType::F32)
    return -1;
  std::vector<float> staging;
  const float *v = t.as<float>();
  if (!hostMemory) {
    staging.resize(size_t(t.numel()));
    backend.copyToHost(staging.data(), t.data, staging.size() * sizeof(float));
    v = staging.data();
  }
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    if (!std::isfinite(v[i]))
      return i;
  return -1;
}

std::string Executor::firstNonFinite() {
  Impl &I = *impl;
  auto describe = [&](const TensorRef &t, int64_t i) {
    std::vector<float> one(1);
    if (I.hostMemory)
      one[0] = t.as<float>()[i];
    else
      I.backend->copyToHost(one.data(), t.as<float>() + i, sizeof(float));
    return llvm::formatv(" (element {0} of {1} is {2})", i, t.numel(),
                         double(one[0]))
        .str();
  };
  for (const PersistentTensor &t : persistentTensors) {
    if (t.kind == PersistentTensor::OptState)
      continue;
    if (int64_t i = firstNonFiniteElement(*I.backend, I.hostMemory, t.ref);
        i >= 0)
      return std::string(t.kind == PersistentTensor::Param ? "parameter '"
                                                           : "state '") +
             t.name + "'" + describe(t.ref, i);
  }
  if (int64_t i = firstNonFiniteElement(*I.backend, I.hostMemory, inputRef);
      i >= 0)
    return "the input batch" + describe(inputRef, i);
  I.uploadBatch();
  for (unsigned k = 0; k < I.forwardEnd && k < I.instrs.size(); ++k) {
    Instr &instr = I.instrs[k];
    if (instr.op != InstrOp::Kernel)
      continue;
    instr.kernel->run(instr.inRefs, instr.outRefs);
    I.backend->synchronize();
    for (size_t o = 0; o < instr.outRefs.size(); ++o)
      if (int64_t i =
              firstNonFiniteElement(*I.backend, I.hostMemory, instr.outRefs[o]);
          i >= 0) {
        const PlanStepInfo &info = stepInfos[k];
        return llvm::formatv("result {0} of node '{1}' ({2})", o, info.name,
                             info.opType)
                   .str() +
               describe(instr.outRefs[o], i);
      }
  }
  return "";
}

float Executor::loss() const {
  const Impl &I = *impl;
  const ValueInfo &v = I.values[size_t(I.lossValue)];
  float l = 0;
  if (I.hostMemory)
    std::memcpy(&l, v.ptr, sizeof(float));
  else
    I.backend->copyToHost(&l, v.ptr, sizeof(float));
  return l;
}

int64_t Executor::correct() const {
  const Impl &I = *impl;
  if (I.scoresValue < 0 || I.labelValue < 0)
    return 0;
  const ValueInfo &s = I.values[size_t(I.scoresValue)];
  const ValueInfo &l = I.values[size_t(I.labelValue)];
  if (s.desc.rank() != 2 || s.desc.dtype != DType::F32)
    return 0;
  int64_t n = s.desc.shape[0], c = s.desc.shape[1];
  std::vector<float> scores(size_t(n * c));
  std::vector<char> labels(l.desc.bytes());
  I.backend->copyToHost(scores.data(), s.ptr, scores.size() * sizeof(float));
  I.backend->copyToHost(labels.data(), l.ptr, labels.size());
  int64_t ok = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float *row = scores.data() + i * c;
    int64_t best = std::max_element(row, row + c) - row;
    int64_t label = l.desc.dtype == DType::I64
                        ? reinterpret_cast<int64_t *>(labels.data())[i]
                        : reinterpret_cast<int32_t *>(labels.data())[i];
    ok += best == label;
  }
  return ok;
}

TensorRef Executor::gradient(const std::string &name) const {
  auto it = impl->gradOfParam.find(name);
  if (it == impl->gradOfParam.end())
    return TensorRef{};
  return impl->ref(it->second);
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

Expected<unsigned> initializeWeights(Executor &exec,
                                     const InitializerLoader &loader,
                                     uint64_t seed) {
  unsigned loaded = 0;
  KernelBackend &backend = exec.backend();
  for (PersistentTensor &t : exec.persistent()) {
    std::vector<char> host(t.ref.bytes(), 0);
    TensorRef staging{host.data(), t.ref.desc};
    bool fromFile = false;
    if (t.kind != PersistentTensor::OptState && loader) {
      std::string error;
      fromFile = loader(t.name, staging, error);
      if (!fromFile && !error.empty())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "initializer '%s': %s", t.name.c_str(),
                                       error.c_str());
    }
    if (fromFile) {
      ++loaded;
    } else if (t.ref.desc.dtype == DType::F32) {
      float *v = staging.as<float>();
      int64_t n = t.ref.numel();
      if (t.init == PersistentTensor::Ones)
        std::fill(v, v + n, 1.0f);
      else if (t.init == PersistentTensor::HeNormal) {
        std::mt19937_64 rng(hashName(t.name, seed));
        std::normal_distribution<float> dist(
            0.0f, std::sqrt(2.0f / float(std::max<int64_t>(t.fanIn, 1))));
        for (int64_t i = 0; i < n; ++i)
          v[i] = dist(rng);
      }
    }
    backend.copyToDevice(t.ref.data, host.data(), host.size());
  }
  return loaded;
}

} // namespace oasr::rt
