//===- FunctionOps.cpp - ONNX function ops that train as their bodies -----===//
//
// Registry entries of the ops ONNX defines as functions of other ops and
// that oasr trains as those ops (a training form builds the body, whose
// rules and kernels run and differentiate it): RMSNormalization and
// Attention (opset 23). ONNX's own shape inference here (1.12) predates
// them, so their shape rules are the registry's.
//
//===----------------------------------------------------------------------===//

#include "RuleSupport.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace ::oasr::ops;

//===----------------------------------------------------------------------===//
// RMSNormalization
//===----------------------------------------------------------------------===//

static bool shapeRMSNorm(ShapeContext &c) {
  if (!c.needInputs(2))
    return false;
  int64_t axis = c.attrs.getInt("axis", -1);
  if (!checkAxis(c, axis, int64_t(c.input(0)->dims.size())))
    return false;
  return c.setAll(*c.input(0));
}

namespace {
/// Builds a training form's nodes before `node`, at its location.
struct FormBuilder {
  NodeOp node;
  OpBuilder b;
  NodeBuilder nb;
  explicit FormBuilder(NodeOp node) : node(node), b(node), nb{b} {}

  Value op(StringRef type, Type result, ValueRange operands,
           ArrayRef<NamedAttribute> attrs = {}) {
    return nb.node(node.getLoc(), type, result, operands, attrs)->getResult(0);
  }
  Value scalar(Type like, double v) {
    auto t = RankedTensorType::get(
        {}, cast<RankedTensorType>(like).getElementType());
    return nb.splat(node.getLoc(), t, v);
  }
  NamedAttribute attr(StringRef name, int64_t v) {
    return b.getNamedAttr(name, b.getI64IntegerAttr(v));
  }
  Value shape(ArrayRef<int64_t> dims) {
    return nb.shapeConstant(node.getLoc(), dims);
  }
  Value reshape(Value v, ArrayRef<int64_t> dims) {
    return reshapeAt(node, v, dims);
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    return transposeAt(node, v, perm);
  }
};
} // namespace

/// RMSNormalization {axis, epsilon}: X / sqrt(mean(X^2 over axis..) + eps)
/// times scale, computed in f32 (stash_type 1) whatever X's type.
static LogicalResult formRMSNorm(NodeOp node) {
  std::string name = mlir::oasr::nodeName(node.getLoc()).value_or("");
  auto xt = cast<RankedTensorType>(node->getOperand(0).getType());
  if (node->getNumOperands() != 2)
    return node.emitError("'RMSNormalization' node \"")
           << name << "\" needs X and scale";
  int64_t rank = xt.getRank(), axis = intAttr(node, "axis", -1);
  if (axis < -rank || axis >= rank)
    return node.emitError("'RMSNormalization' node \"")
           << name << "\": axis " << axis << " is outside [" << -rank << ", "
           << rank << ")";
  if (axis < 0)
    axis += rank;
  double eps = floatAttr(node, "epsilon").value_or(1e-5);
  FormBuilder f(node);
  Value x = node->getOperand(0);
  Type low = xt.getElementType();
  bool widen = !low.isF32();
  if (widen)
    x = f.nb.castTo(node.getLoc(), x, f.b.getF32Type());
  auto x32 = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> stat(xt.getShape()), axes;
  for (int64_t i = axis; i < rank; ++i) {
    stat[i] = 1;
    axes.push_back(i);
  }
  auto statT = x32.clone(stat);
  Value ms =
      f.op("ReduceMean", statT, {f.op("Mul", x32, {x, x}), f.shape(axes)},
           {f.attr("keepdims", 1)});
  Value rms =
      f.op("Sqrt", statT, {f.op("Add", statT, {ms, f.scalar(statT, eps)})});
  Value y = f.op("Div", x32, {x, rms});
  if (widen)
    y = f.nb.castTo(node.getLoc(), y, low);
  y = f.op("Mul", xt, {y, node->getOperand(1)});
  return replaceBy(node, y);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {
/// Attention's operands as [B, H, S, D]: 4-D as they are, 3-D [B, S, H*D]
/// split by q_num_heads / kv_num_heads.
struct AttentionShapes {
  int64_t batch = 0, qHeads = 0, kvHeads = 0, q = 0, kv = 0, d = 0, dv = 0;
  bool threeD = false;
};
} // namespace

/// Reads Q, K and V's shapes; false with `why` when they do not fit.
static bool attentionShapes(ArrayRef<int64_t> q, ArrayRef<int64_t> k,
                            ArrayRef<int64_t> v, int64_t qHeadsAttr,
                            int64_t kvHeadsAttr, AttentionShapes &s,
                            std::string &why) {
  if (q.size() != k.size() || q.size() != v.size() ||
      (q.size() != 3 && q.size() != 4)) {
    why = "Q, K and V must all be 3-D or all 4-D";
    return false;
  }
  s.threeD = q.size() == 3;
  s.batch = q[0];
  if (s.threeD) {
    if (qHeadsAttr <= 0 || kvHeadsAttr <= 0 || q[2] % qHeadsAttr ||
        k[2] % kvHeadsAttr || v[2] % kvHeadsAttr) {
      why = "3-D Q, K and V need q_num_heads and kv_num_heads that divide "
            "their last dimensions";
      return false;
    }
    s.qHeads = qHeadsAttr;
    s.kvHeads = kvHeadsAttr;
    s.q = q[1];
    s.kv = k[1];
    s.d = q[2] / qHeadsAttr;
    s.dv = v[2] / kvHeadsAttr;
    if (k[2] / kvHeadsAttr != s.d || v[1] != s.kv) {
      why = "K's head size or V's length does not match";
      return false;
    }
  } else {
    s.qHeads = q[1];
    s.kvHeads = k[1];
    s.q = q[2];
    s.kv = k[2];
    s.d = q[3];
    s.dv = v[3];
    if (k[3] != s.d || v[1] != s.kvHeads || v[2] != s.kv) {
      why = "K is not [B, Hkv, L, D] or V not [B, Hkv, L, Dv] for Q "
            "[B, Hq, S, D]";
      return false;
    }
  }
  if (k[0] != s.batch || v[0] != s.batch) {
    why = "Q, K and V have different batch sizes";
    return false;
  }
  if (s.kvHeads <= 0 || s.qHeads % s.kvHeads) {
    why = llvm::formatv("{0} query heads are not a multiple of {1} key/value "
                        "heads",
                        s.qHeads, s.kvHeads);
    return false;
  }
  return true;
}

static bool shapeAttention(ShapeContext &c) {
  if (!c.needInputs(3))
    return false;
  const TensorFacts &q = *c.input(0), &k = *c.input(1), &v = *c.input(2);
  if (c.present(4) || c.present(5))
    return c.fail("past_key and past_value are not supported");
  AttentionShapes s;
  if (!attentionShapes(q.dims, k.dims, v.dims, c.attrs.getInt("q_num_heads", 0),
                       c.attrs.getInt("kv_num_heads", 0), s, c.why))
    return false;
  TensorFacts y = TensorFacts::get(q.elemType, {});
  if (s.threeD)
    y.dims = {s.batch, s.q, s.qHeads * s.dv};
  else
    y.dims = {s.batch, s.qHeads, s.q, s.dv};
  c.out[0] = y;
  if (c.numOutputs() > 1)
    c.out[1] = TensorFacts::get(k.elemType, {s.batch, s.kvHeads, s.kv, s.d});
  if (c.numOutputs() > 2)
    c.out[2] = TensorFacts::get(v.elemType, {s.batch, s.kvHeads, s.kv, s.dv});
  if (c.numOutputs() > 3)
    c.out[3] = TensorFacts::get(q.elemType, {s.batch, s.qHeads, s.q, s.kv});
  return true;
}

/// Attention {is_causal, scale, softcap, q_num_heads, kv_num_heads}:
/// softmax(softcap(Q K^T * scale + mask)) V per head, the key/value heads
/// repeated for grouped queries, as MatMul, Mul, Add, Softmax and MatMul (which
/// the attention fusion recognises). A bool mask keeps where true; is_causal
/// masks key j > query i. present_key/present_value are K and V as 4-D;
/// past key/values and the qk_matmul_output result are refused.
static LogicalResult formAttention(NodeOp node) {
  std::string name = mlir::oasr::nodeName(node.getLoc()).value_or("");
  auto fail = [&](const Twine &why) {
    return node.emitError("'Attention' node \"") << name << "\": " << why;
  };
  if (onnxOperand(node, 4) || onnxOperand(node, 5))
    return fail("past_key and past_value are not supported");
  if (node->getNumResults() > 3 && !node->getResult(3).use_empty())
    return fail("the qk_matmul_output result is not supported");
  if (floatAttr(node, "softcap").value_or(0.0) < 0)
    return fail("softcap must not be negative");
  Value q = node->getOperand(0), k = node->getOperand(1),
        v = node->getOperand(2);
  auto qt = cast<RankedTensorType>(q.getType());
  auto kt = cast<RankedTensorType>(k.getType());
  auto vt = cast<RankedTensorType>(v.getType());
  AttentionShapes s;
  std::string why;
  if (!attentionShapes(qt.getShape(), kt.getShape(), vt.getShape(),
                       intAttr(node, "q_num_heads", 0),
                       intAttr(node, "kv_num_heads", 0), s, why))
    return fail(why);
  FormBuilder f(node);
  auto heads = [&](Value x, int64_t h, int64_t len, int64_t d) {
    if (!s.threeD)
      return x;
    return f.transpose(f.reshape(x, {s.batch, len, h, d}), {0, 2, 1, 3});
  };
  q = heads(q, s.qHeads, s.q, s.d);
  k = heads(k, s.kvHeads, s.kv, s.d);
  v = heads(v, s.kvHeads, s.kv, s.dv);
  Value presentK = k, presentV = v;
  // Grouped queries: kv head j serves query heads j*g .. j*g + g - 1.
  int64_t g = s.qHeads / s.kvHeads;
  auto repeat = [&](Value x, int64_t d) {
    if (g == 1)
      return x;
    auto t = cast<RankedTensorType>(x.getType());
    Value e = f.reshape(x, {s.batch, s.kvHeads, 1, s.kv, d});
    e = f.op("Expand", t.clone({s.batch, s.kvHeads, g, s.kv, d}),
             {e, f.shape({s.batch, s.kvHeads, g, s.kv, d})});
    return f.reshape(e, {s.batch, s.qHeads, s.kv, d});
  };
  k = repeat(k, s.d);
  v = repeat(v, s.dv);
  auto qType = cast<RankedTensorType>(q.getType());
  auto scoreT = qType.clone({s.batch, s.qHeads, s.q, s.kv});
  Value scores = f.op("MatMul", scoreT, {q, f.transpose(k, {0, 1, 3, 2})});
  double scale =
      floatAttr(node, "scale").value_or(1.0 / std::sqrt(double(s.d)));
  scores = f.op("Mul", scoreT, {scores, f.scalar(scoreT, scale)});
  const double ninf = -std::numeric_limits<double>::infinity();
  if (Value mask = onnxOperand(node, 3)) {
    auto mt = cast<RankedTensorType>(mask.getType());
    if (mt.getElementType().isInteger(1))
      mask = f.op("Where", mt.clone(qType.getElementType()),
                  {mask, f.scalar(scoreT, 0.0), f.scalar(scoreT, ninf)});
    scores = f.op("Add", scoreT, {scores, mask});
  }
  if (intAttr(node, "is_causal", 0)) {
    auto causalT = RankedTensorType::get({s.q, s.kv}, qType.getElementType());
    SmallVector<Attribute> vals;
    for (int64_t i = 0; i < s.q; ++i)
      for (int64_t j = 0; j < s.kv; ++j)
        vals.push_back(
            f.b.getFloatAttr(qType.getElementType(), j > i ? ninf : 0.0));
    Value causal =
        f.nb.constant(node.getLoc(), DenseElementsAttr::get(causalT, vals));
    scores = f.op("Add", scoreT, {scores, causal});
  }
  // Softcap after the mask, as ONNX's order of the qk outputs has it.
  if (double cap = floatAttr(node, "softcap").value_or(0.0); cap > 0) {
    scores = f.op("Tanh", scoreT,
                  {f.op("Div", scoreT, {scores, f.scalar(scoreT, cap)})});
    scores = f.op("Mul", scoreT, {scores, f.scalar(scoreT, cap)});
  }
  Value p = f.op("Softmax", scoreT, {scores}, {f.attr("axis", -1)});
  auto yT = qType.clone({s.batch, s.qHeads, s.q, s.dv});
  Value y = f.op("MatMul", yT, {p, v});
  if (s.threeD)
    y = f.reshape(f.transpose(y, {0, 2, 1, 3}),
                  {s.batch, s.q, s.qHeads * s.dv});
  if (node->getNumResults() > 1)
    node->getResult(1).replaceAllUsesWith(presentK);
  if (node->getNumResults() > 2)
    node->getResult(2).replaceAllUsesWith(presentV);
  return replaceBy(node, y);
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void ::oasr::ops::registerFunctionOps(OpRegistry &r) {
  r.add("RMSNormalization", 23)
      .precision(Precision::Normalize)
      .shape(shapeRMSNorm)
      .trainingForm(formRMSNorm)
      .noKernels("training form: ReduceMean, Sqrt, Div and Mul, which run "
                 "and differentiate it");
  r.add("Attention", 23)
      .shape(shapeAttention)
      .trainingForm(formAttention)
      .noKernels("training form: MatMul, Mul, Add, Softmax and MatMul, which "
                 "run and differentiate it");
}
