//===- FuseMatMulTranspose.cpp - Products that read transposed operands ---===//
//
// MatMul(Transpose(a), b) with a Transpose swapping the last two axes
// becomes FusedMatMul(a, b) {transA = 1} (likewise for b): the kernel reads
// the operand through its strides instead of a copy being made first.
// Autodiff's MatMul gradients (dA = dY * B^T, dB = A^T * dY) and exported
// linear layers (MatMul(x, Transpose(W))) are all of this form. A product
// read only by such a Transpose computes the transposed result itself
// (B^T A^T), as the gradient of a transposed weight needs.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::oasr {
#define GEN_PASS_DEF_FUSEMATMULTRANSPOSE
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

namespace {
struct FuseMatMulTransposePass
    : mlir::oasr::impl::FuseMatMulTransposeBase<FuseMatMulTransposePass> {
  using Base::Base;
  void runOnOperation() final;
};
} // namespace

/// The operand of `v`'s producer when it is a Transpose that swaps the last
/// two axes of a tensor of rank >= 2 (and nothing else), else null.
static Value swappedFrom(Value v) {
  auto t = v.getDefiningOp<NodeOp>();
  if (!t || !t.is("Transpose") || t->getNumOperands() != 1)
    return nullptr;
  auto type = dyn_cast<RankedTensorType>(t->getOperand(0).getType());
  if (!type || type.getRank() < 2)
    return nullptr;
  std::optional<SmallVector<int64_t>> perm =
      ::oasr::ops::intsOf(t->getAttr("perm"));
  int64_t r = type.getRank();
  if (!perm || int64_t(perm->size()) != r)
    return nullptr;
  for (int64_t i = 0; i < r - 2; ++i)
    if ((*perm)[i] != i)
      return nullptr;
  if ((*perm)[r - 2] != r - 1 || (*perm)[r - 1] != r - 2)
    return nullptr;
  return t->getOperand(0);
}

void FuseMatMulTransposePass::runOnOperation() {
  func::FuncOp step = stepOrForward(getOperation());
  if (!step)
    return;
  SmallVector<NodeOp> matmuls;
  step.walk([&](NodeOp n) {
    if (n.is("MatMul") && n.getDomain().empty())
      matmuls.push_back(n);
  });
  for (NodeOp mm : matmuls) {
    Value a = mm->getOperand(0), b = mm->getOperand(1);
    Value ra = swappedFrom(a), rb = swappedFrom(b);
    // Rank-1 operands are promoted by MatMul's own rule, not FusedMatMul's.
    if ((!ra && !rb) || cast<RankedTensorType>(a.getType()).getRank() < 2 ||
        cast<RankedTensorType>(b.getType()).getRank() < 2)
      continue;
    OpBuilder builder(mm);
    SmallVector<NamedAttribute> attrs(mm->getDiscardableAttrs());
    attrs.push_back(
        builder.getNamedAttr("transA", builder.getI64IntegerAttr(ra ? 1 : 0)));
    attrs.push_back(
        builder.getNamedAttr("transB", builder.getI64IntegerAttr(rb ? 1 : 0)));
    ::oasr::ops::NodeBuilder nb{builder};
    NodeOp fused = nb.node(mm.getLoc(), "FusedMatMul", mm->getResultTypes(),
                           {ra ? ra : a, rb ? rb : b}, attrs, "com.microsoft");
    mm->getResult(0).replaceAllUsesWith(fused->getResult(0));
    mm->erase();
    for (Value v : {a, b})
      if (Operation *t = v.getDefiningOp(); t && t->use_empty())
        t->erase();
    ++numFused;
  }

  // Transpose(op(A) · op(B)) = op(B)ᵀ · op(A)ᵀ: a product whose only reader
  // transposes it (autodiff's gradient of a transposed weight) computes the
  // transposed result itself.
  SmallVector<NodeOp> transposes;
  step.walk([&](NodeOp n) {
    if (n.is("Transpose"))
      transposes.push_back(n);
  });
  for (NodeOp t : transposes) {
    Value prod = swappedFrom(t->getResult(0));
    if (!prod || !prod.hasOneUse())
      continue;
    auto mm = prod.getDefiningOp<NodeOp>();
    if (!mm || mm->getNumOperands() != 2)
      continue;
    bool plain = mm.is("MatMul");
    bool fused = mm.getOpType() == "FusedMatMul" &&
                 mm.getDomain() == "com.microsoft" &&
                 !::oasr::ops::intAttr(mm, "transBatchA", 0) &&
                 !::oasr::ops::intAttr(mm, "transBatchB", 0);
    if (!plain && !fused)
      continue;
    if (cast<RankedTensorType>(mm->getOperand(0).getType()).getRank() < 2 ||
        cast<RankedTensorType>(mm->getOperand(1).getType()).getRank() < 2)
      continue;
    int64_t ta = fused ? ::oasr::ops::intAttr(mm, "transA", 0) : 0;
    int64_t tb = fused ? ::oasr::ops::intAttr(mm, "transB", 0) : 0;
    OpBuilder builder(t);
    SmallVector<NamedAttribute> attrs;
    for (NamedAttribute a : mm->getDiscardableAttrs())
      if (a.getName() != "transA" && a.getName() != "transB")
        attrs.push_back(a);
    attrs.push_back(
        builder.getNamedAttr("transA", builder.getI64IntegerAttr(!tb)));
    attrs.push_back(
        builder.getNamedAttr("transB", builder.getI64IntegerAttr(!ta)));
    ::oasr::ops::NodeBuilder nb{builder};
    NodeOp swapped =
        nb.node(mm.getLoc(), "FusedMatMul", t->getResultTypes(),
                {mm->getOperand(1), mm->getOperand(0)}, attrs, "com.microsoft");
    t->getResult(0).replaceAllUsesWith(swapped->getResult(0));
    t->erase();
    mm->erase();
    ++numFused;
  }
}
