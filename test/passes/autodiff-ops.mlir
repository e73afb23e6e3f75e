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
