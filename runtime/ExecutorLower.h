//===- ExecutorLower.h - Lowering the IR to the executor's plan -*- C++ -*-===//
//
// Private to the lowering library (OASRLower: ExecutorBuild.cpp,
// ExecutorIR.cpp): Executor::create reads the compiled training module and
// builds the plan of ExecutorImpl.h. The only part of the runtime that links
// MLIR; the plan then runs without it.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_RUNTIME_EXECUTORLOWER_H
#define OASR_RUNTIME_EXECUTORLOWER_H

#include "ExecutorImpl.h"

#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Ops/OpRegistry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

namespace oasr::rt {

// Reading the IR (ExecutorIR.cpp).

/// "file:line:col" of an IR location ("" when unknown).
std::string locName(mlir::Location loc);
/// The node's name for messages ('name' (OpType) or the op's name).
std::string opName(mlir::Operation *op);
/// An error naming the node and where it is.
llvm::Error opError(mlir::Operation *op, const llvm::Twine &msg);
/// A ranked tensor type as a TensorDesc; errors name the node, or the
/// function argument's tag when `argument` is given.
llvm::Expected<TensorDesc> descOf(mlir::Type type, mlir::Operation *op,
                                  llvm::StringRef argument = "");
/// ONNX attribute -> runtime attribute. Returns false for attributes the
/// runtime does not pass to kernels.
bool convertAttr(mlir::Attribute a, AttrValue &out);
/// Bytes of a dense constant in the runtime's layout.
llvm::Error materialize(mlir::DenseElementsAttr dense, const TensorDesc &desc,
                        std::vector<char> &bytes, mlir::Operation *op);
/// Views alias their result to operand 0 (the op registry's View trait).
bool isView(llvm::StringRef opType);
/// Bytes of RAM plus swap of this machine (0 when unknown).
uint64_t hostMemoryBytes();

} // namespace oasr::rt

#endif // OASR_RUNTIME_EXECUTORLOWER_H
