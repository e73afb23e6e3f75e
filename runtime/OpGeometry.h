//===- OpGeometry.h - Op validation and geometry for backends ---*- C++ -*-===//
//
// Private to runtime/: what the kernel backends (runtime/cpu, runtime/cuda)
// check and derive from an OpSpec before they build a kernel -- error
// messages naming the node, operand counts and element types, numpy
// broadcasting, convolution and pooling windows, softmax cross-entropy,
// Gemm, reduction and Constant operands. Plain C++ (no MLIR, no oneDNN, no
// CUDA runtime) so both backends, CUDA sources included, share one
// definition of each op's rules and messages; what they compute per element
// is in KernelMath.h. Compiled once, into OASRKernelInterface
// (runtime/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_OPGEOMETRY_H
#define OASR_RUNTIME_OPGEOMETRY_H

#include "KernelMath.h"
#include "oasr/Runtime/Kernel.h"
#include "oasr/Runtime/Status.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// Messages and generic checks
//===----------------------------------------------------------------------===//

/// The failure "node 'name' (Op): msg".
Status nodeError(const OpSpec &spec, const std::string &msg);
/// "[2, 3, 4]".
std::string shapeStr(const std::vector<int64_t> &shape);
/// Checks the operand/result counts: a failure if not in [minIn, maxIn] /
/// [minOut, maxOut].
Status checkArity(const OpSpec &spec, size_t minIn, size_t maxIn, size_t minOut,
                  size_t maxOut);
/// Checks that operand (`isInput`) or result `idx` has element type `t`.
Status checkDType(const OpSpec &spec, bool isInput, size_t idx, DType t);
/// Checks that every operand and result listed is f32.
Status checkAllF32(const OpSpec &spec, const std::vector<size_t> &inputs,
                   const std::vector<size_t> &outputs);
/// The `axis` attribute (default `dflt`) of a node on a rank-`rank` tensor,
/// negative values counted from the end; out of range is an error.
Status normAxis(const OpSpec &spec, int64_t rank, int64_t dflt, int64_t &axis);
/// The usual prologue of a kernel factory: checkArity, then checkAllF32 on
/// the operands `f32In` and results `f32Out` (indices past the counts are
/// skipped).
Status checkSpec(const OpSpec &spec, size_t minIn, size_t maxIn, size_t minOut,
                 size_t maxOut, const std::vector<size_t> &f32In,
                 const std::vector<size_t> &f32Out);
/// Checks that the first `count` operands have result 0's shape ("operands
/// and result must have one shape").
Status checkSameShapes(const OpSpec &spec, size_t count);
/// An elementwise op's prologue: exactly `arity` operands and one result,
/// all f32 and of one shape.
Status checkSameShapeF32(const OpSpec &spec, size_t arity);
/// True if result `idx` is read later (or the executor did not say).
inline bool outputUsed(const OpSpec &spec, size_t idx) {
  return idx >= spec.outputUsed.size() || spec.outputUsed[idx];
}
/// The element types of the arithmetic ops.
inline bool isFloatOrInt(DType t) {
  return t == DType::F32 || t == DType::I64 || t == DType::I32;
}

/// Looks `spec.opType` up in `registry` and builds its kernel with
/// `make(factory)`; an op type not there, or a factory that fails without
/// saying why, is an error naming the node and `backend`.
template <typename Registry, typename Make>
KernelOr createRegistered(const Registry &registry, const OpSpec &spec,
                          const char *backend, Make &&make) {
  auto it = registry.find(spec.opType);
  if (it == registry.end())
    return nodeError(spec, "op type '" + spec.opType +
                               "' is not supported by the " + backend +
                               " backend");
  KernelOr k = make(it->second);
  if (!k.ok() && k.status().message().empty())
    return nodeError(spec, "kernel creation failed");
  return k;
}

/// The kernel of a node with bf16/f16 tensors (docs/precision.md), one rule
/// for every backend: `make(spec)` builds it as it is when `native` (the
/// backend's kernel reads and writes 16-bit tensors; its factory refuses a
/// mix it cannot run); otherwise, or when refused, `make` builds the node's
/// f32 form and `wrap(inner)` puts that kernel between widening and
/// narrowing conversions. When both fail, the native attempt's error.
template <typename Make, typename Wrap>
KernelOr createLowPrecisionKernel(const OpSpec &spec, bool native, Make &&make,
                                  Wrap &&wrap) {
  Status nativeStatus;
  if (native) {
    KernelOr k = make(spec);
    if (k.ok())
      return k;
    nativeStatus = k.status();
  }
  OpSpec wide = spec;
  for (auto *descs : {&wide.inputs, &wide.outputs})
    for (TensorDesc &d : *descs)
      if (isLowFloat(d.dtype))
        d.dtype = DType::F32;
  KernelOr inner = make(wide);
  if (!inner.ok())
    return nativeStatus.ok() ? inner.status() : nativeStatus;
  return wrap(std::move(*inner));
}

//===----------------------------------------------------------------------===//
// Shapes and broadcasting
//===----------------------------------------------------------------------===//

/// Row-major strides of `shape`.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);
/// The spatial dimensions of an [N, C, spatial...] shape.
std::vector<int64_t> spatialDims(const std::vector<int64_t> &shape);
/// True if `in` broadcasts to `out` (numpy rules, aligned right).
bool broadcastsTo(const std::vector<int64_t> &in,
                  const std::vector<int64_t> &out);
/// Add/Sub/Mul/Div/Pow/Sum: result f32/i64/i32, every operand of its element
/// type and broadcasting to its shape.
Status checkBroadcastOperands(const OpSpec &spec);
/// Copies and views (Reshape, Flatten, ...): the result has the operand's
/// element type and element count.
Status checkCopyShapes(const OpSpec &spec);

/// ReduceMean / ReduceSum {axes, keepdims}: `kept` is X's shape with the
/// reduced dimensions 1 (axes from the attribute, else -- keepdims = 1 --
/// from where the result has 1s, else all axes), checked against the result;
/// `scale` is 1 for ReduceSum and the mean's divisor for ReduceMean.
Status reduceGeom(const OpSpec &spec, std::vector<int64_t> &kept, float &scale);

/// Constant: its result's bytes from a flat number attribute (1 element
/// splatted).
Status constantBytes(const OpSpec &spec, std::vector<char> &bytes);

//===----------------------------------------------------------------------===//
// Windows: convolutions and pooling
//===----------------------------------------------------------------------===//

/// The resolved window of a convolution or pooling node.
struct Window {
  std::vector<int64_t> kernel, strides;
  std::vector<int64_t> dilations; ///< oneDNN form: ONNX dilation - 1
  std::vector<int64_t> padL, padR;
  /// The right padding grew beyond the attribute to honour ceil_mode.
  bool paddedForCeil = false;
};

/// Resolves kernel_shape/strides/dilations/pads/auto_pad of a window node
/// against its input (`in`) and result (`out`) spatial sizes; `kernel` is the
/// window size (weights' spatial shape or kernel_shape). With `allowCeil`, a
/// result one larger than floor division is accepted (ceil_mode) and the
/// right padding grows to cover it.
Status resolveWindow(const OpSpec &spec, const std::vector<int64_t> &in,
                     const std::vector<int64_t> &kernel,
                     const std::vector<int64_t> &out, bool allowCeil,
                     Window &w);

/// ConvTranspose's attributes both backends take: auto_pad NOTSET or VALID
/// (its SAME padding is defined on the result; give explicit pads) and
/// output_padding >= 0. The geometry is then convWindow's for the
/// convolution that maps the result back to the input with the same
/// weights (ONNX's ConvTranspose W [C, M/group, k...] is its [M', C'/group,
/// k...]).
Status checkConvTransposeAttrs(const OpSpec &spec);

/// Conv / ConvGrad: X [N, C, spatial...] (1-D to 3-D), W [M, C/group, k...],
/// Y [N, M, spatial...]; `group` and the window.
Status convWindow(const OpSpec &spec, const TensorDesc &x, const TensorDesc &w,
                  const TensorDesc &y, int64_t &group, Window &win);

/// A pool's kernel_shape attribute: present, one value per spatial
/// dimension.
Status poolKernelShape(const OpSpec &spec, size_t spatialRank,
                       std::vector<int64_t> &kernel);
/// AveragePool: dilations other than 1 are not supported.
Status checkAvgPoolDilations(const OpSpec &spec);
/// AveragePool: ceil_mode's extra padding cannot be counted.
Status checkAvgPoolCeil(const OpSpec &spec, bool paddedForCeil);

/// 1-D and 2-D pooling geometry as 2-D (a 1-D pool has ih = oh = kh = 1).
struct Pool2D {
  int64_t planes = 0, ih = 0, iw = 0, oh = 0, ow = 0, kh = 1, kw = 1, sh = 1,
          sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  bool countIncludePad = false;
  /// The right padding grew beyond the attribute to honour ceil_mode.
  bool paddedForCeil = false;
};
/// MaxPool / AveragePool on X [N, C, (H,) W] -> Y.
Status pool2DGeom(const OpSpec &spec, const TensorDesc &x, const TensorDesc &y,
                  Pool2D &g);

OASR_HOST_DEVICE inline bool isNaN(float v) {
#ifdef __CUDA_ARCH__
  return isnan(v);
#else
  return std::isnan(v);
#endif
}

/// The maximum of X's plane `xp` under result element (oy, ox) and its flat
/// index in the plane (the first maximum; a NaN wins and ends the search).
OASR_HOST_DEVICE inline void maxPoolAt(const Pool2D &p, const float *xp,
                                       int64_t oy, int64_t ox, float &best,
                                       int64_t &bestIdx) {
  best = -INFINITY;
  bestIdx = -1;
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    int64_t iy = oy * p.sh - p.ph + ky * p.dh;
    if (iy < 0 || iy >= p.ih)
      continue;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      int64_t ix = ox * p.sw - p.pw + kx * p.dw;
      if (ix < 0 || ix >= p.iw)
        continue;
      float v = xp[iy * p.iw + ix];
      bool nan = isNaN(v);
      if (v > best || bestIdx < 0 || nan) {
        best = v;
        bestIdx = iy * p.iw + ix;
        if (nan)
          return;
      }
    }
  }
}

/// MaxPoolGrad: dY and i64 Indices [N, C, ...], dX [N, C, ...]; the planes
/// and the elements of one plane of dX and of dY.
Status maxPoolGradGeom(const OpSpec &spec, int64_t &planes, int64_t &inPlane,
                       int64_t &outPlane);
/// GlobalAveragePool(Grad): X [N, C, ...] (rank <= maxRank) and
/// Y [N, C, 1, ...]; the planes and the elements of one plane of X.
Status globalPoolGeom(const OpSpec &spec, bool grad, size_t maxRank,
                      int64_t &planes, int64_t &size);

/// PadGrad {pads}: dY -> dX (rank <= maxRank), dX's start in dY negated.
Status padGradBegin(const OpSpec &spec, size_t maxRank,
                    std::vector<int64_t> &begin);

//===----------------------------------------------------------------------===//
// Gemm, softmax cross-entropy
//===----------------------------------------------------------------------===//

/// Y[M, N] = alpha op(A)[M, K] op(B)[K, N] (+ beta C).
struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  bool ta = false, tb = false;
  float alpha = 1, beta = 1;
};
Status gemmShape(const OpSpec &spec, const TensorDesc &a, const TensorDesc &b,
                 const TensorDesc &y, GemmShape &g);
/// GemmGrad: dY, A, B -> dA, dB[, dC]; dA and dB of A's and B's shapes.
Status gemmGradShape(const OpSpec &spec, GemmShape &g);
/// "C of shape [..] does not broadcast to [m, n]".
Status gemmBiasError(const OpSpec &spec, const TensorDesc &c, int64_t m,
                     int64_t n);

/// MatMul (numpy): A and B with 1-D operands promoted (A [1, K], B [K, 1])
/// and aligned to one rank, batch dimensions broadcast; Y's shape at that
/// rank.
Status matMulShapes(const OpSpec &spec, std::vector<int64_t> &a,
                    std::vector<int64_t> &b, std::vector<int64_t> &y);

/// An activation's two parameters as the kernels take them, with ONNX's
/// defaults: 'alpha' (LeakyRelu's slope; HardSigmoid's; Elu's, Selu's,
/// Celu's and ThresholdedRelu's alpha) and the second (HardSigmoid's beta,
/// Selu's gamma); ops without parameters ignore them.
std::pair<float, float> activationParams(const OpSpec &spec, UnaryOp op);

/// The broadcast arithmetic `spec` runs (kBinOps by name; Mod with fmod 1 is
/// Fmod); none for another op.
std::optional<BinOp> binaryOpOf(const OpSpec &spec);

enum class SceReduction : int { Mean, Sum, None };

/// Softmax cross-entropy over scores [N, C, D...] (d = product of the
/// trailing dims) with labels [N, D...].
struct SceGeom {
  int64_t n = 0, c = 0, d = 1;
  SceReduction reduction = SceReduction::Mean;
  bool hasIgnore = false;
  int64_t ignoreIndex = -100;
  bool labels64 = true; ///< labels are i64 (else i32)
  /// oasr's `label_smoothing` attribute in [0, 1) (sceLossAt).
  float labelSmoothing = 0;
};
/// SoftmaxCrossEntropyLoss (scores, labels -> loss[, log_prob]) or, with
/// `grad`, its gradient (dLoss, log_prob, labels -> dScores): the geometry,
/// the labels' type, the reduction and the loss's size.
Status sceGeom(const OpSpec &spec, bool grad, SceGeom &g);

enum class ScatterReduction : int { None, Add, Mul, Max, Min };

/// ScatterND(data, indices [..., k], updates) -> data with `count` slices
/// replaced (or reduced into): tuple t writes `slice` contiguous elements at
/// element offset sum_d indices[t, d] * strides[d] (negative indices count
/// from the end of dims[d]).
/// With `batchDims` b > 0 (GatherND's batch_dims; ScatterND's as
/// GatherND's gradient builds it), the first b dimensions of data and
/// indices are one batch: tuple t indexes batch t / perBatch, which starts
/// at element (t / perBatch) * batchStride.
struct ScatterNDGeom {
  int64_t count = 0, k = 0, slice = 1;
  int64_t dims[8] = {}, strides[8] = {};
  int64_t batchDims = 0, perBatch = 1, batchStride = 0;
  ScatterReduction reduction = ScatterReduction::None;
};
/// Validates ScatterND's operands (i64 indices, updates of shape
/// indices.shape[:-1] + data.shape[b + k:], the reduction attribute).
Status scatterNDGeom(const OpSpec &spec, ScatterNDGeom &g);
/// GatherND {batch_dims}: data, indices -> the slices the tuples name, of
/// shape indices.shape[:-1] + data.shape[b + k:].
Status gatherNDGeom(const OpSpec &spec, ScatterNDGeom &g);

/// The data offset of tuple `t` of a GatherND/ScatterND, or -1 when an
/// index is outside its dimension (negative ones count from its end); the
/// outside index in `bad`.
OASR_HOST_DEVICE inline int64_t ndTupleOffset(const ScatterNDGeom &g,
                                              const int64_t *idx, int64_t t,
                                              int64_t *bad = nullptr) {
  int64_t off = (t / g.perBatch) * g.batchStride;
  for (int64_t d = 0; d < g.k; ++d) {
    int64_t i = idx[t * g.k + d];
    int64_t j = i < 0 ? i + g.dims[d] : i;
    if (j < 0 || j >= g.dims[d]) {
      if (bad)
        *bad = i;
      return -1;
    }
    off += j * g.strides[d];
  }
  return off;
}

/// ArgMax / ArgMin {axis, keepdims, select_last_index}: X (f32) viewed as
/// [outer, n, inner] -> the i64 index of the extreme along n per (outer,
/// inner); a NaN is the extreme (torch.argmax).
struct ArgGeom {
  int64_t outer = 1, n = 1, inner = 1;
  bool max = true, last = false;
};
Status argGeom(const OpSpec &spec, ArgGeom &g);

/// TopK {axis, largest, sorted}: X (f32) viewed as [outer, n, inner] -> the
/// k largest (smallest) values along n and their i64 indices, best first,
/// ties by lower index; a NaN counts as larger than any number (torch.topk).
/// K must be a constant of the program, at most n.
struct TopKGeom {
  int64_t outer = 1, n = 1, inner = 1, k = 0;
  bool largest = true;
};
Status topKGeom(const OpSpec &spec, TopKGeom &g);

/// OneHot {axis}: indices (i64, i32 or f32), depth, values [off, on] -> the
/// result viewed as [outer, depth, inner], element (o, d, i) `on` where
/// indices[o, i] (negative ones plus depth) is d; an index outside
/// [-depth, depth) gives a line of `off`.
struct OneHotGeom {
  int64_t outer = 1, depth = 1, inner = 1;
  DType indexType = DType::I64;
};
Status oneHotGeom(const OpSpec &spec, OneHotGeom &g);

/// GatherElements (data, indices -> Y of indices' shape) and ScatterElements
/// (data, indices, updates -> Y of data's shape) along `axis`: element i of
/// indices (and of Y or updates) names the data element whose coordinates
/// are i's with the axis one replaced by the index (elementsOffset,
/// KernelMath.h). `indices` are i64 or i32; negative ones count from the
/// end of the axis.
struct ElementsGeom {
  int rank = 0, axis = 0;
  int64_t count = 0, axisDim = 1;
  int64_t idxDims[8] = {}, dataStrides[8] = {};
  bool i64 = true;
  bool add = false; ///< ScatterElements {reduction = "add"}
};
/// Validates GatherElements' or ScatterElements' operands and the
/// reduction (none or add), and constant indices against the axis.
Status elementsGeom(const OpSpec &spec, ElementsGeom &g);

/// CumSum (X, axis -> Y of X's shape) over lines of `n` elements at stride
/// `inner`: X viewed as [outer, n, inner]; the axis must be a constant of
/// the program.
struct CumSumGeom {
  int64_t outer = 1, n = 1, inner = 1;
  bool exclusive = false, reverse = false;
};
Status cumSumGeom(const OpSpec &spec, CumSumGeom &g);

/// For one spatial axis: each result index reads `taps` source indices with
/// weights (1 tap for nearest, 2 for linear).
struct ResizeAxis {
  int taps = 1;
  std::vector<int64_t> index; ///< out * taps
  std::vector<float> weight;  ///< out * taps
};

/// Resize (X[, roi[, scales[, sizes]]] -> Y) and ResizeGrad (dY[, roi[,
/// scales[, sizes]]] -> dX) over the last two axes of an [N, C, H, W] (or
/// [N, C, W]) tensor: `planes` = N * C planes of the small side's inH x inW,
/// sampled along each axis by `h` and `w` (the large side's length is
/// index.size() / taps). Built from the static shapes, and the scales when
/// the node has them as a constant attribute list (else the shapes' ratio).
struct ResizeGeom {
  bool grad = false;
  ResizeAxis h, w;
  int64_t planes = 0, inH = 1, inW = 1;
};
Status resizeGeom(const OpSpec &spec, ResizeGeom &g);

/// Validation both backends give Dropout (X[, ratio[, training_mode]] ->
/// Y[, mask]), DropoutGrad (dY, mask[, ratio[, training_mode]] -> dX) and
/// Slice (data, starts, ends[, axes[, steps]] or opset 1's attributes -> Y).
Status checkDropout(const OpSpec &spec);

/// FusedAttention(Q, KT, V[, mask]) {scale} -> Y and FusedAttentionGrad(dY,
/// Q, KT, V[, mask]) {scale} -> dQ, dKT, dV: per batch index b, Y[b] =
/// softmax(scale * Q[b] KT[b], masked to -inf where mask) V[b].
struct AttentionGeom {
  int64_t batch = 1, m = 0, n = 0, d = 0, e = 0;
  float scale = 1;
  /// The float tensors' type (f32 or bf16), one for all of them.
  DType dtype = DType::F32;
  bool hasMask = false;
  /// The mask's element offset of each batch index's [M, N] plane, and its
  /// row and column strides (0 where it broadcasts).
  std::vector<int64_t> maskOffset;
  int64_t maskRowStride = 0, maskColStride = 0;
};
/// Validates a FusedAttention(Grad) node: Q [..., M, D], KT [..., D, N],
/// V [..., N, E] of one batch shape and float type, a bool mask that
/// broadcasts onto [..., M, N], results of the operands' shapes, a finite
/// scale.
Status attentionGeom(const OpSpec &spec, bool grad, AttentionGeom &g);
Status checkDropoutGrad(const OpSpec &spec);
Status checkSlice(const OpSpec &spec);

/// Slice's per-dimension start and step from ONNX starts/ends/axes/steps
/// (negative values and clamping as ONNX says); a failure saying why when
/// they are malformed or do not give `outShape`. Empty axes/steps: the
/// defaults.
Status resolveSlice(const std::vector<int64_t> &inShape,
                    const std::vector<int64_t> &outShape,
                    const std::vector<int64_t> &starts,
                    const std::vector<int64_t> &ends, std::vector<int64_t> axes,
                    std::vector<int64_t> steps, std::vector<int64_t> &start,
                    std::vector<int64_t> &step);

/// resolveSlice for a Slice node at run time: starts, ends, axes and steps
/// from its operands 1..4 (`ints(i)`: operand i's elements, empty when it
/// is absent) or, with fewer than 3 operands, from opset 1's attributes.
Status
resolveSliceAtRun(const std::vector<int64_t> &inShape,
                  const std::vector<int64_t> &outShape, size_t operands,
                  const AttrMap &attrs,
                  const std::function<std::vector<int64_t>(size_t)> &ints,
                  std::vector<int64_t> &start, std::vector<int64_t> &step);

/// Gelu's and GeluGrad's 'approximate' ("none" or "tanh"): whether it is
/// the tanh form; a failure for anything else.
Status geluIsTanh(const OpSpec &spec, bool &tanh);

} // namespace oasr::rt

#endif // OASR_RUNTIME_OPGEOMETRY_H
