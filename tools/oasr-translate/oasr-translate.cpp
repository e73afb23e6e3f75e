//===- oasr-translate.cpp - ONNX to oasr IR translation -------------------===//
//
// `oasr-translate --import-onnx model.onnx -o model.mlir`: imports a binary,
// text (.txtpb/.textproto/.pbtxt) or JSON ModelProto into the oasr IR and
// prints it. Errors name the file and node and exit non-zero.
//
//===----------------------------------------------------------------------===//

#include "oasr/Config.h"
#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Import/ONNXImporter.h"
#include "oasr/Ops/OpRegistry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace llvm;

static cl::OptionCategory category("oasr-translate options");

static cl::opt<std::string>
    inputFilename(cl::Positional, cl::desc("<model.onnx>"), cl::cat(category));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("filename"),
                                           cl::init("-"), cl::cat(category));
static cl::opt<bool> importONNX("import-onnx",
                                cl::desc("Import an ONNX ModelProto (binary, "
                                         "text or JSON) into the oasr IR"),
                                cl::cat(category));
static cl::opt<int64_t> batch("batch",
                              cl::desc("Set dimension 0 of every graph input"),
                              cl::init(0), cl::cat(category));
static cl::list<std::string>
    dims("dim", cl::desc("Fix a symbolic dimension: --dim name=value"),
         cl::value_desc("name=value"), cl::cat(category));
static cl::opt<bool> noVerifyExternal(
    "no-check-external-data",
    cl::desc("Do not check that external-data side files exist"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> printImportTime(
    "print-import-time",
    cl::desc("Print the in-process import + verify time to stderr"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> ownShapeRules(
    "prefer-own-shape-rules",
    cl::desc("Infer shapes with oasr's own rules first, libonnx's only for "
             "ops without one (to cross-check the two)"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> printOpTable(
    "print-op-table",
    cl::desc("Print the supported-op table (docs/generated/Ops.md) from the "
             "op registry"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> quiet("quiet",
                           cl::desc("Import and verify, print nothing"),
                           cl::init(false), cl::cat(category));

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "oasr-translate (oasr " << OASR_VERSION << ", MLIR/LLVM "
       << LLVM_VERSION_STRING << ")\n";
  });
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::ParseCommandLineOptions(argc, argv, "oasr translation driver\n");

  if (printOpTable) {
    std::string error;
    auto output = mlir::openOutputFile(outputFilename, &error);
    if (!output) {
      errs() << "oasr-translate: " << error << "\n";
      return 1;
    }
    oasr::ops::OpRegistry::get().printMarkdown(output->os());
    output->keep();
    return 0;
  }
  if (!importONNX) {
    errs() << "oasr-translate: choose a translation (--import-onnx or "
              "--print-op-table)\n";
    return 1;
  }
  if (inputFilename.empty()) {
    errs() << "oasr-translate: --import-onnx needs a model file\n";
    return 1;
  }
  oasr::onnximport::ImportOptions options;
  options.batch = batch;
  options.checkExternalData = !noVerifyExternal;
  options.preferOwnShapeRules = ownShapeRules;
  for (const std::string &spec : dims) {
    std::string error;
    if (!oasr::onnximport::parseDimOption(spec, options, error)) {
      errs() << "oasr-translate: " << error << "\n";
      return 1;
    }
  }

  mlir::MLIRContext context;
  // Messages already name the file and node: print them as they are.
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    switch (diag.getSeverity()) {
    case mlir::DiagnosticSeverity::Error:
      errs() << "error: ";
      break;
    case mlir::DiagnosticSeverity::Warning:
      errs() << "warning: ";
      break;
    default:
      errs() << "note: ";
      break;
    }
    errs() << diag << "\n";
    for (mlir::Diagnostic &note : diag.getNotes())
      errs() << "note: " << note << "\n";
    return mlir::success();
  });

  auto start = std::chrono::steady_clock::now();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      oasr::onnximport::importONNX(context, inputFilename, options);
  if (!module)
    return 1;
  if (printImportTime)
    errs() << "import-time-s: "
           << std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            start)
                  .count()
           << "\n";
  if (quiet)
    return 0;

  std::string error;
  auto output = mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    errs() << "oasr-translate: " << error << "\n";
    return 1;
  }
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return 0;
}
