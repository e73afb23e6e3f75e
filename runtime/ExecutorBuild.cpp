//===- ExecutorBuild.cpp - Executor::create: IR to plan -------------------===//
//
// Walks @train_step once: assigns every SSA value a storage (activation
// arena, persistent buffer, fused group buffer or alias), creates each
// kernel, and lays out the instructions the step runs.
//
//===----------------------------------------------------------------------===//

#include "ExecutorLower.h"

using namespace mlir;
using llvm::Expected;

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Executor::create
//===----------------------------------------------------------------------===//

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

  /// Ops to instructions, gradient groups and the state write-back: one
  /// method per op the runtime executes.
  llvm::Error buildInstructions() {
    for (Operation &opRef : fn.getBody().front()) {
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
      auto add = [&]() -> llvm::Error {
        if (auto node = dyn_cast<mlir::oasr::NodeOp>(op))
          return addNode(node, ins);
        if (auto start = dyn_cast<mlir::oasr::AllreduceStartOp>(op))
          return addAllreduceStart(start, ins);
        if (auto wait = dyn_cast<mlir::oasr::AllreduceWaitOp>(op))
          return addAllreduceWait(wait);
        if (auto upd = dyn_cast<mlir::oasr::OptimizerUpdateOp>(op))
          return addUpdate(upd, ins);
        if (auto ret = dyn_cast<func::ReturnOp>(op))
          return addReturn(ret, ins);
        return opError(op, "is not an op the runtime executes");
      };
      if (llvm::Error err = add())
        return err;
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

  /// A node: a constant (persistent), a view (an alias of its operand) or
  /// a kernel instruction.
  llvm::Error addNode(mlir::oasr::NodeOp node, const std::vector<int> &ins) {
    Operation *op = node;
    // A custom domain's op runs when the registry gives it kernels
    // (com.microsoft::FusedMatMul, which the compiler emits).
    const ::oasr::ops::OpDef *def =
        node.getDomain().empty() ? nullptr
                                 : ::oasr::ops::OpRegistry::get().lookup(node);
    if (!node.getDomain().empty() &&
        (!def || def->kernels == ::oasr::ops::Kernels::None))
      return opError(op, "custom domain '" + node.getDomain() +
                             "' is not supported by the runtime");
    StringRef opType = node.getOpType();
    const ::oasr::ops::OpRoles &roles = ::oasr::ops::rolesOf(node);
    std::string layer;
    if (auto l = op->getAttrOfType<StringAttr>(mlir::oasr::kLayerAttr))
      layer = l.getValue().str();
    if (roles.constant) {
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
          return opError(op, "its resource blob has " +
                                 std::to_string(data.size()) +
                                 " bytes; the type needs " +
                                 std::to_string(I.values[*id].desc.bytes()));
        I.persist.back().init.assign(data.begin(), data.end());
        return llvm::Error::success();
      }
      auto dense = op->getAttrOfType<DenseElementsAttr>("value");
      if (!dense)
        return opError(op, "needs a dense or resource `value` attribute");
      if (auto err =
              materialize(dense, I.values[*id].desc, I.persist.back().init, op))
        return std::move(err);
      return llvm::Error::success();
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
      return llvm::Error::success();
    }
    if (roles.convert && isWeightCopy(node)) {
      // The parameter's 16-bit copy: kept by its update, not made here.
      auto id = newValue(op->getResult(0), op);
      if (!id)
        return id.takeError();
      newPersistent(*id);
      I.values[*id].used = true;
      copyOfParam[ins[0]] = *id;
      Instr cast;
      cast.ins = ins;
      cast.outs = {*id};
      copyCastOf[op] = int(I.copyCasts.size());
      I.copyCasts.push_back(std::move(cast));
      return llvm::Error::success();
    }
    Instr instr;
    instr.op = InstrOp::Kernel;
    instr.ins = ins;
    if (auto absent =
            op->getAttrOfType<DenseI64ArrayAttr>(mlir::oasr::kAbsentInputsAttr))
      instr.absent.assign(absent.asArrayRef().begin(),
                          absent.asArrayRef().end());
    // Kernel.h: these may alias their result to a same-shaped operand
    // (the op registry's InPlace trait).
    instr.elementwise =
        ::oasr::ops::OpRegistry::get().hasTrait(opType, ::oasr::ops::InPlace);
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
    if (roles.lookupIndices > 0 && size_t(roles.lookupIndices) < ins.size() &&
        ins[size_t(roles.lookupIndices)] == I.inputValue && !I.inputVocab &&
        I.values[ins[0]].desc.rank() >= 1)
      I.inputVocab = I.values[ins[0]].desc.shape[0];
    if (roles.loss) {
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
    return llvm::Error::success();
  }

  /// A forward Cast of an f32 parameter to bf16/f16 whose readers (and
  /// their views') all run before the parameter's optimizer update, on a
  /// backend whose update writes such copies: the update keeps it.
  bool isWeightCopy(mlir::oasr::NodeOp node) {
    Operation *op = node;
    auto arg = dyn_cast<BlockArgument>(op->getOperand(0));
    if (op->getNumOperands() != 1 || op->getNumResults() != 1 || !arg ||
        op->hasAttr(mlir::oasr::kLayerAttr) || !options.weightCopies ||
        !backend.updatesWeightCopies() ||
        !fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                         mlir::oasr::kParamAttr))
      return false;
    auto from = dyn_cast<RankedTensorType>(arg.getType());
    auto to = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!from || !to || !from.getElementType().isF32() ||
        !(to.getElementType().isBF16() || to.getElementType().isF16()))
      return false;
    Operation *update = nullptr;
    for (Operation *user : arg.getUsers())
      if (auto u = dyn_cast<mlir::oasr::OptimizerUpdateOp>(user))
        if (u.getParam() == arg)
          update = user;
    if (!update)
      return false;
    std::function<bool(Value)> readBefore = [&](Value v) {
      for (Operation *user : v.getUsers()) {
        if (!user->isBeforeInBlock(update))
          return false;
        if (auto n = dyn_cast<mlir::oasr::NodeOp>(user))
          if (isView(n.getOpType()) && !readBefore(n->getResult(0)))
            return false;
      }
      return true;
    };
    return readBefore(op->getResult(0));
  }

  /// An allreduce start: its fused group, the copy that packs the
  /// gradients not produced in place, and the Start instruction.
  llvm::Error addAllreduceStart(mlir::oasr::AllreduceStartOp start,
                                const std::vector<int> &ins) {
    Operation *op = start;
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
      return opError(op,
                     llvm::formatv("sends its gradients as {0} but "
                                   "the first group as {1}; a step's "
                                   "groups travel in one type",
                                   gradWireName(wire), gradWireName(exec->wire))
                         .str());
    if (std::optional<int64_t> r = start.getPowersgdRank())
      g.powerSgdRank = unsigned(*r);
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
    g.bytes = start.getBufferBytes() ? size_t(*start.getBufferBytes()) : end;
    Operation *producer = start.getGrads().front().getDefiningOp();
    for (Value v : start.getGrads())
      if (Operation *p = v.getDefiningOp())
        if (!producer || (p->getBlock() == producer->getBlock() &&
                          producer->isBeforeInBlock(p)))
          producer = p;
    if (producer)
      if (auto l = producer->getAttrOfType<StringAttr>(mlir::oasr::kLayerAttr))
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
          PlanStepInfo{llvm::formatv("pack group {0}", g.index).str(), "Copy",
                       g.layer, StepKind::Copy});
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
    return llvm::Error::success();
  }

  /// An allreduce wait: the averaged gradients, read in the group buffer.
  llvm::Error addAllreduceWait(mlir::oasr::AllreduceWaitOp wait) {
    Operation *op = wait;
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
    return llvm::Error::success();
  }

  /// An optimizer update, in place where nothing reads the old value later.
  llvm::Error addUpdate(mlir::oasr::OptimizerUpdateOp upd,
                        const std::vector<int> &ins) {
    Operation *op = upd;
    Instr u;
    u.op = InstrOp::Update;
    u.rule = UpdateRule{upd.getAlgo().str(),
                        options.lrOverride >= 0 ? options.lrOverride
                                                : upd.getLr().convertToDouble(),
                        upd.getMomentum().convertToDouble(),
                        upd.getWeightDecay().convertToDouble(),
                        upd.getDampening().convertToDouble(),
                        upd.getLrDecay().convertToDouble(),
                        upd.getBeta1().convertToDouble(),
                        upd.getBeta2().convertToDouble(),
                        upd.getEpsilon().convertToDouble(),
                        upd.getWeightDecayPost().convertToDouble(),
                        upd.getNesterov()};
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
      if (auto s = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   mlir::oasr::kParamAttr)) {
        I.gradOfParam[s.getValue().str()] = ins[1];
        auto wr = waitResult.find(ins[1]);
        if (wr != waitResult.end())
          gradOrder.push_back(
              {wr->second, s.getValue().str(),
               groups[wr->second.first].gradLayers[wr->second.second],
               I.values[ins[1]].desc.bytes(),
               I.values[ins[1]].desc.rank() >= 2
                   ? uint64_t(I.values[ins[1]].desc.shape[0])
                   : 0});
      }
    if (auto copy = copyOfParam.find(ins[0]); copy != copyOfParam.end())
      u.weightCopy = copy->second;
    exec->stepInfos.push_back(PlanStepInfo{
        "update " + opName(op), "optimizer_update", "", StepKind::Update});
    I.instrs.push_back(std::move(u));
    return llvm::Error::success();
  }

  /// The return: results tagged new_* (or a node's running statistics)
  /// written back over their argument at the end of the step.
  llvm::Error addReturn(func::ReturnOp ret, const std::vector<int> &ins) {
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
      if (!(n = tagged(mlir::oasr::kNewParamAttr)).empty() && paramArg.count(n))
        target = paramArg[n];
      else if (!(n = tagged(mlir::oasr::kNewOptStateAttr)).empty() &&
               optStateArg.count(n))
        target = optStateArg[n];
      else if (!(n = tagged(mlir::oasr::kNewStateAttr)).empty() &&
               stateArg.count(n))
        target = stateArg[n];
      else if (auto res = dyn_cast<OpResult>(v)) {
        auto node = dyn_cast<mlir::oasr::NodeOp>(res.getOwner());
        const ::oasr::ops::OpRoles *roles =
            node ? &::oasr::ops::rolesOf(node) : nullptr;
        int r = int(res.getResultNumber());
        if (roles && roles->statsResult >= 0 && r >= roles->statsResult &&
            r < roles->statsResult + roles->statsCount) {
          Value old = node.getInputs()[size_t(roles->statsOperand + r -
                                              roles->statsResult)];
          if (isa<BlockArgument>(old))
            target = idOf[old];
        }
      }
      if (target >= 0 && I.root(id) != I.root(target) &&
          std::find(copyBack.begin(), copyBack.end(), id) == copyBack.end()) {
        copyBack.push_back(target);
        copyBack.push_back(id);
      }
      if (k == 0 && I.lossValue < 0)
        I.lossValue = id;
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
      if (!node || (!instrOf.count(&opRef) && !copyCastOf.count(&opRef)))
        continue;
      Instr &instr = instrOf.count(&opRef)
                         ? I.instrs[size_t(instrOf[&opRef])]
                         : I.copyCasts[size_t(copyCastOf[&opRef])];
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

    for (Instr &cast : I.copyCasts)
      I.bindRefs(cast);
    for (Instr &instr : I.instrs) {
      if (instr.workspaceBytes)
        instr.kernel->setWorkspace(static_cast<char *>(I.arena) +
                                   instr.workspaceOffset);
      I.bindRefs(instr);
      if (instr.op == InstrOp::Update &&
          !backend.supportsUpdate(instr.rule.algo))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "optimizer '%s' updates on the '%s' backend are not implemented",
            instr.rule.algo.c_str(), backend.name());
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
        if (!node || ::oasr::ops::rolesOf(node).onesOperands.empty())
          continue;
        const std::vector<unsigned> &ones =
            ::oasr::ops::rolesOf(node).onesOperands;
        bool one = std::find(ones.begin(), ones.end(),
                             use.getOperandNumber()) != ones.end();
        int id = idOf[arg];
        for (PersistentTensor &t : exec->persistentTensors)
          if (t.ref.data == I.values[id].ptr)
            t.init = one ? PersistentTensor::Ones : PersistentTensor::Zeros;
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
      gg.powerSgdRank = g.powerSgdRank;
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
      if (I.values[v].where == Where::Group) {
        GradGroup &gg = exec->gradGroups[size_t(I.values[v].group)];
        gg.params.push_back(name);
        if (I.values[v].desc.dtype == DType::F32)
          gg.spans.push_back({name, I.values[v].offset / sizeof(float),
                              I.values[v].desc.shape});
      }
    for (GradGroup &gg : exec->gradGroups)
      std::sort(gg.spans.begin(), gg.spans.end(),
                [](const GradGroup::Span &a, const GradGroup::Span &b) {
                  return a.offset < b.offset;
                });
    std::stable_sort(
        gradOrder.begin(), gradOrder.end(),
        [](const GradOrder &a, const GradOrder &b) { return a.at < b.at; });
    for (GradOrder &g : gradOrder)
      exec->gradInfos.push_back(
          Executor::GradInfo{g.param, g.layer, g.bytes, g.rows});
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
  /// Parameter Casts the updates keep (isWeightCopy): the op's index in
  /// Impl::copyCasts, and each parameter's copy.
  llvm::DenseMap<Operation *, int> copyCastOf;
  llvm::DenseMap<int, int> copyOfParam;
  std::vector<int> copyBack; ///< pairs flattened: dst, src
  bool seenBackward = false;
  llvm::DenseMap<int, std::pair<unsigned, unsigned>> waitResult; ///< id -> g, k
  llvm::DenseMap<Operation *, unsigned> groupOfStart;
  struct PendingGroup {
    unsigned index;
    std::vector<int> grads;
    std::vector<size_t> offsets;
    std::vector<std::string> gradLayers;
    size_t bytes;
    unsigned powerSgdRank = 0;
    std::string layer;
    std::vector<GradSlot> slots;
  };
  std::vector<PendingGroup> groups;
  struct GradOrder {
    std::pair<unsigned, unsigned> at;
    std::string param, layer;
    size_t bytes;
    uint64_t rows;
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

} // namespace oasr::rt
