//===- FuseGelu.cpp - The exported erf GELU as one Gelu node --------------===//
//
// Matches y = Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5), with the
// commutative operands in either order and Mul(x, 1/sqrt2) for the Div,
// and replaces it by Gelu(x) when the chain's inner values have no other
// reader.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::oasr {
#define GEN_PASS_DEF_FUSEGELU
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

namespace {
struct FuseGeluPass : mlir::oasr::impl::FuseGeluBase<FuseGeluPass> {
  using Base::Base;
  void runOnOperation() final;
};
} // namespace

/// True when `v` is a constant scalar within 1e-6 (relative) of `want`.
static bool isScalar(Value v, double want) {
  std::optional<double> s = ::oasr::ops::scalarOf(v);
  return s && std::fabs(*s - want) <= 1e-6 * std::fabs(want);
}

/// The node of type `op` that is the only reader of `v`, or null.
static NodeOp soleUser(Value v, StringRef op) {
  if (!v.hasOneUse())
    return nullptr;
  auto n = dyn_cast<NodeOp>(*v.getUsers().begin());
  return n && n.is(op) && n->getNumResults() == 1 ? n : nullptr;
}

/// For a binary node reading `v` once: its other operand.
static Value otherOperand(NodeOp n, Value v) {
  if (n->getNumOperands() != 2)
    return nullptr;
  if (n->getOperand(0) == v)
    return n->getOperand(1);
  if (n->getOperand(1) == v)
    return n->getOperand(0);
  return nullptr;
}

/// The chain's x when `erf` is the Erf of a GELU, and its nodes in order.
static Value matchGelu(NodeOp erf, SmallVectorImpl<NodeOp> &chain) {
  auto scaled = erf->getOperand(0);
  auto pre = scaled.getDefiningOp<NodeOp>();
  if (!pre || !scaled.hasOneUse() || pre->getNumOperands() != 2)
    return nullptr;
  Value x;
  if (pre.is("Div") && isScalar(pre->getOperand(1), M_SQRT2))
    x = pre->getOperand(0);
  else if (pre.is("Mul") && isScalar(pre->getOperand(1), M_SQRT1_2))
    x = pre->getOperand(0);
  else if (pre.is("Mul") && isScalar(pre->getOperand(0), M_SQRT1_2))
    x = pre->getOperand(1);
  else
    return nullptr;
  NodeOp add = soleUser(erf->getResult(0), "Add");
  if (!add || !isScalar(otherOperand(add, erf->getResult(0)), 1.0))
    return nullptr;
  NodeOp mulX = soleUser(add->getResult(0), "Mul");
  if (!mulX || otherOperand(mulX, add->getResult(0)) != x)
    return nullptr;
  NodeOp half = soleUser(mulX->getResult(0), "Mul");
  if (!half || !isScalar(otherOperand(half, mulX->getResult(0)), 0.5))
    return nullptr;
  if (half->getResult(0).getType() != x.getType())
    return nullptr;
  chain.assign({half, mulX, add, erf, pre});
  return x;
}

void FuseGeluPass::runOnOperation() {
  auto forward = getOperation().lookupSymbol<func::FuncOp>(kForwardFn);
  if (!forward)
    return;
  SmallVector<NodeOp> erfs;
  forward.walk([&](NodeOp n) {
    if (n.is("Erf"))
      erfs.push_back(n);
  });
  for (NodeOp erf : erfs) {
    SmallVector<NodeOp> chain;
    Value x = matchGelu(erf, chain);
    if (!x)
      continue;
    NodeOp last = chain.front();
    OpBuilder b(last);
    ::oasr::ops::NodeBuilder nb{b};
    // The Gelu takes the name of the chain's Erf (its layer in traces).
    NodeOp gelu = nb.node(erf.getLoc(), "Gelu", x.getType(), {x});
    last->getResult(0).replaceAllUsesWith(gelu->getResult(0));
    SmallVector<Operation *> constants;
    for (NodeOp n : chain) {
      for (Value v : n->getOperands())
        if (auto c = v.getDefiningOp<NodeOp>(); c && c.is("Constant"))
          constants.push_back(c);
      n->erase();
    }
    for (Operation *c : constants)
      if (c->use_empty() && c->getBlock())
        c->erase();
    ++numFused;
  }
}
