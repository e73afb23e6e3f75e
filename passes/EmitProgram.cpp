//===- EmitProgram.cpp - The compiled step as an .oasrprog file -----------===//
//
// lowerToProgram (lib/Lower) and writeProgram (runtime/ProgramIO.cpp): the
// file `oasr-run PATH.oasrprog` trains without compiling.
//
//===----------------------------------------------------------------------===//

#include "PassDetail.h"
#include "oasr/Lower/Lower.h"
#include "oasr/Passes/Passes.h"
#include "oasr/Runtime/ProgramIO.h"

namespace mlir::oasr {
#define GEN_PASS_DEF_EMITPROGRAM
#include "oasr/Passes/Passes.h.inc"
} // namespace mlir::oasr

using namespace mlir;

namespace {
struct EmitProgramPass : mlir::oasr::impl::EmitProgramBase<EmitProgramPass> {
  using Base::Base;
  void runOnOperation() final;
};
} // namespace

void EmitProgramPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (!::oasr::rt::isProgramFile(file)) {
    module.emitError("--oasr-emit-program: file='")
        << file << "': the program file's name must end in .oasrprog";
    return signalPassFailure();
  }
  auto program = ::oasr::rt::lowerToProgram(module);
  if (!program) {
    module.emitError("--oasr-emit-program: ")
        << llvm::toString(program.takeError());
    return signalPassFailure();
  }
  if (llvm::Error err = ::oasr::rt::writeProgram(*program, file)) {
    module.emitError("--oasr-emit-program: ") << llvm::toString(std::move(err));
    return signalPassFailure();
  }
}
