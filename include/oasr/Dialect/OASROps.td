//===- OASROps.td - Operations of the oasr dialect ---------*- tablegen -*-===//

#ifndef OASR_DIALECT_OASROPS_TD
#define OASR_DIALECT_OASROPS_TD

include "oasr/Dialect/OASRDialect.td"
include "oasr/Dialect/OASRAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

//===----------------------------------------------------------------------===//
// NodeOp
//===----------------------------------------------------------------------===//

def OASR_NodeOp : OASR_Op<"node", [Pure]> {
  let summary = "A generic ONNX node";
  let description = [{
    One ONNX node, kept generically: `op_type` and `domain` identify the ONNX
    operator (the default domain `ai.onnx` is written as the empty string and
    omitted when printing), the ONNX attributes are the op's discardable
    attributes, and the node name is the op's location. Backward nodes created
    by the compiler use ONNX Runtime's training vocabulary (`ConvGrad`,
    `ReluGrad`, ...) in the `com.microsoft` sense, but stay in the default
    domain so a training graph reads uniformly.

    ```mlir
    %y = oasr.node "Conv"(%x, %w) {pads = [3, 3, 3, 3], strides = [2, 2]}
        : (tensor<8x3x224x224xf32>, tensor<64x3x7x7xf32>)
        -> tensor<8x64x112x112xf32> loc("/conv1/Conv")
    %z = oasr.node "com.microsoft"::"Gelu"(%y) : (tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$op_type, DefaultValuedStrAttr<StrAttr, "">:$domain,
                       Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$resultTypes, "::llvm::StringRef":$opType,
                   "::mlir::ValueRange":$inputs,
                   CArg<"::llvm::ArrayRef<::mlir::NamedAttribute>", "{}">:$attrs)>
  ];
  let extraClassDeclaration = [{
    /// Returns true when this node is `opType` in the default ONNX domain.
    bool is(::llvm::StringRef opType) {
      return getDomain().empty() && getOpType() == opType;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Fused allreduce
//===----------------------------------------------------------------------===//

def OASR_AllreduceStartOp : OASR_Op<"allreduce_start"> {
  let summary = "Start one fused allreduce over a group of gradients";
  let description = [{
    Starts averaging `grads` over all data-parallel ranks as one fused
    collective. Collectives are issued in program order on one communication
    channel, so every rank issues them in the same order. `group` is the
    position of this group in that order. After `--oasr-layout-gradients`,
    `offsets` gives each gradient's byte offset in one contiguous buffer of
    `buffer_bytes` bytes, so the collective needs no packing copy.

    The returned token must be awaited exactly once by `oasr.allreduce_wait`.

    ```mlir
    %t = oasr.allreduce_start %gw, %gb {group = 0 : i64}
        : tensor<64x3x7x7xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$grads, I64Attr:$group,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       OptionalAttr<I64Attr>:$buffer_bytes);
  let results = (outs OASR_TokenType:$token);
  let assemblyFormat = "$grads attr-dict `:` type($grads)";
  let hasVerifier = 1;
}

def OASR_AllreduceWaitOp : OASR_Op<"allreduce_wait"> {
  let summary = "Wait for a fused allreduce and take its averaged gradients";
  let description = [{
    Blocks until the collective started by the `oasr.allreduce_start` that
    produced `token` has finished, and returns the averaged gradients, one per
    operand of that start, with the same types.

    ```mlir
    %rw, %rb = oasr.allreduce_wait %t : tensor<64x3x7x7xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins OASR_TokenType:$token);
  let results = (outs Variadic<AnyRankedTensor>:$reduced);
  let assemblyFormat = "$token attr-dict `:` type($reduced)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start op this wait completes.
    AllreduceStartOp getStart();
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def OASR_OptimizerUpdateOp : OASR_Op<"optimizer_update", [Pure,
    AllTypesMatch<["param", "grad", "new_param"]>,
    TypesMatchWith<"one new state per state", "state", "new_state", "$_self">]> {
  let summary = "One optimizer step on one parameter";
  let description = [{
    Computes the updated parameter (and optimizer state) from the parameter,
    its averaged gradient and the optimizer state. `algo` is `sgd` (no state)
    or `momentum` (one state tensor, the velocity `v`):

    * `sgd`:      `p' = p - lr * (g + weight_decay * p)`
    * `momentum`: `v' = momentum * v + (g + weight_decay * p)`, `p' = p - lr * v'`

    ```mlir
    %p1, %v1 = oasr.optimizer_update "momentum" %p, %g, %v
        {lr = 1.0e-01 : f64, momentum = 9.0e-01 : f64}
        : tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$algo, AnyRankedTensor:$param,
                       AnyRankedTensor:$grad, Variadic<AnyRankedTensor>:$state,
                       F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
  let results = (outs AnyRankedTensor:$new_param,
                      Variadic<AnyRankedTensor>:$new_state);
  let assemblyFormat = [{
    $algo $param `,` $grad (`,` $state^)? attr-dict `:` type($param)
    (`,` type($state)^)?
  }];
  let hasVerifier = 1;
}

#endif // OASR_DIALECT_OASROPS_TD
