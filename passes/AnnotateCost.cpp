//===- AnnotateCost.cpp - Per-node cost of the training step --------------===//
//
// Analytic FLOPs/bytes with a device roofline, or measured per-layer times
// from an oasr-profile-v1 file, attached as #oasr.cost to every node of
// @train_step; plus each gradient's bytes and ready position.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace mlir::oasr {
#define GEN_PASS_DEF_ANNOTATECOST
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

//===----------------------------------------------------------------------===//
// Devices (docs/passes.md gives the sources)
//===----------------------------------------------------------------------===//

namespace {
struct Device {
  llvm::StringLiteral name;
  double peakFlops;      ///< FP32 FLOP/s
  double bytesPerSecond; ///< memory bandwidth
  /// FLOP/s of products in bf16/f16 (dense tensor cores, AVX512-BF16) and
  /// in TF32 (`precision=tf32`); 0 where the device has no such unit and
  /// the product runs at the FP32 rate.
  double lowFlops = 0, tf32Flops = 0;
};
} // namespace

static constexpr Device kDevices[] = {
    // The build machine (2 vCPU AMD EPYC VM), measured: best oneDNN
    // convolution of oasr-bench-kernels on 2 threads and best 64 MiB copy;
    // see docs/passes.md. bf16: AVX512-BF16's vdpbf16ps does two
    // multiply-adds per f32 lane, so twice the f32 rate (docs/precision.md).
    {"cpu", 185.0e9, 17.0e9, 370.0e9, 0},
    // NVIDIA H100 SXM5 datasheet: 67 TFLOP/s FP32, 3.35 TB/s HBM3, dense
    // tensor cores 989 TFLOP/s BF16/FP16 and 494.5 TFLOP/s TF32.
    {"h100", 67.0e12, 3.35e12, 989.0e12, 494.5e12},
    // NVIDIA H200 SXM datasheet: 67 TFLOP/s FP32, 4.8 TB/s HBM3e; tensor
    // cores as H100's.
    {"h200", 67.0e12, 4.8e12, 989.0e12, 494.5e12},
    // NVIDIA V100 SXM2 datasheet: 15.7 TFLOP/s FP32, 900 GB/s HBM2, 125
    // TFLOP/s FP16 tensor cores (no BF16, no TF32).
    {"v100", 15.7e12, 900.0e9, 125.0e12, 0},
    // NVIDIA K80 datasheet, per GK210 (half a board, one rank): 8.73/2
    // TFLOP/s FP32 with boost, 480/2 GB/s GDDR5; no tensor cores.
    {"k80", 4.365e12, 240.0e9, 0, 0},
};

/// The FLOP/s of `node` on `dev`: the low-precision rate when its float
/// operands are 16-bit, TF32's for f32 products of a tf32 step.
static double nodeFlops(const Device &dev, NodeOp node, bool tf32) {
  bool low = false, f32 = false;
  for (Value v : node->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType())) {
      low |= t.getElementType().isBF16() || t.getElementType().isF16();
      f32 |= t.getElementType().isF32();
    }
  if (low && !f32 && dev.lowFlops > 0)
    return dev.lowFlops;
  const ::oasr::ops::OpDef *def = ::oasr::ops::OpRegistry::get().lookup(node);
  if (tf32 && dev.tf32Flops > 0 && def &&
      def->precision == ::oasr::ops::Precision::Lower)
    return dev.tf32Flops;
  return dev.peakFlops;
}

static const Device *findDevice(StringRef name) {
  for (const Device &d : kDevices)
    if (name.equals_insensitive(d.name))
      return &d;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Analytic FLOPs and bytes (each op's cost rule in the op registry)
//===----------------------------------------------------------------------===//

using ::oasr::ops::Work;

/// FLOPs and bytes of one node. Results nobody uses (the input gradient of
/// the first convolution) are not counted: the runtime need not compute them.
/// Ops without a cost rule do one operation per result element.
static Work analyticWork(NodeOp node) {
  return ::oasr::ops::analyticCost(node);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct AnnotateCostPass : mlir::oasr::impl::AnnotateCostBase<AnnotateCostPass> {
  using Base::Base;
  void runOnOperation() final;

private:
  LogicalResult applyProfile(ModuleOp module, StepAnalysis &step,
                             DenseMap<Operation *, double> &analyticUs,
                             DenseMap<Operation *, double> &timeUs);
};
} // namespace

/// Spreads `total` over `ops` in proportion to `weight` (evenly when all
/// weights are zero).
static void spread(ArrayRef<Operation *> ops, double total,
                   DenseMap<Operation *, double> &weight,
                   DenseMap<Operation *, double> &out) {
  if (ops.empty())
    return;
  double sum = 0;
  for (Operation *op : ops)
    sum += weight.lookup(op);
  for (Operation *op : ops)
    out[op] =
        sum > 0 ? total * weight.lookup(op) / sum : total / double(ops.size());
}

LogicalResult
AnnotateCostPass::applyProfile(ModuleOp module, StepAnalysis &step,
                               DenseMap<Operation *, double> &analyticUs,
                               DenseMap<Operation *, double> &timeUs) {
  llvm::Expected<::oasr::schedule::Profile> loaded =
      ::oasr::schedule::readProfile(profile);
  if (!loaded)
    return module.emitError("cannot read profile: ")
           << llvm::toString(loaded.takeError());
  ::oasr::schedule::Profile &p = *loaded;

  // A step layer closes at each node that makes gradients ready and holds
  // every backward node before it in backward order (StepAnalysis); a
  // profile may list nodes without gradients as layers of their own (oasr-run
  // --profile does: a transformer's attention matmuls and softmax were 16 of
  // its 17.7 ms of backward). Fold each such layer into the next layer with
  // gradients in backward order -- the previous one in forward order -- and
  // those after the last into the last, as StepAnalysis does.
  {
    std::vector<::oasr::schedule::Layer> folded;
    double pending = 0;
    for (auto it = p.layers.rbegin(); it != p.layers.rend(); ++it) {
      if (it->grads.empty()) {
        pending += it->backwardUs;
        continue;
      }
      folded.push_back(std::move(*it));
      folded.back().backwardUs += pending;
      pending = 0;
    }
    if (!folded.empty()) {
      folded.back().backwardUs += pending;
      p.layers.assign(std::make_move_iterator(folded.rbegin()),
                      std::make_move_iterator(folded.rend()));
    }
  }

  // Profile layers by gradient name and by layer name.
  llvm::StringMap<unsigned> byGrad, byName;
  for (auto [i, layer] : llvm::enumerate(p.layers)) {
    byName[layer.name] = i;
    for (const ::oasr::schedule::GradTensor &g : layer.grads)
      byGrad[g.name] = i;
  }
  SmallVector<bool> used(p.layers.size(), false);
  SmallVector<std::string> unmatchedStep;
  for (StepLayer &layer : step.layers) {
    std::optional<unsigned> match;
    for (unsigned g : layer.grads) {
      auto it = byGrad.find(step.grads[g].param);
      if (it != byGrad.end()) {
        match = it->second;
        break;
      }
    }
    if (!match) {
      auto it = byName.find(layer.name);
      if (it != byName.end())
        match = it->second;
    }
    if (!match || used[*match]) {
      unmatchedStep.push_back(layer.name);
      for (Operation *op : layer.backwardOps)
        timeUs[op] = 0;
      continue;
    }
    used[*match] = true;
    const ::oasr::schedule::Layer &pl = p.layers[*match];
    spread(layer.backwardOps, pl.backwardUs, analyticUs, timeUs);
    for (unsigned g : layer.grads) {
      const StepGrad &grad = step.grads[g];
      for (const ::oasr::schedule::GradTensor &t : pl.grads)
        if (t.name == grad.param && t.bytes != grad.bytes)
          mlir::emitWarning(step.func.getLoc())
              << "profile gives " << t.bytes << " bytes for '" << t.name
              << "', the step has " << grad.bytes;
    }
  }
  spread(step.forwardOps, p.forwardUs, analyticUs, timeUs);

  SmallVector<std::string> unmatchedProfile;
  for (auto [i, layer] : llvm::enumerate(p.layers))
    if (!used[i])
      unmatchedProfile.push_back(layer.name);
  if (!unmatchedProfile.empty())
    mlir::emitWarning(step.func.getLoc())
        << "profile layers with no match in the step: "
        << llvm::join(unmatchedProfile, ", ");
  if (!unmatchedStep.empty())
    mlir::emitWarning(step.func.getLoc())
        << "step layers with no match in the profile (cost 0): "
        << llvm::join(unmatchedStep, ", ");
  numUnmatched = unmatchedProfile.size() + unmatchedStep.size();

  // Keep what the planner needs beyond per-node times.
  Builder b(module.getContext());
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr("source", b.getStringAttr("profile")),
      b.getNamedAttr("file", b.getStringAttr(profile)),
      b.getNamedAttr("update_us", b.getF64FloatAttr(p.updateUs))};
  if (p.comm) {
    attrs.push_back(
        b.getNamedAttr("alpha_s", b.getF64FloatAttr(p.comm->alphaS)));
    attrs.push_back(b.getNamedAttr("beta_s_per_byte",
                                   b.getF64FloatAttr(p.comm->betaSPerByte)));
    attrs.push_back(
        b.getNamedAttr("ranks", b.getI64IntegerAttr(p.comm->ranks)));
    attrs.push_back(
        b.getNamedAttr("overlap_rate", b.getF64FloatAttr(p.comm->overlapRate)));
    if (p.comm->computeRate != 1)
      attrs.push_back(b.getNamedAttr("compute_rate",
                                     b.getF64FloatAttr(p.comm->computeRate)));
    if (p.comm->callComputeUs != 0)
      attrs.push_back(b.getNamedAttr("call_compute_us",
                                     b.getF64FloatAttr(p.comm->callComputeUs)));
  }
  module->setAttr(kCostModelAttr, b.getDictionaryAttr(attrs));
  return success();
}

void AnnotateCostPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp fn = getTrainStep(module, "--oasr-annotate-cost");
  if (!fn)
    return signalPassFailure();
  const Device *dev = findDevice(device);
  if (!dev) {
    std::string names;
    for (const Device &d : kDevices)
      names += (names.empty() ? "" : ", ") + d.name.str();
    module.emitError("unknown device '")
        << device << "' (known: " << names << ")";
    return signalPassFailure();
  }
  FailureOr<StepAnalysis> step = StepAnalysis::build(fn);
  if (failed(step))
    return signalPassFailure();

  // Analytic time of every node on the device.
  DenseMap<Operation *, double> analyticUs, timeUs;
  DenseMap<Operation *, Work> work;
  double flops = 0;
  auto precision = module->getAttrOfType<StringAttr>(kPrecisionAttr);
  bool tf32 = precision && precision.getValue() == "tf32";
  for (Operation &op : fn.getBody().front()) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node)
      continue;
    Work w = analyticWork(node);
    work[node] = w;
    flops += w.flops;
    analyticUs[node] = 1e6 * std::max(w.flops / nodeFlops(*dev, node, tf32),
                                      w.bytes / dev->bytesPerSecond);
  }
  totalFlops = uint64_t(flops / 1e6);

  Builder b(module.getContext());
  if (!profile.empty()) {
    if (failed(applyProfile(module, *step, analyticUs, timeUs)))
      return signalPassFailure();
  } else {
    timeUs = analyticUs;
    module->setAttr(
        kCostModelAttr,
        b.getDictionaryAttr(
            {b.getNamedAttr("source", b.getStringAttr("roofline")),
             b.getNamedAttr("device", b.getStringAttr(dev->name)),
             b.getNamedAttr("peak_flops", b.getF64FloatAttr(dev->peakFlops)),
             b.getNamedAttr("bytes_per_s",
                            b.getF64FloatAttr(dev->bytesPerSecond)),
             b.getNamedAttr("update_us", b.getF64FloatAttr(0.0))}));
  }

  MLIRContext *ctx = module.getContext();
  for (auto &[op, w] : work) {
    double t = timeUs.lookup(op);
    bool backward = isBackwardNode(op);
    op->setAttr(kCostAttr,
                CostAttr::get(ctx, backward ? 0.0 : t, backward ? t : 0.0,
                              int64_t(w.flops), int64_t(w.bytes)));
    ++numAnnotated;
  }

  // Each gradient's bytes and ready position, on the step's results.
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i) {
    if (!fn.getResultAttr(i, kGradAttr))
      continue;
    Value g = ret.getOperand(i);
    for (const StepGrad &grad : step->grads)
      if (grad.value == g) {
        fn.setResultAttr(i, kGradBytesAttr,
                         b.getI64IntegerAttr(int64_t(grad.bytes)));
        fn.setResultAttr(i, kReadyAttr, b.getI64IntegerAttr(grad.readyPos));
      }
  }
}
