//===- LowerImpl.h - Lowering the IR to a Program -------------*- C++ -*-===//
//
// Private to the lowering library (OASRLower: LowerProgram.cpp,
// LowerIR.cpp): lowerToProgram reads the compiled training module and
// writes it as a Program (oasr/Runtime/Program.h). The only part that links
// MLIR on the way to the executor; the program then loads without it.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_LIB_LOWER_LOWERIMPL_H
#define OASR_LIB_LOWER_LOWERIMPL_H

#include "oasr/Lower/Lower.h"
#include "oasr/Runtime/Program.h"

#include "oasr/Dialect/OASRDialect.h"
#include "oasr/Ops/OpRegistry.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

namespace oasr::rt {

// Reading the IR (LowerIR.cpp).

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
/// A forward Cast of an f32 parameter to bf16/f16 whose readers (and their
/// views') all run before the parameter's optimizer update: a copy the
/// update can keep (KernelBackend::updatesWeightCopies).
bool isParamCopyCast(mlir::func::FuncOp fn, mlir::oasr::NodeOp node);

} // namespace oasr::rt

#endif // OASR_LIB_LOWER_LOWERIMPL_H
