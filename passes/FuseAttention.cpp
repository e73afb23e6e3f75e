//===- FuseAttention.cpp - Exported attention as one FusedAttention -------===//
//
// Matches the scaled dot-product attention exporters write,
//   MatMul(Softmax(mask(MatMul(Q, KT) * s)), V)
// where `* s` is any chain of Mul/Div by scalars computed from constants and
// `mask` is either Where(c, -inf, x) or x + Where(c, -inf, 0) (times a
// positive scalar), and replaces it by FusedAttention(Q, KT, V[, c])
// {scale = s}. The fused op saves only its operands for backward: its
// gradient recomputes the probabilities instead of keeping them.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace mlir::oasr {
#define GEN_PASS_DEF_FUSEATTENTION
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

namespace {
struct FuseAttentionPass
    : mlir::oasr::impl::FuseAttentionBase<FuseAttentionPass> {
  using Base::Base;
  void runOnOperation() final;
};

/// One matched attention: its operands, its scale and the nodes it replaces.
struct Match {
  Value q, kt, v, mask;
  double scale = 1.0;
  NodeOp product; ///< MatMul(P, V), whose result the fused node takes over
  SmallVector<NodeOp> chain;
};
} // namespace

/// The value of a one-element tensor computed from constants (the scale
/// exporters write as Pow/Reciprocal/Sqrt/Mul/Div/Cast chains).
static std::optional<double> scalarValue(Value v, unsigned depth = 0) {
  if (depth > 8)
    return std::nullopt;
  if (std::optional<double> s = ::oasr::ops::scalarOf(v))
    return s;
  auto n = v.getDefiningOp<NodeOp>();
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!n || !n.getDomain().empty() || !t || !t.hasStaticShape() ||
      t.getNumElements() != 1 || n->getNumResults() != 1)
    return std::nullopt;
  auto arg = [&](unsigned i) -> std::optional<double> {
    if (i >= n->getNumOperands())
      return std::nullopt;
    return scalarValue(n->getOperand(i), depth + 1);
  };
  if (n.is("Cast") || n.is("Identity"))
    return t.getElementType().isIntOrFloat() ? arg(0) : std::nullopt;
  if (n.is("Reciprocal") || n.is("Sqrt")) {
    std::optional<double> x = arg(0);
    if (!x)
      return std::nullopt;
    return n.is("Sqrt") ? std::sqrt(*x) : 1.0 / *x;
  }
  std::optional<double> a = arg(0), b = arg(1);
  if (!a || !b || n->getNumOperands() != 2)
    return std::nullopt;
  if (n.is("Mul"))
    return *a * *b;
  if (n.is("Div"))
    return *a / *b;
  if (n.is("Pow"))
    return std::pow(*a, *b);
  return std::nullopt;
}

/// The NodeOp defining `v` when it is of type `op` and `v` has no other
/// reader, else null.
static NodeOp soleDef(Value v, StringRef op) {
  auto n = v.getDefiningOp<NodeOp>();
  if (!n || !n.is(op) || n->getNumResults() != 1 || !v.hasOneUse())
    return nullptr;
  return n;
}

static bool isMinusInf(Value v) {
  std::optional<double> s = scalarValue(v);
  return s && std::isinf(*s) && *s < 0;
}

static bool isBool(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isInteger(1);
}

/// True when `v` is a float constant of zeros, of any shape: a scalar, a
/// splat, or (as the importer keeps large initializers) a resource blob.
static bool isZeros(Value v) {
  if (std::optional<double> s = scalarValue(v))
    return *s == 0.0;
  auto c = v.getDefiningOp<NodeOp>();
  if (!c || !c.is("Constant"))
    return false;
  if (auto dense = c->getAttrOfType<DenseFPElementsAttr>("value"))
    return dense.isSplat() &&
           dense.getSplatValue<APFloat>().convertToDouble() == 0.0;
  auto blobAttr = c->getAttrOfType<DenseResourceElementsAttr>("value");
  if (!blobAttr || !isa<FloatType>(blobAttr.getType().getElementType()))
    return false;
  AsmResourceBlob *blob = blobAttr.getRawHandle().getBlob();
  return blob && llvm::all_of(blob->getData(), [](char b) { return b == 0; });
}

/// The condition `c` of an additive mask Where(c, -inf, 0), optionally
/// times a positive scalar (which keeps -inf and 0), else null.
static Value additiveMaskCondition(Value bias, SmallVectorImpl<NodeOp> &nodes) {
  auto n = bias.getDefiningOp<NodeOp>();
  while (n && n.is("Mul") && n->getNumOperands() == 2) {
    std::optional<double> k = scalarValue(n->getOperand(1));
    Value other = n->getOperand(0);
    if (!k) {
      k = scalarValue(n->getOperand(0));
      other = n->getOperand(1);
    }
    if (!k || !(*k > 0) || std::isinf(*k) || !bias.hasOneUse())
      return nullptr;
    nodes.push_back(n);
    bias = other;
    n = bias.getDefiningOp<NodeOp>();
  }
  if (!n || !n.is("Where") || !bias.hasOneUse() || !isBool(n->getOperand(0)) ||
      !isMinusInf(n->getOperand(1)))
    return nullptr;
  if (!isZeros(n->getOperand(2)))
    return nullptr;
  nodes.push_back(n);
  return n->getOperand(0);
}

/// True when `mask` broadcasts onto `scores` (numpy rules, no larger rank).
static bool broadcastsOnto(Value mask, Value scores) {
  auto m = dyn_cast<RankedTensorType>(mask.getType());
  auto s = cast<RankedTensorType>(scores.getType());
  if (!m || !m.hasStaticShape() || m.getRank() > s.getRank())
    return false;
  for (int64_t i = 1; i <= m.getRank(); ++i) {
    int64_t md = m.getShape()[m.getRank() - i];
    if (md != 1 && md != s.getShape()[s.getRank() - i])
      return false;
  }
  return true;
}

/// Matches the attention ending in `softmax`. Returns failure with the
/// reason (for the remark) when the pattern is there but cannot be fused,
/// and success with `m.product` null when `softmax` is no attention.
static LogicalResult matchAttention(NodeOp softmax, Match &m,
                                    std::string &why) {
  Value probs = softmax->getResult(0);
  auto probsType = dyn_cast<RankedTensorType>(probs.getType());
  if (!probsType || !probsType.hasStaticShape() || probsType.getRank() < 2 ||
      !probs.hasOneUse())
    return success();
  auto reader = dyn_cast<NodeOp>(*probs.getUsers().begin());
  if (!reader)
    return success();
  if (reader.is("Dropout")) {
    // The unfused graph keeps the mask and its RNG stream (docs/passes.md).
    auto next = reader->getResult(0).hasOneUse()
                    ? dyn_cast<NodeOp>(*reader->getResult(0).getUsers().begin())
                    : NodeOp();
    if (next && next.is("MatMul")) {
      why = "dropout on the attention probabilities";
      return failure();
    }
    return success();
  }
  if (!reader.is("MatMul") || reader->getOperand(0) != probs)
    return success();
  int64_t axis = probsType.getRank() - 1;
  auto axisAttr = softmax->getAttrOfType<IntegerAttr>("axis");
  if (!axisAttr || (axisAttr.getInt() != -1 && axisAttr.getInt() != axis))
    return success();

  m.chain.assign({reader, softmax});
  Value x = softmax->getOperand(0);
  // The mask: Where(c, -inf, x) or x + Where(c, -inf, 0).
  if (NodeOp where = soleDef(x, "Where")) {
    if (!isBool(where->getOperand(0)) || !isMinusInf(where->getOperand(1))) {
      why = "masked fill with a value other than -inf";
      return failure();
    }
    m.mask = where->getOperand(0);
    m.chain.push_back(where);
    x = where->getOperand(2);
  } else if (NodeOp add = soleDef(x, "Add")) {
    m.chain.push_back(add);
    SmallVector<NodeOp> maskNodes;
    for (unsigned side : {1u, 0u}) {
      maskNodes.clear();
      if (Value c = additiveMaskCondition(add->getOperand(side), maskNodes)) {
        m.mask = c;
        x = add->getOperand(1 - side);
        break;
      }
    }
    if (!m.mask) {
      why = "an additive bias that is not a -inf mask";
      return failure();
    }
    m.chain.append(maskNodes.begin(), maskNodes.end());
  }
  // The scale: Mul/Div by scalars.
  while (true) {
    auto n = x.getDefiningOp<NodeOp>();
    if (!n || !x.hasOneUse() || n->getNumOperands() != 2 ||
        !(n.is("Mul") || n.is("Div")))
      break;
    std::optional<double> k = scalarValue(n->getOperand(1));
    Value other = n->getOperand(0);
    if (!k && n.is("Mul")) {
      k = scalarValue(n->getOperand(0));
      other = n->getOperand(1);
    }
    if (!k || *k == 0.0 || !std::isfinite(*k))
      break;
    m.scale = n.is("Mul") ? m.scale * *k : m.scale / *k;
    m.chain.push_back(n);
    x = other;
  }
  NodeOp scores = soleDef(x, "MatMul");
  if (!scores)
    return success(); // a softmax over something else
  m.chain.push_back(scores);
  m.q = scores->getOperand(0);
  m.kt = scores->getOperand(1);
  m.v = reader->getOperand(1);
  auto q = dyn_cast<RankedTensorType>(m.q.getType());
  auto kt = dyn_cast<RankedTensorType>(m.kt.getType());
  auto v = dyn_cast<RankedTensorType>(m.v.getType());
  if (!q || !kt || !v || !q.hasStaticShape() || !kt.hasStaticShape() ||
      !v.hasStaticShape() || q.getRank() < 2 || kt.getRank() != q.getRank() ||
      v.getRank() != q.getRank() ||
      q.getShape().drop_back(2) != kt.getShape().drop_back(2) ||
      q.getShape().drop_back(2) != v.getShape().drop_back(2)) {
    why = "Q, K and V do not share one batch shape";
    return failure();
  }
  if (q.getElementType() != kt.getElementType() ||
      q.getElementType() != v.getElementType() ||
      !isa<FloatType>(q.getElementType()) ||
      probsType.getElementType() != q.getElementType()) {
    why = "Q, K, V and the scores are not of one float type";
    return failure();
  }
  if (m.mask && !broadcastsOnto(m.mask, probs)) {
    why = "a mask that does not broadcast onto the scores";
    return failure();
  }
  m.product = reader;
  return success();
}

/// Erases the matched nodes, then the producers left without readers among
/// the nodes that fed them from constants (the scale and mask arithmetic).
static void eraseChain(ArrayRef<NodeOp> chain) {
  llvm::DenseSet<Operation *> erased;
  SmallVector<Operation *> work;
  auto erase = [&](Operation *op) {
    for (Value v : op->getOperands())
      if (auto p = v.getDefiningOp<NodeOp>())
        work.push_back(p);
    erased.insert(op);
    op->erase();
  };
  for (NodeOp n : chain)
    if (!erased.contains(n) && n->use_empty())
      erase(n);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (erased.contains(op) || !op->use_empty())
      continue;
    auto n = cast<NodeOp>(op);
    if (n.is("Constant") || n.is("Cast") || n.is("Pow") || n.is("Reciprocal") ||
        n.is("Sqrt") || n.is("Mul") || n.is("Div") || n.is("Where"))
      erase(op);
  }
}

void FuseAttentionPass::runOnOperation() {
  auto forward = getOperation().lookupSymbol<func::FuncOp>(kForwardFn);
  if (!forward)
    return;
  SmallVector<NodeOp> softmaxes;
  forward.walk([&](NodeOp n) {
    if (n.is("Softmax") && n.getDomain().empty())
      softmaxes.push_back(n);
  });
  // Debian's LLVM keeps no statistics (docs/passes.md): count here too.
  unsigned fused = 0, unfused = 0;
  for (NodeOp softmax : softmaxes) {
    Match m;
    std::string why;
    if (failed(matchAttention(softmax, m, why))) {
      mlir::emitRemark(softmax.getLoc())
          << "attention left unfused: " << why
          << "; its probabilities are saved for backward";
      ++numUnfused;
      ++unfused;
      continue;
    }
    if (!m.product)
      continue;
    OpBuilder b(m.product);
    ::oasr::ops::NodeBuilder nb{b};
    SmallVector<Value> operands = {m.q, m.kt, m.v};
    if (m.mask)
      operands.push_back(m.mask);
    // The fused node takes the softmax's name (its layer in traces).
    NodeOp node = nb.node(
        softmax.getLoc(), "FusedAttention", m.product->getResult(0).getType(),
        operands, {b.getNamedAttr("scale", b.getF32FloatAttr(float(m.scale)))});
    m.product->getResult(0).replaceAllUsesWith(node->getResult(0));
    eraseChain(m.chain);
    ++numFused;
    ++fused;
  }
  if (fused || unfused)
    mlir::emitRemark(forward.getLoc())
        << "oasr-fuse-attention: " << fused << " attention(s) fused, "
        << unfused << " left unfused";
}
