//===- ArithmeticOps.cpp - Elementwise math, activations and logic --------===//
//
// Registry entries of the elementwise ops: activations, arithmetic with
// numpy broadcasting, comparisons and logic (attention masks), Where, Cast,
// Clip, and the gradient ops autodiff emits for them.
//
//===----------------------------------------------------------------------===//

#include "RuleSupport.h"

#include <cmath>

using namespace mlir;
using namespace ::oasr::ops;

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

/// Same shape as input 0; the IsNaN/IsInf predicates give bool.
static bool shapeUnary(ShapeContext &c) {
  if (!c.needInputs(1))
    return false;
  TensorFacts info = *c.input(0);
  if (c.op == "IsNaN" || c.op == "IsInf" || c.op == "Not")
    info.elemType = kBool;
  return c.setAll(info);
}

/// Broadcast of all inputs; comparisons and logic give bool, Where the type
/// of its value operands.
static bool shapeCompare(ShapeContext &c) {
  if (!shapeBroadcast(c))
    return false;
  for (TensorFacts &o : c.out)
    o.elemType = kBool;
  return true;
}

static bool shapeWhere(ShapeContext &c) {
  if (!shapeBroadcast(c))
    return false;
  for (TensorFacts &o : c.out)
    o.elemType = c.in[1]->elemType;
  return true;
}

static bool shapeCast(ShapeContext &c) {
  bool like = c.op == "CastLike";
  if (!c.needInputs(like ? 2 : 1))
    return false;
  TensorFacts info = *c.input(0);
  info.elemType =
      like ? c.input(1)->elemType : int32_t(c.attrs.getInt("to", kFloat));
  return c.setAll(info);
}

//===----------------------------------------------------------------------===//
// Fold rules
//===----------------------------------------------------------------------===//

/// Broadcasting elementwise evaluation of integer arithmetic, comparisons
/// and Where on folded inputs.
static bool foldElementwise(FoldContext &c) {
  SmallVector<const FoldedInts *, 3> ins;
  for (size_t i = 0; i < c.folded.size(); ++i) {
    if (!c.folded[i])
      return false;
    ins.push_back(c.folded[i]);
  }
  if (ins.empty())
    return false;
  StringRef op = c.op;
  const TensorFacts &y = c.outType;
  int64_t n = y.numElements(), rank = y.dims.size();
  SmallVector<int64_t, 4> index(rank);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k;
    for (int64_t i = rank - 1; i >= 0; --i) {
      index[i] = rem % y.dims[i];
      rem /= y.dims[i];
    }
    SmallVector<int64_t, 3> args;
    for (const FoldedInts *v : ins) {
      int64_t offset = 0, stride = 1, vr = v->dims.size();
      for (int64_t i = vr - 1; i >= 0; --i) {
        int64_t d = v->dims[i];
        offset += (d == 1 ? 0 : index[rank - vr + i]) * stride;
        stride *= d;
      }
      args.push_back(v->values[offset]);
    }
    int64_t a = args[0], b = args.size() > 1 ? args[1] : 0, r;
    if (op == "Add")
      r = a + b;
    else if (op == "Sub")
      r = a - b;
    else if (op == "Mul")
      r = a * b;
    else if (op == "Div" || op == "Mod") {
      if (b == 0)
        return false;
      r = op == "Div" ? a / b : a % b;
      // Mod without fmod takes the divisor's sign (Python's %).
      if (op == "Mod" && !c.attrs.getInt("fmod", 0) && r != 0 &&
          (r < 0) != (b < 0))
        r += b;
    } else if (op == "Equal")
      r = a == b;
    else if (op == "Less")
      r = a < b;
    else if (op == "Greater")
      r = a > b;
    else if (op == "LessOrEqual")
      r = a <= b;
    else if (op == "GreaterOrEqual")
      r = a >= b;
    else if (op == "Max")
      r = std::max(a, b);
    else if (op == "Min")
      r = std::min(a, b);
    else if (op == "Not")
      r = !a;
    else if (op == "And")
      r = a && b;
    else if (op == "Or")
      r = a || b;
    else if (op == "Neg")
      r = -a;
    else if (op == "Abs")
      r = a < 0 ? -a : a;
    else if (op == "Where" && args.size() == 3)
      r = a ? b : args[2];
    else
      return false;
    c.result.values.push_back(r);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Gradient rules
//===----------------------------------------------------------------------===//

/// <Op>Grad(dY, Y) -> dX, from the forward result (ONNX Runtime's
/// SigmoidGrad/TanhGrad convention), keeping the forward's attributes.
template <const char *Name>
static LogicalResult gradFromResult(GradContext &c) {
  c.dIns = {
      c.node1(Name, typeOf(c, 0), {c.dOut(), c.out(0)}, onnxAttrs(c.fwd))};
  return success();
}

/// <Op>Grad(dY, X) -> dX, from the forward input.
template <const char *Name> static LogicalResult gradFromInput(GradContext &c) {
  c.dIns = {c.node1(Name, typeOf(c, 0), {c.dOut(), c.in(0)}, onnxAttrs(c.fwd))};
  return success();
}

static constexpr char kLeakyReluGrad[] = "LeakyReluGrad",
                      kSigmoidGrad[] = "SigmoidGrad", kTanhGrad[] = "TanhGrad",
                      kEluGrad[] = "EluGrad",
                      kHardSigmoidGrad[] = "HardSigmoidGrad",
                      kHardSwishGrad[] = "HardSwishGrad",
                      kMishGrad[] = "MishGrad";

static LogicalResult gradRelu(GradContext &c) {
  c.dIns = {c.node1("ReluGrad", typeOf(c, 0), {c.dOut(), c.out(0)})};
  return success();
}

static LogicalResult gradClip(GradContext &c) {
  double lo = -INFINITY, hi = INFINITY;
  if (auto a = floatAttr(c.fwd, "min"))
    lo = *a;
  if (auto a = floatAttr(c.fwd, "max"))
    hi = *a;
  for (unsigned i = 1; i < c.fwd->getNumOperands() && i < 3; ++i) {
    std::optional<double> v = scalarOf(c.in(i));
    if (!v)
      return c.fail(Twine(i == 1 ? "min" : "max") + " is not a constant");
    (i == 1 ? lo : hi) = *v;
  }
  if (c.wants(1) || c.wants(2))
    return c.fail("gradients of the bounds are not supported");
  auto &b = c.b();
  c.dIns = {c.node1("ClipGrad", typeOf(c, 0), {c.dOut(), c.in(0)},
                    {b.getNamedAttr("min", b.getF32FloatAttr(lo)),
                     b.getNamedAttr("max", b.getF32FloatAttr(hi))})};
  return success();
}

static LogicalResult gradAdd(GradContext &c) {
  Value g = c.dOut();
  c.dIns = {c.wants(0) ? c.sumTo(g, typeOf(c, 0)) : Value(),
            c.wants(1) ? c.sumTo(g, typeOf(c, 1)) : Value()};
  return success();
}

static LogicalResult gradSub(GradContext &c) {
  Value g = c.dOut();
  c.dIns = {c.wants(0) ? c.sumTo(g, typeOf(c, 0)) : Value(), Value()};
  if (c.wants(1))
    c.dIns[1] = c.node1("Neg", typeOf(c, 1), {c.sumTo(g, typeOf(c, 1))});
  return success();
}

static LogicalResult gradMul(GradContext &c) {
  Value g = c.dOut();
  Type y = g.getType();
  c.dIns.assign(2, Value());
  for (unsigned i : {0u, 1u})
    if (c.wants(i))
      c.dIns[i] = c.sumTo(c.node1("Mul", y, {g, c.in(1 - i)}), typeOf(c, i));
  return success();
}

static LogicalResult gradDiv(GradContext &c) {
  // y = a / b: da = g / b, db = -g · y / b.
  Value g = c.dOut();
  Type y = g.getType();
  c.dIns.assign(2, Value());
  if (c.wants(0))
    c.dIns[0] = c.sumTo(c.node1("Div", y, {g, c.in(1)}), typeOf(c, 0));
  if (c.wants(1)) {
    Value q = c.node1("Div", y, {c.out(0), c.in(1)});
    Value gq = c.sumTo(c.node1("Mul", y, {g, q}), typeOf(c, 1));
    c.dIns[1] = c.node1("Neg", typeOf(c, 1), {gq});
  }
  return success();
}

static LogicalResult gradPow(GradContext &c) {
  // y = x^e: dx = g · e · x^(e-1).
  if (c.wants(1))
    return c.fail("gradients of the exponent are not supported");
  Value g = c.dOut();
  Type y = g.getType();
  Type eType = typeOf(c, 1);
  Value e = c.in(1);
  Value em1;
  if (std::optional<double> ev = scalarOf(e))
    em1 = c.splat(eType, *ev - 1.0);
  else
    em1 = c.node1("Sub", eType, {e, c.splat(eType, 1.0)});
  Value p = c.node1("Pow", y, {c.in(0), em1});
  Value pe = c.node1("Mul", y, {p, e});
  c.dIns = {c.sumTo(c.node1("Mul", y, {g, pe}), typeOf(c, 0)), Value()};
  return success();
}

static LogicalResult gradSqrt(GradContext &c) {
  // y = sqrt(x): dx = 0.5 · g / y.
  Type t = typeOf(c, 0);
  auto half = c.splat(
      RankedTensorType::get({}, cast<RankedTensorType>(t).getElementType()),
      0.5);
  Value h = c.node1("Mul", t, {c.dOut(), half});
  c.dIns = {c.node1("Div", t, {h, c.out(0)})};
  return success();
}

static LogicalResult gradErf(GradContext &c) {
  // dx = g · 2/sqrt(pi) · exp(-x²).
  Type t = typeOf(c, 0);
  auto scalar =
      RankedTensorType::get({}, cast<RankedTensorType>(t).getElementType());
  Value x2 = c.node1("Mul", t, {c.in(0), c.in(0)});
  Value e = c.node1("Exp", t, {c.node1("Neg", t, {x2})});
  Value s = c.node1("Mul", t, {e, c.splat(scalar, 2.0 / std::sqrt(M_PI))});
  c.dIns = {c.node1("Mul", t, {c.dOut(), s})};
  return success();
}

static LogicalResult gradGelu(GradContext &c) {
  c.dIns = {c.node("GeluGrad", typeOf(c, 0), {c.dOut(), c.in(0)},
                   onnxAttrs(c.fwd), c.fwd.getDomain())
                ->getResult(0)};
  return success();
}

static LogicalResult gradExp(GradContext &c) {
  // dx = g · y.
  c.dIns = {c.node1("Mul", typeOf(c, 0), {c.dOut(), c.out(0)})};
  return success();
}

static LogicalResult gradLog(GradContext &c) {
  // dx = g / x.
  c.dIns = {c.node1("Div", typeOf(c, 0), {c.dOut(), c.in(0)})};
  return success();
}

static LogicalResult gradNeg(GradContext &c) {
  c.dIns = {c.node1("Neg", typeOf(c, 0), {c.dOut()})};
  return success();
}

static LogicalResult gradReciprocal(GradContext &c) {
  // y = 1/x: dx = -g · y².
  Type t = typeOf(c, 0);
  Value y2 = c.node1("Mul", t, {c.out(0), c.out(0)});
  c.dIns = {c.node1("Neg", t, {c.node1("Mul", t, {c.dOut(), y2})})};
  return success();
}

/// The element type of `t` as a rank-0 tensor type.
static Type scalarType(Type t) {
  return RankedTensorType::get({}, cast<RankedTensorType>(t).getElementType());
}

/// `t`'s shape with bool elements (comparison results).
static Type boolLike(GradContext &c, Type t) {
  return cast<RankedTensorType>(t).clone(c.b().getI1Type());
}

/// dx = g · f'(x) for y = f(x), f'(x) built by `deriv` from x and y.
template <typename F> static LogicalResult gradTimes(GradContext &c, F deriv) {
  Type t = typeOf(c, 0);
  c.dIns = {c.node1("Mul", t, {c.dOut(), deriv(t, c.in(0), c.out(0))})};
  return success();
}

static LogicalResult gradAbs(GradContext &c) {
  // dx = g sign(x), 0 at 0 (PyTorch's sgn).
  Type t = typeOf(c, 0);
  Value x = c.in(0), g = c.dOut(), zero = c.splat(scalarType(t), 0.0);
  Value below = c.node1("Where", t,
                        {c.node1("Less", boolLike(c, t), {x, zero}),
                         c.node1("Neg", t, {g}), zero});
  c.dIns = {c.node1("Where", t,
                    {c.node1("Greater", boolLike(c, t), {x, zero}), g, below})};
  return success();
}

static LogicalResult gradNone(GradContext &) { return success(); }

static LogicalResult gradMod(GradContext &c) {
  // y = a - q b with q = floor(a / b) (fmod 0) or trunc(a / b) (fmod 1),
  // piecewise constant: da = g, db = -g q (torch.remainder's and
  // torch.fmod's rules).
  Type t = c.out(0).getType();
  Value g = c.dOut();
  if (c.wants(0))
    c.dIns.push_back(c.sumTo(g, c.in(0).getType()));
  else
    c.dIns.push_back(Value());
  if (c.wants(1)) {
    Value q =
        c.node1("Div", t, {c.node1("Sub", t, {c.in(0), c.out(0)}), c.in(1)});
    q = c.node1("Round", t, {q});
    c.dIns.push_back(c.sumTo(c.node1("Neg", t, {c.node1("Mul", t, {g, q})}),
                             c.in(1).getType()));
  }
  return success();
}

static LogicalResult gradSoftplus(GradContext &c) {
  // y = log(1 + e^x): dx = g · sigmoid(x).
  return gradTimes(
      c, [&](Type t, Value x, Value) { return c.node1("Sigmoid", t, {x}); });
}

static LogicalResult gradSoftsign(GradContext &c) {
  // y = x / (1 + |x|): dx = g / (1 + |x|)^2.
  Type t = typeOf(c, 0);
  Value d = c.node1(
      "Add", t, {c.node1("Abs", t, {c.in(0)}), c.splat(scalarType(t), 1.0)});
  c.dIns = {c.node1("Div", t, {c.dOut(), c.node1("Mul", t, {d, d})})};
  return success();
}

static LogicalResult gradSin(GradContext &c) {
  return gradTimes(
      c, [&](Type t, Value x, Value) { return c.node1("Cos", t, {x}); });
}

static LogicalResult gradCos(GradContext &c) {
  return gradTimes(c, [&](Type t, Value x, Value) {
    return c.node1("Neg", t, {c.node1("Sin", t, {x})});
  });
}

/// Where(x > threshold, above, below) of x's shape.
static Value piecewise(GradContext &c, Type t, Value x, double threshold,
                       Value above, Value below) {
  Value cond = c.node1("Greater", boolLike(c, t),
                       {x, c.splat(scalarType(t), threshold)});
  return c.node1("Where", t, {cond, above, below});
}

static LogicalResult gradSelu(GradContext &c) {
  // x > 0: gamma; else gamma alpha e^x = y + gamma alpha.
  double alpha = floatAttr(c.fwd, "alpha").value_or(1.67326319217681884765625);
  double gamma = floatAttr(c.fwd, "gamma").value_or(1.05070102214813232421875);
  return gradTimes(c, [&](Type t, Value x, Value y) {
    Value below = c.node1("Add", t, {y, c.splat(scalarType(t), gamma * alpha)});
    return piecewise(c, t, x, 0, c.splat(scalarType(t), gamma), below);
  });
}

static LogicalResult gradCelu(GradContext &c) {
  // x > 0: 1; else e^(x / alpha) = y / alpha + 1.
  double alpha = floatAttr(c.fwd, "alpha").value_or(1.0);
  return gradTimes(c, [&](Type t, Value x, Value y) {
    Value scaled = c.node1("Mul", t, {y, c.splat(scalarType(t), 1.0 / alpha)});
    Value below = c.node1("Add", t, {scaled, c.splat(scalarType(t), 1.0)});
    return piecewise(c, t, x, 0, c.splat(scalarType(t), 1.0), below);
  });
}

static LogicalResult gradThresholdedRelu(GradContext &c) {
  double alpha = floatAttr(c.fwd, "alpha").value_or(1.0);
  return gradTimes(c, [&](Type t, Value x, Value) {
    return piecewise(c, t, x, alpha, c.splat(scalarType(t), 1.0),
                     c.splat(scalarType(t), 0.0));
  });
}

static LogicalResult gradPRelu(GradContext &c) {
  // y = x > 0 ? x : s x: dx = g (x > 0 ? 1 : s), ds = sum g (x > 0 ? 0 : x).
  Type t = c.dOut().getType();
  Value x = c.in(0), g = c.dOut();
  c.dIns.assign(2, Value());
  if (c.wants(0)) {
    Value slope = piecewise(c, t, x, 0, c.splat(scalarType(t), 1.0), c.in(1));
    c.dIns[0] = c.sumTo(c.node1("Mul", t, {g, slope}), typeOf(c, 0));
  }
  if (c.wants(1)) {
    Value neg = piecewise(c, t, x, 0, c.splat(scalarType(t), 0.0), x);
    c.dIns[1] = c.sumTo(c.node1("Mul", t, {g, neg}), typeOf(c, 1));
  }
  return success();
}

/// Max and Min of two operands: the gradient goes to the operand that was
/// taken, halved where they tie (torch.maximum's and minimum's rule).
template <bool IsMax> static LogicalResult gradMaxMin(GradContext &c) {
  if (c.fwd->getNumOperands() != 2)
    return c.fail("gradients of more than two operands are not supported");
  Value g = c.dOut();
  Type t = g.getType();
  Value zero = c.splat(scalarType(t), 0.0);
  Value half = c.node1("Mul", t, {g, c.splat(scalarType(t), 0.5)});
  Value tie = c.node1("Equal", boolLike(c, t), {c.in(0), c.in(1)});
  c.dIns.assign(2, Value());
  for (unsigned i : {0u, 1u})
    if (c.wants(i)) {
      Value won = c.node1(IsMax ? "Greater" : "Less", boolLike(c, t),
                          {c.in(i), c.in(1 - i)});
      Value part = c.node1("Where", t, {tie, half, zero});
      c.dIns[i] = c.sumTo(c.node1("Where", t, {won, g, part}), typeOf(c, i));
    }
  return success();
}

static LogicalResult gradSum(GradContext &c) {
  unsigned n = c.fwd->getNumOperands();
  c.dIns.assign(n, Value());
  for (unsigned i = 0; i < n; ++i)
    if (c.wants(i))
      c.dIns[i] = c.sumTo(c.dOut(), typeOf(c, i));
  return success();
}

/// Mean of n operands as Sum times 1/n, which run and differentiate it.
static LogicalResult formMean(NodeOp node) {
  OpBuilder b(node);
  NodeBuilder nb{b};
  Location loc = node.getLoc();
  Type t = node->getResult(0).getType();
  Value sum = nb.node(loc, "Sum", {t}, SmallVector<Value>(node->getOperands()))
                  ->getResult(0);
  Value scale = nb.splat(loc, scalarType(t), 1.0 / node->getNumOperands());
  return replaceBy(node, nb.node(loc, "Mul", {t}, {sum, scale})->getResult(0));
}

static LogicalResult gradWhere(GradContext &c) {
  // y = cond ? a : b: da = cond ? g : 0, db = cond ? 0 : g.
  if (c.wants(0))
    return c.fail("the condition cannot carry a gradient");
  Value g = c.dOut();
  Type y = g.getType();
  auto scalar =
      RankedTensorType::get({}, cast<RankedTensorType>(y).getElementType());
  c.dIns.assign(3, Value());
  for (unsigned i : {1u, 2u})
    if (c.wants(i)) {
      Value zero = c.splat(scalar, 0.0);
      Value picked =
          c.node1("Where", y, {c.in(0), i == 1 ? g : zero, i == 1 ? zero : g});
      c.dIns[i] = c.sumTo(picked, typeOf(c, i));
    }
  return success();
}

static LogicalResult gradCast(GradContext &c) {
  // Between float types the gradient casts back; from integers none flows.
  if (!isFloatTensor(typeOf(c, 0)))
    return c.fail("the operand is not a float tensor");
  Type x = typeOf(c, 0);
  Value g = c.dOut();
  if (g.getType() != x)
    g = c.node1("Cast", x, {g},
                {c.b().getNamedAttr(
                    "to", c.b().getI64IntegerAttr(onnxFloatType(
                              cast<RankedTensorType>(x).getElementType())))});
  c.dIns = {g};
  if (c.fwd->getNumOperands() > 1)
    c.dIns.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

/// Elementwise: what in-place may write over.
constexpr unsigned kEw = Elementwise | InPlace;

/// Activations and math with a gradient rule.
static void registerActivationOps(OpRegistry &r) {
  r.add("Relu").traits(kEw).shape(shapeUnary).grad(gradRelu);
  r.add("ReluGrad").traits(Gradient | Elementwise).shape(shapeUnary);
  r.add("LeakyRelu")
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradFromResult<kLeakyReluGrad>);
  r.add("LeakyReluGrad").traits(Gradient | Elementwise);
  r.add("Sigmoid")
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradFromResult<kSigmoidGrad>);
  r.add("SigmoidGrad").traits(Gradient | Elementwise).shape(shapeUnary);
  r.add("Tanh")
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradFromResult<kTanhGrad>);
  r.add("TanhGrad").traits(Gradient | Elementwise).shape(shapeUnary);
  r.add("Elu")
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradFromResult<kEluGrad>);
  r.add("EluGrad").traits(Gradient | Elementwise);
  r.add("HardSigmoid")
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradFromInput<kHardSigmoidGrad>);
  r.add("HardSigmoidGrad").traits(Gradient | Elementwise);
  r.add("HardSwish", 14)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradFromInput<kHardSwishGrad>);
  r.add("HardSwishGrad").traits(Gradient | Elementwise);
  r.add("Mish", 18)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradFromInput<kMishGrad>);
  r.add("MishGrad").traits(Gradient | Elementwise);
  r.add("Exp")
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradExp)
      .cost(costPerInput<8>);
  r.add("Log")
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradLog);
  r.add("Sqrt")
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradSqrt)
      .cost(costPerInput<8>);
  r.add("Erf")
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradErf)
      .cost(costPerInput<8>);
  r.add("Neg")
      .traits(kEw)
      .shape(shapeUnary)
      .fold(foldElementwise)
      .grad(gradNeg);
  r.add("Abs")
      .traits(Elementwise)
      .shape(shapeUnary)
      .fold(foldElementwise)
      .grad(gradAbs);
  r.add("Reciprocal")
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradReciprocal);
  for (const char *domain : {"", "com.microsoft"})
    r.add("Gelu", 1, domain)
        .traits(Elementwise)
        .shape(shapeUnary)
        .grad(gradGelu)
        .cost(costPerInput<8>);
  r.add("GeluGrad")
      .traits(Gradient | Elementwise)
      .shape(shapeUnary)
      .cost(costPerOutput<12>);
  r.add("GeluGrad", 1, "com.microsoft")
      .traits(Gradient | Elementwise)
      .shape(shapeUnary)
      .cost(costPerOutput<12>);
  r.add("Clip").traits(Elementwise).shape(shapeUnary).grad(gradClip);
  r.add("ClipGrad").traits(Gradient | Elementwise);
  // Activations whose gradient is built from the ops above.
  r.add("Softplus")
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradSoftplus)
      .cost(costPerInput<8>);
  r.add("Softsign").traits(Elementwise).shape(shapeUnary).grad(gradSoftsign);
  r.add("Sin", 7)
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradSin)
      .cost(costPerInput<8>);
  r.add("Cos", 7)
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradCos)
      .cost(costPerInput<8>);
  r.add("Selu").traits(Elementwise).shape(shapeUnary).grad(gradSelu);
  r.add("Celu", 12).traits(Elementwise).shape(shapeUnary).grad(gradCelu);
  r.add("ThresholdedRelu", 10)
      .traits(Elementwise)
      .shape(shapeUnary)
      .grad(gradThresholdedRelu);
}

/// Broadcast arithmetic, Cast, comparisons and the shape-only entries.
static void registerBroadcastOps(OpRegistry &r) {
  // Arithmetic with numpy broadcasting.
  for (const char *op : {"Add", "Sub", "Mul", "Div"})
    r.add(op)
        .traits(kEw)
        .shape(shapeBroadcast)
        .fold(foldElementwise)
        .grad(op == StringRef("Add")   ? gradAdd
              : op == StringRef("Sub") ? gradSub
              : op == StringRef("Mul") ? gradMul
                                       : gradDiv);
  r.add("Pow")
      .precision(Precision::F32)
      .traits(Elementwise)
      .shape(shapeBroadcast)
      .grad(gradPow)
      .cost(costPerInput<8>);
  r.add("Sum").traits(kEw).shape(shapeBroadcast).grad(gradSum);
  r.add("PRelu").traits(Elementwise).shape(shapeBroadcast).grad(gradPRelu);
  r.add("Max")
      .traits(Elementwise)
      .shape(shapeBroadcast)
      .fold(foldElementwise)
      .grad(gradMaxMin<true>);
  r.add("Min")
      .traits(Elementwise)
      .shape(shapeBroadcast)
      .fold(foldElementwise)
      .grad(gradMaxMin<false>);
  r.add("Mean")
      .traits(Elementwise)
      .shape(shapeBroadcast)
      .trainingForm(formMean)
      .noKernels("training form: Sum and Mul, which run and differentiate it");
  r.add("Where", 9)
      .traits(Elementwise)
      .shape(shapeWhere)
      .fold(foldElementwise)
      .grad(gradWhere);
  OpRoles convert;
  convert.convert = true;
  r.add("Cast")
      .precision(Precision::Keep)
      .traits(Elementwise)
      .shape(shapeCast)
      .fold(foldCopy)
      .grad(gradCast)
      .roles(convert);
  // Comparisons and logic (attention masks): no gradient.
  for (const char *op : {"Equal", "Less", "Greater", "LessOrEqual",
                         "GreaterOrEqual", "And", "Or", "Xor"})
    r.add(op).traits(Elementwise).shape(shapeCompare).fold(foldElementwise);
  r.add("Not").traits(Elementwise).shape(shapeUnary).fold(foldElementwise);

  // Shape rules for import and planning only.
  constexpr const char *kNoKernel =
      "shape rule for import and planning; no kernel yet";
  // Piecewise constant: no gradient flows back (PyTorch's zeros).
  for (const char *op : {"Floor", "Ceil", "Round", "Sign"})
    r.add(op).traits(Elementwise).shape(shapeUnary).grad(gradNone);
  r.add("Hardmax").traits(Elementwise).shape(shapeUnary).noKernels(kNoKernel);
  for (const char *op : {"IsNaN", "IsInf"})
    r.add(op).traits(Elementwise).shape(shapeUnary).noKernels(kNoKernel);
  for (const char *op : {"FastGelu", "BiasGelu"})
    r.add(op, 1, "com.microsoft").shape(shapeUnary).noKernels(kNoKernel);
  r.add("Mod")
      .traits(Elementwise)
      .shape(shapeBroadcast)
      .fold(foldElementwise)
      .grad(gradMod);
  r.add("BitShift")
      .traits(Elementwise)
      .shape(shapeBroadcast)
      .noKernels(kNoKernel);
  r.add("CastLike", 15)
      .precision(Precision::Keep)
      .traits(Elementwise)
      .shape(shapeCast)
      .noKernels(kNoKernel);
}

void ::oasr::ops::registerArithmeticOps(OpRegistry &r) {
  registerActivationOps(r);
  registerBroadcastOps(r);
}
