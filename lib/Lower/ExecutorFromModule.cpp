//===- ExecutorFromModule.cpp - Executor::create for a module -------------===//
//
// A compiled module run in process: lowerToProgram, then the runtime's
// Executor::create(Program). Its own library (OASRLowerRun), so that the
// lowering alone (OASRLower, which the emit-program pass uses) does not
// link the runtime.
//
//===----------------------------------------------------------------------===//

#include "oasr/Lower/Lower.h"
#include "oasr/Runtime/Executor.h"

namespace oasr::rt {

llvm::Expected<std::unique_ptr<Executor>>
Executor::create(mlir::ModuleOp module, KernelBackend &backend,
                 const ExecutorOptions &options) {
  auto program = lowerToProgram(module);
  if (!program)
    return program.takeError();
  return create(std::move(*program), backend, options);
}

} // namespace oasr::rt
