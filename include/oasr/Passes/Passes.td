//===- Passes.td - oasr graph passes -----------------------*- tablegen -*-===//
//
// Every oasr pass is declared here with a summary, a description of what it
// does and why, its options and its statistics. Each is implemented in one
// file under passes/.
//
//===----------------------------------------------------------------------===//

#ifndef OASR_PASSES_PASSES_TD
#define OASR_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Autodiff
//===----------------------------------------------------------------------===//

def Autodiff : Pass<"oasr-autodiff", "::mlir::ModuleOp"> {
  let summary = "Build one training step (forward, loss, backward) from @forward";
  let description = [{
    Replaces the imported `func.func @forward` by `func.func @train_step`
    (docs/IR.md, section 2): the forward graph in training form, a loss, and
    reverse-mode backward nodes for every node on a path from a trained
    parameter to the loss. The step returns the loss, one gradient per
    `oasr.param` (in parameter order, tagged `oasr.grad`), then the updated
    batch-norm running statistics (`oasr.new_state`).

    * Training form: `BatchNormalization` gets its five training results,
      `MaxPool` its `Indices`, `Dropout` its mask, `LayerNormalization` its
      `Mean`/`InvStdDev`, so backward nodes can reuse them.
    * Loss: when the model has no scalar float output, the pass appends
      `SoftmaxCrossEntropyLoss(logits, label) {reduction = "mean"}` and an
      i64 `label` argument right after the inputs. `output=` chooses the
      model output (a scalar output is taken as the loss itself), `loss=`
      names the loss result, `label=` the label argument. Logits of a
      sequence model, `[N, T, V]` from an integer `[N, T]` input, get a
      token-level loss: both are reshaped to `[N*T, V]` and `[N*T]`, the
      label argument is `[N, T]` (next-token labels), and `ignore-index=`
      excludes a label value (padding) from the mean. `label-smoothing=E`
      gives the appended loss oasr's `label_smoothing` attribute: the
      target is 1 - E on the label plus E / C on every class. A model's own
      `SoftmaxCrossEntropyLoss` reading an i64 graph input as labels gets
      that argument retagged `oasr.label`, so the runtime feeds it.
    * Backward nodes are explicit `oasr.node`s named after ONNX Runtime's
      gradient ops (`ConvGrad`, `ReluGrad`, `GemmGrad`, ...) or built from
      plain ONNX ops (`MatMul`, `Transpose`, `Split`, `Reshape`, ...), emitted
      in reverse forward order and tagged `oasr.layer = "<forward node>"`.
      Fan-out gradients are summed with `Add`/`Sum`.
    * Only nodes on a parameter-to-loss path are differentiated; a node there
      without a gradient rule is an error naming the node.
    * When the module carries ONNX TrainingInfo (`oasr.trained`), only those
      parameters are trained; the others become `oasr.state`.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::oasr::OASRDialect"];
  let options = [
    Option<"outputName", "output", "std::string", "\"\"",
           "Model output to train on (logits, or a scalar loss); default: "
           "the first scalar float output, else the first float output">,
    Option<"lossName", "loss", "std::string", "\"loss\"",
           "Name of the loss result (and of the appended loss node)">,
    Option<"labelName", "label", "std::string", "\"label\"",
           "Name of the appended integer label argument">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-1",
           "Label value the appended loss ignores (a negative value: none)">,
    Option<"labelSmoothing", "label-smoothing", "double", "0.0",
           "Label smoothing of the appended loss, in [0, 1) (as "
           "torch.nn.CrossEntropyLoss's label_smoothing)">
  ];
  let statistics = [
    Statistic<"numForwardNodes", "forward-nodes", "Forward nodes in the step">,
    Statistic<"numBackwardNodes", "backward-nodes", "Backward nodes created">,
    Statistic<"numParams", "params", "Trained parameters (one gradient each)">,
    Statistic<"numFrozen", "frozen-params",
              "Parameters left untrained by oasr.trained">
  ];
}

//===----------------------------------------------------------------------===//
// Autocast
//===----------------------------------------------------------------------===//

def Autocast : Pass<"oasr-autocast", "::mlir::ModuleOp"> {
  let summary = "Choose each forward node's precision: bf16/f16 mixed precision";
  let description = [{
    Rewrites the imported `func.func @forward` (before `--oasr-autodiff`) so
    that the step computes in `precision=` and records it in the module
    attribute `oasr.precision`, which the runtime reads (docs/precision.md).

    * `bf16`, `f16`: mixed precision. Each node follows its op's precision
      policy in the op registry (docs/generated/Ops.md, column *precision*):
      *lower* (Conv, ConvTranspose, MatMul, Gemm) casts its float operands
      to the low type and produces it; *f32* (softmax, losses, exp/log/pow,
      reductions) casts them to f32; *follow* runs in the type of its
      computed operands (the widest when they differ), leaving parameters
      and constants in f32 for the kernel to read as they are; *normalize*
      is follow for X and Y with scale, bias and statistics in f32; *keep*
      (Cast, Constant, Shape, ...) is left alone.
    * Casts are `oasr.node "Cast"`, one per value and type, placed before
      its first reader, so a parameter read twice (tied embeddings) is cast
      once per step. A cast back to the type a value was widened from (by
      the model's own Cast or an earlier one) reads the original instead
      (bf16 -> f32 -> bf16 is exact); casts left without readers, and casts
      between one type, are erased.
    * The function's results keep their types: a low result is cast back,
      so the loss autodiff appends sees f32 logits.
    * Parameters, optimizer state and gradients stay f32 (master weights):
      autodiff differentiates the casts, so a parameter's gradient is cast
      back to f32 before the allreduce and the update. Backward follows the
      forward's types: a tensor backward reads is kept in the type forward
      produced it in, so saved activations are half the bytes.
    * `tf32`: no node changes (f32 tensors); the attribute tells a GPU
      backend to run products on TF32 tensor cores. `f32` leaves the
      module as it was.
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let options = [
    Option<"precision", "precision", "std::string", "\"bf16\"",
           "f32, tf32, bf16 or f16">
  ];
  let statistics = [
    Statistic<"numLowered", "lowered-nodes", "Nodes that compute in the low type">,
    Statistic<"numCasts", "casts", "Cast nodes inserted">,
    Statistic<"numReused", "casts-reused",
              "Casts avoided by reading an earlier cast or the original">,
    Statistic<"numRemoved", "casts-removed",
              "Casts erased: left without readers, or between one type">
  ];
}

//===----------------------------------------------------------------------===//
// FuseAttention
//===----------------------------------------------------------------------===//

def FuseAttention : Pass<"oasr-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Fold scaled dot-product attention into one FusedAttention";
  let description = [{
    Exporters write attention as `MatMul(Softmax(mask(MatMul(Q, KT) * s)),
    V)`, and autodiff then saves the probabilities (batch x heads x S x S)
    for `SoftmaxGrad` and the second product's gradient: most of a
    transformer's saved activations. This pass replaces each such chain in
    `@forward` whose inner values have no other reader by
    `FusedAttention(Q, KT, V[, mask]) {scale}`, whose gradient
    (`FusedAttentionGrad`) recomputes the probabilities from Q, KT, V and
    the mask, so only those are saved.

    `* s` is any chain of `Mul`/`Div` by scalars computed from constants;
    the mask is `Where(c, -inf, x)` or `x + Where(c, -inf, 0)` (times a
    positive scalar), c boolean and broadcast onto the scores. A softmax
    followed by `Dropout` and then the product, a fill other than -inf or
    another additive bias (it may need a gradient) stays unfused, and the
    pass says so in a remark on the Softmax. It runs before autocast and
    autodiff; the training pipeline leaves it out with
    `fuse-attention=false` (oasr-run `--fuse-attention=false`).
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Attention chains folded">,
    Statistic<"numUnfused", "unfused", "Attention chains left as they are">
  ];
}

//===----------------------------------------------------------------------===//
// FuseGelu
//===----------------------------------------------------------------------===//

def FuseGelu : Pass<"oasr-fuse-gelu", "::mlir::ModuleOp"> {
  let summary = "Fold the exported erf GELU into one Gelu node";
  let description = [{
    Exporters before ONNX opset 20 write GELU as five nodes,
    `Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)` (operands in either
    order, `Mul(x, 1/sqrt 2)` for the Div), and autodiff differentiates
    each: eleven forward and backward nodes, each a pass over the tensor.
    This pass replaces every such chain in `@forward` whose inner values
    have no other reader by one `Gelu` node (the registry's op, a kernel on
    every backend), which autodiff turns into one `GeluGrad`.

    The training pipeline runs it with `precision=bf16|f16` (where each
    pass over the tensor also converts), and leaves an f32 step as it was,
    bit for bit.
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "GELU chains folded into Gelu">
  ];
}

//===----------------------------------------------------------------------===//
// FuseMatMulTranspose
//===----------------------------------------------------------------------===//

def FuseMatMulTranspose : Pass<"oasr-fuse-matmul-transpose", "::mlir::ModuleOp"> {
  let summary = "Products read transposed operands through their strides";
  let description = [{
    Rewrites `MatMul(Transpose(a), b)`, where the Transpose swaps the last two
    axes, into `com.microsoft::FusedMatMul(a, b) {transA = 1}`, and likewise
    for `b` (`transB`). The kernel then reads the operand through its
    strides and no transposed copy is made. Autodiff's MatMul gradients
    (`dA = dY · Bᵀ`, `dB = Aᵀ · dY`) and exported linear layers
    (`MatMul(x, Transpose(W))`) all have this form. A Transpose left without
    readers is erased. A product whose only reader is such a Transpose
    computes the transposed result itself (`(A·B)ᵀ = Bᵀ·Aᵀ`), as the gradient
    of a transposed weight needs. The pass runs on `@train_step` (else
    `@forward`).

    The training pipeline runs it right after autodiff with
    `precision=bf16|f16`, and leaves an f32 step as it was, bit for bit.
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "MatMuls that read a transposed operand">
  ];
}

//===----------------------------------------------------------------------===//
// FuseCasts
//===----------------------------------------------------------------------===//

def FuseCasts : Pass<"oasr-fuse-casts", "::mlir::ModuleOp"> {
  let summary = "A product writes the f32 its only reader widens it to";
  let description = [{
    In a mixed-precision step a parameter's gradient leaves its product in
    16 bits and the gradient of the parameter's Cast widens it to f32 for
    the master weights; a classifier's logits are widened for the loss the
    same way. When a product's result has no reader but such a widening
    `Cast`, and the op accumulates in f32 (the registry's *f32 results*
    trait: MatMul, FusedMatMul, Gemm, GemmGrad), the product writes the f32
    result itself. That saves one pass over the tensor and one rounding. The
    pass runs on `@train_step` (else `@forward`).

    The training pipeline runs it last among the fusions under
    `precision=bf16|f16`.
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Widening casts folded into their product">
  ];
}

//===----------------------------------------------------------------------===//
// AnnotateCost
//===----------------------------------------------------------------------===//

def AnnotateCost : Pass<"oasr-annotate-cost", "::mlir::ModuleOp"> {
  let summary = "Attach #oasr.cost to every forward and backward node";
  let description = [{
    Gives every `oasr.node` of `@train_step` an `oasr.cost`, so the planner
    knows when each gradient is ready:

    * `device=NAME` (default `cpu`): analytic FLOPs and bytes from the static
      shapes, turned into time by a roofline,
      `t = max(flops / peak_flops, bytes / bandwidth)`. Devices: `cpu` (this
      build machine, measured), `h100`, `h200`, `v100`, `k80` (one GK210);
      docs/passes.md lists the numbers and their sources.
    * `profile=FILE`: measured times from an `oasr-profile-v1` file. A profile
      layer matches the planner layer that makes the same parameter gradients
      ready (or, failing that, the backward nodes whose `oasr.layer` equals
      its name); its `backward_us` is spread over that layer's backward nodes
      in proportion to their analytic cost, and the profile's `forward_us` over
      the forward nodes likewise, so the planner gets back exactly the
      profile. Unmatched names on either side are reported as warnings. The
      profile's `comm` and `update_us` are kept in the module attribute
      `oasr.cost_model` for `--oasr-plan-allreduce`.

    It also records, on each gradient result of `@train_step`, its size
    (`oasr.grad_bytes`) and its ready position (`oasr.ready`: the index of the
    backward node that makes it ready, in backward order).
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let options = [
    Option<"device", "device", "std::string", "\"cpu\"",
           "Roofline device: cpu, h100, h200, v100, k80">,
    Option<"profile", "profile", "std::string", "\"\"",
           "oasr-profile-v1 file with measured per-layer times">
  ];
  let statistics = [
    Statistic<"numAnnotated", "annotated-nodes", "Nodes given an oasr.cost">,
    Statistic<"numUnmatched", "unmatched-names",
              "Profile layers or step layers without a match">,
    Statistic<"totalFlops", "total-mflops", "Analytic MFLOP of one step">
  ];
}

//===----------------------------------------------------------------------===//
// PlanAllreduce
//===----------------------------------------------------------------------===//

def PlanAllreduce : Pass<"oasr-plan-allreduce", "::mlir::ModuleOp"> {
  let summary = "Group the gradients into fused allreduces placed by lib/Schedule";
  let description = [{
    Builds the planner's profile from the annotated step (one layer per
    backward node that makes parameter gradients ready, in forward order;
    `backward_us` = the summed `oasr.cost` of the backward nodes up to it,
    `forward_us` = the summed forward costs), asks lib/Schedule for the plan
    of `strategy`, and rewrites the step:

    * one `oasr.allreduce_start` per group, in group order, right after the
      backward node that makes the group's last gradient ready;
    * the matching `oasr.allreduce_wait`s, in the same order, before the
      return that consumes the averaged gradients.

    The communication model is, in order of precedence: `alpha=`/`beta=`
    (seconds, seconds per byte; with `ranks=P` the ring form where `alpha`
    is the per-step latency and `beta` the inverse link bandwidth), `comm=`
    (an `oasr-comm-v1` calibration from `oasr-bench comm`), or the `comm`
    object of the profile given to `--oasr-annotate-cost`. The module
    attribute `oasr.plan` records the strategy, the number of groups, the
    model and the predicted iteration time; the latter is exactly what
    `oasr-plan` predicts for the same profile. wfbp, single, bucket:N, ddp
    and horovod need no model: without one they are planned all the same
    and `oasr.plan` has no model and no predicted time.

    `grad-dtype=bf16|f16` sends the gradients in half the bytes: every
    `oasr.allreduce_start` gets `wire_type = bf16` (or `f16`), `oasr.plan`
    records `grad_dtype`, and the planner charges `beta` on half the
    gradient bytes (alpha, the per-group overhead and the overlap rate stay
    as given), so the plan and its predicted time are those of the narrower
    wire. The default `f32` leaves the IR as it was.
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let options = [
    Option<"strategy", "strategy", "std::string", "\"oasr\"",
           "oasr, optimal, mgwfbp, wfbp, single, ddp, horovod or bucket:N">,
    Option<"alpha", "alpha", "double", "-1.0",
           "Allreduce start-up time alpha (seconds)">,
    Option<"beta", "beta", "double", "-1.0",
           "Allreduce time per byte beta (seconds/byte)">,
    Option<"comm", "comm", "std::string", "\"\"",
           "oasr-comm-v1 calibration file (oasr-bench comm)">,
    Option<"ranks", "ranks", "int", "0",
           "Use the ring form over P ranks (with alpha and beta)">,
    Option<"groupOverheadUs", "group-overhead-us", "double", "0.0",
           "Extra fixed cost per communicated group (microseconds)">,
    Option<"overlapRate", "overlap-rate", "double", "-1.0",
           "Rate in [0, 1] at which communication progresses while backward "
           "computes (default: the calibration's or profile's, else 1)">,
    Option<"gradDtype", "grad-dtype", "std::string", "\"f32\"",
           "Element type gradients travel in: f32, bf16 or f16 (half the "
           "bytes on the wire)">,
    Option<"compress", "compress", "std::string", "\"off\"",
           "What groups may send: off, powersgd:R or auto[:R[-M]]">,
    Option<"compressGmacs", "compress-gmacs", "double", "-1.0",
           "Multiply-adds per second (1e9) of compression on the "
           "communication thread (default: the roofline's)">,
    Option<"twoLevel", "two-level", "std::string", "\"auto\"",
           "Allreduce route per group where the calibration has a second "
           "tier (ranks sharing nodes): auto (the faster per group), flat "
           "or two-level">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Fused allreduce groups">,
    Statistic<"numGrads", "grads", "Gradients communicated">,
    Statistic<"predictedUs", "predicted-iteration-us",
              "Predicted iteration time (microseconds, rounded)">
  ];
}

//===----------------------------------------------------------------------===//
// LayoutGradients
//===----------------------------------------------------------------------===//

def LayoutGradients : Pass<"oasr-layout-gradients", "::mlir::ModuleOp"> {
  let summary = "Give each allreduce group one contiguous gradient buffer";
  let description = [{
    Assigns the gradients of every `oasr.allreduce_start` consecutive byte
    offsets in one buffer (`offsets`, `buffer_bytes`), each aligned to
    `alignment` bytes, so that the runtime allocates the group's gradients
    inside one buffer, backward writes them in place, and the fused
    allreduce runs on the buffer with no packing copy.
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let options = [
    Option<"alignment", "alignment", "int64_t", "256",
           "Byte alignment of each gradient in its buffer (power of two)">
  ];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Gradient buffers laid out">,
    Statistic<"bufferBytes", "buffer-bytes", "Bytes over all buffers">,
    Statistic<"paddingBytes", "padding-bytes", "Bytes lost to alignment">
  ];
}

//===----------------------------------------------------------------------===//
// InsertOptimizer
//===----------------------------------------------------------------------===//

def InsertOptimizer : Pass<"oasr-insert-optimizer", "::mlir::ModuleOp"> {
  let summary = "Update each parameter right after its group's allreduce";
  let description = [{
    Inserts one `oasr.optimizer_update` per parameter right after the
    `oasr.allreduce_wait` of its group, so that the updates of early groups
    run while later groups are still being communicated. The step then
    returns the loss, the new parameters (`oasr.new_param`), the new
    optimizer state (`oasr.new_opt_state`) and the new batch-norm state.
    Optimizer state tensors become new arguments tagged `oasr.opt_state`:
    the velocity of `momentum`, the sum of squares of `adagrad` and Adam's
    first moment carry the parameter's name, Adam's second moment
    `<name>:h`.

    The optimizer and its hyper-parameters come from the options, else from
    the model's ONNX TrainingInfo (`oasr.optimizer`, ONNX's Momentum,
    Adagrad or Adam with their attributes mapped as `oasr.optimizer_update`
    documents), else the defaults: sgd with lr 0.01; momentum 0.9; Adagrad
    epsilon 1e-10; Adam betas 0.9/0.999 and epsilon 1e-6.
  }];
  let dependentDialects = ["::mlir::oasr::OASRDialect"];
  let options = [
    Option<"algo", "algo", "std::string", "\"\"",
           "sgd, momentum, adagrad, adam or adamw">,
    Option<"lr", "lr", "double", "-1.0", "Learning rate">,
    Option<"momentum", "momentum", "double", "-1.0", "Momentum (momentum)">,
    Option<"weightDecay", "weight-decay", "double", "-1.0",
           "L2 weight decay added to the gradient">,
    Option<"dampening", "dampening", "double", "-1.0",
           "Dampening of the gradient (momentum)">,
    Option<"nesterov", "nesterov", "bool", "false",
           "Nesterov momentum (momentum)">,
    Option<"lrDecay", "lr-decay", "double", "-1.0",
           "Learning-rate decay per update (adagrad)">,
    Option<"beta1", "beta1", "double", "-1.0",
           "First-moment decay (adam)">,
    Option<"beta2", "beta2", "double", "-1.0",
           "Second-moment decay (adam)">,
    Option<"epsilon", "epsilon", "double", "-1.0",
           "Denominator term (adagrad, adam, adamw)">,
    Option<"decayExclude", "decay-exclude", "std::string", "\"none\"",
           "Parameters without weight decay: none (the default: every "
           "parameter decays), 1d (every tensor of rank <= 1: biases, "
           "normalisation weights; oasr-run's default), or a regular "
           "expression searched in their names">
  ];
  let statistics = [
    Statistic<"numUpdates", "updates", "Parameter updates inserted">
  ];
}

//===----------------------------------------------------------------------===//
// PlanReport
//===----------------------------------------------------------------------===//

def PlanReport : Pass<"oasr-plan-report", "::mlir::ModuleOp"> {
  let summary = "Print the planned groups and predicted timeline";
  let description = [{
    Prints a readable summary of a planned step: the strategy and
    communication model, every fused allreduce group (gradients, bytes,
    the node it follows, its ready/start/end times) and the predicted
    timeline (forward, backward, communication, iteration, lower bound),
    to stdout or to `output=FILE`. The IR is unchanged.

    `format=json` writes the same facts in the form of one strategy entry
    of `oasr-plan --format=json` (`name`, `iteration_us`, `num_groups`,
    `groups` as lists of gradient names in ready order, ...), so scripts can
    compare the planned IR with `oasr-plan` group by group.
  }];
  let options = [
    Option<"output", "output", "std::string", "\"-\"",
           "Where to write the report ('-' for stdout)">,
    Option<"format", "format", "std::string", "\"text\"",
           "Report format: text or json">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Allreduce groups reported">,
    Statistic<"numGrads", "grads", "Gradients reported">,
    Statistic<"gradBytes", "grad-bytes", "Gradient bytes communicated">,
    Statistic<"predictedUs", "predicted-iteration-us",
              "Predicted iteration time (microseconds, rounded)">,
    Statistic<"lowerBoundUs", "lower-bound-us",
              "Lower bound on the iteration time (microseconds, rounded)">
  ];
}

#endif // OASR_PASSES_PASSES_TD

//===----------------------------------------------------------------------===//
// EmitProgram
//===----------------------------------------------------------------------===//

def EmitProgram : Pass<"oasr-emit-program", "::mlir::ModuleOp"> {
  let summary = "Write the compiled step as an .oasrprog program file";
  let description = [{
    The compiler's last step as a pass: lowers `@train_step` to the plain
    Program the runtime loads (lib/Lower's `lowerToProgram`) and writes it
    to `file=PATH.oasrprog` (a FlatBuffer, runtime/Program.fbs), which
    `oasr-run PATH.oasrprog` trains with no compiler. The IR is unchanged.
    It is `oasr-run MODEL --compile-only=PATH` for a pipeline run by
    `oasr-opt`. A module the runtime could not run (no training step, an op
    it does not execute) is an error naming the op.
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"",
           "The program file to write (its name ends in .oasrprog)">
  ];
}
