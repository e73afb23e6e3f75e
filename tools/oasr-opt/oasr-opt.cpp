//===- oasr-opt.cpp - The oasr optimizer driver ---------------------------===//
//
// MlirOptMain with the oasr dialect, func, and every oasr pass and pipeline.
// An ONNX model (.onnx, or a text ModelProto) is imported first, so
// `oasr-opt model.onnx --batch=32 --oasr-train-pipeline` works directly.
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Import/ONNXImporter.h"
#include "oasr/Import/ONNXModel.h"
#include "oasr/Passes/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

static llvm::cl::opt<int64_t>
    importBatch("batch",
                llvm::cl::desc("With an ONNX input: set dimension 0 of every "
                               "graph input"),
                llvm::cl::init(0));
static llvm::cl::list<std::string>
    importDims("dim",
               llvm::cl::desc("With an ONNX input: fix a symbolic dimension "
                              "(name=value)"),
               llvm::cl::value_desc("name=value"));

/// Imports the ONNX model and runs MlirOptMain on the imported module
/// (printed with its locations, so node names survive).
static mlir::LogicalResult runOnONNX(llvm::StringRef inputFilename,
                                     llvm::StringRef outputFilename,
                                     mlir::DialectRegistry &registry) {
  oasr::onnximport::ImportOptions options;
  options.batch = importBatch;
  for (const std::string &spec : importDims) {
    std::string error;
    if (!oasr::onnximport::parseDimOption(spec, options, error)) {
      llvm::errs() << "oasr-opt: " << error << "\n";
      return mlir::failure();
    }
  }
  std::string text;
  {
    mlir::MLIRContext context(registry);
    // Import errors already name the file and node.
    mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &d) {
      llvm::errs() << (d.getSeverity() == mlir::DiagnosticSeverity::Error
                           ? "error: "
                           : "note: ")
                   << d << "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        oasr::onnximport::importONNX(context, inputFilename, options);
    if (!module)
      return mlir::failure();
    llvm::raw_string_ostream os(text);
    module->print(os, mlir::OpPrintingFlags().enableDebugInfo());
  }
  std::string error;
  auto output = mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "oasr-opt: " << error << "\n";
    return mlir::failure();
  }
  if (mlir::failed(mlir::MlirOptMain(
          output->os(),
          llvm::MemoryBuffer::getMemBufferCopy(text, inputFilename), registry,
          mlir::MlirOptMainConfig::createFromCLOptions())))
    return mlir::failure();
  output->keep();
  return mlir::success();
}

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
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "oasr optimizer driver: training-graph passes\n", registry);
  if (inputFilename != "-" &&
      oasr::onnximport::ModelFile::isONNX(inputFilename))
    return mlir::asMainReturnCode(
        runOnONNX(inputFilename, outputFilename, registry));
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}
