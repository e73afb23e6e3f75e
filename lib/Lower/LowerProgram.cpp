//===- LowerProgram.cpp - lowerToProgram: the IR as a Program ------------===//
//
// Walks @train_step once: gives every SSA value a slot and its storage
// (activation arena, persistent buffer, fused group buffer or alias) and
// lays out the instructions the step runs, with the module's plan, as a
// Program (oasr/Runtime/Program.h) that Executor::create loads.
//
//===----------------------------------------------------------------------===//

#include "LowerImpl.h"

using namespace mlir;
using llvm::Expected;

namespace oasr::rt {

namespace {

/// lowerToProgram in phases; each reads what the earlier ones built.
class ProgramLowering {
public:
  explicit ProgramLowering(ModuleOp module) : module(module) {}

  llvm::Expected<Program> lower() {
    using Phase = llvm::Error (ProgramLowering::*)();
    for (Phase phase :
         {&ProgramLowering::checkModule, &ProgramLowering::readAttributes,
          &ProgramLowering::readArguments, &ProgramLowering::buildInstructions,
          &ProgramLowering::initHints})
      if (llvm::Error err = (this->*phase)())
        return std::move(err);
    return std::move(P);
  }

private:
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
      P.source = s.getValue().str();
    if (auto s = module->getAttrOfType<StringAttr>(mlir::oasr::kModelAttr))
      P.model = s.getValue().str();
    if (auto s = module->getAttrOfType<StringAttr>(mlir::oasr::kPrecisionAttr))
      P.precision = s.getValue().str();
    if (auto b =
            module->getAttrOfType<IntegerAttr>(mlir::oasr::kRebatchedFromAttr))
      P.rebatchedFrom = b.getInt();
    // An ONNX training model's update count T: the first update is number T.
    if (auto opt =
            module->getAttrOfType<DictionaryAttr>(mlir::oasr::kOptimizerAttr))
      if (auto t = opt.getAs<IntegerAttr>("update_count")) {
        std::string name = "T";
        if (auto n = opt.getAs<StringAttr>("update_count_name")) {
          name = "'" + n.str() + "'";
          P.countName = n.str();
        }
        if (t.getInt() < 0)
          return llvm::createStringError(
              llvm::inconvertibleErrorCode(),
              "the model's update count %s is %lld; ONNX counts updates from 0",
              name.c_str(), (long long)t.getInt());
        P.updatesDone = t.getInt();
      }
    if (auto plan =
            module->getAttrOfType<DictionaryAttr>(mlir::oasr::kPlanAttr)) {
      if (auto s = plan.getAs<StringAttr>("strategy"))
        P.strategy = s.getValue().str();
      if (auto f = plan.getAs<FloatAttr>("predicted_iteration_us"))
        P.predictedUs = f.getValueAsDouble();
      else if (auto i = plan.getAs<IntegerAttr>("predicted_iteration_us"))
        P.predictedUs = double(i.getInt());
      auto number = [&](StringRef key, double &out) {
        if (auto f = plan.getAs<FloatAttr>(key))
          out = f.getValueAsDouble();
      };
      number("alpha_s", P.alphaS);
      number("beta_s_per_byte", P.betaS);
      number("group_overhead_us", P.groupOverheadUs);
      number("overlap_rate", P.overlapRate);
      number("compress_us_per_mac", P.compressUsPerMac);
      number("compress_us_per_element", P.compressUsPerElement);
      if (auto s = plan.getAs<StringAttr>("compress"))
        P.compress = s.getValue().str();
      if (auto t = plan.getAs<DictionaryAttr>("two_level")) {
        Executor::PlanTier &tier = P.tier;
        auto count = [&](StringRef key, int &out) {
          if (auto i = t.getAs<IntegerAttr>(key))
            out = int(std::clamp<int64_t>(i.getInt(), 0, 1 << 30));
        };
        count("ranks", tier.ranks);
        count("ranks_per_node", tier.ranksPerNode);
        for (auto [key, out] : {std::pair{"intra_alpha_s", &tier.intraAlphaS},
                                {"intra_beta_s_per_byte", &tier.intraBetaS},
                                {"inter_alpha_s", &tier.interAlphaS},
                                {"inter_beta_s_per_byte", &tier.interBetaS}})
          if (auto f = t.getAs<FloatAttr>(key))
            *out = f.getValueAsDouble();
      }
      if (auto st = plan.getAs<DictionaryAttr>("steady")) {
        SteadyExecution &se = P.steady;
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
        P.costs = s.getValue().str();
      if (auto f = costs.getAs<StringAttr>("file"))
        P.costs += " " + f.getValue().str();
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
    int id = int(P.values.size());
    P.values.push_back(ValueInfo{});
    P.values.back().desc = *d;
    idOf[v] = id;
    return id;
  }
  void newPersistent(int id) {
    P.values[id].where = Where::Persistent;
    P.values[id].persistent = int(P.persist.size());
    P.persist.push_back(PersistBuf{P.values[id].desc, nullptr, {}});
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
        if (P.inputValue >= 0)
          return llvm::createStringError(
              llvm::inconvertibleErrorCode(),
              "@train_step has more than one oasr.input; the runtime feeds one "
              "input tensor");
        P.inputValue = *id;
      } else if (!(name = tag(mlir::oasr::kLabelAttr)).empty()) {
        P.labelValue = *id;
      } else if (!(name = tag(mlir::oasr::kParamAttr)).empty()) {
        paramArg[name] = *id;
        P.tensors.push_back({PersistentTensor::Param, name, *id});
      } else if (!(name = tag(mlir::oasr::kStateAttr)).empty()) {
        stateArg[name] = *id;
        P.tensors.push_back({PersistentTensor::State, name, *id});
      } else if (!(name = tag(mlir::oasr::kOptStateAttr)).empty()) {
        optStateArg[name] = *id;
        P.tensors.push_back({PersistentTensor::OptState, name, *id});
      } else {
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "@train_step argument #%u has none of the tags oasr.input, "
            "oasr.label, oasr.param, oasr.state, oasr.opt_state",
            arg.getArgNumber());
      }
    }
    if (P.inputValue < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "@train_step has no argument tagged "
                                     "oasr.input");
    return llvm::Error::success();
  }

  /// Ops to instructions, gradient P.groups and the state write-back: one
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
    if (P.lossValue < 0)
      return notTraining("@train_step computes no loss");

    if (!copyBack.empty()) {
      ProgramInstr c;
      c.op = InstrOp::Copy;
      for (size_t k = 0; k < copyBack.size(); k += 2) {
        c.copies.push_back({copyBack[k], copyBack[k + 1]});
        c.ins.push_back(copyBack[k + 1]);
      }
      P.steps.push_back(
          PlanStepInfo{"write back state", "Copy", "", StepKind::Copy});
      P.instrs.push_back(std::move(c));
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
        if (P.values[*id].desc.dtype != DType::F32 ||
            P.values[*id].desc.numel() != 1)
          return opError(op, "the loss-scale seed must be one f32");
        P.lossScaleValue = *id;
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
        if (data.size() != P.values[*id].desc.bytes())
          return opError(op, "its resource blob has " +
                                 std::to_string(data.size()) +
                                 " bytes; the type needs " +
                                 std::to_string(P.values[*id].desc.bytes()));
        P.persist.back().init.assign(data.begin(), data.end());
        return llvm::Error::success();
      }
      auto dense = op->getAttrOfType<DenseElementsAttr>("value");
      if (!dense)
        return opError(op, "needs a dense or resource `value` attribute");
      if (auto err =
              materialize(dense, P.values[*id].desc, P.persist.back().init, op))
        return std::move(err);
      return llvm::Error::success();
    }
    if (isView(opType) && op->getNumResults() == 1 && !ins.empty()) {
      auto id = newValue(op->getResult(0), op);
      if (!id)
        return id.takeError();
      if (P.values[*id].desc.bytes() != P.values[ins[0]].desc.bytes())
        return opError(op, "view changes the number of bytes");
      P.values[*id].where = Where::Alias;
      P.values[*id].aliasOf = ins[0];
      P.values[ins[0]].used = true;
      // The view reads its input when its own readers run: handled by the
      // liveness pass through `root`.
      return llvm::Error::success();
    }
    ProgramInstr instr;
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
    instr.opType = opType.str();
    instr.name = name;
    instr.location = locName(op->getLoc());
    for (NamedAttribute a : op->getDiscardableAttrs()) {
      if (a.getName().getValue().starts_with("oasr."))
        continue;
      AttrValue v;
      if (convertAttr(a.getValue(), v))
        instr.attrs.set(a.getName().str(), std::move(v));
    }
    instr.paramCopy = roles.convert && isParamCopyCast(fn, node);
    for (Value r : op->getResults()) {
      auto id = newValue(r, op);
      if (!id)
        return id.takeError();
      P.values[*id].def = int(P.instrs.size());
      P.values[*id].kernelOutput = true;
      instr.outs.push_back(*id);
    }
    bool backward = !layer.empty();
    if (backward)
      seenBackward = true;
    if (roles.lookupIndices > 0 && size_t(roles.lookupIndices) < ins.size() &&
        ins[size_t(roles.lookupIndices)] == P.inputValue && !P.inputVocab &&
        P.values[ins[0]].desc.rank() >= 1)
      P.inputVocab = P.values[ins[0]].desc.shape[0];
    if (roles.loss) {
      P.lossValue = instr.outs.empty() ? -1 : instr.outs[0];
      P.scoresValue = ins.empty() ? -1 : ins[0];
      P.forwardEnd = unsigned(P.instrs.size()) + 1;
    }
    if (!seenBackward && P.lossValue < 0)
      P.forwardEnd = unsigned(P.instrs.size()) + 1;
    P.steps.push_back(
        PlanStepInfo{name, opType.str(), backward ? layer : name,
                     backward ? StepKind::Backward : StepKind::Forward});
    instrOf[op] = int(P.instrs.size());
    // Kernels are created after buffer planning, when outputUsed is known.
    P.instrs.push_back(std::move(instr));
    return llvm::Error::success();
  }

  /// An allreduce start: its fused group, the copy that packs the
  /// gradients not produced in place, and the Start instruction.
  llvm::Error addAllreduceStart(mlir::oasr::AllreduceStartOp start,
                                const std::vector<int> &ins) {
    Operation *op = start;
    ProgramGroup g;
    g.index = unsigned(P.groups.size());
    // The wire type (f32 gradients only, as the verifier checks); one
    // for the whole step, so that a regroup keeps it.
    GradWire wire = GradWire::F32;
    if (std::optional<Type> t = start.getWireType())
      wire = t->isBF16()  ? GradWire::BF16
             : t->isF16() ? GradWire::F16
                          : GradWire::F32;
    if (P.groups.empty())
      P.wire = wire;
    else if (wire != P.wire)
      return opError(op, llvm::formatv("sends its gradients as {0} but "
                                       "the first group as {1}; a step's "
                                       "P.groups travel in one type",
                                       gradWireName(wire), gradWireName(P.wire))
                             .str());
    if (std::optional<int64_t> r = start.getPowersgdRank())
      g.powerSgdRank = unsigned(*r);
    g.twoLevel = start.getTwoLevel();
    std::optional<ArrayRef<int64_t>> offs = start.getOffsets();
    size_t end = 0;
    for (auto [k, v] : llvm::enumerate(ins)) {
      size_t off = offs ? size_t((*offs)[k]) : alignUp(end);
      g.grads.push_back(v);
      g.offsets.push_back(off);
      end = off + P.values[v].desc.bytes();
      if (P.values[v].desc.dtype != P.values[ins[0]].desc.dtype)
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
    ProgramInstr copyIn;
    copyIn.op = InstrOp::Copy;
    for (auto [k, v] : llvm::enumerate(g.grads)) {
      ValueInfo &vi = P.values[v];
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
        int slot = int(P.values.size());
        P.values.push_back(ValueInfo{});
        P.values[slot].desc = vi.desc;
        P.values[slot].where = Where::Group;
        P.values[slot].group = int(g.index);
        P.values[slot].offset = g.offsets[k];
        copyIn.copies.push_back({slot, v});
        copyIn.ins.push_back(v);
        copyIn.outs.push_back(slot);
        g.slots.push_back(GradSlot{slot, -1, int(P.instrs.size())});
      }
    }
    copyIn.pack = true;
    if (!copyIn.copies.empty()) {
      P.steps.push_back(
          PlanStepInfo{llvm::formatv("pack group {0}", g.index).str(), "Copy",
                       g.layer, StepKind::Copy});
      P.instrs.push_back(std::move(copyIn));
    }
    ProgramInstr s;
    s.op = InstrOp::Start;
    s.group = g.index;
    s.ins = ins;
    P.steps.push_back(
        PlanStepInfo{llvm::formatv("allreduce_start {0}", g.index).str(),
                     "allreduce_start", g.layer, StepKind::Comm});
    P.instrs.push_back(std::move(s));
    P.groups.push_back(std::move(g));
    return llvm::Error::success();
  }

  /// An allreduce wait: the averaged gradients, read in the group buffer.
  llvm::Error addAllreduceWait(mlir::oasr::AllreduceWaitOp wait) {
    Operation *op = wait;
    auto it = groupOfStart.find(wait.getStart().getOperation());
    if (it == groupOfStart.end())
      return opError(op, "waits for an allreduce that was not started");
    ProgramGroup &g = P.groups[it->second];
    ProgramInstr w;
    w.op = InstrOp::Wait;
    w.group = g.index;
    for (auto [k, r] : llvm::enumerate(op->getResults())) {
      auto id = newValue(r, op);
      if (!id)
        return id.takeError();
      P.values[*id].where = Where::Group;
      P.values[*id].group = int(g.index);
      P.values[*id].offset = g.offsets[k];
      P.values[*id].def = int(P.instrs.size());
      waitResult[*id] = {g.index, unsigned(k)};
      g.slots[k].wait = *id;
      w.outs.push_back(*id);
    }
    P.steps.push_back(
        PlanStepInfo{llvm::formatv("allreduce_wait {0}", g.index).str(),
                     "allreduce_wait", g.layer, StepKind::Comm});
    P.instrs.push_back(std::move(w));
    return llvm::Error::success();
  }

  /// An optimizer update, in place where nothing reads the old value later.
  llvm::Error addUpdate(mlir::oasr::OptimizerUpdateOp upd,
                        const std::vector<int> &ins) {
    Operation *op = upd;
    ProgramInstr u;
    u.op = InstrOp::Update;
    u.rule = UpdateRule{upd.getAlgo().str(),
                        upd.getLr().convertToDouble(),
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
    if (P.values[ins[0]].desc.dtype != DType::F32)
      return opError(
          op, std::string("the parameter is ") +
                  dtypeName(P.values[ins[0]].desc.dtype) +
                  " (a model exported after .half()?): the runtime updates "
                  "f32 master weights only; export the model in f32 and "
                  "train it with --precision=f16 or bf16 "
                  "(docs/precision.md)");
    // New parameter / state in place when the old value is an argument
    // and nothing reads it after this update.
    for (auto [k, r] : llvm::enumerate(op->getResults())) {
      Value old = k == 0 ? upd.getParam() : upd.getState()[k - 1];
      int oldId = idOf[old];
      bool inPlace = P.values[oldId].where == Where::Persistent &&
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
        P.values[*id].where = Where::Alias;
        P.values[*id].aliasOf = oldId;
      } else {
        P.values[*id].def = int(P.instrs.size());
        P.values[*id].kernelOutput = true;
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
        P.gradOfParam[s.getValue().str()] = ins[1];
        auto wr = waitResult.find(ins[1]);
        if (wr != waitResult.end())
          P.gradients.push_back(
              {wr->second, s.getValue().str(),
               P.groups[wr->second.first].gradLayers[wr->second.second],
               P.values[ins[1]].desc.bytes(),
               P.values[ins[1]].desc.rank() >= 2
                   ? uint64_t(P.values[ins[1]].desc.shape[0])
                   : 0});
      }
    P.steps.push_back(PlanStepInfo{"update " + opName(op), "optimizer_update",
                                   "", StepKind::Update});
    P.instrs.push_back(std::move(u));
    return llvm::Error::success();
  }

  /// The return: results tagged new_* (or a node's running statistics)
  /// written back over their argument at the end of the step.
  llvm::Error addReturn(func::ReturnOp ret, const std::vector<int> &ins) {
    // Results tagged new_* (or produced by BN training outputs) overwrite
    // the argument of the same name at the end of the step.
    for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
      int id = ins[k];
      P.values[id].used = true;
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
      if (target >= 0 && rootOf(id) != rootOf(target) &&
          std::find(copyBack.begin(), copyBack.end(), id) == copyBack.end()) {
        copyBack.push_back(target);
        copyBack.push_back(id);
      }
      if (k == 0 && P.lossValue < 0)
        P.lossValue = id;
    }
    return llvm::Error::success();
  }

  /// How seeded random init fills each tensor, from how the step reads it.
  llvm::Error initHints() {
    for (ProgramTensor &t : P.tensors) {
      const TensorDesc &d = P.values[size_t(t.value)].desc;
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
    for (BlockArgument arg : fn.getBody().front().getArguments()) {
      for (OpOperand &use : arg.getUses()) {
        auto node = dyn_cast<mlir::oasr::NodeOp>(use.getOwner());
        if (!node || ::oasr::ops::rolesOf(node).onesOperands.empty())
          continue;
        const std::vector<unsigned> &ones =
            ::oasr::ops::rolesOf(node).onesOperands;
        bool one = std::find(ones.begin(), ones.end(),
                             use.getOperandNumber()) != ones.end();
        int id = idOf[arg];
        for (ProgramTensor &t : P.tensors)
          if (t.value == id)
            t.init = one ? PersistentTensor::Ones : PersistentTensor::Zeros;
      }
    }
    if (P.forwardEnd == 0)
      P.forwardEnd = unsigned(P.instrs.size());
    return llvm::Error::success();
  }

  /// The root of value `v`'s aliases.
  int rootOf(int v) const {
    while (P.values[size_t(v)].where == Where::Alias)
      v = P.values[size_t(v)].aliasOf;
    return v;
  }

  ModuleOp module;
  Program P;
  func::FuncOp fn;
  // Arguments and values.
  llvm::DenseMap<Value, int> idOf;
  std::map<std::string, int> paramArg, stateArg, optStateArg;
  // Instructions.
  llvm::DenseMap<Operation *, int> instrOf;
  std::vector<int> copyBack; ///< pairs flattened: dst, src
  bool seenBackward = false;
  llvm::DenseMap<int, std::pair<unsigned, unsigned>> waitResult; ///< id -> g, k
  llvm::DenseMap<Operation *, unsigned> groupOfStart;
};

} // namespace

llvm::Expected<Program> lowerToProgram(ModuleOp module) {
  return ProgramLowering(module).lower();
}

} // namespace oasr::rt
