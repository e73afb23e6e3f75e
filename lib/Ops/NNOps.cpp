//===- NNOps.cpp - Convolutions, pooling, normalization, GEMM, losses -----===//
//
// Registry entries of the layers: Conv/ConvTranspose, pooling,
// Batch/Instance/LayerNormalization, Gemm/MatMul, Dropout, Softmax and the
// softmax cross-entropy loss, recurrent layers (LSTM/GRU) and Resize, with
// their training forms (extra forward results backward reuses), gradient
// rules and the gradient ops they emit (ONNX Runtime's vocabulary).
//
//===----------------------------------------------------------------------===//

#include "RuleSupport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ::oasr::ops;

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

static bool shapeDropout(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  c.out[0] = *c.input(0);
  if (c.numOutputs() > 1) {
    c.out[1] = *c.input(0);
    c.out[1].elemType = int32_t(DataType::Bool);
  }
  return true;
}

static bool shapeWindow(ShapeContext &c) {
  StringRef op = c.op;
  bool isConv = op == "Conv" || op == "ConvTranspose";
  if (!c.needInputs(isConv ? 2 : 1))
    return false;
  const TensorFacts &x = *c.input(0);
  size_t spatial = x.dims.size() >= 2 ? x.dims.size() - 2 : 0;
  SmallVector<int64_t> kernel;
  if (auto k = c.attrs.findInts("kernel_shape"))
    kernel = *k;
  else if (isConv && c.input(1)->dims.size() == spatial + 2)
    kernel.assign(c.input(1)->dims.begin() + 2, c.input(1)->dims.end());
  if (kernel.size() != spatial) {
    c.why = "kernel_shape does not match the input rank";
    return false;
  }
  SmallVector<int64_t> strides =
      c.attrs.findInts("strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> dilations =
      c.attrs.findInts("dilations").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      c.attrs.findInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial) {
    c.why = "strides/dilations/pads do not match the input rank";
    return false;
  }
  // Windows are divided by their strides; ONNX wants both positive.
  if (llvm::any_of(strides, [](int64_t v) { return v <= 0; }) ||
      llvm::any_of(dilations, [](int64_t v) { return v <= 0; })) {
    c.why = "strides and dilations must be positive";
    return false;
  }
  std::string autoPad = c.attrs.getString("auto_pad", "NOTSET");
  bool ceilMode = c.attrs.getInt("ceil_mode", 0) != 0;
  TensorFacts y = TensorFacts::get(x.elemType, {x.dims[0]});
  int64_t channels = x.dims[1];
  if (op == "Conv")
    channels = c.input(1)->dims[0];
  if (op == "ConvTranspose")
    channels = c.input(1)->dims[1] * c.attrs.getInt("group", 1);
  y.dims.push_back(channels);
  auto outputShape = c.attrs.findInts("output_shape");
  auto outputPadding = c.attrs.findInts("output_padding");
  if (outputShape && op == "ConvTranspose") {
    // The spatial sizes; some exporters (and ONNX Runtime) also accept
    // the whole shape, N and C first.
    if (outputShape->size() == spatial + 2)
      outputShape->erase(outputShape->begin(), outputShape->begin() + 2);
    if (outputShape->size() != spatial) {
      c.why = llvm::formatv("output_shape has {0} value(s); expected {1} (the "
                            "spatial sizes) or {2} (with N and C)",
                            outputShape->size(), spatial, spatial + 2);
      return false;
    }
  }
  for (size_t i = 0; i < spatial; ++i) {
    int64_t d = x.dims[i + 2], o;
    if (op == "ConvTranspose") {
      if (outputShape) {
        o = (*outputShape)[i];
      } else {
        int64_t outPad = outputPadding && outputPadding->size() == spatial
                             ? (*outputPadding)[i]
                             : 0;
        int64_t span = (kernel[i] - 1) * dilations[i] + 1;
        o = strides[i] * (d - 1) + outPad + span;
        if (autoPad == "NOTSET" || autoPad.empty())
          o -= pads[i] + pads[i + spatial];
        else if (autoPad != "VALID")
          o = d * strides[i];
      }
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      o = d < 0 ? -1 : (d + strides[i] - 1) / strides[i];
    } else if (autoPad == "VALID") {
      o = windowOutput(d, kernel[i], strides[i], dilations[i], 0, 0, ceilMode);
    } else {
      o = windowOutput(d, kernel[i], strides[i], dilations[i], pads[i],
                       pads[i + spatial], ceilMode);
    }
    y.dims.push_back(o);
  }
  c.out[0] = y;
  if (c.numOutputs() > 1) {
    c.out[1] = y;
    c.out[1].elemType = int32_t(DataType::Int64);
  }
  return true;
}

static bool shapeGlobalPool(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  TensorFacts y = *c.input(0);
  for (size_t i = 2; i < y.dims.size(); ++i)
    y.dims[i] = 1;
  return c.setAll(y);
}

static bool shapeNormalization(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  c.out[0] = *c.input(0);
  for (size_t i = 1; i < c.numOutputs(); ++i)
    c.out[i] = TensorFacts::get(c.input(0)->elemType, c.input(1)->dims);
  return true;
}

static bool shapeLayerNorm(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  c.out[0] = *c.input(0);
  int64_t rank = c.input(0)->dims.size();
  int64_t axis = c.attrs.getInt("axis", -1);
  if (!checkAxis(c, axis, rank))
    return false;
  TensorFacts stats = *c.input(0);
  stats.elemType = int32_t(c.attrs.getInt("stash_type", 1));
  for (int64_t i = axis; i < rank; ++i)
    stats.dims[i] = 1;
  for (size_t i = 1; i < c.numOutputs(); ++i)
    c.out[i] = stats;
  return true;
}

//===- Gradient ops as ONNX Runtime training graphs carry them ------------===//
// Autodiff types the results of the gradient ops it emits itself; an
// imported ORT training model needs rules (docs/importer.md, "ONNX Runtime
// training artifacts").

/// ConvGrad(dY, X, W) -> dX, dW[, dB]: X's, W's and [C_out].
static bool shapeConvGrad(ShapeContext &c) {
  if (!c.needInputs(3))
    return false;
  const TensorFacts &x = *c.input(1), &w = *c.input(2);
  if (w.dims.empty())
    return c.fail("ConvGrad's W has rank 0");
  c.out[0] = x;
  if (c.numOutputs() > 1)
    c.out[1] = w;
  if (c.numOutputs() > 2)
    c.out[2] = TensorFacts::get(w.elemType, {w.dims[0]});
  return true;
}

/// BatchNormalizationGrad / LayerNormalizationGrad(dY, X, scale, ...) ->
/// dX, dScale[, dBias]: X's, then scale's.
static bool shapeNormGrad(ShapeContext &c) {
  if (!c.needInputs(3))
    return false;
  c.out[0] = *c.input(1);
  for (size_t i = 1; i < c.numOutputs(); ++i)
    c.out[i] = *c.input(2);
  return true;
}

/// SoftmaxCrossEntropyLossGrad(dLoss, log_prob, labels) -> dScores.
static bool shapeLikeInput1(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  return c.setAll(*c.input(1));
}

/// FusedAttention(Q, KT, V[, mask]) -> Y: Q [..., M, D], KT [..., D, N],
/// V [..., N, E] with one batch shape; Y is [..., M, E].
static bool shapeFusedAttention(ShapeContext &c) {
  if (!c.needInputs(3))
    return false;
  const TensorFacts &q = *c.input(0), &v = *c.input(2);
  if (q.dims.size() < 2 || v.dims.size() != q.dims.size())
    return c.fail("FusedAttention needs Q and V of one rank >= 2");
  TensorFacts y = q;
  y.dims.back() = v.dims.back();
  c.out[0] = y;
  return true;
}

/// FusedAttentionGrad(dY, Q, KT, V[, mask]) -> dQ, dKT, dV.
static bool shapeFusedAttentionGrad(ShapeContext &c) {
  if (!c.needInputs(4))
    return false;
  for (size_t i = 0; i < 3 && i < c.numOutputs(); ++i)
    c.out[i] = *c.input(i + 1);
  return true;
}

/// MaxPoolGrad(dY, Indices) / AveragePoolGrad(dY) -> dX: X's shape cannot be
/// recovered from dY; the ORT importer passes the forward X as one more
/// operand while shapes are inferred (and drops it afterwards).
template <size_t Operands> static bool shapePoolGrad(ShapeContext &c) {
  if (!c.present(Operands))
    return c.fail("the pooling gradient's result shape needs the forward "
                  "input, which the node does not name");
  if (!c.needInputs(Operands + 1))
    return false;
  return c.setAll(*c.input(Operands));
}

/// com.microsoft FusedMatMul(A, B) {transA, transB, transBatchA = 0,
/// transBatchB = 0, alpha}: MatMul of A and B with their last two axes
/// swapped where asked.
static bool shapeFusedMatMul(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  if (c.attrs.getInt("transBatchA", 0) || c.attrs.getInt("transBatchB", 0))
    return c.fail("FusedMatMul with transBatchA/transBatchB is not supported");
  TensorFacts a = *c.input(0), b = *c.input(1);
  if (a.dims.size() < 2 || b.dims.size() < 2)
    return c.fail("FusedMatMul needs operands of rank >= 2");
  if (c.attrs.getInt("transA", 0))
    std::swap(a.dims[a.dims.size() - 1], a.dims[a.dims.size() - 2]);
  if (c.attrs.getInt("transB", 0))
    std::swap(b.dims[b.dims.size() - 1], b.dims[b.dims.size() - 2]);
  if (a.dims.back() != b.dims[b.dims.size() - 2])
    return c.fail("FusedMatMul: inner dimensions differ");
  TensorFacts lead = a, leadB = b;
  lead.dims.pop_back();
  lead.dims.pop_back();
  leadB.dims.pop_back();
  leadB.dims.pop_back();
  SmallVector<int64_t> batch;
  if (!broadcast({&lead, &leadB}, batch))
    return c.fail("FusedMatMul: batch dimensions do not broadcast");
  batch.push_back(a.dims[a.dims.size() - 2]);
  batch.push_back(b.dims.back());
  return c.setAll(TensorFacts::get(a.elemType, batch));
}

static bool shapeGemm(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  const TensorFacts &a = *c.input(0), &b = *c.input(1);
  if (a.dims.size() != 2 || b.dims.size() != 2) {
    c.why = "Gemm inputs must be 2-D";
    return false;
  }
  int64_t m = c.attrs.getInt("transA", 0) ? a.dims[1] : a.dims[0];
  int64_t n = c.attrs.getInt("transB", 0) ? b.dims[0] : b.dims[1];
  return c.setAll(TensorFacts::get(a.elemType, {m, n}));
}

static bool shapeMatMul(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  TensorFacts a = *c.input(0), b = *c.input(1);
  if (a.dims.empty() || b.dims.empty()) {
    c.why = "MatMul of a scalar";
    return false;
  }
  bool aVec = a.dims.size() == 1, bVec = b.dims.size() == 1;
  if (aVec)
    a.dims.insert(a.dims.begin(), 1);
  if (bVec)
    b.dims.push_back(1);
  int64_t ka = a.dims.back(), kb = b.dims[b.dims.size() - 2];
  if (ka >= 0 && kb >= 0 && ka != kb) {
    c.why = llvm::formatv("inner dimensions differ ({0} vs {1})", ka, kb);
    return false;
  }
  TensorFacts batchA = TensorFacts::get(0, llvm::ArrayRef(a.dims).drop_back(2));
  TensorFacts batchB = TensorFacts::get(0, llvm::ArrayRef(b.dims).drop_back(2));
  TensorFacts y;
  y.ranked = true;
  y.elemType = a.elemType;
  const TensorFacts *batches[] = {&batchA, &batchB};
  if (!broadcast(batches, y.dims)) {
    c.why = "batch dimensions do not broadcast";
    return false;
  }
  if (!aVec)
    y.dims.push_back(a.dims[a.dims.size() - 2]);
  if (!bVec)
    y.dims.push_back(b.dims.back());
  return c.setAll(y);
}

//===----------------------------------------------------------------------===//
// Training forms
//===----------------------------------------------------------------------===//

static LogicalResult formBatchNorm(NodeOp node) {
  OpBuilder b(node);
  if (node->getNumOperands() != 5)
    return node.emitError("'BatchNormalization' node \"")
           << mlir::oasr::nodeName(node.getLoc()).value_or("")
           << "\" needs 5 operands (X, scale, B, input_mean, input_var), got "
           << node->getNumOperands();
  Type x = node->getOperand(0).getType();
  Type stat = node->getOperand(3).getType();
  rebuildNode(node, {x, stat, stat, stat, stat},
              SmallVector<Value>(node->getOperands()),
              {b.getNamedAttr("training_mode", b.getI64IntegerAttr(1))});
  return success();
}

static LogicalResult formMaxPool(NodeOp node) {
  if (node->getNumResults() != 1)
    return success();
  OpBuilder b(node);
  Type y = node->getResult(0).getType();
  rebuildNode(node, {y, withElementType(y, b.getI64Type())},
              SmallVector<Value>(node->getOperands()));
  return success();
}

/// GlobalMaxPool as MaxPool over the whole spatial extent, in training form
/// (with the indices its gradient scatters to).
static LogicalResult formGlobalMaxPool(NodeOp node) {
  auto xt = cast<RankedTensorType>(node->getOperand(0).getType());
  if (xt.getRank() < 3)
    return node.emitError("'GlobalMaxPool' node \"")
           << mlir::oasr::nodeName(node.getLoc()).value_or("")
           << "\" needs X of rank 3 or more";
  OpBuilder b(node);
  NodeBuilder nb{b};
  Type y = node->getResult(0).getType();
  SmallVector<int64_t> window(xt.getShape().drop_front(2));
  NodeOp pool =
      nb.node(node.getLoc(), "MaxPool", {y, withElementType(y, b.getI64Type())},
              {node->getOperand(0)},
              {b.getNamedAttr("kernel_shape", b.getI64ArrayAttr(window))});
  return replaceBy(node, pool->getResult(0));
}

static LogicalResult formDropout(NodeOp node) {
  OpBuilder b(node);
  NodeBuilder nb{b};
  Location loc = node.getLoc();
  Value x = node->getOperand(0);
  Value ratio = node->getNumOperands() > 1 ? node->getOperand(1) : Value();
  // A ratio of 0 drops nothing (PyTorch's dropout returns its input then):
  // the node goes, unless something reads its mask.
  std::optional<double> known =
      ratio ? scalarOf(ratio)
            : std::optional<double>(floatAttr(node, "ratio").value_or(0.5));
  if (known && *known == 0.0 &&
      (node->getNumResults() < 2 || node->getResult(1).use_empty())) {
    node->getResult(0).replaceAllUsesWith(x);
    node->erase();
    return success();
  }
  if (!ratio) {
    double r = floatAttr(node, "ratio").value_or(0.5);
    ratio = nb.splat(loc, RankedTensorType::get({}, b.getF32Type()), r);
  }
  Value mode = nb.splat(loc, RankedTensorType::get({}, b.getI1Type()), 1.0);
  Type y = node->getResult(0).getType();
  rebuildNode(node, {y, withElementType(y, b.getI1Type())}, {x, ratio, mode});
  return success();
}

static LogicalResult formLayerNorm(NodeOp node) {
  if (node->getNumResults() != 1)
    return success();
  OpBuilder b(node);
  auto x = cast<RankedTensorType>(node->getOperand(0).getType());
  int64_t axis = intAttr(node, "axis", -1);
  if (axis < 0)
    axis += x.getRank();
  SmallVector<int64_t> statShape(x.getShape());
  for (int64_t i = axis; i < x.getRank(); ++i)
    statShape[i] = 1;
  auto stat = RankedTensorType::get(statShape, b.getF32Type());
  rebuildNode(node, {x, stat, stat}, SmallVector<Value>(node->getOperands()));
  return success();
}

/// Normalises x over its axes from `axis` on with LayerNormalization in
/// training form (formLayerNorm's results Y, Mean, InvStdDev; a constant
/// scale of ones), before `node`, whose location the new nodes keep.
static Value layerNormTraining(NodeOp node, Value x, int64_t axis,
                               double epsilon) {
  OpBuilder b(node);
  NodeBuilder nb{b};
  Location loc = node.getLoc();
  auto xt = cast<RankedTensorType>(x.getType());
  auto ones = RankedTensorType::get(xt.getShape().drop_front(axis),
                                    xt.getElementType());
  SmallVector<int64_t> statShape(xt.getShape());
  for (int64_t i = axis; i < xt.getRank(); ++i)
    statShape[i] = 1;
  auto stat = RankedTensorType::get(statShape, b.getF32Type());
  return nb
      .node(loc, "LayerNormalization", {xt, stat, stat},
            {x, nb.splat(loc, ones, 1.0)},
            {b.getNamedAttr("axis", b.getI64IntegerAttr(axis)),
             b.getNamedAttr("epsilon", b.getF32FloatAttr(epsilon))})
      ->getResult(0);
}

/// y * scale + bias with scale and bias [C] broadcast over axis 1 of y.
static Value affinePerChannel(NodeOp node, Value y, Value scale, Value bias) {
  OpBuilder b(node);
  NodeBuilder nb{b};
  auto yt = cast<RankedTensorType>(y.getType());
  SmallVector<int64_t> perChannel(yt.getRank() - 1, 1);
  perChannel[0] = yt.getDimSize(1);
  Value s = reshapeAt(node, scale, perChannel);
  Value sb = reshapeAt(node, bias, perChannel);
  Value scaled = nb.node(node.getLoc(), "Mul", {yt}, {y, s})->getResult(0);
  return nb.node(node.getLoc(), "Add", {yt}, {scaled, sb})->getResult(0);
}

/// InstanceNormalization (X [N, C, D...], scale [C], B [C]): each (n, c)
/// normalised over D..., as LayerNormalization over axes 2.. times scale
/// plus B per channel, which the gradient rules of those ops differentiate
/// (PyTorch exports GroupNorm at opset 17 through it).
static LogicalResult formInstanceNorm(NodeOp node) {
  auto xt = cast<RankedTensorType>(node->getOperand(0).getType());
  if (node->getNumOperands() != 3 || xt.getRank() < 3)
    return node.emitError("'InstanceNormalization' node \"")
           << mlir::oasr::nodeName(node.getLoc()).value_or("")
           << "\" needs X of rank 3 or more, scale and B";
  double eps = floatAttr(node, "epsilon").value_or(1e-5);
  Value y = layerNormTraining(node, node->getOperand(0), 2, eps);
  y = affinePerChannel(node, y, node->getOperand(1), node->getOperand(2));
  return replaceBy(node, y);
}

/// GroupNormalization (X [N, C, D...], scale, bias, num_groups): X as
/// [N, G, C/G * D...] normalised over its last axis, then scale and bias
/// per channel (opset 21) or per group (opset 18).
static LogicalResult formGroupNorm(NodeOp node) {
  auto xt = cast<RankedTensorType>(node->getOperand(0).getType());
  int64_t groups = intAttr(node, "num_groups", 0);
  std::string name = mlir::oasr::nodeName(node.getLoc()).value_or("");
  if (node->getNumOperands() != 3 || xt.getRank() < 3)
    return node.emitError("'GroupNormalization' node \"")
           << name << "\" needs X of rank 3 or more, scale and bias";
  int64_t c = xt.getDimSize(1);
  if (groups <= 0 || c % groups != 0)
    return node.emitError("'GroupNormalization' node \"")
           << name << "\": num_groups " << groups << " does not divide the "
           << c << " channels";
  double eps = floatAttr(node, "epsilon").value_or(1e-5);
  int64_t n = xt.getDimSize(0), rest = xt.getNumElements() / (n * groups);
  Value grouped = reshapeAt(node, node->getOperand(0), {n, groups, rest});
  Value y = layerNormTraining(node, grouped, 2, eps);
  auto scaleT = cast<RankedTensorType>(node->getOperand(1).getType());
  if (scaleT.getNumElements() == c) {
    y = reshapeAt(node, y, xt.getShape());
    y = affinePerChannel(node, y, node->getOperand(1), node->getOperand(2));
  } else if (scaleT.getNumElements() == groups) {
    // Per group: [N, G, rest] times scale [G, 1].
    y = affinePerChannel(node, y, node->getOperand(1), node->getOperand(2));
    y = reshapeAt(node, y, xt.getShape());
  } else {
    return node.emitError("'GroupNormalization' node \"")
           << name << "\": scale has " << scaleT.getNumElements()
           << " values; expected " << c << " (channels) or " << groups
           << " (groups)";
  }
  return replaceBy(node, y);
}

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

/// The string attribute `name` of `node` ("" when it has none).
static std::string equationOf(Operation *node) {
  if (auto a = node->getAttrOfType<StringAttr>("equation"))
    return a.str();
  return "";
}

namespace {
/// An Einsum equation over operand ranks: one label string per operand and
/// the output's, each ellipsis spelt out as labels of its own ('A', 'B',
/// ...; the equation's labels are lower and upper case letters, so the
/// ellipsis labels come from characters no equation uses: '0' on).
struct EinsumSpec {
  SmallVector<std::string> ins;
  std::string out;
};
} // namespace

/// Parses `equation` for operands of `ranks`; the error says what is wrong.
static std::optional<EinsumSpec>
parseEinsum(StringRef equation, ArrayRef<int64_t> ranks, std::string &why) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ')
      eq += ch;
  StringRef text(eq);
  auto [lhs, rhs] = text.split("->");
  bool implicit = !text.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ranks.size()) {
    why = llvm::formatv("{0} operand term(s) for {1} operand(s)", terms.size(),
                        ranks.size());
    return std::nullopt;
  }
  EinsumSpec spec;
  int64_t ellipsisRank = -1;
  auto expand = [&](StringRef term, int64_t rank, std::string &labels) -> bool {
    size_t dots = term.find("...");
    std::string letters =
        (term.substr(0, dots) +
         (dots == StringRef::npos ? StringRef() : term.substr(dots + 3)))
            .str();
    for (char ch : letters)
      if (!llvm::isAlpha(ch)) {
        why = llvm::formatv("'{0}' is not a label (letters and one '...')", ch);
        return false;
      }
    int64_t extra = rank - int64_t(letters.size());
    if (dots == StringRef::npos ? extra != 0 : extra < 0) {
      why = llvm::formatv("term '{0}' has {1} label(s) for an operand of rank "
                          "{2}",
                          term, letters.size(), rank);
      return false;
    }
    if (dots != StringRef::npos) {
      if (ellipsisRank >= 0 && ellipsisRank != extra) {
        why = "the '...' of the operands cover different ranks";
        return false;
      }
      ellipsisRank = std::max(ellipsisRank, extra);
    }
    std::string ell;
    for (int64_t k = 0; k < (dots == StringRef::npos ? 0 : extra); ++k)
      ell += char('0' + k);
    labels = dots == StringRef::npos
                 ? letters
                 : (term.substr(0, dots) + ell + term.substr(dots + 3)).str();
    return true;
  };
  for (auto [term, rank] : llvm::zip(terms, ranks)) {
    spec.ins.emplace_back();
    if (!expand(term, rank, spec.ins.back()))
      return std::nullopt;
    for (size_t i = 0; i < spec.ins.back().size(); ++i)
      if (spec.ins.back().find(spec.ins.back()[i], i + 1) !=
          std::string::npos) {
        why = llvm::formatv("label '{0}' repeats in one operand (diagonals "
                            "are not supported)",
                            spec.ins.back()[i]);
        return std::nullopt;
      }
  }
  if (implicit) {
    // The ellipsis first, then the labels that appear once, sorted.
    std::string once;
    for (char ch = 'A'; ch <= 'z'; ++ch) {
      int count = 0;
      for (const std::string &in : spec.ins)
        count += int(llvm::count(in, ch));
      if (count == 1 && llvm::isAlpha(ch))
        once += ch;
    }
    for (int64_t k = 0; k < std::max<int64_t>(ellipsisRank, 0); ++k)
      spec.out += char('0' + k);
    spec.out += once;
  } else {
    if (!expand(
            rhs,
            int64_t(rhs.size()) - (rhs.contains("...") ? 3 : 0) +
                (rhs.contains("...") ? std::max<int64_t>(ellipsisRank, 0) : 0),
            spec.out))
      return std::nullopt;
    for (char ch : spec.out)
      if (llvm::none_of(spec.ins, [&](const std::string &in) {
            return in.find(ch) != std::string::npos;
          })) {
        why = llvm::formatv("output label '{0}' is in no operand", ch);
        return std::nullopt;
      }
  }
  return spec;
}

/// Each label's size over the operands' dims; false (with `why`) when a
/// label has two sizes.
static bool einsumSizes(const EinsumSpec &spec,
                        ArrayRef<SmallVector<int64_t>> dims,
                        llvm::DenseMap<char, int64_t> &size, std::string &why) {
  for (auto [labels, d] : llvm::zip(spec.ins, dims))
    for (auto [ch, n] : llvm::zip(labels, d)) {
      auto [it, fresh] = size.try_emplace(ch, n);
      if (!fresh && it->second != n) {
        why = llvm::formatv("label '{0}' has sizes {1} and {2}", ch, it->second,
                            n);
        return false;
      }
    }
  return true;
}

static bool shapeEinsum(ShapeContext &c) {
  if (!c.needInputs(c.numInputs()))
    return false;
  SmallVector<int64_t> ranks;
  SmallVector<SmallVector<int64_t>> dims;
  for (unsigned i = 0; i < c.numInputs(); ++i) {
    const auto &d = c.input(i)->dims;
    ranks.push_back(int64_t(d.size()));
    dims.emplace_back(d.begin(), d.end());
  }
  std::string why;
  std::optional<EinsumSpec> spec =
      parseEinsum(c.attrs.getString("equation", ""), ranks, why);
  llvm::DenseMap<char, int64_t> size;
  if (!spec || !einsumSizes(*spec, dims, size, why))
    return c.fail("equation '" + c.attrs.getString("equation", "") +
                  "': " + why);
  SmallVector<int64_t> out;
  for (char ch : spec->out)
    out.push_back(size[ch]);
  c.out[0] = TensorFacts::get(c.input(0)->elemType, out);
  return true;
}

/// Einsum of one or two operands as the ops that differentiate it: labels
/// only one operand has and the output lacks are summed away (ReduceSum),
/// the rest transposed to [batch, kept, contracted] and [batch, contracted,
/// kept], multiplied as [B, M, K] x [B, K, N] (MatMul), and reshaped and
/// transposed to the output's order.
static LogicalResult formEinsum(NodeOp node) {
  std::string name = mlir::oasr::nodeName(node.getLoc()).value_or("");
  auto fail = [&](const Twine &why) {
    return node.emitError("'Einsum' node \"")
           << name << "\": equation '" << equationOf(node) << "': " << why;
  };
  unsigned n = node->getNumOperands();
  if (n < 1 || n > 2)
    return fail("only one or two operands are supported");
  SmallVector<int64_t> ranks;
  SmallVector<SmallVector<int64_t>> dims;
  for (Value v : node->getOperands()) {
    auto t = cast<RankedTensorType>(v.getType());
    ranks.push_back(t.getRank());
    dims.emplace_back(t.getShape());
  }
  std::string why;
  std::optional<EinsumSpec> spec = parseEinsum(equationOf(node), ranks, why);
  llvm::DenseMap<char, int64_t> size;
  if (!spec || !einsumSizes(*spec, dims, size, why))
    return fail(why);
  OpBuilder b(node);
  NodeBuilder nb{b};
  Location loc = node.getLoc();
  Type elem =
      cast<RankedTensorType>(node->getResult(0).getType()).getElementType();
  auto typeFor = [&](StringRef labels) {
    SmallVector<int64_t> shape;
    for (char ch : labels)
      shape.push_back(size[ch]);
    return RankedTensorType::get(shape, elem);
  };
  auto transposeTo = [&](Value v, StringRef from, StringRef to) -> Value {
    if (from == to)
      return v;
    SmallVector<int64_t> perm;
    for (char ch : to)
      perm.push_back(int64_t(from.find(ch)));
    return transposeAt(node, v, perm);
  };
  auto reshapeTo = [&](Value v, ArrayRef<int64_t> shape) {
    return reshapeAt(node, v, shape);
  };
  // Sum away what only this operand has and the output lacks.
  SmallVector<Value> operands(node->getOperands());
  SmallVector<std::string> labels(spec->ins);
  for (unsigned i = 0; i < n; ++i) {
    std::string kept;
    SmallVector<int64_t> axes;
    for (auto [k, ch] : llvm::enumerate(labels[i])) {
      bool elsewhere = spec->out.find(ch) != std::string::npos ||
                       (n == 2 && labels[1 - i].find(ch) != std::string::npos);
      if (elsewhere)
        kept += ch;
      else
        axes.push_back(int64_t(k));
    }
    if (axes.empty())
      continue;
    auto axesType =
        RankedTensorType::get({int64_t(axes.size())}, b.getI64Type());
    SmallVector<int64_t> keptDims(typeFor(labels[i]).getShape());
    for (int64_t a : axes)
      keptDims[size_t(a)] = 1;
    Value summed =
        nb.node(loc, "ReduceSum", {RankedTensorType::get(keptDims, elem)},
                {operands[i], nb.constant(loc, DenseElementsAttr::get(
                                                   axesType, ArrayRef(axes)))},
                {b.getNamedAttr("keepdims", b.getI64IntegerAttr(1))})
            ->getResult(0);
    operands[i] = reshapeTo(summed, typeFor(kept).getShape());
    labels[i] = kept;
  }
  Value y;
  std::string have;
  if (n == 1) {
    y = operands[0];
    have = labels[0];
  } else {
    std::string batch, left, right, contract;
    for (char ch : labels[0]) {
      bool inB = labels[1].find(ch) != std::string::npos;
      bool inOut = spec->out.find(ch) != std::string::npos;
      (inB ? (inOut ? batch : contract) : left) += ch;
    }
    for (char ch : labels[1])
      if (labels[0].find(ch) == std::string::npos)
        right += ch;
    auto prod = [&](StringRef ls) {
      int64_t p = 1;
      for (char ch : ls)
        p *= size[ch];
      return p;
    };
    int64_t bs = prod(batch), m = prod(left), k = prod(contract),
            nn = prod(right);
    Value a =
        reshapeTo(transposeTo(operands[0], labels[0], batch + left + contract),
                  {bs, m, k});
    Value c =
        reshapeTo(transposeTo(operands[1], labels[1], batch + contract + right),
                  {bs, k, nn});
    y = nb.node(loc, "MatMul", {RankedTensorType::get({bs, m, nn}, elem)},
                {a, c})
            ->getResult(0);
    have = batch + left + right;
    y = reshapeTo(y, typeFor(have).getShape());
  }
  y = transposeTo(y, have, spec->out);
  y = reshapeTo(
      y, cast<RankedTensorType>(node->getResult(0).getType()).getShape());
  return replaceBy(node, y);
}

static LogicalResult formSoftmaxCrossEntropy(NodeOp node) {
  if (node->getNumResults() != 1)
    return success();
  rebuildNode(node,
              {node->getResult(0).getType(), node->getOperand(0).getType()},
              SmallVector<Value>(node->getOperands()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

static LogicalResult gradConv(GradContext &c) {
  SmallVector<Type> types = {typeOf(c, 0), typeOf(c, 1)};
  if (c.fwd->getNumOperands() > 2)
    types.push_back(typeOf(c, 2));
  NodeOp g =
      c.node("ConvGrad", types, {c.dOut(), c.in(0), c.in(1)}, onnxAttrs(c.fwd));
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradBatchNorm(GradContext &c) {
  if (c.fwd->getNumResults() != 5)
    return c.fail("expected the training form with 5 results");
  double eps = floatAttr(c.fwd, "epsilon").value_or(1e-5);
  NodeOp g = c.node(
      "BatchNormalizationGrad", {typeOf(c, 0), typeOf(c, 1), typeOf(c, 2)},
      {c.dOut(), c.in(0), c.in(1), c.out(3), c.out(4)},
      {c.b().getNamedAttr("epsilon", c.b().getF32FloatAttr(eps))});
  c.dIns = {g->getResult(0), g->getResult(1), g->getResult(2), Value(),
            Value()};
  if (c.wants(3) || c.wants(4))
    return c.fail("gradients of the running statistics are not supported");
  return success();
}

static LogicalResult gradMaxPool(GradContext &c) {
  if (c.fwd->getNumResults() != 2)
    return c.fail("expected the training form with Indices");
  c.dIns = {c.node1("MaxPoolGrad", typeOf(c, 0), {c.dOut(), c.out(1)},
                    onnxAttrs(c.fwd))};
  return success();
}

static LogicalResult gradAveragePool(GradContext &c) {
  c.dIns = {
      c.node1("AveragePoolGrad", typeOf(c, 0), {c.dOut()}, onnxAttrs(c.fwd))};
  return success();
}

static LogicalResult gradGlobalAveragePool(GradContext &c) {
  c.dIns = {c.node1("GlobalAveragePoolGrad", typeOf(c, 0), {c.dOut()})};
  return success();
}

static LogicalResult gradGemm(GradContext &c) {
  SmallVector<Type> types = {typeOf(c, 0), typeOf(c, 1)};
  if (c.fwd->getNumOperands() > 2)
    types.push_back(typeOf(c, 2));
  SmallVector<NamedAttribute> attrs;
  for (StringRef name : {"transA", "transB", "alpha", "beta"})
    if (Attribute a = c.fwd->getAttr(name))
      attrs.push_back(c.b().getNamedAttr(name, a));
  NodeOp g = c.node("GemmGrad", types, {c.dOut(), c.in(0), c.in(1)}, attrs);
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradMatMul(GradContext &c) {
  auto a = cast<RankedTensorType>(typeOf(c, 0));
  auto bt = cast<RankedTensorType>(typeOf(c, 1));
  auto dy = cast<RankedTensorType>(c.out(0).getType());
  if (a.getRank() < 2 || bt.getRank() < 2)
    return c.fail("rank-1 operands are not supported");
  Value g = c.dOut();
  c.dIns.assign(2, Value());
  if (c.wants(0)) {
    // dA = dY · Bᵀ, summed over broadcast batch axes.
    SmallVector<int64_t> shape(dy.getShape());
    shape.back() = a.getShape().back();
    Value full = c.node1("MatMul", dy.clone(shape), {g, c.swapLast2(c.in(1))});
    c.dIns[0] = c.sumTo(full, a);
  }
  if (c.wants(1)) {
    if (bt.getRank() == 2 && a.getRank() > 2) {
      // The linear-layer case: dB = Aᵀ · dY over all leading axes at once.
      int64_t rows = a.getNumElements() / a.getShape().back();
      auto a2 = RankedTensorType::get({rows, a.getShape().back()},
                                      a.getElementType());
      auto dy2 = RankedTensorType::get({rows, dy.getShape().back()},
                                       dy.getElementType());
      c.dIns[1] =
          c.node1("MatMul", bt,
                  {c.swapLast2(c.reshape(c.in(0), a2)), c.reshape(g, dy2)});
    } else {
      SmallVector<int64_t> shape(dy.getShape());
      shape[shape.size() - 2] = a.getShape().back();
      Value full =
          c.node1("MatMul", dy.clone(shape), {c.swapLast2(c.in(0)), g});
      c.dIns[1] = c.sumTo(full, bt);
    }
  }
  return success();
}

static LogicalResult gradDropout(GradContext &c) {
  if (c.fwd->getNumResults() != 2)
    return c.fail("expected the training form with a mask");
  double ratio = scalarOf(c.in(1)).value_or(0.5);
  auto &b = c.b();
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("DropoutGrad", typeOf(c, 0), {c.dOut(), c.out(1)},
                      {b.getNamedAttr("ratio", b.getF32FloatAttr(ratio))});
  return success();
}

static LogicalResult gradSoftmaxCrossEntropy(GradContext &c) {
  if (c.fwd->getNumResults() != 2)
    return c.fail("expected the training form with log_prob");
  if (c.fwd->getNumOperands() > 2)
    return c.fail("class weights are not supported");
  c.dIns = {c.node1("SoftmaxCrossEntropyLossGrad", typeOf(c, 0),
                    {c.dOut(), c.out(1), c.in(1)}, onnxAttrs(c.fwd)),
            Value()};
  return success();
}

static LogicalResult gradLayerNorm(GradContext &c) {
  if (c.fwd->getNumResults() != 3)
    return c.fail("expected the training form with Mean and InvStdDev");
  SmallVector<Type> types = {typeOf(c, 0), typeOf(c, 1)};
  if (c.fwd->getNumOperands() > 2)
    types.push_back(typeOf(c, 2));
  NodeOp g = c.node("LayerNormalizationGrad", types,
                    {c.dOut(), c.in(0), c.in(1), c.out(1), c.out(2)},
                    onnxAttrs(c.fwd));
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradSoftmax(GradContext &c) {
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  int64_t dflt = c.opset >= 13 ? -1 : 1;
  int64_t axis = intAttr(c.fwd, "axis", dflt);
  if (axis < 0)
    axis += x.getRank();
  if (c.opset < 13 && axis != x.getRank() - 1)
    return c.fail("Softmax before opset 13 over several axes");
  auto &b = c.b();
  c.dIns = {c.node1("SoftmaxGrad", x, {c.dOut(), c.out(0)},
                    {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))})};
  return success();
}

/// FusedAttention: one FusedAttentionGrad recomputing the probabilities
/// from Q, KT, V and the mask (nothing else is saved); the mask has no
/// gradient.
static LogicalResult gradFusedAttention(GradContext &c) {
  SmallVector<Value> ins = {c.dOut(), c.in(0), c.in(1), c.in(2)};
  if (c.fwd->getNumOperands() > 3)
    ins.push_back(c.in(3));
  NodeOp g =
      c.node("FusedAttentionGrad", {typeOf(c, 0), typeOf(c, 1), typeOf(c, 2)},
             ins, onnxAttrs(c.fwd));
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  for (unsigned i = 0; i < 3; ++i)
    c.dIns[i] = g->getResult(i);
  return success();
}

static LogicalResult gradLogSoftmax(GradContext &c) {
  auto x = cast<RankedTensorType>(typeOf(c, 0));
  int64_t axis = intAttr(c.fwd, "axis", c.opset >= 13 ? -1 : 1);
  if (axis < 0)
    axis += x.getRank();
  if (c.opset < 13 && axis != x.getRank() - 1)
    return c.fail("LogSoftmax before opset 13 over several axes");
  auto &b = c.b();
  c.dIns = {c.node1("LogSoftmaxGrad", x, {c.dOut(), c.out(0)},
                    {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))})};
  return success();
}

static LogicalResult gradConvTranspose(GradContext &c) {
  SmallVector<Type> types = {typeOf(c, 0), typeOf(c, 1)};
  if (c.fwd->getNumOperands() > 2)
    types.push_back(typeOf(c, 2));
  NodeOp g = c.node("ConvTransposeGrad", types, {c.dOut(), c.in(0), c.in(1)},
                    onnxAttrs(c.fwd));
  c.dIns.assign(g->getResults().begin(), g->getResults().end());
  return success();
}

static LogicalResult gradResize(GradContext &c) {
  for (unsigned i = 1; i < c.fwd->getNumOperands(); ++i)
    if (c.wants(i))
      return c.fail("roi, scales and sizes cannot carry a gradient");
  SmallVector<Value> operands = {c.dOut()};
  for (unsigned i = 1; i < c.fwd->getNumOperands(); ++i)
    operands.push_back(c.in(i));
  SmallVector<NamedAttribute> attrs = onnxAttrs(c.fwd);
  if (Attribute absent = c.fwd->getAttr(mlir::oasr::kAbsentInputsAttr))
    attrs.push_back(c.b().getNamedAttr(mlir::oasr::kAbsentInputsAttr, absent));
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  c.dIns[0] = c.node1("ResizeGrad", typeOf(c, 0), operands, attrs);
  return success();
}

/// LSTM/GRU: <Op>Grad(X, W, R, B, initial_h[, initial_c], dY, dY_h[, dY_c])
/// -> (dX, dW, dR, dB, d_initial_h[, d_initial_c]); operands the forward
/// leaves out, and result gradients nobody sends back, are absent operands.
template <bool IsLSTM> static LogicalResult gradRecurrent(GradContext &c) {
  // Forward ONNX positions: X W R B sequence_lens initial_h [initial_c [P]].
  SmallVector<int64_t> positions = onnxPositions(c.fwd);
  unsigned numStates = IsLSTM ? 2 : 1;
  SmallVector<Value> byPos(5 + numStates);
  for (auto [i, pos] : llvm::enumerate(positions)) {
    if (pos >= int64_t(byPos.size()))
      return c.fail("peephole weights are not supported");
    byPos[pos] = c.in(i);
  }
  if (byPos[4])
    return c.fail("sequence_lens is not supported (all sequences have the "
                  "full length)");
  if (c.wants(4))
    return c.fail("sequence_lens cannot carry a gradient");
  // Grad operand list: X W R B h0 [c0] dY dY_h [dY_c].
  SmallVector<Value> operands;
  SmallVector<int64_t> absent;
  auto push = [&](Value v) {
    if (v)
      operands.push_back(v);
    else
      absent.push_back(operands.size() + absent.size());
  };
  for (unsigned p : {0u, 1u, 2u, 3u, 5u})
    push(byPos[p]);
  if (IsLSTM)
    push(byPos[6]);
  for (unsigned r = 0; r < 1 + numStates; ++r)
    push(r < c.fwd->getNumResults() && c.dOuts[r] ? c.dOuts[r] : Value());
  while (!absent.empty() &&
         absent.back() == int64_t(operands.size() + absent.size() - 1))
    absent.pop_back();
  // Results: dX dW dR dB dh0 [dc0] -- typed like the forward operands;
  // absent forward operands still get a typed result nobody uses, so the
  // positions stay fixed. B/h0/c0 shapes are derived when absent.
  auto w = cast<RankedTensorType>(byPos[1].getType());
  auto x = cast<RankedTensorType>(byPos[0].getType());
  int64_t dirs = w.getDimSize(0), gates = w.getDimSize(1);
  int64_t hidden = gates / (IsLSTM ? 4 : 3);
  Type f32 = x.getElementType();
  auto bType = RankedTensorType::get({dirs, 2 * gates}, f32);
  auto hType = RankedTensorType::get({dirs, x.getDimSize(1), hidden}, f32);
  SmallVector<Type> types = {x, w, byPos[2].getType(), bType, hType};
  if (IsLSTM)
    types.push_back(hType);
  SmallVector<NamedAttribute> attrs = onnxAttrs(c.fwd);
  if (!absent.empty())
    attrs.push_back(c.b().getNamedAttr(mlir::oasr::kAbsentInputsAttr,
                                       c.b().getDenseI64ArrayAttr(absent)));
  NodeOp g = c.node(IsLSTM ? "LSTMGrad" : "GRUGrad", types, operands, attrs);
  // Back to forward operand order.
  c.dIns.assign(c.fwd->getNumOperands(), Value());
  SmallVector<int64_t> resultOf = {0, 1, 2, 3, -1, 4, 5};
  for (auto [i, pos] : llvm::enumerate(positions))
    if (pos < int64_t(resultOf.size()) && resultOf[pos] >= 0 &&
        resultOf[pos] < int64_t(g->getNumResults()))
      c.dIns[i] = g->getResult(resultOf[pos]);
  return success();
}

//===----------------------------------------------------------------------===//
// Shape rules of the recurrent layers and Resize
//===----------------------------------------------------------------------===//

/// LSTM/GRU (layout 0): Y [T, D, B, H], Y_h and Y_c [D, B, H].
static bool shapeRecurrent(ShapeContext &c) {
  if (!c.needInputs(3))
    return false;
  const TensorFacts &x = *c.input(0), &w = *c.input(1);
  if (x.dims.size() != 3 || w.dims.size() != 3)
    return c.fail("X and W must be 3-D");
  if (c.attrs.getInt("layout", 0) != 0)
    return c.fail("layout=1 (batch first) is not supported");
  int64_t hidden = c.attrs.getInt("hidden_size", -1);
  if (hidden <= 0)
    return c.fail("hidden_size is missing");
  int64_t dirs = w.dims[0];
  for (size_t i = 0; i < c.numOutputs(); ++i)
    c.out[i] = i == 0 ? TensorFacts::get(x.elemType,
                                         {x.dims[0], dirs, x.dims[1], hidden})
                      : TensorFacts::get(x.elemType, {dirs, x.dims[1], hidden});
  return true;
}

/// Resize (opset 11+: X, roi, scales, sizes): sizes when given, else
/// floor(dim * scale).
static bool shapeResize(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  const TensorFacts &x = *c.input(0);
  TensorFacts y = x;
  if (const FoldedInts *sizes = c.getFolded(3)) {
    if (sizes->values.size() != x.dims.size())
      return c.fail("sizes does not match the input rank");
    y.dims.assign(sizes->values.begin(), sizes->values.end());
    return c.setAll(y);
  }
  std::optional<SmallVector<double>> scales = c.attrs.findFloats("scales");
  if (!scales && c.present(2)) {
    if (c.floats.size() <= 2 || !c.floats[2])
      return c.fail("scales (input #2) is not a constant known at import time");
    scales = SmallVector<double>(c.floats[2]->begin(), c.floats[2]->end());
  }
  if (!scales || scales->size() != x.dims.size())
    return c.fail("neither sizes nor scales of the input rank are known");
  for (size_t i = 0; i < y.dims.size(); ++i)
    y.dims[i] = x.dims[i] < 0 ? -1 : int64_t(double(x.dims[i]) * (*scales)[i]);
  return c.setAll(y);
}

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

static Work costConv(Operation *op) {
  double out = numel(op->getResult(0));
  double perOut = 2.0 * productFrom(op->getOperand(1).getType(), 1);
  return {out * perOut + (op->getNumOperands() > 2 ? out : 0),
          trafficBytes(op)};
}

static Work costConvGrad(Operation *op) {
  double dy = numel(op->getOperand(0));
  double perOut = 2.0 * productFrom(op->getOperand(2).getType(), 1);
  return {(resultUsed(op, 0) ? dy * perOut : 0) +
              (resultUsed(op, 1) ? dy * perOut : 0) +
              (resultUsed(op, 2) ? dy : 0),
          trafficBytes(op)};
}

/// ConvTranspose: every input element meets the whole kernel of its group.
static Work costConvTranspose(Operation *op) {
  double x = numel(op->getOperand(0));
  double perIn = 2.0 * productFrom(op->getOperand(1).getType(), 1);
  return {x * perIn, trafficBytes(op)};
}

static Work costConvTransposeGrad(Operation *op) {
  double x = numel(op->getOperand(1));
  double perIn = 2.0 * productFrom(op->getOperand(2).getType(), 1);
  return {(resultUsed(op, 0) ? x * perIn : 0) +
              (resultUsed(op, 1) ? x * perIn : 0) +
              (resultUsed(op, 2) ? double(numel(op->getOperand(0))) : 0),
          trafficBytes(op)};
}

static Work costGemm(Operation *op) {
  bool grad = cast<NodeOp>(op).getOpType() == "GemmGrad";
  auto a = cast<RankedTensorType>(op->getOperand(grad ? 1 : 0).getType());
  int64_t transA = intAttr(op, "transA", 0);
  double m = a.getDimSize(transA ? 1 : 0), k = a.getDimSize(transA ? 0 : 1);
  double n = grad ? productFrom(op->getOperand(0).getType(), 1)
                  : productFrom(op->getResult(0).getType(), 1);
  Work w{0, trafficBytes(op)};
  if (!grad)
    w.flops = 2 * m * n * k + (op->getNumOperands() > 2 ? m * n : 0);
  else
    w.flops = (resultUsed(op, 0) ? 2 * m * n * k : 0) +
              (resultUsed(op, 1) ? 2 * m * n * k : 0) +
              (resultUsed(op, 2) ? m * n : 0);
  return w;
}

static Work costMatMul(Operation *op) {
  auto a = cast<RankedTensorType>(op->getOperand(0).getType());
  // FusedMatMul {transA}: A is stored [..., K, M].
  bool transA = intAttr(op, "transA", 0) != 0 && a.getRank() >= 2;
  int64_t k = transA ? a.getShape()[a.getRank() - 2] : a.getShape().back();
  return {2.0 * numel(op->getResult(0)) * k, trafficBytes(op)};
}

/// FusedAttention: Q·KT and P·V (2·M·N·(D + E) per batch) and the
/// softmax; FusedAttentionGrad: the recomputed Q·KT, dY·Vᵀ, Pᵀ·dY, dS·K
/// and Qᵀ·dS.
template <bool Grad> static Work costFusedAttention(Operation *op) {
  auto q = cast<RankedTensorType>(op->getOperand(Grad ? 1 : 0).getType());
  auto kt = cast<RankedTensorType>(op->getOperand(Grad ? 2 : 1).getType());
  auto v = cast<RankedTensorType>(op->getOperand(Grad ? 3 : 2).getType());
  double d = q.getShape().back(), e = v.getShape().back();
  double scores = double(numel(op->getOperand(Grad ? 1 : 0))) / d *
                  double(kt.getShape().back());
  double flops = Grad ? scores * (6.0 * d + 4.0 * e + 12.0)
                      : scores * (2.0 * d + 2.0 * e + 8.0);
  return {flops, trafficBytes(op)};
}

static Work costNormGrad(Operation *op) {
  return {12.0 * numel(op->getOperand(1)), trafficBytes(op)};
}

static Work costPool(Operation *op) {
  return {double(numel(op->getResult(0))) * kernelSize(op), trafficBytes(op)};
}

static Work costPoolGrad(Operation *op) {
  return {double(numel(op->getOperand(0))) * kernelSize(op), trafficBytes(op)};
}

/// LSTM/GRU: the four (three) gate GEMMs of every step, input and recurrent.
static Work costRecurrent(Operation *op) {
  auto x = cast<RankedTensorType>(op->getOperand(0).getType());
  auto w = cast<RankedTensorType>(op->getOperand(1).getType());
  auto r = cast<RankedTensorType>(op->getOperand(2).getType());
  double steps = x.getDimSize(0), batch = x.getDimSize(1);
  double flops = 2.0 * steps * batch *
                 (double(w.getNumElements()) + double(r.getNumElements()));
  bool grad = cast<NodeOp>(op).getOpType().ends_with("Grad");
  // Backward recomputes forward, then data and weight gradients.
  return {grad ? 3.0 * flops : flops, trafficBytes(op)};
}

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

/// Convolutions and pooling.
static void registerWindowOps(OpRegistry &r) {
  r.add("Conv")
      .precision(Precision::Lower)
      .shape(shapeWindow)
      .grad(gradConv)
      .cost(costConv);
  r.add("ConvGrad")
      .precision(Precision::Lower)
      .traits(Gradient)
      .shape(shapeConvGrad)
      .cost(costConvGrad)
      .summary("dY, X, W -> dX, dW[, dB]");
  r.add("ConvTranspose")
      .precision(Precision::Lower)
      .shape(shapeWindow)
      .grad(gradConvTranspose)
      .cost(costConvTranspose);
  r.add("ConvTransposeGrad")
      .precision(Precision::Lower)
      .traits(Gradient)
      .cost(costConvTransposeGrad)
      .summary("dY, X, W -> dX, dW[, dB]");
  r.add("MaxPool")
      .shape(shapeWindow)
      .trainingForm(formMaxPool)
      .grad(gradMaxPool)
      .cost(costPool);
  r.add("MaxPoolGrad")
      .traits(Gradient)
      .shape(shapePoolGrad<2>)
      .summary("dY, Indices -> dX");
  r.add("AveragePool").shape(shapeWindow).grad(gradAveragePool).cost(costPool);
  r.add("AveragePoolGrad")
      .traits(Gradient)
      .shape(shapePoolGrad<1>)
      .cost(costPoolGrad);
  r.add("LpPool")
      .precision(Precision::F32)
      .shape(shapeWindow)
      .noKernels("shape rule for import and planning; no kernel yet");
  r.add("GlobalAveragePool")
      .shape(shapeGlobalPool)
      .grad(gradGlobalAveragePool)
      .cost(costPerInput<1>);
  r.add("GlobalAveragePoolGrad").traits(Gradient);
  r.add("GlobalMaxPool")
      .shape(shapeGlobalPool)
      .trainingForm(formGlobalMaxPool)
      .noKernels("training form: MaxPool over the whole spatial extent");
  r.add("GlobalLpPool")
      .shape(shapeGlobalPool)
      .noKernels("shape rule for import and planning; no kernel yet");
}

/// The normalizations and their gradients.
static void registerNormOps(OpRegistry &r) {
  // X, scale, B, input_mean, input_var: the running mean and variance
  // come back as results 1 and 2; scale and variance start at one.
  OpRoles bnRoles;
  bnRoles.statsOperand = 3;
  bnRoles.statsResult = 1;
  bnRoles.statsCount = 2;
  bnRoles.onesOperands = {1, 4};
  r.add("BatchNormalization")
      .precision(Precision::Normalize)
      .shape(shapeNormalization)
      .trainingForm(formBatchNorm)
      .grad(gradBatchNorm)
      .cost(costPerInput<8>)
      .roles(bnRoles);
  r.add("BatchNormInternal", 1, "com.microsoft")
      .precision(Precision::Normalize)
      .shape(shapeNormalization)
      .noKernels("ONNX Runtime training graphs only: the ORT importer turns "
                 "it into BatchNormalization in training form");
  r.add("BatchNormalizationGrad")
      .precision(Precision::Normalize)
      .traits(Gradient)
      .shape(shapeNormGrad)
      .cost(costNormGrad);
  constexpr const char *kDecomposed =
      "training form: LayerNormalization, Mul and Add, which run and "
      "differentiate it";
  r.add("InstanceNormalization")
      .precision(Precision::Normalize)
      .shape(shapeNormalization)
      .trainingForm(formInstanceNorm)
      .noKernels(kDecomposed);
  r.add("GroupNormalization", 18)
      .precision(Precision::Normalize)
      .shape(shapeNormalization)
      .trainingForm(formGroupNorm)
      .noKernels(kDecomposed);
  r.add("LayerNormalization")
      .precision(Precision::Normalize)
      .shape(shapeLayerNorm)
      .trainingForm(formLayerNorm)
      .grad(gradLayerNorm)
      .cost(costPerInput<8>);
  r.add("LayerNormalizationGrad")
      .precision(Precision::Normalize)
      .traits(Gradient)
      .shape(shapeNormGrad)
      .cost(costNormGrad);
}

/// Products, dropout, softmax and losses, resizing and the recurrent layers.
static void registerProductAndLossOps(OpRegistry &r) {
  r.add("Gemm")
      .precision(Precision::Lower)
      .traits(WideResults)
      .shape(shapeGemm)
      .grad(gradGemm)
      .cost(costGemm);
  r.add("GemmGrad")
      .precision(Precision::Lower)
      .traits(WideResults)
      .traits(Gradient)
      .cost(costGemm);
  r.add("MatMul")
      .precision(Precision::Lower)
      .traits(WideResults)
      .shape(shapeMatMul)
      .grad(gradMatMul)
      .cost(costMatMul);
  r.add("Einsum", 12)
      .precision(Precision::Lower)
      .shape(shapeEinsum)
      .trainingForm(formEinsum)
      .noKernels("training form: ReduceSum, Transpose, Reshape and MatMul, "
                 "which run and differentiate it");
  r.add("FusedMatMul", 1, "com.microsoft")
      .traits(WideResults)
      .precision(Precision::Lower)
      .shape(shapeFusedMatMul)
      .cost(costMatMul);
  r.add("Dropout")
      .shape(shapeDropout)
      .trainingForm(formDropout)
      .grad(gradDropout);
  r.add("DropoutGrad").traits(Gradient | Elementwise);
  r.add("Softmax")
      .precision(Precision::F32)
      .shape(shapeSameAsInput)
      .grad(gradSoftmax)
      .cost(costPerInput<8>);
  r.add("SoftmaxGrad")
      .precision(Precision::F32)
      .traits(Gradient)
      .shape(shapeSameAsInput)
      .cost(costPerOutput<12>);
  // The attention oasr-fuse-attention folds (docs/passes.md): products in
  // the low type under mixed precision, the softmax in f32 inside.
  r.add("FusedAttention")
      .precision(Precision::Lower)
      .shape(shapeFusedAttention)
      .grad(gradFusedAttention)
      .cost(costFusedAttention<false>);
  r.add("FusedAttentionGrad")
      .precision(Precision::Lower)
      .traits(Gradient)
      .shape(shapeFusedAttentionGrad)
      .cost(costFusedAttention<true>);
  r.add("LogSoftmax")
      .precision(Precision::F32)
      .shape(shapeSameAsInput)
      .grad(gradLogSoftmax)
      .cost(costPerInput<8>);
  r.add("LogSoftmaxGrad")
      .precision(Precision::F32)
      .traits(Gradient)
      .cost(costPerOutput<12>);
  // ONNX Runtime's opset-13 names of the same gradients (training graphs).
  for (const char *op : {"SoftmaxGrad_13", "LogSoftmaxGrad_13"})
    r.add(op)
        .traits(Gradient)
        .shape(shapeSameAsInput)
        .cost(costPerOutput<12>)
        .precision(Precision::F32);
  OpRoles lossRoles;
  lossRoles.loss = true;
  r.add("SoftmaxCrossEntropyLoss", 12)
      .precision(Precision::F32)
      .trainingForm(formSoftmaxCrossEntropy)
      .grad(gradSoftmaxCrossEntropy)
      .cost(costPerInput<8>)
      .roles(lossRoles);
  r.add("SoftmaxCrossEntropyLossGrad")
      .precision(Precision::F32)
      .traits(Gradient)
      .shape(shapeLikeInput1);
  r.add("Resize", 11).shape(shapeResize).grad(gradResize);
  r.add("ResizeGrad").traits(Gradient);
  r.add("LSTM")
      .precision(Precision::F32)
      .shape(shapeRecurrent)
      .grad(gradRecurrent<true>)
      .cost(costRecurrent);
  r.add("LSTMGrad")
      .precision(Precision::F32)
      .traits(Gradient)
      .cost(costRecurrent);
  r.add("GRU")
      .precision(Precision::F32)
      .shape(shapeRecurrent)
      .grad(gradRecurrent<false>)
      .cost(costRecurrent);
  r.add("GRUGrad")
      .precision(Precision::F32)
      .traits(Gradient)
      .cost(costRecurrent);
}

void ::oasr::ops::registerNNOps(OpRegistry &r) {
  registerWindowOps(r);
  registerNormOps(r);
  registerProductAndLossOps(r);
}
