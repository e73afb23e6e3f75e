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

    `wire_type`, when present, is the element type the gradients travel in:
    `bf16` or `f16` (`--oasr-plan-allreduce{grad-dtype=...}`). The f32
    gradients are rounded to it (to nearest, ties to even) before the
    collective, summed over the ranks in it (each partial sum computed in
    f32 and rounded back), and converted back to f32 and divided by the
    number of ranks after it. Absent (or `f32`): the gradients travel as
    they are.

    `powersgd_rank`, when present, sends the group compressed by PowerSGD
    at that rank (`--oasr-plan-allreduce{compress=...}`,
    docs/compression.md): each f32 gradient matrix that compression pays
    for travels as rank-R factors with error feedback, the others as they
    are. The gradients are then f32, and the factors and the uncompressed
    gradients travel in `wire_type`: absent or f32, or bf16 (f16 is
    refused: the factors are not scaled into its range).

    `two_level`, when present, sends the group as a two-level allreduce
    where ranks share nodes (`--oasr-plan-allreduce{two-level=...}`): a
    reduce-scatter inside each node, an allreduce of each node's share
    between the nodes, then an all-gather inside the node. It sums f32 in
    another order than one collective (the same on every rank). With
    `powersgd_rank`, each of the factors' two collectives takes that
    route. A job whose ranks do not form equal nodes of two or more sends
    it as one collective.

    The returned token must be awaited exactly once by `oasr.allreduce_wait`.

    ```mlir
    %t = oasr.allreduce_start %gw, %gb {group = 0 : i64}
        : tensor<64x3x7x7xf32>, tensor<64xf32>
    %u = oasr.allreduce_start %g {group = 1 : i64, wire_type = bf16}
        : tensor<10xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$grads, I64Attr:$group,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       OptionalAttr<I64Attr>:$buffer_bytes,
                       OptionalAttr<TypeAttr>:$wire_type,
                       OptionalAttr<I64Attr>:$powersgd_rank,
                       UnitAttr:$two_level);
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
    its averaged gradient and the optimizer state. The update rules are those
    of ONNX's `ai.onnx.preview.training` optimizers, so a model's
    TrainingInfo imports onto them unchanged. `t` is the number of updates
    applied before this one (ONNX's `T`; the runtime counts it), and
    `g_r = g + weight_decay * p` the regularized gradient.

    * `sgd` (no state): `p' = p - lr * g_r`
    * `momentum` (velocity `v`; ONNX Momentum with `alpha = momentum`,
      `beta = 1 - dampening`, `mode = nesterov`):
      `v' = momentum * v + (t > 0 ? 1 - dampening : 1) * g_r`,
      `p' = p - lr * v'`, or with `nesterov`
      `p' = p - lr * (g_r + momentum * v')` (PyTorch's SGD with the same
      momentum, dampening and nesterov computes the same)
    * `adagrad` (sum of squares `h`; ONNX Adagrad, `decay_factor = lr_decay`):
      `h' = h + g_r^2`, `p' = p - lr / (1 + t * lr_decay) * g_r / (sqrt(h') + epsilon)`
      (PyTorch's Adagrad computes the same)
    * `adam` (moments `v`, `h`; ONNX Adam with `alpha = beta1`,
      `beta = beta2`, `norm_coefficient_post = weight_decay_post`):
      `v' = beta1 v + (1 - beta1) g_r`, `h' = beta2 h + (1 - beta2) g_r^2`,
      `r = t > 0 ? lr * sqrt(1 - beta2^t) / (1 - beta1^t) : lr`,
      `p' = (1 - weight_decay_post) * (p - r * v' / (sqrt(h') + epsilon))`.
      This is ONNX's rule, not PyTorch's: no bias correction on the first
      update, and epsilon added before the correction scale.
    * `adamw` (moments `v`, `h`; torch.optim.AdamW, decoupled decay, `t`
      counted from 1): `p1 = (1 - lr * weight_decay) p`,
      `v' = lerp(v, g, 1 - beta1)`, `h' = beta2 h + (1 - beta2) g^2`,
      `p' = p1 - lr / (1 - beta1^t) * v' / (sqrt(h') / sqrt(1 - beta2^t) + epsilon)`.

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
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov,
                       DefaultValuedAttr<F64Attr, "0.0">:$lr_decay,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1.0e-06">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay_post);
  let results = (outs AnyRankedTensor:$new_param,
                      Variadic<AnyRankedTensor>:$new_state);
  let assemblyFormat = [{
    $algo $param `,` $grad (`,` $state^)? attr-dict `:` type($param)
    (`,` type($state)^)?
  }];
  let extraClassDeclaration = [{
    /// Number of state tensors `algo` keeps per parameter, or -1 when
    /// `algo` is not an optimizer this op knows.
    static int numStateTensors(::llvm::StringRef algo);
  }];
  let hasVerifier = 1;
}

#endif // OASR_DIALECT_OASROPS_TD
