//===- RuleSupport.h - Helpers the op families share ------------*- C++ -*-===//
//
// Private to lib/Ops: shape arithmetic on TensorFacts (broadcasting, axes,
// convolution windows), the common shape rules, and the pieces of the cost
// rules (element counts, memory traffic).
//
//===----------------------------------------------------------------------===//

#ifndef OASR_LIB_OPS_RULESUPPORT_H
#define OASR_LIB_OPS_RULESUPPORT_H

#include "oasr/Import/ONNXModel.h"
#include "oasr/Ops/GradContext.h"
#include "oasr/Ops/OpRegistry.h"

namespace oasr::ops {

using ::oasr::onnximport::DataType;

constexpr int32_t kFloat = int32_t(DataType::Float);
constexpr int32_t kInt64 = int32_t(DataType::Int64);
constexpr int32_t kBool = int32_t(DataType::Bool);

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

inline int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// Normalizes `axis` into [0, rank). When it is outside [-rank, rank) (a
/// model can say anything), sets `c.why` and returns false: shape rules
/// index dims with it.
inline bool checkAxis(ShapeContext &c, int64_t &axis, int64_t rank) {
  int64_t normalized = normalizeAxis(axis, rank);
  if (normalized < 0 || normalized >= rank) {
    c.why = "axis " + std::to_string(axis) + " is out of range for rank " +
            std::to_string(rank);
    return false;
  }
  axis = normalized;
  return true;
}

/// Numpy broadcasting of `shapes`; false when incompatible.
bool broadcast(llvm::ArrayRef<const TensorFacts *> shapes,
               llvm::SmallVectorImpl<int64_t> &out);

/// Output size of a convolution/pool window along one axis (-1 unknown).
int64_t windowOutput(int64_t in, int64_t kernel, int64_t stride,
                     int64_t dilation, int64_t padBegin, int64_t padEnd,
                     bool ceilMode);

/// Every result like input 0.
bool shapeSameAsInput(ShapeContext &c);
/// The type of the forward node's operand `operand` (gradient rules).
inline mlir::Type typeOf(GradContext &c, unsigned operand) {
  return c.in(operand).getType();
}
/// Every result the numpy broadcast of all inputs, with input 0's type.
bool shapeBroadcast(ShapeContext &c);

/// Identity, Reshape, Flatten, Squeeze, Unsqueeze, Cast: the same values.
bool foldCopy(FoldContext &c);

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

int64_t numel(Value v);
/// Product of the dimensions of `type` from axis `from` on (0 when unknown).
int64_t productFrom(Type type, unsigned from);
/// Product of the `kernel_shape` attribute.
int64_t kernelSize(Operation *op);
/// Memory traffic: every operand read and every used result written.
double trafficBytes(Operation *op);
/// True when result `i` has users.
bool resultUsed(Operation *op, unsigned i);

/// No data moves (views, constants, shape queries).
Work costFree(Operation *op);
/// One operation per result element (elementwise ops, data movement).
Work costPerResult(Operation *op);
/// `N` operations per element of operand 0 (transcendental functions).
template <int N> Work costPerInput(Operation *op) {
  return {double(N) * double(numel(op->getOperand(0))), trafficBytes(op)};
}
/// `N` operations per element of result 0 (gradients of those functions).
template <int N> Work costPerOutput(Operation *op) {
  return {op->getNumResults() ? double(N) * double(numel(op->getResult(0)))
                              : 0.0,
          trafficBytes(op)};
}

} // namespace oasr::ops

#endif // OASR_LIB_OPS_RULESUPPORT_H
