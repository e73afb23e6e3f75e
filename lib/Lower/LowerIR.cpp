//===- LowerIR.cpp - Reading the IR for the program ----------------------===//
//
// Names, locations and errors of IR operations, tensor types as TensorDescs,
// attributes as kernel attributes, constants materialized into buffers.
//
//===----------------------------------------------------------------------===//

#include "LowerImpl.h"

using namespace mlir;
using llvm::Expected;

namespace oasr::rt {

//===----------------------------------------------------------------------===//
// IR -> plan helpers
//===----------------------------------------------------------------------===//

std::string locName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations()) {
      std::string s = locName(l);
      if (!s.empty())
        return s;
    }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return llvm::formatv("{0}:{1}:{2}", file.getFilename().getValue(),
                         file.getLine(), file.getColumn())
        .str();
  return "";
}

std::string opName(Operation *op) {
  std::string s = locName(op->getLoc());
  if (!s.empty())
    return s;
  if (auto node = dyn_cast<mlir::oasr::NodeOp>(op))
    return node.getOpType().str();
  return op->getName().getStringRef().str();
}

llvm::Error opError(Operation *op, const llvm::Twine &msg) {
  std::string where = locName(op->getLoc());
  std::string kind;
  if (auto node = dyn_cast<mlir::oasr::NodeOp>(op))
    kind = ("'" + node.getOpType() + "'").str();
  else
    kind = ("'" + op->getName().getStringRef() + "'").str();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      (kind + (where.empty() ? "" : " at " + where) + ": " + msg).str());
}

Expected<TensorDesc> descOf(Type type, Operation *op, StringRef argument) {
  // Errors name the node, or for a function argument, its tag's value.
  auto fail = [&](const llvm::Twine &msg) {
    if (argument.empty())
      return opError(op, msg);
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        ("@train_step argument '" + argument + "': " + msg).str());
  };
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return fail("needs statically shaped tensors, got a value of type " +
                llvm::formatv("{0}", type).str());
  TensorDesc d;
  Type e = t.getElementType();
  if (e.isF32())
    d.dtype = DType::F32;
  else if (e.isF16())
    d.dtype = DType::F16;
  else if (e.isBF16())
    d.dtype = DType::BF16;
  else if (e.isInteger(64))
    d.dtype = DType::I64;
  else if (e.isInteger(32))
    d.dtype = DType::I32;
  else if (e.isInteger(1))
    d.dtype = DType::Bool;
  else
    return fail("unsupported element type " + llvm::formatv("{0}", e).str());
  d.shape.assign(t.getShape().begin(), t.getShape().end());
  // Sizes are int64/size_t products everywhere below (and in every kernel
  // library): refuse a shape whose element or byte count overflows.
  uint64_t elements = 1;
  for (int64_t dim : d.shape) {
    if (dim < 0 || (dim && elements > uint64_t(INT64_MAX) / uint64_t(dim)))
      return fail("cannot allocate a value of type " +
                  llvm::formatv("{0}", type).str() +
                  ": its element count overflows 64 bits");
    elements *= uint64_t(dim);
  }
  if (elements > uint64_t(INT64_MAX) / dtypeSize(d.dtype))
    return fail("cannot allocate a value of type " +
                llvm::formatv("{0}", type).str() +
                ": its size in bytes overflows 64 bits");
  // cuDNN and cuBLAS take 32-bit dimensions; oneDNN's primitive creation
  // dies with SIGFPE from 2^32 rows. No kernel is created for such a value.
  for (auto [i, dim] : llvm::enumerate(d.shape))
    if (dim > INT32_MAX)
      return fail(llvm::formatv("cannot allocate a value of type {0}: "
                                "dimension {1} ({2}) is 2^31 or more, "
                                "beyond what the kernel libraries "
                                "take",
                                type, i, dim)
                      .str());
  return d;
}

/// Bytes of RAM plus swap of this machine (0 when unknown).
/// ONNX attribute -> runtime attribute. Returns false for attributes the
/// runtime does not pass to kernels.
bool convertAttr(Attribute a, AttrValue &out) {
  if (auto i = dyn_cast<IntegerAttr>(a)) {
    out = int64_t(i.getValue().getSExtValue());
    return true;
  }
  if (auto f = dyn_cast<FloatAttr>(a)) {
    out = f.getValueAsDouble();
    return true;
  }
  if (auto s = dyn_cast<StringAttr>(a)) {
    out = s.getValue().str();
    return true;
  }
  if (auto arr = dyn_cast<DenseI64ArrayAttr>(a)) {
    out =
        std::vector<int64_t>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<DenseI32ArrayAttr>(a)) {
    out =
        std::vector<int64_t>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<DenseF32ArrayAttr>(a)) {
    out = std::vector<double>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<DenseF64ArrayAttr>(a)) {
    out = std::vector<double>(arr.asArrayRef().begin(), arr.asArrayRef().end());
    return true;
  }
  if (auto arr = dyn_cast<ArrayAttr>(a)) {
    bool allInt = true, allNum = true, allStr = true;
    for (Attribute e : arr) {
      allInt &= isa<IntegerAttr>(e);
      allNum &= isa<IntegerAttr, FloatAttr>(e);
      allStr &= isa<StringAttr>(e);
    }
    if (allStr && !arr.empty()) {
      std::vector<std::string> v;
      for (Attribute e : arr)
        v.push_back(cast<StringAttr>(e).getValue().str());
      out = std::move(v);
      return true;
    }
    if (allInt) {
      std::vector<int64_t> v;
      for (Attribute e : arr)
        v.push_back(cast<IntegerAttr>(e).getValue().getSExtValue());
      out = std::move(v);
      return true;
    }
    if (allNum) {
      std::vector<double> v;
      for (Attribute e : arr)
        v.push_back(
            isa<FloatAttr>(e)
                ? cast<FloatAttr>(e).getValueAsDouble()
                : double(cast<IntegerAttr>(e).getValue().getSExtValue()));
      out = std::move(v);
      return true;
    }
    return false;
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(a)) {
    Type e = dense.getElementType();
    if (isa<FloatType>(e)) {
      std::vector<double> v;
      for (APFloat f : dense.getValues<APFloat>())
        v.push_back(f.convertToDouble());
      out = std::move(v);
      return true;
    }
    if (isa<IntegerType>(e)) {
      std::vector<int64_t> v;
      for (APInt i : dense.getValues<APInt>())
        v.push_back(e.isInteger(1) ? int64_t(i.getZExtValue())
                                   : i.getSExtValue());
      out = std::move(v);
      return true;
    }
  }
  return false;
}

/// Bytes of a dense constant in the runtime's layout.
llvm::Error materialize(DenseElementsAttr dense, const TensorDesc &desc,
                        std::vector<char> &bytes, Operation *op) {
  bytes.assign(desc.bytes(), 0);
  int64_t n = desc.numel();
  auto at = [&](int64_t i) { return dense.isSplat() ? 0 : i; };
  switch (desc.dtype) {
  case DType::F32: {
    auto vals = llvm::to_vector(dense.getValues<APFloat>());
    for (int64_t i = 0; i < n; ++i)
      reinterpret_cast<float *>(bytes.data())[i] =
          float(vals[at(i)].convertToDouble());
    return llvm::Error::success();
  }
  case DType::F16:
  case DType::BF16: {
    auto vals = llvm::to_vector(dense.getValues<APFloat>());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h = uint16_t(vals[at(i)].bitcastToAPInt().getZExtValue());
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    return llvm::Error::success();
  }
  case DType::I64:
  case DType::I32:
  case DType::Bool: {
    auto vals = llvm::to_vector(dense.getValues<APInt>());
    for (int64_t i = 0; i < n; ++i) {
      const APInt &v = vals[at(i)];
      if (desc.dtype == DType::I64)
        reinterpret_cast<int64_t *>(bytes.data())[i] = v.getSExtValue();
      else if (desc.dtype == DType::I32)
        reinterpret_cast<int32_t *>(bytes.data())[i] =
            int32_t(v.getSExtValue());
      else
        bytes[i] = char(v.getZExtValue() != 0);
    }
    return llvm::Error::success();
  }
  }
  return opError(op, "cannot materialise this constant");
}

/// Views alias their result to operand 0 (the op registry's View trait).
bool isView(StringRef opType) {
  return ::oasr::ops::OpRegistry::get().hasTrait(opType, ::oasr::ops::View);
}

bool isParamCopyCast(func::FuncOp fn, mlir::oasr::NodeOp node) {
  Operation *op = node;
  if (op->getNumOperands() != 1 || op->getNumResults() != 1)
    return false;
  auto arg = dyn_cast<BlockArgument>(op->getOperand(0));
  if (!arg || op->hasAttr(mlir::oasr::kLayerAttr) ||
      !fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                       mlir::oasr::kParamAttr))
    return false;
  auto from = dyn_cast<RankedTensorType>(arg.getType());
  auto to = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!from || !to || !from.getElementType().isF32() ||
      !(to.getElementType().isBF16() || to.getElementType().isF16()))
    return false;
  Operation *update = nullptr;
  for (Operation *user : arg.getUsers())
    if (auto u = dyn_cast<mlir::oasr::OptimizerUpdateOp>(user))
      if (u.getParam() == arg)
        update = user;
  if (!update)
    return false;
  std::function<bool(Value)> readBefore = [&](Value v) {
    for (Operation *user : v.getUsers()) {
      if (!user->isBeforeInBlock(update))
        return false;
      if (auto n = dyn_cast<mlir::oasr::NodeOp>(user))
        if (isView(n.getOpType()) && !readBefore(n->getResult(0)))
          return false;
    }
    return true;
  };
  return readBefore(op->getResult(0));
}

} // namespace oasr::rt
