//===- ArithmeticKernels.cpp - Broadcast arithmetic on the GPU ------------===//
//
// Add/Sub/Mul/Div/Pow/Sum with numpy broadcasting, Neg, and the reductions
// (ReduceMean/ReduceSum, ReduceSumTo), the ops of the CPU backend's
// ArithmeticKernels.cpp; device code in CudaKernels.cu. Also the broadcast
// and reduction plans the other families build on.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace oasr::rt::cuda {

/// `in` broadcast onto `out` (numpy, aligned right) as strides of `out`'s
/// dimensions.
bool broadcastStrides(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &out, int64_t *strides) {
  if (in.size() > out.size())
    return false;
  std::vector<int64_t> s = rowMajorStrides(in);
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d) {
    strides[d] = 0;
    if (d < off || in[d - off] == 1)
      continue;
    if (in[d - off] != out[d])
      return false;
    strides[d] = s[d - off];
  }
  return true;
}

Status makeBroadcast(const OpSpec &spec, const std::vector<int64_t> &out,
                     Broadcast &b) {
  if (out.size() > size_t(kMaxRank) ||
      spec.inputs.size() > size_t(kMaxOperands)) {
    return nodeError(spec,
                     "the cuda backend broadcasts up to " +
                         std::to_string(kMaxOperands) +
                         " operands of rank <= " + std::to_string(kMaxRank));
  }
  b.rank = std::max<int>(1, int(out.size()));
  b.operands = int(spec.inputs.size());
  b.dims[0] = 1;
  for (size_t d = 0; d < out.size(); ++d)
    b.dims[d] = out[d];
  for (size_t j = 0; j < spec.inputs.size(); ++j)
    if (!broadcastStrides(spec.inputs[j].shape, out, b.strides[j])) {
      return nodeError(spec, "operand " + std::to_string(j) + " of shape " +
                                 shapeStr(spec.inputs[j].shape) +
                                 " does not broadcast to " + shapeStr(out));
    }
  return Status::success();
}

static KernelOr createNary(CudaBackend &be, const OpSpec &spec) {
  bool sum = spec.opType == "Sum";
  OASR_RETURN_IF_ERROR(
      checkSpec(spec, sum ? 1 : 2, sum ? kMaxOperands : 2, 1, 1, {}, {}));
  // bf16 operands and result, alone or mixed with f32 (arithmetic in f32):
  // checked as f32.
  OpSpec checked = spec.opType == "Pow" ? spec : bf16AsF32(spec);
  OASR_RETURN_IF_ERROR(checkBroadcastOperands(checked));
  DType t = spec.outputs[0].dtype;
  Broadcast b;
  OASR_RETURN_IF_ERROR(makeBroadcast(spec, spec.outputs[0].shape, b));
  for (size_t j = 0; j < spec.inputs.size(); ++j)
    b.bf16[j] = spec.inputs[j].dtype == DType::BF16;
  BinOp op = binaryOpOf(spec).value_or(BinOp::Add); // Sum
  int64_t n = spec.outputs[0].numel();
  return lambda(
      be, spec,
      [b, op, t, n](cudaStream_t s, const auto &in, const auto &out) mutable {
        for (size_t j = 0; j < in.size(); ++j)
          b.x[j] = in[j].data;
        launchNary(b, op, t, out[0].data, n, s);
      });
}

static KernelOr createNeg(CudaBackend &be, const OpSpec &spec) {
  DType t = spec.outputs[0].dtype;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 1, 1, 1, {}, {}));
  OASR_RETURN_IF_ERROR(checkDType(spec, true, 0, t));
  if (!isFloatOrInt(t) || spec.inputs[0].shape != spec.outputs[0].shape) {
    return nodeError(spec, "expects X and Y of one shape, f32/i64/i32");
  }
  int64_t n = spec.outputs[0].numel();
  return lambda(be, spec,
                [t, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchNeg(t, in[0].data, out[0].data, n, s);
                });
}

/// x of shape `xs` summed onto `kept` (same rank after aligning right, each
/// dimension kept whole or reduced to 1).
bool makeReduction(const std::vector<int64_t> &xs, std::vector<int64_t> kept,
                   Reduction &r) {
  if (kept.size() > xs.size() || xs.size() > size_t(kMaxRank))
    return false;
  kept.insert(kept.begin(), xs.size() - kept.size(), 1);
  std::vector<int64_t> st = rowMajorStrides(xs);
  for (size_t d = 0; d < xs.size(); ++d) {
    if (kept[d] == xs[d] && xs[d] != 1) {
      r.outDims[r.outRank] = xs[d];
      r.outStrides[r.outRank++] = st[d];
    } else if (kept[d] == 1) {
      if (xs[d] == 1)
        continue;
      r.redDims[r.redRank] = xs[d];
      r.redStrides[r.redRank++] = st[d];
      r.inner *= xs[d];
    } else {
      return false;
    }
  }
  return true;
}

/// ReduceMean / ReduceSum {axes, keepdims} (axes as an attribute, or
/// keepdims = 1 with the result's 1s, or all axes).
static KernelOr createReduce(CudaBackend &be, const OpSpec &spec) {
  std::vector<int64_t> kept;
  float scale = 1.0f;
  OASR_RETURN_IF_ERROR(checkSpec(spec, 1, 2, 1, 1, {0}, {0}));
  OASR_RETURN_IF_ERROR(reduceGeom(spec, kept, scale));
  const auto &xs = spec.inputs[0].shape;
  Reduction r;
  if (!makeReduction(xs, kept, r)) {
    return nodeError(spec, "result " + shapeStr(spec.outputs[0].shape) +
                               " does not match the reduction of " +
                               shapeStr(xs));
  }
  int64_t keptNumel = spec.outputs[0].numel();
  if (spec.opType == "ReduceProd")
    return lambda(
        be, spec,
        [r, keptNumel](cudaStream_t s, const auto &in, const auto &out) {
          launchReduceProd(r, in[0].template as<float>(),
                           out[0].template as<float>(), keptNumel, s);
        });
  if (spec.opType == "ReduceMax" || spec.opType == "ReduceMin") {
    bool max = spec.opType == "ReduceMax";
    return lambda(
        be, spec,
        [r, max, keptNumel](cudaStream_t s, const auto &in, const auto &out) {
          launchReduceExtreme(r, in[0].template as<float>(),
                              out[0].template as<float>(), keptNumel, max, s);
        });
  }
  return lambda(
      be, spec,
      [r, scale, keptNumel](cudaStream_t s, const auto &in, const auto &out) {
        launchReduce(r, in[0].template as<float>(), scale,
                     out[0].template as<float>(), keptNumel, s);
      });
}

/// ReduceSumTo: dY summed over the axes along which the result broadcasts
/// (the reduction machinery of ReduceSum, one block per result element).
static KernelOr createReduceSumTo(CudaBackend &be, const OpSpec &spec) {
  OASR_RETURN_IF_ERROR(checkSpec(bf16AsF32(spec), 1, 1, 1, 1, {0}, {0}));
  Reduction r;
  if (!makeReduction(spec.inputs[0].shape, spec.outputs[0].shape, r)) {
    return nodeError(spec, shapeStr(spec.outputs[0].shape) +
                               " does not broadcast to " +
                               shapeStr(spec.inputs[0].shape));
  }
  int64_t n = spec.outputs[0].numel();
  // Summed over leading dimensions only (a bias's gradient): columns of a
  // [rows, cols] matrix, read row by row.
  const auto &xs = spec.inputs[0].shape;
  std::vector<int64_t> kept = spec.outputs[0].shape;
  kept.insert(kept.begin(), xs.size() - kept.size(), 1);
  size_t lead = 0;
  while (lead < xs.size() && kept[lead] == 1 && xs[lead] != 1)
    ++lead;
  bool columns = lead > 0 &&
                 std::equal(kept.begin() + lead, kept.end(), xs.begin() + lead);
  if (columns) {
    int64_t rows = spec.inputs[0].numel() / std::max<int64_t>(n, 1);
    return lambda(be, spec,
                  [rows, n](cudaStream_t s, const auto &in, const auto &out) {
                    launchSumRows(rows, n, floatAt(in, 0), floatAt(out, 0), s);
                  });
  }
  return lambda(be, spec,
                [r, n](cudaStream_t s, const auto &in, const auto &out) {
                  launchReduce(r, floatAt(in, 0), 1.0f, floatAt(out, 0), n, s);
                });
}

void registerArithmeticKernels(FactoryRegistry &r) {
  for (const NamedOp<BinOp> &op : kBinOps)
    r[op.name] = createNary;
  r["Sum"] = createNary;
  r["Neg"] = createNeg;
  r["ReduceMean"] = createReduce;
  r["ReduceSum"] = createReduce;
  r["ReduceMax"] = createReduce;
  r["ReduceMin"] = createReduce;
  r["ReduceProd"] = createReduce;
  r["ReduceSumTo"] = createReduceSumTo;
}

} // namespace oasr::rt::cuda
