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

#include <charconv>
#include <cstdlib>

namespace mlir::oasr {
#define GEN_PASS_DEF_INSERTOPTIMIZER
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

namespace {
struct InsertOptimizerPass
    : mlir::oasr::impl::InsertOptimizerBase<InsertOptimizerPass> {
  using Base::Base;
  void runOnOperation() final;
};
} // namespace

/// An option if given (>= 0), else the model's TrainingInfo value, else
/// `dflt`.
static double pick(double option, DictionaryAttr fromModel, StringRef key,
                   double dflt) {
  if (option >= 0)
    return option;
  if (fromModel)
    if (auto f = fromModel.getAs<FloatAttr>(key)) {
      if (!f.getType().isF32())
        return f.getValueAsDouble();
      // ONNX stores floats as f32: take the shortest decimal that reads
      // back as that f32 (0.05f is 0.05, not 0.0500000007).
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof(buf) - 1,
                             float(f.getValueAsDouble()));
      *r.ptr = 0;
      return std::strtod(buf, nullptr);
    }
  return dflt;
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
  auto fromModel = module->getAttrOfType<DictionaryAttr>(kOptimizerAttr);
  std::string algoName = algo;
  if (algoName.empty() && fromModel)
    if (auto a = fromModel.getAs<StringAttr>("algo"))
      algoName = a.getValue().str();
  if (algoName.empty())
    algoName = "sgd";
  if (algoName != "sgd" && algoName != "momentum") {
    module.emitError("unknown optimizer '")
        << algoName << "', expected 'sgd' or 'momentum'";
    return signalPassFailure();
  }
  double lrValue = pick(lr, fromModel, "lr", 0.01);
  double momentumValue =
      pick(momentum, fromModel, "momentum", algoName == "momentum" ? 0.9 : 0);
  double wdValue = pick(weightDecay, fromModel, "weight_decay", 0.0);

  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  DenseMap<StringRef, BlockArgument> paramArg;
  for (BlockArgument arg : body.getArguments())
    if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    kParamAttr))
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
      fn.emitError("gradient '") << gradName.getValue()
                                 << "' has no 'oasr.param' argument";
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
    if (algoName == "momentum") {
      unsigned index = fn.getNumArguments();
      (void)fn.insertArgument(
          index, param.getType(),
          b.getDictionaryAttr(b.getNamedAttr(kOptStateAttr, gradName)),
          param.getLoc());
      state.push_back(body.getArgument(index));
    }
    auto update = b.create<OptimizerUpdateOp>(
        value.getLoc(), param.getType(), ValueRange(state).getTypes(),
        b.getStringAttr(algoName), param, value, state,
        b.getF64FloatAttr(lrValue), b.getF64FloatAttr(momentumValue),
        b.getF64FloatAttr(wdValue));
    if (auto wait = value.getDefiningOp<AllreduceWaitOp>())
      lastAfter[wait] = update;
    newParams.push_back(update.getNewParam());
    paramAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(kNewParamAttr, gradName)));
    for (Value s : update.getNewState()) {
      newOptState.push_back(s);
      optAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(kNewOptStateAttr, gradName)));
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
