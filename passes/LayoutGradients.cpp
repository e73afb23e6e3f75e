//===- LayoutGradients.cpp - One contiguous buffer per allreduce group ----===//
//
// Gives the gradients of each fused allreduce consecutive, aligned byte
// offsets in one buffer so the collective needs no packing copy.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::oasr {
#define GEN_PASS_DEF_LAYOUTGRADIENTS
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;
using namespace mlir::oasr;

namespace {
struct LayoutGradientsPass
    : mlir::oasr::impl::LayoutGradientsBase<LayoutGradientsPass> {
  using Base::Base;
  void runOnOperation() final;
};
} // namespace

void LayoutGradientsPass::runOnOperation() {
  ModuleOp module = getOperation();
  int64_t align = alignment;
  if (align < 1 || !llvm::isPowerOf2_64(align)) {
    module.emitError("'alignment' must be a power of two, got ") << align;
    return signalPassFailure();
  }
  Builder b(module.getContext());
  WalkResult result = module.walk([&](AllreduceStartOp start) {
    SmallVector<int64_t> offsets;
    int64_t end = 0, payload = 0;
    for (auto [i, g] : llvm::enumerate(start.getGrads())) {
      auto type = cast<RankedTensorType>(g.getType());
      if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat()) {
        start.emitError("gradient #")
            << i << " of group " << start.getGroup() << " (type " << g.getType()
            << ") has no static byte size to place in the group's buffer";
        return WalkResult::interrupt();
      }
      int64_t bytes = tensorBytes(type);
      int64_t offset = llvm::alignTo(end, align);
      offsets.push_back(offset);
      end = offset + bytes;
      payload += bytes;
    }
    int64_t size = llvm::alignTo(end, align);
    start.setOffsetsAttr(b.getDenseI64ArrayAttr(offsets));
    start.setBufferBytesAttr(b.getI64IntegerAttr(size));
    ++numBuffers;
    bufferBytes += size;
    paddingBytes += size - payload;
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    signalPassFailure();
}
