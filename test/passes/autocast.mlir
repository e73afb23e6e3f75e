// RUN: oasr-opt %s --oasr-autocast=precision=bf16 -split-input-file -mlir-print-debuginfo | FileCheck %s
// RUN: oasr-opt %s --oasr-autocast=precision=f16 -split-input-file | FileCheck %s --check-prefix=F16
// RUN: oasr-opt %s --oasr-autocast=precision=tf32 -split-input-file | FileCheck %s --check-prefix=TF32
// RUN: oasr-opt %s --oasr-autocast=precision=f32 -split-input-file | FileCheck %s --check-prefix=F32

// A CNN block: the convolution and the classifier lower every float operand
// (input, weights, bias) to bf16; BatchNormalization runs on bf16 X with its
// scale, bias and statistics in f32; Relu and MaxPool follow; the logits
// are cast back to the declared f32.
// CHECK-LABEL: module attributes {oasr.precision = "bf16"}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x8x8xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x3x3x3xf32>
// CHECK-SAME: %[[S:[^:]*]]: tensor<4xf32>
// CHECK: %[[XL:.*]] = oasr.node "Cast"(%[[X]]) {to = 16 : i64} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xbf16> loc(#[[XLOC:.*]])
// CHECK-NEXT: %[[WL:.*]] = oasr.node "Cast"(%[[W]]) {to = 16 : i64} : (tensor<4x3x3x3xf32>) -> tensor<4x3x3x3xbf16>
// CHECK-NEXT: %[[C:.*]] = oasr.node "Conv"(%[[XL]], %[[WL]]){{.*}} -> tensor<2x4x8x8xbf16>
// CHECK-NEXT: %[[BN:.*]] = oasr.node "BatchNormalization"(%[[C]], %[[S]], %{{.*}}, %{{.*}}, %{{.*}}){{.*}}: (tensor<2x4x8x8xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xbf16>
// CHECK-NEXT: %[[R:.*]] = oasr.node "Relu"(%[[BN]]){{.*}} -> tensor<2x4x8x8xbf16>
// CHECK-NEXT: %[[P:.*]] = oasr.node "GlobalAveragePool"(%[[R]]){{.*}} -> tensor<2x4x1x1xbf16>
// CHECK-NEXT: %[[F:.*]] = oasr.node "Flatten"(%[[P]]){{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[FW:.*]] = oasr.node "Cast"(%{{.*}}) {to = 16 : i64} : (tensor<5x4xf32>) -> tensor<5x4xbf16>
// CHECK-NEXT: %[[FB:.*]] = oasr.node "Cast"(%{{.*}}) {to = 16 : i64} : (tensor<5xf32>) -> tensor<5xbf16>
// CHECK-NEXT: %[[G:.*]] = oasr.node "Gemm"(%[[F]], %[[FW]], %[[FB]]){{.*}} -> tensor<2x5xbf16>
// CHECK-NEXT: %[[Y:.*]] = oasr.node "Cast"(%[[G]]) {to = 1 : i64} : (tensor<2x5xbf16>) -> tensor<2x5xf32>
// CHECK-NEXT: return %[[Y]] : tensor<2x5xf32>
// CHECK: #[[XLOC]] = loc("x/autocast_bf16")
// F16: oasr.node "Conv"({{.*}}) -> tensor<2x4x8x8xf16>
// F16: oasr.node "Gemm"({{.*}}) -> tensor<2x5xf16>
// TF32-LABEL: module attributes {oasr.precision = "tf32"}
// TF32-NOT: bf16
// TF32: oasr.node "Conv"({{.*}}) -> tensor<2x4x8x8xf32>
// F32-NOT: oasr.precision
// F32-NOT: bf16
module {
  func.func @forward(%x: tensor<2x3x8x8xf32> {oasr.input = "x"},
                     %w: tensor<4x3x3x3xf32> {oasr.param = "conv.weight"},
                     %s: tensor<4xf32> {oasr.param = "bn.scale"},
                     %b: tensor<4xf32> {oasr.param = "bn.bias"},
                     %m: tensor<4xf32> {oasr.state = "bn.mean"},
                     %v: tensor<4xf32> {oasr.state = "bn.var"},
                     %fw: tensor<5x4xf32> {oasr.param = "fc.weight"},
                     %fb: tensor<5xf32> {oasr.param = "fc.bias"})
      -> (tensor<2x5xf32> {oasr.output = "logits"}) {
    %c = oasr.node "Conv"(%x, %w) {pads = [1, 1, 1, 1]} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> loc("conv")
    %bn = oasr.node "BatchNormalization"(%c, %s, %b, %m, %v) : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32> loc("bn")
    %r = oasr.node "Relu"(%bn) : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> loc("relu")
    %p = oasr.node "GlobalAveragePool"(%r) : (tensor<2x4x8x8xf32>) -> tensor<2x4x1x1xf32> loc("pool")
    %f = oasr.node "Flatten"(%p) {axis = 1 : i64} : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32> loc("flatten")
    %g = oasr.node "Gemm"(%f, %fw, %fb) {transB = 1 : i64} : (tensor<2x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x5xf32> loc("fc")
    return %g : tensor<2x5xf32>
  }
}

// -----

// Attention: the products lower, the bias Add follows its bf16 operand and
// reads the f32 bias as it is, Softmax widens to f32 and the second product
// lowers its output again. A parameter read by two products (tied weights)
// is cast once.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x4xf32>
// CHECK-SAME: %[[B:[^:]*]]: tensor<4xf32>
// CHECK: %[[WL:.*]] = oasr.node "Cast"(%[[W]]) {to = 16 : i64}
// CHECK-NOT: oasr.node "Cast"(%[[W]])
// CHECK: %[[M:.*]] = oasr.node "MatMul"(%{{.*}}, %[[WL]]){{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[A:.*]] = oasr.node "Add"(%[[M]], %[[B]]){{.*}}: (tensor<2x4xbf16>, tensor<4xf32>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[AW:.*]] = oasr.node "Cast"(%[[A]]) {to = 1 : i64} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[SM:.*]] = oasr.node "Softmax"(%[[AW]]){{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: %[[SL:.*]] = oasr.node "Cast"(%[[SM]]) {to = 16 : i64}
// CHECK-NEXT: oasr.node "MatMul"(%[[SL]], %[[WL]]){{.*}} -> tensor<2x4xbf16>
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"},
                     %b: tensor<4xf32> {oasr.param = "b"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mm1")
    %a = oasr.node "Add"(%m, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("bias")
    %s = oasr.node "Softmax"(%a) {axis = -1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("softmax")
    %y = oasr.node "MatMul"(%s, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mm2")
    return %y : tensor<2x4xf32>
  }
}

// -----

// Promotion: an Add of a bf16 product and an f32 activation (an f32
// embedding) runs in f32, the bf16 side widened; a node reading only
// parameters and constants stays as imported.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[E:[^:]*]]: tensor<2x4xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x4xf32>
// CHECK: %[[N:.*]] = oasr.node "Neg"(%[[W]]){{.*}} -> tensor<4x4xf32>
// CHECK: %[[M:.*]] = oasr.node "MatMul"({{.*}}){{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[MW:.*]] = oasr.node "Cast"(%[[M]]) {to = 1 : i64}
// CHECK-NEXT: oasr.node "Add"(%[[MW]], %[[E]]){{.*}} -> tensor<2x4xf32>
module {
  func.func @forward(%e: tensor<2x4xf32> {oasr.input = "e"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    %n = oasr.node "Neg"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("neg")
    %m = oasr.node "MatMul"(%e, %n) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mm")
    %a = oasr.node "Add"(%m, %e) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("residual")
    return %a : tensor<2x4xf32>
  }
}

// -----

// Redundant pairs: the model widens a product's result with its own Cast;
// the next product reads the bf16 original, and the model's Cast, left
// without readers, is erased.
// CHECK-LABEL: func.func @forward
// CHECK: %[[M:.*]] = oasr.node "MatMul"({{.*}}){{.*}} -> tensor<2x4xbf16>
// CHECK-NOT: "Cast"(%[[M]])
// CHECK: oasr.node "MatMul"(%[[M]], %{{.*}}){{.*}} -> tensor<2x4xbf16>
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mm1")
    %c = oasr.node "Cast"(%m) {to = 1 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("model_cast")
    %y = oasr.node "MatMul"(%c, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mm2")
    return %y : tensor<2x4xf32>
  }
}
