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
#include "llvm/Support/Debug.h"

#include <cmath>

#define DEBUG_TYPE "oasr-annotate-cost"

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
};
} // namespace

static constexpr Device kDevices[] = {
    // The build machine (2 vCPU AMD EPYC VM), measured: best oneDNN
    // convolution of oasr-bench-kernels on 2 threads and best 64 MiB copy;
    // see docs/passes.md.
    {"cpu", 185.0e9, 17.0e9},
    // NVIDIA H100 SXM5 datasheet: 67 TFLOP/s FP32, 3.35 TB/s HBM3.
    {"h100", 67.0e12, 3.35e12},
    // NVIDIA H200 SXM datasheet: 67 TFLOP/s FP32, 4.8 TB/s HBM3e.
    {"h200", 67.0e12, 4.8e12},
    // NVIDIA V100 SXM2 datasheet: 15.7 TFLOP/s FP32, 900 GB/s HBM2.
    {"v100", 15.7e12, 900.0e9},
    // NVIDIA K80 datasheet, per GK210 (half a board, one rank): 8.73/2
    // TFLOP/s FP32 with boost, 480/2 GB/s GDDR5.
    {"k80", 4.365e12, 240.0e9},
};

static const Device *findDevice(StringRef name) {
  for (const Device &d : kDevices)
    if (name.equals_insensitive(d.name))
      return &d;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Analytic FLOPs and bytes
//===----------------------------------------------------------------------===//

namespace {
struct Work {
  double flops = 0;
  double bytes = 0;
};
} // namespace

static int64_t numel(Value v) { return tensorElements(v.getType()); }

static int64_t productFrom(Type type, unsigned from) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  int64_t p = 1;
  for (unsigned i = from; i < t.getRank(); ++i)
    p *= t.getDimSize(i);
  return p;
}

static int64_t kernelSize(Operation *op) {
  int64_t k = 1;
  if (auto shape = op->getAttrOfType<ArrayAttr>("kernel_shape"))
    for (Attribute a : shape)
      if (auto i = dyn_cast<IntegerAttr>(a))
        k *= i.getInt();
  return k;
}

/// Memory traffic: every operand read and every used result written.
static double trafficBytes(Operation *op) {
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += tensorBytes(v.getType());
  for (Value v : op->getResults())
    if (!v.use_empty())
      bytes += tensorBytes(v.getType());
  return bytes;
}

/// FLOPs and bytes of one node. Results nobody uses (the input gradient of
/// the first convolution) are not counted: the runtime need not compute them.
static Work analyticWork(NodeOp node) {
  Work w;
  StringRef type = node.getOpType();
  Operation *op = node;
  auto used = [&](unsigned i) {
    return i < op->getNumResults() && !op->getResult(i).use_empty();
  };
  // Views and constants move no data.
  if (type == "Constant" || type == "Reshape" || type == "Flatten" ||
      type == "Squeeze" || type == "Unsqueeze" || type == "Identity" ||
      type == "Shape")
    return w;
  w.bytes = trafficBytes(op);
  double out = op->getNumResults() ? numel(op->getResult(0)) : 0;
  if (type == "Conv") {
    double perOut = 2.0 * productFrom(op->getOperand(1).getType(), 1);
    w.flops = out * perOut + (op->getNumOperands() > 2 ? out : 0);
  } else if (type == "ConvGrad") {
    double dy = numel(op->getOperand(0));
    double perOut = 2.0 * productFrom(op->getOperand(2).getType(), 1);
    w.flops = (used(0) ? dy * perOut : 0) + (used(1) ? dy * perOut : 0) +
              (used(2) ? dy : 0);
  } else if (type == "Gemm" || type == "GemmGrad") {
    bool grad = type == "GemmGrad";
    auto a = cast<RankedTensorType>(op->getOperand(grad ? 1 : 0).getType());
    int64_t transA = 0;
    if (auto t = op->getAttrOfType<IntegerAttr>("transA"))
      transA = t.getInt();
    double m = a.getDimSize(transA ? 1 : 0), k = a.getDimSize(transA ? 0 : 1);
    double n = grad ? productFrom(op->getOperand(0).getType(), 1)
                    : productFrom(op->getResult(0).getType(), 1);
    if (!grad)
      w.flops = 2 * m * n * k + (op->getNumOperands() > 2 ? m * n : 0);
    else
      w.flops = (used(0) ? 2 * m * n * k : 0) + (used(1) ? 2 * m * n * k : 0) +
                (used(2) ? m * n : 0);
  } else if (type == "MatMul") {
    auto a = cast<RankedTensorType>(op->getOperand(0).getType());
    w.flops = 2.0 * out * a.getShape().back();
  } else if (type == "BatchNormalization" || type == "LayerNormalization") {
    w.flops = 8.0 * numel(op->getOperand(0));
  } else if (type == "BatchNormalizationGrad" ||
             type == "LayerNormalizationGrad") {
    w.flops = 12.0 * numel(op->getOperand(1));
  } else if (type == "MaxPool" || type == "AveragePool") {
    w.flops = out * kernelSize(op);
  } else if (type == "AveragePoolGrad") {
    w.flops = numel(op->getOperand(0)) * kernelSize(op);
  } else if (type == "GlobalAveragePool" || type == "ReduceMean" ||
             type == "ReduceSumTo" || type == "ReduceSum") {
    w.flops = numel(op->getOperand(0));
  } else if (type == "Softmax" || type == "SoftmaxCrossEntropyLoss" ||
             type == "Erf" || type == "Exp" || type == "Gelu" ||
             type == "Sqrt" || type == "Pow") {
    w.flops = 8.0 * numel(op->getOperand(0));
  } else if (type == "GeluGrad" || type == "SoftmaxGrad") {
    w.flops = 12.0 * out;
  } else {
    // Elementwise and data movement: one operation per produced element.
    for (Value v : op->getResults())
      w.flops += numel(v);
  }
  return w;
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
  for (Operation &op : fn.getBody().front()) {
    auto node = dyn_cast<NodeOp>(op);
    if (!node)
      continue;
    Work w = analyticWork(node);
    work[node] = w;
    flops += w.flops;
    analyticUs[node] =
        1e6 * std::max(w.flops / dev->peakFlops, w.bytes / dev->bytesPerSecond);
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
