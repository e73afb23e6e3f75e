//===- Passes.h - oasr graph passes -----------------------------*- C++ -*-===//
//
// The training passes (autodiff, cost annotation, allreduce planning, gradient
// buffer layout, optimizer insertion, plan report) and the training pipeline.
// Everything is declared in Passes.td; this header adds the pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_PASSES_PASSES_H
#define OASR_PASSES_PASSES_H

#include "oasr/Dialect/OASRDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::oasr {

#define GEN_PASS_DECL
#include "oasr/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "oasr/Passes/Passes.h.inc"

/// Options of `--oasr-train-pipeline`: the union of the passes' options.
struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  // --oasr-autocast (not run for f32)
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Step precision: f32, tf32, bf16 or f16 (mixed)"),
      llvm::cl::init("f32")};
  // --oasr-fuse-attention
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Fold scaled dot-product attention into FusedAttention"),
      llvm::cl::init(true)};
  // --oasr-autodiff
  Option<std::string> output{*this, "output",
                             llvm::cl::desc("Model output to train on")};
  Option<std::string> loss{*this, "loss", llvm::cl::desc("Loss name"),
                           llvm::cl::init("loss")};
  Option<std::string> label{*this, "label",
                            llvm::cl::desc("Label argument name"),
                            llvm::cl::init("label")};
  Option<int64_t> ignoreIndex{
      *this, "ignore-index",
      llvm::cl::desc("Label value the loss ignores (negative: none)"),
      llvm::cl::init(-1)};
  Option<double> labelSmoothing{
      *this, "label-smoothing",
      llvm::cl::desc("Label smoothing of the appended loss, in [0, 1)"),
      llvm::cl::init(0.0)};
  // --oasr-annotate-cost
  Option<std::string> device{*this, "device", llvm::cl::desc("Roofline device"),
                             llvm::cl::init("cpu")};
  Option<std::string> profile{*this, "profile",
                              llvm::cl::desc("oasr-profile-v1 file")};
  // --oasr-plan-allreduce
  Option<std::string> strategy{*this, "strategy",
                               llvm::cl::desc("Merge strategy"),
                               llvm::cl::init("oasr")};
  Option<double> alpha{*this, "alpha",
                       llvm::cl::desc("Allreduce start-up time (s)"),
                       llvm::cl::init(-1.0)};
  Option<double> beta{*this, "beta",
                      llvm::cl::desc("Allreduce time per byte (s/B)"),
                      llvm::cl::init(-1.0)};
  Option<std::string> comm{*this, "comm",
                           llvm::cl::desc("oasr-comm-v1 calibration file")};
  Option<int> ranks{*this, "ranks", llvm::cl::desc("Ring form over P ranks"),
                    llvm::cl::init(0)};
  Option<double> groupOverheadUs{
      *this, "group-overhead-us",
      llvm::cl::desc("Extra fixed cost per communicated group (us)"),
      llvm::cl::init(0.0)};
  Option<double> overlapRate{
      *this, "overlap-rate",
      llvm::cl::desc("Communication progress rate during backward, in [0, 1] "
                     "(default: the calibration's or profile's, else 1)"),
      llvm::cl::init(-1.0)};
  Option<std::string> gradDtype{
      *this, "grad-dtype",
      llvm::cl::desc("Element type gradients travel in: f32, bf16 or f16"),
      llvm::cl::init("f32")};
  Option<std::string> compress{
      *this, "compress",
      llvm::cl::desc("What groups may send: off, powersgd:R or auto[:R[-M]]"),
      llvm::cl::init("off")};
  Option<std::string> twoLevel{
      *this, "two-level",
      llvm::cl::desc("Allreduce per group where the calibration has a "
                     "second tier: auto, flat or two-level"),
      llvm::cl::init("auto")};
  // --oasr-layout-gradients
  Option<int64_t> alignment{*this, "alignment",
                            llvm::cl::desc("Gradient alignment (bytes)"),
                            llvm::cl::init(256)};
  // --oasr-insert-optimizer
  Option<std::string> algo{
      *this, "algo",
      llvm::cl::desc("Optimizer: sgd, momentum, adagrad, adam or adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(-1.0)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("Momentum"),
                          llvm::cl::init(-1.0)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("Weight decay"),
                             llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam's beta1"),
                       llvm::cl::init(-1.0)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam's beta2"),
                       llvm::cl::init(-1.0)};
  Option<double> epsilon{*this, "epsilon", llvm::cl::desc("Adam's epsilon"),
                         llvm::cl::init(-1.0)};
  Option<std::string> decayExclude{
      *this, "decay-exclude",
      llvm::cl::desc("Parameters without weight decay: none, 1d or a regex"),
      llvm::cl::init("none")};
  // --oasr-plan-report
  Option<bool> report{*this, "report",
                      llvm::cl::desc("Print the plan report at the end"),
                      llvm::cl::init(false)};
  Option<std::string> reportOutput{*this, "report-output",
                                   llvm::cl::desc("Plan report file"),
                                   llvm::cl::init("-")};
};

/// Adds the training passes to `pm`, configured by `options`.
void populateTrainPipeline(OpPassManager &pm,
                           const TrainPipelineOptions &options);

/// Registers `--oasr-train-pipeline`.
void registerTrainPipeline();

/// Registers every oasr pass and pipeline with the global registry.
void registerAllPasses();

} // namespace mlir::oasr

#endif // OASR_PASSES_PASSES_H
