//===- PlanAllreduce.cpp - Fused allreduces at the planner's boundaries ---===//
//
// Builds the planner profile of the annotated step, calls lib/Schedule for
// the plan of the chosen strategy, and inserts oasr.allreduce_start after the
// node that makes each group's last gradient ready and the waits before the
// gradients are consumed.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"
#include "oasr/Schedule/Steady.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <optional>

namespace mlir::oasr {
#define GEN_PASS_DEF_PLANALLREDUCE
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;
namespace sched = ::oasr::schedule;

namespace {
struct PlanAllreducePass
    : mlir::oasr::impl::PlanAllreduceBase<PlanAllreducePass> {
  using Base::Base;
  void runOnOperation() final;

private:
  FailureOr<std::optional<sched::CommModel>> commModel(ModuleOp module);
};
} // namespace

// Option errors are reported at the module's location without the module
// itself: an operation's diagnostic would print the whole module as a note.
static InFlightDiagnostic optionError(ModuleOp module) {
  return mlir::emitError(module.getLoc());
}

FailureOr<std::optional<sched::CommModel>>
PlanAllreducePass::commModel(ModuleOp module) {
  // -1 (the default) means "not given"; other negative values are mistakes.
  for (auto [name, value] :
       {std::pair{"alpha", double(alpha)}, std::pair{"beta", double(beta)}})
    if (value < 0 && value != -1.0) {
      optionError(module) << "'" << name << "' must be >= 0, got " << value;
      return failure();
    }
  bool hasAlpha = alpha >= 0, hasBeta = beta >= 0;
  if (hasAlpha != hasBeta) {
    optionError(module) << (hasAlpha ? "'alpha' needs 'beta'"
                                     : "'beta' needs 'alpha'");
    return failure();
  }
  if (hasAlpha && !comm.empty()) {
    optionError(module) << "'alpha'/'beta' and 'comm' are mutually exclusive";
    return failure();
  }
  if (ranks < 0 || (ranks > 0 && !hasAlpha)) {
    optionError(module) << "'ranks' needs 'alpha' and 'beta' (the per-step "
                           "ring latency and inverse bandwidth) and must be "
                           ">= 1";
    return failure();
  }
  if (groupOverheadUs < 0) {
    optionError(module) << "'group-overhead-us' must be >= 0";
    return failure();
  }
  if (overlapRate != -1.0 && !(overlapRate >= 0 && overlapRate <= 1)) {
    optionError(module) << "'overlap-rate' must be in [0, 1] (the rate "
                           "communication progresses while backward "
                           "computes), got "
                        << overlapRate.getValue();
    return failure();
  }
  sched::CommModel m;
  if (hasAlpha) {
    m = ranks > 0
            ? sched::CommModel::ring(ranks, alpha, beta > 0 ? 1.0 / beta : 0.0)
            : sched::CommModel::alphaBeta(alpha, beta);
  } else if (!comm.empty()) {
    llvm::Expected<sched::CommModel> c = sched::readCalibration(comm);
    if (!c) {
      optionError(module) << "cannot read the communication model: "
                          << llvm::toString(c.takeError());
      return failure();
    }
    m = *c;
  } else {
    auto model = module->getAttrOfType<DictionaryAttr>(kCostModelAttr);
    auto a = model ? model.getAs<FloatAttr>("alpha_s") : FloatAttr();
    auto b = model ? model.getAs<FloatAttr>("beta_s_per_byte") : FloatAttr();
    if (!a || !b) {
      // The simple strategies group by layer or size: they plan without a
      // model, and the plan then predicts no time.
      if (!sched::strategyNeedsCommModel(strategy) &&
          !sched::isSteadyStrategy(strategy))
        return std::optional<sched::CommModel>();
      optionError(module)
          << "strategy '" << strategy
          << "' needs a communication model (the allreduce time alpha + "
             "beta * bytes): measure one on the ranks and network you train "
             "on with `mpirun -np P oasr-bench comm --out=comm.json` and give "
             "'comm=comm.json', or give 'alpha' and 'beta', or a profile with "
             "a 'comm' object to --oasr-annotate-cost; wfbp, single, "
             "bucket:<bytes>, ddp and horovod plan without one";
      return failure();
    }
    int r = 0;
    if (auto ra = model.getAs<IntegerAttr>("ranks"))
      r = ra.getInt();
    m = sched::CommModel::alphaBeta(a.getValueAsDouble(), b.getValueAsDouble(),
                                    r);
    if (auto o = model.getAs<FloatAttr>("overlap_rate"))
      m.overlapRate = o.getValueAsDouble();
    if (auto c = model.getAs<FloatAttr>("compute_rate"))
      m.computeRate = c.getValueAsDouble();
    if (auto c = model.getAs<FloatAttr>("call_compute_us"))
      m.callComputeUs = c.getValueAsDouble();
  }
  m.groupOverheadUs = groupOverheadUs;
  if (overlapRate != -1.0)
    m.overlapRate = overlapRate;
  return std::optional<sched::CommModel>(m);
}

void PlanAllreducePass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp fn = getTrainStep(module, "--oasr-plan-allreduce");
  if (!fn)
    return signalPassFailure();
  if (!fn.getBody().getOps<AllreduceStartOp>().empty()) {
    fn.emitError("@train_step is already planned");
    return signalPassFailure();
  }
  // Checked before any analysis so a typo fails fast; makePlan reports the
  // same errors.
  const bool steady = sched::isSteadyStrategy(strategy);
  if (llvm::Error e =
          steady ? llvm::Error::success() : sched::checkStrategy(strategy)) {
    optionError(module) << llvm::toString(std::move(e));
    return signalPassFailure();
  }
  llvm::Expected<sched::WireDType> wire = sched::parseWireDType(gradDtype);
  if (!wire) {
    llvm::consumeError(wire.takeError());
    optionError(module) << "'grad-dtype' must be f32, bf16 or f16 (the "
                           "element type gradients travel in), got '"
                        << gradDtype << "'";
    return signalPassFailure();
  }
  Type wireType;
  if (*wire == sched::WireDType::BF16)
    wireType = BFloat16Type::get(module.getContext());
  else if (*wire == sched::WireDType::F16)
    wireType = Float16Type::get(module.getContext());
  llvm::Expected<sched::CompressPolicy> policy =
      sched::parseCompressPolicy(compress);
  if (!policy) {
    optionError(module) << "'compress=" << llvm::toString(policy.takeError());
    return signalPassFailure();
  }
  if (!policy->off() && wireType) {
    optionError(module) << "'compress=" << compress
                        << "' sends PowerSGD's factors in f32; it does not "
                           "combine with 'grad-dtype="
                        << gradDtype << "'";
    return signalPassFailure();
  }
  if (!policy->off() && steady) {
    optionError(module) << "'compress=" << compress << "': strategy '"
                        << strategy
                        << "' plans the steady-state step, which does not "
                           "compress yet; use oasr, optimal, mgwfbp, wfbp, "
                           "single, ddp, horovod or bucket:N";
    return signalPassFailure();
  }
  if (compressGmacs != -1.0 && !(compressGmacs > 0)) {
    optionError(module) << "'compress-gmacs' must be > 0, got "
                        << compressGmacs;
    return signalPassFailure();
  }
  FailureOr<StepAnalysis> step = StepAnalysis::build(fn);
  if (failed(step))
    return signalPassFailure();
  if (!step->hasCosts) {
    fn.emitError("nodes without 'oasr.cost': run --oasr-annotate-cost first");
    return signalPassFailure();
  }
  FailureOr<std::optional<sched::CommModel>> cm = commModel(module);
  if (failed(cm))
    return signalPassFailure();
  // Without a model (a simple strategy) the grouping is the same under any
  // one; the plan records no model and no predicted time.
  const bool hasModel = cm->has_value();
  if (policy->mode == sched::CompressPolicy::Mode::Auto && !hasModel) {
    optionError(module) << "'compress=" << compress
                        << "' chooses each group's form on the allreduce "
                           "model, and strategy '"
                        << strategy
                        << "' was given none: give 'comm=', 'alpha' and "
                           "'beta', or 'compress=powersgd:R'";
    return signalPassFailure();
  }
  sched::CommModel model = hasModel ? **cm : sched::CommModel();
  model.wire = *wire;
  if (!policy->off())
    sched::setCompressionCosts(model, compressGmacs);
  if (wireType)
    for (const StepGrad &g : step->grads)
      if (!cast<ShapedType>(g.value.getType()).getElementType().isF32()) {
        optionError(module) << "'grad-dtype=" << gradDtype
                            << "' converts f32 gradients; gradient '" << g.param
                            << "' is " << g.value.getType();
        return signalPassFailure();
      }

  double updateUs = 0;
  if (auto costModel = module->getAttrOfType<DictionaryAttr>(kCostModelAttr))
    if (auto u = costModel.getAs<FloatAttr>("update_us"))
      updateUs = u.getValueAsDouble();
  sched::Profile profile = step->toProfile(updateUs);
  // A steady-state strategy (docs/planner.md, "The steady-state step")
  // plans the whole step; the runtime runs its allreduce plans.
  std::optional<sched::LoweredSteadyPlan> lowered;
  llvm::Expected<sched::Plan> plan = [&]() -> llvm::Expected<sched::Plan> {
    if (!steady)
      return sched::makeCompressedPlan(strategy, profile, model, *policy);
    sched::SteadyComm sc = sched::SteadyComm::fromAllreduce(model);
    // A calibration's measured reduce-scatter and all-gather (oasr-bench
    // comm --collectives=...), else halves of the allreduce.
    if (!comm.empty()) {
      bool measured[2] = {false, false};
      auto halves =
          sched::SteadyComm::fromCalibrationFile(model, comm, measured);
      if (!halves)
        return halves.takeError();
      sc = *halves;
    }
    // The runtime reduce-scatters f32 gradients only, and updates on the
    // compute lane after the all-gather (DeAR's form).
    sc.allowReduceScatter = !wireType;
    sc.shardUpdate = false;
    auto sp = sched::makeSteadyPlan(strategy, profile, sc);
    if (!sp)
      return sp.takeError();
    auto low = sched::lowerSteadyPlan(*sp, profile, sc);
    if (!low)
      return low.takeError();
    lowered = std::move(*low);
    lowered->plan.strategy = strategy;
    return lowered->plan;
  }();
  if (!plan) {
    optionError(module) << llvm::toString(plan.takeError());
    return signalPassFailure();
  }
  SmallVector<unsigned> order = step->readyOrder();

  // Starts: right after the node that makes the group's last gradient ready
  // (several groups after one node keep their order).
  OpBuilder b(module.getContext());
  Block &body = fn.getBody().front();
  DenseMap<Operation *, Operation *> lastInsertedAfter;
  SmallVector<AllreduceStartOp> starts;
  for (unsigned k = 0; k < plan->numGroups(); ++k) {
    SmallVector<Value> grads;
    for (unsigned i = plan->groupBegin(k); i < plan->groupEnds[k]; ++i)
      grads.push_back(step->grads[order[i]].value);
    // Gradients are in ready order: the last one is ready last.
    Operation *readyOp = step->grads[order[plan->groupEnds[k] - 1]].readyOp;
    Operation *after = lastInsertedAfter.lookup(readyOp);
    b.setInsertionPointAfter(after ? after : readyOp);
    auto start = b.create<AllreduceStartOp>(
        readyOp->getLoc(), TokenType::get(module.getContext()), grads,
        b.getI64IntegerAttr(k), DenseI64ArrayAttr(), IntegerAttr(),
        wireType ? TypeAttr::get(wireType) : TypeAttr(),
        plan->form(k).compressed() ? b.getI64IntegerAttr(plan->form(k).rank)
                                   : IntegerAttr());
    lastInsertedAfter[readyOp] = start;
    starts.push_back(start);
  }

  // Waits: before the return, in group order; the return takes the
  // averaged gradients.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  b.setInsertionPoint(ret);
  for (AllreduceStartOp start : starts) {
    auto wait = b.create<AllreduceWaitOp>(
        start.getLoc(), start.getGrads().getTypes(), start.getToken());
    for (auto [grad, reduced] : llvm::zip(start.getGrads(), wait.getReduced()))
      grad.replaceUsesWithIf(reduced, [&](OpOperand &use) {
        return use.getOwner() == ret.getOperation();
      });
  }

  SmallVector<NamedAttribute> planAttrs{
      b.getNamedAttr("strategy", b.getStringAttr(plan->strategy)),
      b.getNamedAttr("groups", b.getI64IntegerAttr(plan->numGroups())),
      b.getNamedAttr("update_us", b.getF64FloatAttr(updateUs))};
  if (wireType)
    planAttrs.push_back(b.getNamedAttr(
        "grad_dtype", b.getStringAttr(sched::wireDTypeName(*wire))));
  if (!policy->off()) {
    planAttrs.append(
        {b.getNamedAttr("compress", b.getStringAttr(policy->name())),
         b.getNamedAttr("compressed_groups",
                        b.getI64IntegerAttr(plan->numCompressed())),
         b.getNamedAttr("compress_us_per_mac",
                        b.getF64FloatAttr(model.compressUsPerMac)),
         b.getNamedAttr("compress_us_per_element",
                        b.getF64FloatAttr(model.compressUsPerElement))});
  }
  if (hasModel) {
    sched::Timeline timeline = sched::simulate(profile, model, *plan);
    planAttrs.append(
        {b.getNamedAttr("predicted_iteration_us",
                        b.getF64FloatAttr(timeline.iterationUs)),
         b.getNamedAttr("alpha_s", b.getF64FloatAttr(model.alphaS)),
         b.getNamedAttr("beta_s_per_byte",
                        b.getF64FloatAttr(model.betaSPerByte)),
         b.getNamedAttr("group_overhead_us",
                        b.getF64FloatAttr(model.groupOverheadUs)),
         b.getNamedAttr("overlap_rate", b.getF64FloatAttr(model.overlapRate))});
    // The bound carries every gradient byte; compressed groups carry fewer.
    if (!plan->compresses())
      planAttrs.push_back(b.getNamedAttr(
          "lower_bound_us",
          b.getF64FloatAttr(sched::lowerBoundUs(profile, model))));
    if (model.computeRate != 1)
      planAttrs.push_back(
          b.getNamedAttr("compute_rate", b.getF64FloatAttr(model.computeRate)));
    if (model.callComputeUs != 0)
      planAttrs.push_back(b.getNamedAttr(
          "call_compute_us", b.getF64FloatAttr(model.callComputeUs)));
    predictedUs = uint64_t(std::llround(timeline.iterationUs));
  }
  if (lowered) {
    // The steady step: the period is the predicted time per step.
    SmallVector<int64_t> pieces(lowered->pieces.begin(), lowered->pieces.end());
    SmallVector<int64_t> scatter(lowered->scatter.begin(),
                                 lowered->scatter.end());
    SmallVector<int64_t> order;
    for (const sched::LoweredUnit &u : lowered->order)
      order.append({int64_t(u.group), int64_t(u.piece), int64_t(u.gather)});
    for (NamedAttribute &a : planAttrs)
      if (a.getName() == "predicted_iteration_us")
        a.setValue(b.getF64FloatAttr(lowered->periodUs));
    planAttrs.push_back(b.getNamedAttr(
        "steady",
        b.getDictionaryAttr(
            {b.getNamedAttr("forward_waits",
                            b.getBoolAttr(lowered->forwardWaits)),
             b.getNamedAttr("pieces", b.getDenseI64ArrayAttr(pieces)),
             b.getNamedAttr("scatter", b.getDenseI64ArrayAttr(scatter)),
             b.getNamedAttr("order", b.getDenseI64ArrayAttr(order))})));
    predictedUs = uint64_t(std::llround(lowered->periodUs));
  }
  module->setAttr(kPlanAttr, b.getDictionaryAttr(planAttrs));
  numGroups = plan->numGroups();
  numGrads = order.size();
}
