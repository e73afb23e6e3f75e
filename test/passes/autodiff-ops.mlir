// RUN: oasr-opt %s --oasr-autodiff -split-input-file | FileCheck %s

// Clip (bounds from constants), AveragePool, GlobalAveragePool, Pad, Dropout.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[D:.*]]:2 = oasr.node "Dropout"(%{{.*}}, %[[RATIO:.*]], %[[MODE:.*]]) : (tensor<2x4xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
// CHECK: %[[DD:.*]] = oasr.node "DropoutGrad"(%{{.*}}, %[[D]]#1) {oasr.layer = "/drop", ratio = 2.500000e-01 : f32}
// CHECK: oasr.node "GlobalAveragePoolGrad"(%{{.*}}) {oasr.layer = "/gap"} : (tensor<2x4x1x1xf32>) -> tensor<2x4x6x6xf32>
// CHECK: oasr.node "AveragePoolGrad"(%{{.*}}) {kernel_shape = [2, 2], oasr.layer = "/avg", strides = [1, 1]} : (tensor<2x4x6x6xf32>) -> tensor<2x4x7x7xf32>
// CHECK: oasr.node "PadGrad"(%{{.*}}) {oasr.layer = "/pad", pads = [0, 0, 1, 1, 0, 0, 0, 0]} : (tensor<2x4x7x7xf32>) -> tensor<2x4x6x6xf32>
// CHECK: oasr.node "ClipGrad"(%{{.*}}, %{{.*}}) {max = 6.000000e+00 : f32, min = 0.000000e+00 : f32, oasr.layer = "/clip"} : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
// CHECK: oasr.node "ConvGrad"
module {
  func.func @forward(%x: tensor<2x3x6x6xf32> {oasr.input = "input"},
                     %w: tensor<4x3x1x1xf32> {oasr.param = "conv.weight"},
                     %cb: tensor<4xf32> {oasr.param = "conv.bias"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    %c = oasr.node "Conv"(%x, %w, %cb) : (tensor<2x3x6x6xf32>, tensor<4x3x1x1xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32> loc("/conv")
    %lo = oasr.node "Constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %hi = oasr.node "Constant"() {value = dense<6.0> : tensor<f32>} : () -> tensor<f32>
    %k = oasr.node "Clip"(%c, %lo, %hi) : (tensor<2x4x6x6xf32>, tensor<f32>, tensor<f32>) -> tensor<2x4x6x6xf32> loc("/clip")
    %pads = oasr.node "Constant"() {value = dense<[0, 0, 1, 1, 0, 0, 0, 0]> : tensor<8xi64>} : () -> tensor<8xi64>
    %p = oasr.node "Pad"(%k, %pads) : (tensor<2x4x6x6xf32>, tensor<8xi64>) -> tensor<2x4x7x7xf32> loc("/pad")
    %a = oasr.node "AveragePool"(%p) {kernel_shape = [2, 2], strides = [1, 1]} : (tensor<2x4x7x7xf32>) -> tensor<2x4x6x6xf32> loc("/avg")
    %g = oasr.node "GlobalAveragePool"(%a) : (tensor<2x4x6x6xf32>) -> tensor<2x4x1x1xf32> loc("/gap")
    %shape = oasr.node "Constant"() {value = dense<[2, 4]> : tensor<2xi64>} : () -> tensor<2xi64>
    %r = oasr.node "Reshape"(%g, %shape) : (tensor<2x4x1x1xf32>, tensor<2xi64>) -> tensor<2x4xf32> loc("/reshape")
    %ratio = oasr.node "Constant"() {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
    %d = oasr.node "Dropout"(%r, %ratio) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("/drop")
    %i = oasr.node "Identity"(%d) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/id")
    return %i : tensor<2x4xf32>
  }
}

// -----

// MatMul against a parameter, Mul and Concat; unnamed nodes get stable names.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x5xf32> {oasr.param = "w"}
// CHECK-SAME: %[[S:[^:]*]]: tensor<5xf32> {oasr.param = "s"}
// CHECK: %[[M:.*]] = oasr.node "MatMul"(%[[X]], %[[W]])
// CHECK: %[[SPLIT:.*]]:2 = oasr.node "Split"(%{{.*}}) {axis = 2 : i64, oasr.layer = "Concat_3", split = [5, 5]} : (tensor<2x3x10xf32>) -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>)
// Both Concat operands are %[[MS]]: its two gradients are summed.
// CHECK: %[[DMS:.*]] = oasr.node "Add"(%[[SPLIT]]#0, %[[SPLIT]]#1) {oasr.layer = "Mul_2"}
// CHECK-NEXT: %[[DM:.*]] = oasr.node "Mul"(%[[DMS]], %[[S]]) {oasr.layer = "Mul_2"}
// CHECK-NEXT: %[[DSF:.*]] = oasr.node "Mul"(%[[DMS]], %[[M]]) {oasr.layer = "Mul_2"} : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: %[[DS:.*]] = oasr.node "ReduceSumTo"(%[[DSF]]) {oasr.layer = "Mul_2"} : (tensor<2x3x5xf32>) -> tensor<5xf32>
// CHECK: %[[A2:.*]] = oasr.node "Reshape"(%[[X]], %{{.*}}) {oasr.layer = "MatMul_1"} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
// CHECK: %[[AT:.*]] = oasr.node "Transpose"(%[[A2]]) {oasr.layer = "MatMul_1", perm = [1, 0]} : (tensor<6x4xf32>) -> tensor<4x6xf32>
// CHECK: %[[G2:.*]] = oasr.node "Reshape"(%[[DM]], %{{.*}}) {oasr.layer = "MatMul_1"} : (tensor<2x3x5xf32>, tensor<2xi64>) -> tensor<6x5xf32>
// CHECK: %[[DW:.*]] = oasr.node "MatMul"(%[[AT]], %[[G2]]) {oasr.layer = "MatMul_1"} : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK: return %{{.*}}, %[[DW]], %[[DS]]
module {
  func.func @forward(%x: tensor<2x3x4xf32> {oasr.input = "x"},
                     %w: tensor<4x5xf32> {oasr.param = "w"},
                     %s: tensor<5xf32> {oasr.param = "s"})
      -> (tensor<2x3x10xf32> {oasr.output = "y"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    %ms = oasr.node "Mul"(%m, %s) : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
    %c = oasr.node "Concat"(%ms, %ms) {axis = -1 : i64} : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x10xf32>
    return %c : tensor<2x3x10xf32>
  }
}

// -----

// A rank-3 output is flattened for the appended loss.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<2xi64> {oasr.label = "label"}
// CHECK: %[[F:.*]] = oasr.node "Flatten"(%{{.*}}) {axis = 1 : i64} : (tensor<2x3x10xf32>) -> tensor<2x30xf32>
// CHECK: oasr.node "SoftmaxCrossEntropyLoss"(%[[F]], %{{.*}})
// CHECK: oasr.node "Reshape"(%{{.*}}, %{{.*}}) {oasr.layer = "loss/Flatten"} : (tensor<2x30xf32>, tensor<3xi64>) -> tensor<2x3x10xf32>
module {
  func.func @forward(%x: tensor<2x3x10xf32> {oasr.input = "x"},
                     %s: tensor<10xf32> {oasr.param = "s"})
      -> (tensor<2x3x10xf32> {oasr.output = "y"}) {
    %m = oasr.node "Mul"(%x, %s) : (tensor<2x3x10xf32>, tensor<10xf32>) -> tensor<2x3x10xf32>
    return %m : tensor<2x3x10xf32>
  }
}

// -----

// ONNX TrainingInfo: only the trained parameters get gradients; the frozen
// one becomes state. A scalar output is the model's own loss: no label.
// Nodes off the parameter-to-loss path (the Sqrt of the input) are fine.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {oasr.input = "x"}, %[[T:[^:]*]]: tensor<4xf32> {oasr.param = "trained"}, %[[F:[^:]*]]: tensor<4xf32> {oasr.state = "frozen"})
// CHECK-SAME: -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "trained"})
// CHECK-NOT: oasr.label
// CHECK: oasr.node "Sqrt"(%[[X]])
// CHECK: oasr.node "Expand"
// CHECK: return
module attributes {oasr.trained = ["trained"]} {
  func.func @forward(%x: tensor<4xf32> {oasr.input = "x"},
                     %f: tensor<4xf32> {oasr.param = "frozen"},
                     %t: tensor<4xf32> {oasr.param = "trained"})
      -> (tensor<4xf32> {oasr.output = "other"}, tensor<f32> {oasr.output = "l"}) {
    %q = oasr.node "Sqrt"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc("/sqrt")
    %a = oasr.node "Mul"(%q, %f) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("/mul_f")
    %b = oasr.node "Mul"(%a, %t) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("/mul_t")
    %l = oasr.node "ReduceMean"(%b) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32> loc("/mean")
    return %x, %l : tensor<4xf32>, tensor<f32>
  }
}

// -----

// Activations (ONNX Runtime's conventions: SigmoidGrad/TanhGrad from the
// result, HardSigmoidGrad/HardSwishGrad from the input), Exp, Log,
// Reciprocal, LogSoftmax, and Where with a mask (no gradient for the
// condition; each branch summed back to its own shape).
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: oasr.node "LogSoftmaxGrad"(%{{.*}}, %{{.*}}) {axis = 1 : i64, oasr.layer = "/lsm"}
// CHECK-DAG: oasr.node "Where"(%{{.*}}, %{{.*}}, %{{.*}}) {oasr.layer = "/where"} : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK-DAG: oasr.node "ReduceSumTo"(%{{.*}}) {oasr.layer = "/where"} : (tensor<2x4xf32>) -> tensor<4xf32>
// CHECK-DAG: oasr.node "Neg"
// CHECK-DAG: oasr.node "Div"(%{{.*}}, %{{.*}}) {oasr.layer = "/log"}
// CHECK-DAG: oasr.node "Mul"(%{{.*}}, %{{.*}}) {oasr.layer = "/exp"}
// CHECK-DAG: oasr.node "HardSwishGrad"(%{{.*}}, %[[HSIN:.*]]) {oasr.layer = "/hswish"}
// CHECK-DAG: oasr.node "HardSigmoidGrad"(%{{.*}}, %{{.*}}) {alpha = 2.000000e-01 : f32, beta = 5.000000e-01 : f32, oasr.layer = "/hsig"}
// CHECK-DAG: oasr.node "TanhGrad"(%{{.*}}, %{{.*}}) {oasr.layer = "/tanh"}
// CHECK-DAG: oasr.node "SigmoidGrad"(%{{.*}}, %{{.*}}) {oasr.layer = "/sig"}
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "input"},
                     %m: tensor<2x4xi1> {oasr.input = "mask"},
                     %w: tensor<4x4xf32> {oasr.param = "w"},
                     %b: tensor<4xf32> {oasr.param = "b"})
      -> (tensor<2x4xf32> {oasr.output = "out"}) {
    %0 = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/mm")
    %1 = oasr.node "Sigmoid"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/sig")
    %2 = oasr.node "Tanh"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/tanh")
    %3 = oasr.node "HardSigmoid"(%2) {alpha = 2.000000e-01 : f32, beta = 5.000000e-01 : f32} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/hsig")
    %4 = oasr.node "HardSwish"(%3) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/hswish")
    %5 = oasr.node "Exp"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/exp")
    %6 = oasr.node "Log"(%5) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/log")
    %7 = oasr.node "Reciprocal"(%6) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/recip")
    %8 = oasr.node "Where"(%m, %7, %b) : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("/where")
    %9 = oasr.node "LogSoftmax"(%8) {axis = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/lsm")
    return %9 : tensor<2x4xf32>
  }
}

// -----

// ConvTranspose -> ConvTransposeGrad (dY, X, W) with the forward's
// attributes.
// CHECK-LABEL: func.func @train_step
// CHECK: oasr.node "ConvTransposeGrad"(%{{.*}}, %{{.*}}, %{{.*}}) {oasr.layer = "/up", strides = [2, 2]} : (tensor<1x2x4x4xf32>, tensor<1x3x2x2xf32>, tensor<3x2x2x2xf32>) -> (tensor<1x3x2x2xf32>, tensor<3x2x2x2xf32>)
module {
  func.func @forward(%x: tensor<1x3x2x2xf32> {oasr.input = "input"},
                     %wt: tensor<3x2x2x2xf32> {oasr.param = "up.weight"})
      -> (tensor<1x2x4x4xf32> {oasr.output = "up"}) {
    %u = oasr.node "ConvTranspose"(%x, %wt) {strides = [2, 2]} : (tensor<1x3x2x2xf32>, tensor<3x2x2x2xf32>) -> tensor<1x2x4x4xf32> loc("/up")
    return %u : tensor<1x2x4x4xf32>
  }
}

// -----

// LSTM -> LSTMGrad(X, W, R, B, <h0>, <c0>, dY): the operands the forward
// leaves out and the result gradients nobody sends back are absent inputs.
// CHECK-LABEL: func.func @train_step
// CHECK: oasr.node "LSTMGrad"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {hidden_size = 3 : i64, oasr.absent_inputs = array<i64: 4, 5>, oasr.layer = "/lstm"} : (tensor<5x2x4xf32>, tensor<1x12x4xf32>, tensor<1x12x3xf32>, tensor<1x24xf32>, tensor<5x1x2x3xf32>) -> (tensor<5x2x4xf32>, tensor<1x12x4xf32>, tensor<1x12x3xf32>, tensor<1x24xf32>, tensor<1x2x3xf32>, tensor<1x2x3xf32>)
module {
  func.func @forward(%s: tensor<5x2x4xf32> {oasr.input = "seq"},
                     %w: tensor<1x12x4xf32> {oasr.param = "lstm.W"},
                     %r: tensor<1x12x3xf32> {oasr.param = "lstm.R"},
                     %b: tensor<1x24xf32> {oasr.param = "lstm.B"})
      -> (tensor<5x1x2x3xf32> {oasr.output = "y"}) {
    %y = oasr.node "LSTM"(%s, %w, %r, %b) {hidden_size = 3 : i64} : (tensor<5x2x4xf32>, tensor<1x12x4xf32>, tensor<1x12x3xf32>, tensor<1x24xf32>) -> tensor<5x1x2x3xf32> loc("/lstm")
    return %y : tensor<5x1x2x3xf32>
  }
}

// -----

// Dropout with a ratio of 0 drops nothing: it leaves the step (forward and
// backward), as PyTorch's dropout returns its input.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: "Dropout"
// CHECK: oasr.node "Relu"
// CHECK-NOT: "Dropout"
// CHECK: oasr.node "ReluGrad"
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "input"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/mm")
    %ratio = oasr.node "Constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %d = oasr.node "Dropout"(%m, %ratio) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("/drop")
    %r = oasr.node "Relu"(%d) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/relu")
    return %r : tensor<2x4xf32>
  }
}
