//===- OASRDialect.h - The oasr dialect -------------------------*- C++ -*-===//
//
// Declares the oasr dialect, its attributes, types and operations.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_DIALECT_OASRDIALECT_H
#define OASR_DIALECT_OASRDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "oasr/Dialect/AttrNames.h"
#include "oasr/Dialect/OASRDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "oasr/Dialect/OASRAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "oasr/Dialect/OASRTypes.h.inc"

#define GET_OP_CLASSES
#include "oasr/Dialect/OASROps.h.inc"

#endif // OASR_DIALECT_OASRDIALECT_H
