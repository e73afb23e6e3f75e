//===- FuseCasts.cpp - Products write the f32 their reader widens to ------===//
//
// In a mixed-precision step the gradient of a parameter leaves its product
// in 16 bits and the Cast's gradient widens it to f32 for the master
// weights; a classifier's logits are widened for the loss likewise. A
// product that accumulates in f32 (the WideResults trait) can write that
// f32 itself: one pass over the tensor and one rounding fewer.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

namespace mlir::oasr {
#define GEN_PASS_DEF_FUSECASTS
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

namespace {
struct FuseCastsPass : mlir::oasr::impl::FuseCastsBase<FuseCastsPass> {
  using Base::Base;
  void runOnOperation() final;
};
} // namespace

void FuseCastsPass::runOnOperation() {
  func::FuncOp step = stepOrForward(getOperation());
  if (!step)
    return;
  const ::oasr::ops::OpRegistry &registry = ::oasr::ops::OpRegistry::get();
  SmallVector<NodeOp> casts;
  step.walk([&](NodeOp n) {
    if (n.is("Cast"))
      casts.push_back(n);
  });
  for (NodeOp cast : casts) {
    auto wide = dyn_cast<RankedTensorType>(cast->getResult(0).getType());
    Value src = cast->getOperand(0);
    auto narrow = dyn_cast<RankedTensorType>(src.getType());
    if (!wide || !narrow || !wide.getElementType().isF32() ||
        !(narrow.getElementType().isBF16() ||
          narrow.getElementType().isF16()) ||
        !src.hasOneUse())
      continue;
    auto producer = src.getDefiningOp<NodeOp>();
    const ::oasr::ops::OpDef *def =
        producer ? registry.lookup(producer) : nullptr;
    if (!def || !def->has(::oasr::ops::WideResults))
      continue;
    src.setType(wide);
    cast->getResult(0).replaceAllUsesWith(src);
    cast->erase();
    ++numFused;
  }
}
