//===- ImportFuzzer.cpp - libFuzzer target: ModelFile + ONNX import -------===//
//
// One input is one binary ModelProto. It is loaded through ModelFile (the
// wire-level scan that leaves big raw_data in place), imported into a fresh
// MLIRContext (diagnostics swallowed: an error is a fine outcome, a crash,
// hang or sanitizer report is not), and every initializer is read. The model
// "lives" in an empty directory, so external data can never name a file
// that exists (the location rule keeps it inside that directory anyway).
//
//===----------------------------------------------------------------------===//

#include "oasr/Import/ONNXImporter.h"
#include "oasr/Import/ONNXModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

#include <cstdint>

using namespace oasr::onnximport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.onnx");
  auto model = ModelFile::loadFromBuffer(
      std::move(buffer), "/nonexistent-oasr-fuzz-dir/fuzz.onnx", "binary");
  if (!model) {
    llvm::consumeError(model.takeError());
    return 0;
  }
  for (const onnx::TensorProto &init : (*model)->proto().graph().initializer())
    if (auto bytes = (*model)->readTensor(init); !bytes)
      llvm::consumeError(bytes.takeError());

  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  ImportOptions options;
  options.batch = 2; // symbolic batch dims become 2 instead of an error
  mlir::OwningOpRef<mlir::ModuleOp> module =
      importONNX(context, **model, options);
  (void)module;
  return 0;
}
