//===- Pipeline.cpp - The training pipeline -------------------------------===//
//
// --oasr-train-pipeline: fuse-attention, fuse-gelu and autocast (mixed
// precision), autodiff, annotate-cost, plan-allreduce, layout-gradients,
// insert-optimizer (and optionally the plan report).
//
//===----------------------------------------------------------------------===//

#include "oasr/Passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::oasr;

void mlir::oasr::populateTrainPipeline(OpPassManager &pm,
                                       const TrainPipelineOptions &opts) {
  if (opts.fuseAttention)
    pm.addPass(createFuseAttention());
  if (opts.precision == "bf16" || opts.precision == "f16")
    pm.addPass(createFuseGelu());
  if (opts.precision != "f32") {
    AutocastOptions autocast;
    autocast.precision = opts.precision;
    pm.addPass(createAutocast(autocast));
  }

  AutodiffOptions autodiff;
  autodiff.outputName = opts.output;
  autodiff.lossName = opts.loss;
  autodiff.labelName = opts.label;
  autodiff.ignoreIndex = opts.ignoreIndex;
  autodiff.labelSmoothing = opts.labelSmoothing;
  pm.addPass(createAutodiff(autodiff));
  if (opts.precision == "bf16" || opts.precision == "f16") {
    pm.addPass(createFuseMatMulTranspose());
    pm.addPass(createFuseCasts());
  }

  AnnotateCostOptions cost;
  cost.device = opts.device;
  cost.profile = opts.profile;
  pm.addPass(createAnnotateCost(cost));

  PlanAllreduceOptions plan;
  plan.strategy = opts.strategy;
  plan.alpha = opts.alpha;
  plan.beta = opts.beta;
  plan.comm = opts.comm;
  plan.ranks = opts.ranks;
  plan.groupOverheadUs = opts.groupOverheadUs;
  plan.overlapRate = opts.overlapRate;
  plan.gradDtype = opts.gradDtype;
  plan.compress = opts.compress;
  plan.twoLevel = opts.twoLevel;
  pm.addPass(createPlanAllreduce(plan));

  LayoutGradientsOptions layout;
  layout.alignment = opts.alignment;
  pm.addPass(createLayoutGradients(layout));

  InsertOptimizerOptions optimizer;
  optimizer.algo = opts.algo;
  optimizer.lr = opts.lr;
  optimizer.momentum = opts.momentum;
  optimizer.weightDecay = opts.weightDecay;
  optimizer.beta1 = opts.beta1;
  optimizer.beta2 = opts.beta2;
  optimizer.epsilon = opts.epsilon;
  optimizer.decayExclude = opts.decayExclude;
  pm.addPass(createInsertOptimizer(optimizer));

  if (opts.report) {
    PlanReportOptions report;
    report.output = opts.reportOutput;
    pm.addPass(createPlanReport(report));
  }
}

void mlir::oasr::registerTrainPipeline() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "oasr-train-pipeline",
      "Imported forward graph to planned training step: autocast, autodiff, "
      "annotate-cost, plan-allreduce, layout-gradients, insert-optimizer",
      populateTrainPipeline);
}
