//===- oasr-opt.cpp - The oasr optimizer driver ---------------------------===//
//
// MlirOptMain with the oasr dialect, func, and every oasr pass and pipeline.
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Passes/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "oasr-opt (oasr " << OASR_VERSION << ", MLIR/LLVM "
       << LLVM_VERSION_STRING << ")\n";
  });
  mlir::registerTransformsPasses();
  mlir::oasr::registerAllPasses();

  mlir::DialectRegistry registry;
  registry.insert<mlir::oasr::OASRDialect, mlir::func::FuncDialect,
                  mlir::cf::ControlFlowDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "oasr optimizer driver: training-graph passes\n", registry));
}
