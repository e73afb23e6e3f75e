//===- InsertOptimizer.cpp - Parameter updates after each group's wait ----===//
//
// One oasr.optimizer_update per parameter right after the allreduce_wait of
// its group, so updates of early groups overlap the rest of communication.
// The step then returns new parameters and optimizer state instead of
// gradients.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Regex.h"

#include <charconv>
#include <cstdlib>
#include <optional>

namespace mlir::oasr {
#define GEN_PASS_DEF_INSERTOPTIMIZER
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

namespace {
struct Hyper;
struct InsertOptimizerPass
    : mlir::oasr::impl::InsertOptimizerBase<InsertOptimizerPass> {
  using Base::Base;
  void runOnOperation() final;

private:
  LogicalResult chooseHyper(ModuleOp module, std::string &algoName,
                            int &numState, Hyper &hyper);
};
} // namespace

/// A float from the model's TrainingInfo (`oasr.optimizer`, ONNX names). ONNX
/// stores floats as f32: take the shortest decimal that reads back as that f32
/// (0.05f is 0.05, not 0.0500000007).
static std::optional<double> modelFloat(DictionaryAttr fromModel,
                                        StringRef key) {
  if (!fromModel)
    return std::nullopt;
  auto f = fromModel.getAs<FloatAttr>(key);
  if (!f)
    return std::nullopt;
  if (!f.getType().isF32())
    return f.getValueAsDouble();
  char buf[32];
  auto r =
      std::to_chars(buf, buf + sizeof(buf) - 1, float(f.getValueAsDouble()));
  *r.ptr = 0;
  return std::strtod(buf, nullptr);
}

namespace {
/// The hyper-parameters of one optimizer_update, resolved from the pass
/// options (given when >= 0), else the model's ONNX TrainingInfo, else the
/// defaults of PyTorch's optimizer of the same name.
struct Hyper {
  double lr = 0.01, momentum = 0, weightDecay = 0, dampening = 0, lrDecay = 0,
         beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6, weightDecayPost = 0;
  bool nesterov = false;
  /// The decay is a recipe's (the option's, adamw's default), which leaves
  /// biases and normalisation weights out; a model's training info decays
  /// every parameter, as ONNX Runtime does.
  bool recipeDecay = false;
};
} // namespace

/// How ONNX's optimizer attributes map onto optimizer_update's (see
/// OASROps.td): Momentum alpha/beta/norm_coefficient/mode, Adagrad
/// decay_factor/epsilon/norm_coefficient, Adam alpha/beta/epsilon/
/// norm_coefficient/norm_coefficient_post.
static void fromOnnx(StringRef algo, DictionaryAttr m, Hyper &h) {
  auto set = [&](double &field, StringRef key, double scale = 1,
                 double offset = 0) {
    if (auto v = modelFloat(m, key))
      field = offset + scale * *v;
  };
  set(h.lr, "lr");
  set(h.weightDecay, "norm_coefficient");
  if (algo == "momentum") {
    set(h.momentum, "alpha");
    set(h.dampening, "beta", -1, 1); // ONNX scales g by beta = 1 - dampening
    if (m)
      if (auto mode = m.getAs<StringAttr>("mode"))
        h.nesterov = mode.getValue() == "nesterov";
  } else if (algo == "adagrad") {
    set(h.lrDecay, "decay_factor");
    set(h.epsilon, "epsilon");
  } else if (algo == "adam") {
    set(h.beta1, "alpha");
    set(h.beta2, "beta");
    set(h.epsilon, "epsilon");
    set(h.weightDecayPost, "norm_coefficient_post");
  }
}

/// The optimizer and its hyperparameters: the option's, else the model's
/// training info's, else SGD; options override the model's values.
LogicalResult InsertOptimizerPass::chooseHyper(ModuleOp module,
                                               std::string &algoName,
                                               int &numState, Hyper &hyper) {
  auto fromModel = module->getAttrOfType<DictionaryAttr>(kOptimizerAttr);
  std::string modelAlgo;
  if (fromModel)
    if (auto a = fromModel.getAs<StringAttr>("algo"))
      modelAlgo = a.getValue().str();
  algoName = algo.empty() ? modelAlgo : std::string(algo);
  if (algoName.empty())
    algoName = "sgd";
  numState = OptimizerUpdateOp::numStateTensors(algoName);
  if (numState < 0) {
    module.emitError("unknown optimizer '")
        << algoName << "'"
        << (algo.empty() ? " in the model's training info" : "")
        << ", expected 'sgd', 'momentum', 'adagrad', 'adam' or 'adamw'";
    return failure();
  }
  if (algoName == "adamw") { // torch.optim.AdamW's defaults
    hyper.weightDecay = 0.01;
    hyper.epsilon = 1e-8;
  }
  if (algoName == "momentum")
    hyper.momentum = 0.9;
  if (algoName == "adagrad")
    hyper.epsilon = 1e-10; // PyTorch's Adagrad default
  // The model's values apply to the optimizer the model names.
  if (algoName == modelAlgo)
    fromOnnx(algoName, fromModel, hyper);
  else if (auto v = modelFloat(fromModel, "lr"))
    hyper.lr = *v;
  auto opt = [](double option, double &field) {
    if (option >= 0)
      field = option;
  };
  opt(lr, hyper.lr);
  opt(momentum, hyper.momentum);
  opt(weightDecay, hyper.weightDecay);
  hyper.recipeDecay =
      weightDecay >= 0 || (algoName == "adamw" && algoName != modelAlgo);
  opt(dampening, hyper.dampening);
  opt(lrDecay, hyper.lrDecay);
  opt(beta1, hyper.beta1);
  opt(beta2, hyper.beta2);
  opt(epsilon, hyper.epsilon);
  // ONNX Runtime's AdamW (Hugging Face form) decays the updated weights by
  // lr * weight_decay: ONNX Adam's norm_coefficient_post at the final lr.
  if (algoName == modelAlgo)
    if (auto wd = modelFloat(fromModel, "decoupled_weight_decay"))
      hyper.weightDecayPost = hyper.lr * *wd;
  if (nesterov) // only switches Nesterov on, like the other options override
    hyper.nesterov = true;
  if (hyper.nesterov && algoName != "momentum") {
    module.emitError("nesterov applies to the 'momentum' optimizer, not '")
        << algoName << "'";
    return failure();
  }
  return success();
}

void InsertOptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp fn = getTrainStep(module, "--oasr-insert-optimizer");
  if (!fn)
    return signalPassFailure();
  if (!fn.getBody().getOps<OptimizerUpdateOp>().empty()) {
    fn.emitError("@train_step already has optimizer updates");
    return signalPassFailure();
  }
  std::string algoName;
  int numState = 0;
  Hyper hyper;
  if (failed(chooseHyper(module, algoName, numState, hyper)))
    return signalPassFailure();
  // Which parameters go without decay: rank <= 1 (biases, normalisation
  // weights), none, or those whose name the pattern finds.
  std::optional<llvm::Regex> exclude;
  if (decayExclude != "1d" && decayExclude != "none") {
    exclude.emplace(decayExclude);
    std::string why;
    if (!exclude->isValid(why)) {
      module.emitError("decay-exclude '")
          << decayExclude << "' is not a regular expression: " << why;
      return signalPassFailure();
    }
  }
  auto decays = [&](StringRef name, Type type) {
    if (decayExclude == "none" || !hyper.recipeDecay)
      return true;
    if (exclude)
      return !exclude->match(name);
    auto t = dyn_cast<RankedTensorType>(type);
    return !t || t.getRank() > 1;
  };

  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  DenseMap<StringRef, BlockArgument> paramArg;
  for (BlockArgument arg : body.getArguments())
    if (auto name =
            fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttr))
      paramArg[name.getValue()] = arg;

  SmallVector<Value> loss, newParams, newOptState, rest;
  SmallVector<DictionaryAttr> lossAttrs, paramAttrs, optAttrs, restAttrs;
  DenseMap<Operation *, Operation *> lastAfter;
  SmallVector<Value> operands(ret.getOperands());
  for (auto [i, value] : llvm::enumerate(operands)) {
    DictionaryAttr attrs = fn.getResultAttrDict(i);
    if (!attrs)
      attrs = DictionaryAttr::get(ctx);
    auto gradName = attrs.getAs<StringAttr>(kGradAttr);
    if (!gradName) {
      (i == 0 ? loss : rest).push_back(value);
      (i == 0 ? lossAttrs : restAttrs).push_back(attrs);
      continue;
    }
    BlockArgument param = paramArg.lookup(gradName.getValue());
    if (!param) {
      fn.emitError("gradient '")
          << gradName.getValue() << "' has no 'oasr.param' argument";
      return signalPassFailure();
    }
    // Right after the group's wait (after the updates already placed there),
    // else before the return.
    if (auto wait = value.getDefiningOp<AllreduceWaitOp>()) {
      Operation *after = lastAfter.lookup(wait);
      b.setInsertionPointAfter(after ? after : wait.getOperation());
    } else {
      b.setInsertionPoint(ret);
    }
    SmallVector<Value> state;
    SmallVector<StringAttr> stateNames;
    for (int k = 0; k < numState; ++k) {
      // Slot 0 is tagged with the parameter's name, Adam's second moment
      // with "<name>:h".
      std::string stateName = gradName.getValue().str();
      if (k > 0)
        stateName += ":h";
      unsigned index = fn.getNumArguments();
      (void)fn.insertArgument(index, param.getType(),
                              b.getDictionaryAttr(b.getNamedAttr(
                                  kOptStateAttr, b.getStringAttr(stateName))),
                              param.getLoc());
      state.push_back(body.getArgument(index));
      stateNames.push_back(b.getStringAttr(stateName));
    }
    auto update = b.create<OptimizerUpdateOp>(
        value.getLoc(), param.getType(), ValueRange(state).getTypes(),
        b.getStringAttr(algoName), param, value, state,
        b.getF64FloatAttr(hyper.lr), b.getF64FloatAttr(hyper.momentum),
        b.getF64FloatAttr(decays(gradName.getValue(), param.getType())
                              ? hyper.weightDecay
                              : 0.0),
        b.getF64FloatAttr(hyper.dampening), b.getBoolAttr(hyper.nesterov),
        b.getF64FloatAttr(hyper.lrDecay), b.getF64FloatAttr(hyper.beta1),
        b.getF64FloatAttr(hyper.beta2), b.getF64FloatAttr(hyper.epsilon),
        b.getF64FloatAttr(hyper.weightDecayPost));
    if (auto wait = value.getDefiningOp<AllreduceWaitOp>())
      lastAfter[wait] = update;
    newParams.push_back(update.getNewParam());
    paramAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(kNewParamAttr, gradName)));
    for (auto [s, stateName] :
         llvm::zip_equal(update.getNewState(), stateNames)) {
      newOptState.push_back(s);
      optAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(kNewOptStateAttr, stateName)));
    }
    ++numUpdates;
  }

  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto [vs, as] : {std::make_pair(&loss, &lossAttrs),
                        std::make_pair(&newParams, &paramAttrs),
                        std::make_pair(&newOptState, &optAttrs),
                        std::make_pair(&rest, &restAttrs)}) {
    results.append(vs->begin(), vs->end());
    resultAttrs.append(as->begin(), as->end());
  }
  b.setInsertionPoint(ret);
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  fn.setFunctionType(b.getFunctionType(body.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
  fn.setAllResultAttrs(resultAttrs);
}
