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
      names the loss result, `label=` the label argument.
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
           "Name of the appended integer label argument">
  ];
  let statistics = [
    Statistic<"numForwardNodes", "forward-nodes", "Forward nodes in the step">,
    Statistic<"numBackwardNodes", "backward-nodes", "Backward nodes created">,
    Statistic<"numParams", "params", "Trained parameters (one gradient each)">,
    Statistic<"numFrozen", "frozen-params",
              "Parameters left untrained by oasr.trained">
  ];
}

#endif // OASR_PASSES_PASSES_TD
