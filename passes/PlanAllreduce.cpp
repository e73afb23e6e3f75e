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
  // The phases of runOnOperation, in order; errors are reported where
  // they are found.
  LogicalResult checkOptions(ModuleOp module, struct PlanChoice &c);
  FailureOr<StepAnalysis> analyze(ModuleOp module, func::FuncOp fn,
                                  struct PlanChoice &c);
  LogicalResult makeStepPlan(ModuleOp module, const StepAnalysis &step,
                             struct PlanChoice &c);
  void insertCollectives(func::FuncOp fn, const StepAnalysis &step,
                         ArrayRef<unsigned> order, const struct PlanChoice &c);
  DictionaryAttr planAttributes(MLIRContext *ctx, const struct PlanChoice &c);
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

namespace {
/// What the pass decided, phase by phase: the options, then the analysis
/// and model, then the plan.
struct PlanChoice {
  bool steady = false; ///< a steady-state strategy (the whole step)
  sched::WireDType wire = sched::WireDType::F32;
  Type wireType; ///< bf16/f16 on the wire; null for f32
  sched::CompressPolicy policy;
  sched::AllreduceRoute route = sched::AllreduceRoute::Auto;
  /// Per group of the plan: sent as a two-level allreduce.
  std::vector<bool> twoLevel;
  bool hasModel = false; ///< an allreduce model was given
  sched::CommModel model;
  double updateUs = 0;
  sched::Profile profile;
  sched::Plan plan;
  std::optional<sched::LoweredSteadyPlan> lowered; ///< steady strategies
  sched::CompressionCostSource compressFrom =
      sched::CompressionCostSource::Default;
};
} // namespace

LogicalResult PlanAllreducePass::checkOptions(ModuleOp module, PlanChoice &c) {
  // Checked before any analysis so a typo fails fast; makePlan reports the
  // same errors.
  c.steady = sched::isSteadyStrategy(strategy);
  if (llvm::Error e =
          c.steady ? llvm::Error::success() : sched::checkStrategy(strategy)) {
    optionError(module) << llvm::toString(std::move(e));
    return failure();
  }
  llvm::Expected<sched::WireDType> wire = sched::parseWireDType(gradDtype);
  if (!wire) {
    llvm::consumeError(wire.takeError());
    optionError(module) << "'grad-dtype' must be f32, bf16 or f16 (the "
                           "element type gradients travel in), got '"
                        << gradDtype << "'";
    return failure();
  }
  c.wire = *wire;
  if (*wire == sched::WireDType::BF16)
    c.wireType = BFloat16Type::get(module.getContext());
  else if (*wire == sched::WireDType::F16)
    c.wireType = Float16Type::get(module.getContext());
  llvm::Expected<sched::CompressPolicy> policy =
      sched::parseCompressPolicy(compress);
  if (!policy) {
    optionError(module) << "'compress=" << llvm::toString(policy.takeError());
    return failure();
  }
  c.policy = *policy;
  if (!c.policy.off() && c.wire == sched::WireDType::F16) {
    optionError(module) << "'compress=" << compress
                        << "': PowerSGD's factors are not scaled, and P = M "
                           "Q can pass f16's range; send them in bf16 "
                           "('grad-dtype=bf16') or f32";
    return failure();
  }
  llvm::Expected<sched::AllreduceRoute> route =
      sched::parseAllreduceRoute(twoLevel);
  if (!route) {
    optionError(module) << "'two-level=" << llvm::toString(route.takeError());
    return failure();
  }
  c.route = *route;
  if (c.route == sched::AllreduceRoute::TwoLevel && c.steady) {
    optionError(module) << "'two-level=two-level' sends every group as a "
                           "two-level allreduce; steady-state plans keep one "
                           "tier, so it does not combine with 'strategy="
                        << strategy.getValue() << "'";
    return failure();
  }
  if (compressGmacs != -1.0 && !(compressGmacs > 0)) {
    optionError(module) << "'compress-gmacs' must be > 0, got "
                        << compressGmacs;
    return failure();
  }
  return success();
}

FailureOr<StepAnalysis>
PlanAllreducePass::analyze(ModuleOp module, func::FuncOp fn, PlanChoice &c) {
  FailureOr<StepAnalysis> built = StepAnalysis::build(fn);
  if (failed(built))
    return failure();
  if (!built->hasCosts) {
    fn.emitError("nodes without 'oasr.cost': run --oasr-annotate-cost first");
    return failure();
  }
  FailureOr<std::optional<sched::CommModel>> cm = commModel(module);
  if (failed(cm))
    return failure();
  // Without a model (a simple strategy) the grouping is the same under any
  // one; the plan records no model and no predicted time.
  c.hasModel = cm->has_value();
  if (c.policy.mode == sched::CompressPolicy::Mode::Auto && !c.hasModel) {
    optionError(module) << "'compress=" << compress
                        << "' chooses each group's form on the allreduce "
                           "model, and strategy '"
                        << strategy
                        << "' was given none: give 'comm=', 'alpha' and "
                           "'beta', or 'compress=powersgd:R'";
    return failure();
  }
  c.model = c.hasModel ? **cm : sched::CommModel();
  c.model.wire = c.wire;
  if (c.route == sched::AllreduceRoute::TwoLevel &&
      !c.model.twoLevel.present()) {
    optionError(module) << "'two-level=two-level': the communication model "
                           "has no second tier (a calibration's 'two_level', "
                           "which oasr-bench comm writes where ranks share "
                           "nodes)";
    return failure();
  }
  // The steady step's reduce-scatters keep one tier.
  c.model.route = !c.steady ? c.route : sched::AllreduceRoute::Flat;
  if (!c.policy.off())
    c.compressFrom = sched::setCompressionCosts(c.model, compressGmacs);
  if (c.wireType)
    for (const StepGrad &g : built->grads)
      if (!cast<ShapedType>(g.value.getType()).getElementType().isF32()) {
        optionError(module) << "'grad-dtype=" << gradDtype
                            << "' converts f32 gradients; gradient '" << g.param
                            << "' is " << g.value.getType();
        return failure();
      }

  return built;
}

LogicalResult PlanAllreducePass::makeStepPlan(ModuleOp module,
                                              const StepAnalysis &step,
                                              PlanChoice &c) {
  c.updateUs = 0;
  if (auto costModel = module->getAttrOfType<DictionaryAttr>(kCostModelAttr))
    if (auto u = costModel.getAs<FloatAttr>("update_us"))
      c.updateUs = u.getValueAsDouble();
  c.profile = step.toProfile(c.updateUs);
  // A steady-state strategy (docs/planner.md, "The steady-state step")
  // plans the whole step; the runtime runs its allreduce plans.
  llvm::Expected<sched::Plan> plan = [&]() -> llvm::Expected<sched::Plan> {
    if (!c.steady)
      return sched::makeCompressedPlan(strategy, c.profile, c.model, c.policy);
    sched::SteadyComm sc = sched::SteadyComm::fromAllreduce(c.model);
    // A calibration's measured reduce-scatter and all-gather (oasr-bench
    // comm --collectives=...), else halves of the allreduce.
    if (!comm.empty()) {
      bool measured[2] = {false, false};
      auto halves =
          sched::SteadyComm::fromCalibrationFile(c.model, comm, measured);
      if (!halves)
        return halves.takeError();
      sc = *halves;
    }
    // The runtime reduce-scatters f32 gradients only, and updates on the
    // compute lane after the all-gather (DeAR's form).
    sc.allowReduceScatter = !c.wireType;
    sc.shardUpdate = false;
    auto sp = sched::makeSteadyPlan(strategy, c.profile, sc, c.policy);
    if (!sp)
      return sp.takeError();
    auto low = sched::lowerSteadyPlan(*sp, c.profile, sc);
    if (!low)
      return low.takeError();
    c.lowered = std::move(*low);
    c.lowered->plan.strategy = strategy;
    return c.lowered->plan;
  }();
  if (!plan) {
    optionError(module) << llvm::toString(plan.takeError());
    return failure();
  }
  c.plan = std::move(*plan);
  c.twoLevel = c.hasModel ? sched::twoLevelGroups(c.profile, c.model, c.plan)
                          : std::vector<bool>(c.plan.numGroups(), false);
  return success();
}

void PlanAllreducePass::insertCollectives(func::FuncOp fn,
                                          const StepAnalysis &step,
                                          ArrayRef<unsigned> order,
                                          const PlanChoice &c) {
  // Starts: right after the node that makes the group's last gradient ready
  // (several groups after one node keep their order).
  OpBuilder b(fn.getContext());
  Block &body = fn.getBody().front();
  DenseMap<Operation *, Operation *> lastInsertedAfter;
  SmallVector<AllreduceStartOp> starts;
  for (unsigned k = 0; k < c.plan.numGroups(); ++k) {
    SmallVector<Value> grads;
    for (unsigned i = c.plan.groupBegin(k); i < c.plan.groupEnds[k]; ++i)
      grads.push_back(step.grads[order[i]].value);
    // Gradients are in ready order: the last one is ready last.
    Operation *readyOp = step.grads[order[c.plan.groupEnds[k] - 1]].readyOp;
    Operation *after = lastInsertedAfter.lookup(readyOp);
    b.setInsertionPointAfter(after ? after : readyOp);
    auto start = b.create<AllreduceStartOp>(
        readyOp->getLoc(), TokenType::get(fn.getContext()), grads,
        b.getI64IntegerAttr(k), DenseI64ArrayAttr(), IntegerAttr(),
        c.wireType ? TypeAttr::get(c.wireType) : TypeAttr(),
        c.plan.form(k).compressed() ? b.getI64IntegerAttr(c.plan.form(k).rank)
                                    : IntegerAttr(),
        c.twoLevel[k] ? b.getUnitAttr() : UnitAttr());
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
}

DictionaryAttr PlanAllreducePass::planAttributes(MLIRContext *ctx,
                                                 const PlanChoice &c) {
  OpBuilder b(ctx);
  SmallVector<NamedAttribute> planAttrs{
      b.getNamedAttr("strategy", b.getStringAttr(c.plan.strategy)),
      b.getNamedAttr("groups", b.getI64IntegerAttr(c.plan.numGroups())),
      b.getNamedAttr("update_us", b.getF64FloatAttr(c.updateUs))};
  if (c.wireType)
    planAttrs.push_back(b.getNamedAttr(
        "grad_dtype", b.getStringAttr(sched::wireDTypeName(c.wire))));
  if (!c.policy.off()) {
    planAttrs.append(
        {b.getNamedAttr("compress", b.getStringAttr(c.policy.name())),
         b.getNamedAttr("compressed_groups",
                        b.getI64IntegerAttr(c.plan.numCompressed())),
         b.getNamedAttr("compress_us_per_mac",
                        b.getF64FloatAttr(c.model.compressUsPerMac)),
         b.getNamedAttr("compress_us_per_element",
                        b.getF64FloatAttr(c.model.compressUsPerElement)),
         b.getNamedAttr("compress_from",
                        b.getStringAttr(sched::compressionCostSourceName(
                            c.compressFrom)))});
  }
  if (c.hasModel && c.model.twoLevelUsable()) {
    unsigned twoLevelGroups = llvm::count(c.twoLevel, true);
    const sched::TwoLevelTier &t = c.model.twoLevel;
    planAttrs.push_back(b.getNamedAttr(
        "two_level",
        b.getDictionaryAttr(
            {b.getNamedAttr("route", b.getStringAttr(sched::allreduceRouteName(
                                         c.model.route))),
             b.getNamedAttr("groups", b.getI64IntegerAttr(twoLevelGroups)),
             b.getNamedAttr("ranks", b.getI64IntegerAttr(c.model.ranks)),
             b.getNamedAttr("ranks_per_node",
                            b.getI64IntegerAttr(t.ranksPerNode)),
             b.getNamedAttr("intra_alpha_s", b.getF64FloatAttr(t.intraAlphaS)),
             b.getNamedAttr("intra_beta_s_per_byte",
                            b.getF64FloatAttr(t.intraBetaSPerByte)),
             b.getNamedAttr("inter_alpha_s", b.getF64FloatAttr(t.interAlphaS)),
             b.getNamedAttr("inter_beta_s_per_byte",
                            b.getF64FloatAttr(t.interBetaSPerByte))})));
  }
  if (c.hasModel) {
    const sched::CommModel &model = c.model;
    sched::Timeline timeline = sched::simulate(c.profile, model, c.plan);
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
    if (!c.plan.compresses())
      planAttrs.push_back(b.getNamedAttr(
          "lower_bound_us",
          b.getF64FloatAttr(sched::lowerBoundUs(c.profile, model))));
    if (model.computeRate != 1)
      planAttrs.push_back(
          b.getNamedAttr("compute_rate", b.getF64FloatAttr(model.computeRate)));
    if (model.callComputeUs != 0)
      planAttrs.push_back(b.getNamedAttr(
          "call_compute_us", b.getF64FloatAttr(model.callComputeUs)));
    predictedUs = uint64_t(std::llround(timeline.iterationUs));
  }
  if (const std::optional<sched::LoweredSteadyPlan> &lowered = c.lowered) {
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
  return b.getDictionaryAttr(planAttrs);
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
  PlanChoice c;
  if (failed(checkOptions(module, c)))
    return signalPassFailure();
  FailureOr<StepAnalysis> step = analyze(module, fn, c);
  if (failed(step) || failed(makeStepPlan(module, *step, c)))
    return signalPassFailure();
  SmallVector<unsigned> order = step->readyOrder();
  insertCollectives(fn, *step, order, c);
  module->setAttr(kPlanAttr, planAttributes(module.getContext(), c));
  numGroups = c.plan.numGroups();
  numGrads = order.size();
}
