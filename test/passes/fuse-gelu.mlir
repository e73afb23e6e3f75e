// RUN: oasr-opt %s --oasr-fuse-gelu -split-input-file | FileCheck %s
// RUN: oasr-opt %s --oasr-train-pipeline='precision=bf16 strategy=wfbp' -split-input-file | FileCheck %s --check-prefix=PIPE
// RUN: oasr-opt %s --oasr-train-pipeline='strategy=wfbp' -split-input-file | FileCheck %s --check-prefix=F32

// The chain PyTorch exports for F.gelu at opset 17 becomes one Gelu; its
// constants go with it.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8xf32>
// CHECK: %[[M:.*]] = oasr.node "MatMul"(%[[X]]
// CHECK-NEXT: %[[G:.*]] = oasr.node "Gelu"(%[[M]]) : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
// CHECK-NOT: "Erf"
// In the bf16 step, one Gelu and one GeluGrad, both in bf16.
// PIPE-LABEL: func.func @train_step
// PIPE-NOT: "Erf"
// PIPE: oasr.node "Gelu"({{.*}}) {{.*}}: (tensor<2x8xbf16>) -> tensor<2x8xbf16>
// PIPE-NOT: "Erf"
// PIPE: oasr.node "GeluGrad"({{.*}}) {{.*}}: (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
// PIPE-NOT: "Erf"
// PIPE: return
// An f32 step is left as it was.
// F32-LABEL: func.func @train_step
// F32: oasr.node "Erf"
// F32-NOT: "Gelu"
module {
  func.func @forward(%x: tensor<2x8xf32> {oasr.input = "x"},
                     %w: tensor<8x8xf32> {oasr.param = "w"})
      -> (tensor<2x8xf32> {oasr.output = "logits"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32> loc("/fc")
    %s2 = oasr.node "Constant"() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
    %d = oasr.node "Div"(%m, %s2) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32> loc("/act/Div")
    %e = oasr.node "Erf"(%d) : (tensor<2x8xf32>) -> tensor<2x8xf32> loc("/act/Erf")
    %one = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %a = oasr.node "Add"(%e, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32> loc("/act/Add")
    %mx = oasr.node "Mul"(%m, %a) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> loc("/act/Mul")
    %half = oasr.node "Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %y = oasr.node "Mul"(%mx, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32> loc("/act/Mul_1")
    return %y : tensor<2x8xf32>
  }
}

// -----

// Operands swapped and Mul by 1/sqrt(2): still a GELU.
// CHECK-LABEL: func.func @forward
// CHECK: oasr.node "Gelu"
// CHECK-NOT: "Erf"
module {
  func.func @forward(%x: tensor<2x8xf32> {oasr.input = "x"})
      -> (tensor<2x8xf32> {oasr.output = "logits"}) {
    %s2 = oasr.node "Constant"() {value = dense<0.707106769> : tensor<f32>} : () -> tensor<f32>
    %d = oasr.node "Mul"(%s2, %x) : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %e = oasr.node "Erf"(%d) : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %one = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %a = oasr.node "Add"(%one, %e) : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %mx = oasr.node "Mul"(%a, %x) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %half = oasr.node "Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %y = oasr.node "Mul"(%half, %mx) : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// Not a GELU: the inner Erf is read elsewhere too, or the constant is off.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: "Gelu"
// CHECK: oasr.node "Erf"
// CHECK-NOT: "Gelu"
// CHECK: oasr.node "Erf"
// CHECK-NOT: "Gelu"
module {
  func.func @forward(%x: tensor<2x8xf32> {oasr.input = "x"})
      -> (tensor<2x8xf32> {oasr.output = "logits"}, tensor<2x8xf32> {oasr.output = "erf"}) {
    %s2 = oasr.node "Constant"() {value = dense<1.41421354> : tensor<f32>} : () -> tensor<f32>
    %d = oasr.node "Div"(%x, %s2) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %e = oasr.node "Erf"(%d) : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %one = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %a = oasr.node "Add"(%e, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %mx = oasr.node "Mul"(%x, %a) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %half = oasr.node "Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %y = oasr.node "Mul"(%mx, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %k = oasr.node "Constant"() {value = dense<1.5> : tensor<f32>} : () -> tensor<f32>
    %d2 = oasr.node "Div"(%y, %k) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %e2 = oasr.node "Erf"(%d2) : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %a2 = oasr.node "Add"(%e2, %one) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %mx2 = oasr.node "Mul"(%y, %a2) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y2 = oasr.node "Mul"(%mx2, %half) : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    return %y2, %e : tensor<2x8xf32>, tensor<2x8xf32>
  }
}
