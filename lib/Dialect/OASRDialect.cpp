//===- OASRDialect.cpp - The oasr dialect ---------------------------------===//
//
// Dialect registration, attribute/type storage, custom assembly and verifiers
// of the oasr dialect.
//
//===----------------------------------------------------------------------===//

#include "oasr/Dialect/OASRDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::oasr;

#include "oasr/Dialect/OASRDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "oasr/Dialect/OASRAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "oasr/Dialect/OASRTypes.cpp.inc"

#define GET_OP_CLASSES
#include "oasr/Dialect/OASROps.cpp.inc"

void OASRDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "oasr/Dialect/OASROps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "oasr/Dialect/OASRAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "oasr/Dialect/OASRTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//

static LogicalResult verifyNameTag(function_ref<InFlightDiagnostic()> emitError,
                                   NamedAttribute attr) {
  auto str = dyn_cast<StringAttr>(attr.getValue());
  if (!str || str.getValue().empty())
    return emitError() << "'" << attr.getName().getValue()
                       << "' must be a non-empty string naming the ONNX "
                          "initializer";
  return success();
}

LogicalResult OASRDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == kCostAttr && !isa<CostAttr>(attr.getValue()))
    return op->emitOpError()
           << "'" << kCostAttr << "' must be a #oasr.cost attribute";
  if (attr.getName() == kParamAttr || attr.getName() == kStateAttr)
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' tags function arguments, not operations";
  return success();
}

LogicalResult OASRDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  auto emitError = [&] {
    return op->emitOpError() << "argument #" << argIndex << ": ";
  };
  if (attr.getName() == kParamAttr || attr.getName() == kStateAttr) {
    if (failed(verifyNameTag(emitError, attr)))
      return failure();
    Region &region = op->getRegion(regionIndex);
    if (attr.getName() == kParamAttr && !region.empty() &&
        region.getArgument(argIndex).getType() &&
        !isa<RankedTensorType>(region.getArgument(argIndex).getType()))
      return emitError() << "a parameter must be a ranked tensor";
    return success();
  }
  if (attr.getName() == kCostAttr)
    return emitError() << "'" << kCostAttr << "' belongs on operations";
  return success();
}

LogicalResult CostAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               llvm::APFloat forwardUs,
                               llvm::APFloat backwardUs, int64_t flops,
                               int64_t bytes) {
  if (forwardUs.isNegative() || backwardUs.isNegative() || forwardUs.isNaN() ||
      backwardUs.isNaN())
    return emitError() << "cost times must be non-negative";
  if (flops < 0 || bytes < 0)
    return emitError() << "cost flops and bytes must be non-negative";
  return success();
}

//===----------------------------------------------------------------------===//
// NodeOp
//===----------------------------------------------------------------------===//

void NodeOp::build(OpBuilder &b, OperationState &state, TypeRange resultTypes,
                   StringRef opType, ValueRange inputs,
                   ArrayRef<NamedAttribute> attrs) {
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  state.getOrAddProperties<Properties>().op_type = b.getStringAttr(opType);
  state.addAttributes(attrs);
}

// oasr.node ["domain" `::`] "OpType" `(` operands `)` attr-dict `:` fn-type
ParseResult NodeOp::parse(OpAsmParser &parser, OperationState &result) {
  std::string first;
  if (parser.parseString(&first))
    return failure();
  std::string domain, opType = first;
  if (succeeded(parser.parseOptionalColon())) {
    if (parser.parseColon() || parser.parseString(&opType))
      return failure();
    domain = first;
  }
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  FunctionType fnType;
  SMLoc operandsLoc = parser.getCurrentLocation();
  if (parser.parseOperandList(operands, OpAsmParser::Delimiter::Paren) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(fnType) ||
      parser.resolveOperands(operands, fnType.getInputs(), operandsLoc,
                             result.operands))
    return failure();
  result.addTypes(fnType.getResults());
  Builder &b = parser.getBuilder();
  auto &props = result.getOrAddProperties<Properties>();
  props.op_type = b.getStringAttr(opType);
  if (!domain.empty())
    props.domain = b.getStringAttr(domain);
  return success();
}

void NodeOp::print(OpAsmPrinter &p) {
  p << ' ';
  if (!getDomain().empty()) {
    p.printString(getDomain());
    p << "::";
  }
  p.printString(getOpType());
  p << '(' << getInputs() << ')';
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getOpTypeAttrName(), getDomainAttrName()});
  p << " : ";
  p.printFunctionalType(getInputs().getTypes(), getOutputs().getTypes());
}

LogicalResult NodeOp::verify() {
  if (getOpType().empty())
    return emitOpError("needs a non-empty ONNX op type");
  return success();
}

//===----------------------------------------------------------------------===//
// Allreduce
//===----------------------------------------------------------------------===//

LogicalResult AllreduceStartOp::verify() {
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  if (getGroupAttr().getInt() < 0)
    return emitOpError("group must be non-negative");
  Value token = getToken();
  if (!token.hasOneUse())
    return emitOpError("token must be awaited exactly once, found ")
           << std::distance(token.use_begin(), token.use_end()) << " uses";
  if (!isa<AllreduceWaitOp>(*token.user_begin()))
    return emitOpError("token must be consumed by 'oasr.allreduce_wait'");
  std::optional<ArrayRef<int64_t>> offsets = getOffsets();
  if (offsets.has_value() != getBufferBytes().has_value())
    return emitOpError("'offsets' and 'buffer_bytes' come together");
  if (offsets) {
    if (offsets->size() != getGrads().size())
      return emitOpError("has ") << getGrads().size() << " gradients but "
                                 << offsets->size() << " offsets";
    int64_t end = 0;
    for (auto [i, grad] : llvm::enumerate(getGrads())) {
      auto type = cast<RankedTensorType>(grad.getType());
      if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
        return emitOpError("gradient #") << i << " needs a static shape";
      if ((*offsets)[i] < end)
        return emitOpError("gradient #") << i << " at offset " << (*offsets)[i]
                                         << " overlaps the previous gradient";
      end = (*offsets)[i] +
            type.getNumElements() * (type.getElementTypeBitWidth() / 8);
    }
    if (end > *getBufferBytes())
      return emitOpError("gradients end at byte ")
             << end << " past buffer_bytes = " << *getBufferBytes();
  }
  if (std::optional<Type> wire = getWireType()) {
    if (!wire->isF32() && !wire->isBF16() && !wire->isF16())
      return emitOpError("wire_type must be f32, bf16 or f16, got ") << *wire;
    if (!wire->isF32())
      for (auto [i, grad] : llvm::enumerate(getGrads()))
        if (!cast<RankedTensorType>(grad.getType()).getElementType().isF32())
          return emitOpError("gradient #")
                 << i << " is not f32: only f32 gradients travel as " << *wire;
  }
  if (std::optional<int64_t> rank = getPowersgdRank()) {
    if (*rank < 1)
      return emitOpError("powersgd_rank must be at least 1, got ") << *rank;
    if (std::optional<Type> wire = getWireType(); wire && wire->isF16())
      return emitOpError("powersgd_rank sends f32 or bf16 factors; "
                         "wire_type is ")
             << *wire;
    for (auto [i, grad] : llvm::enumerate(getGrads()))
      if (!cast<RankedTensorType>(grad.getType()).getElementType().isF32())
        return emitOpError("gradient #")
               << i << " is not f32: PowerSGD compresses f32 gradients";
  }
  if (getTwoLevel()) {
    for (auto [i, grad] : llvm::enumerate(getGrads()))
      if (!cast<RankedTensorType>(grad.getType()).getElementType().isF32())
        return emitOpError("gradient #")
               << i << " is not f32: two_level sums f32 gradients in the node";
  }
  return success();
}

AllreduceStartOp AllreduceWaitOp::getStart() {
  return getToken().getDefiningOp<AllreduceStartOp>();
}

LogicalResult AllreduceWaitOp::verify() {
  AllreduceStartOp start = getStart();
  if (!start)
    return emitOpError("token must come from 'oasr.allreduce_start'");
  if (start->getBlock() != (*this)->getBlock())
    return emitOpError("must be in the same block as its allreduce_start");
  if (start.getGrads().getTypes() != getReduced().getTypes())
    return emitOpError("result types must match the gradients of group ")
           << start.getGroupAttr().getInt();
  return success();
}

//===----------------------------------------------------------------------===//
// OptimizerUpdateOp
//===----------------------------------------------------------------------===//

int OptimizerUpdateOp::numStateTensors(StringRef algo) {
  return llvm::StringSwitch<int>(algo)
      .Case("sgd", 0)
      .Case("momentum", 1)
      .Case("adagrad", 1)
      .Case("adam", 2)
      .Case("adamw", 2)
      .Default(-1);
}

LogicalResult OptimizerUpdateOp::verify() {
  int expectedState = numStateTensors(getAlgo());
  if (expectedState < 0)
    return emitOpError("unknown algo '")
           << getAlgo()
           << "', expected 'sgd', 'momentum', 'adagrad', 'adam' or 'adamw'";
  if (getState().size() != size_t(expectedState))
    return emitOpError("'") << getAlgo() << "' takes " << expectedState
                            << " state tensor(s), got " << getState().size();
  Type type = getParam().getType();
  if (getGrad().getType() != type || getNewParam().getType() != type)
    return emitOpError("parameter, gradient and result types must match");
  for (Value v : getState())
    if (v.getType() != type)
      return emitOpError("state must have the parameter's type");
  if (getNewState().getTypes() != getState().getTypes())
    return emitOpError("must return one new state per state operand");
  for (auto [name, value] : {std::pair<StringRef, APFloat>{"lr", getLr()},
                             {"momentum", getMomentum()},
                             {"weight_decay", getWeightDecay()},
                             {"lr_decay", getLrDecay()},
                             {"epsilon", getEpsilon()}})
    if (!(value.convertToDouble() >= 0))
      return emitOpError() << name << " must be non-negative, got "
                           << value.convertToDouble();
  // Coefficients of convex combinations and decays live in [0, 1].
  for (auto [name, value] :
       {std::pair<StringRef, APFloat>{"dampening", getDampening()},
        {"beta1", getBeta1()},
        {"beta2", getBeta2()},
        {"weight_decay_post", getWeightDecayPost()}})
    if (!(value.convertToDouble() >= 0 && value.convertToDouble() <= 1))
      return emitOpError() << name << " must be in [0, 1], got "
                           << value.convertToDouble();
  return success();
}
