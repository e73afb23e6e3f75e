// RUN: oasr-opt %s --oasr-train-pipeline='precision=bf16 strategy=wfbp' 2>/dev/null | FileCheck %s
// RUN: oasr-opt %s --oasr-train-pipeline='strategy=wfbp' 2>/dev/null | FileCheck %s --check-prefix=F32
// RUN: oasr-opt %s --oasr-train-pipeline='strategy=wfbp fuse-attention=false' 2>&1 | FileCheck %s --check-prefix=OFF

// In the bf16 step: the fused node and its gradient in bf16, the mask a
// bool operand of both, and no SoftmaxGrad (nothing of [2, 4, 4] saved).
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: "Softmax"
// CHECK: oasr.node "FusedAttention"({{.*}}) {{.*}}scale = 2.500000e-01 : f32} : (tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>, tensor<2x1x4xi1>) -> tensor<2x4x8xbf16>
// CHECK-NOT: "SoftmaxGrad"
// CHECK: oasr.node "FusedAttentionGrad"({{.*}}) {{.*}}scale = 2.500000e-01 : f32} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>, tensor<2x1x4xi1>) -> (tensor<2x4x8xbf16>, tensor<2x8x4xbf16>, tensor<2x4x8xbf16>)
// CHECK-NOT: "SoftmaxGrad"
// CHECK: return
// The f32 step fuses too, in f32.
// F32-LABEL: func.func @train_step
// F32: oasr.node "FusedAttention"({{.*}}) {{.*}}: (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>, tensor<2x1x4xi1>) -> tensor<2x4x8xf32>
// F32: oasr.node "FusedAttentionGrad"
// fuse-attention=false (oasr-run --fuse-attention=false) leaves the step as
// it was, and says nothing.
// OFF-NOT: remark
// OFF-LABEL: func.func @train_step
// OFF-NOT: "FusedAttention"
// OFF: oasr.node "Softmax"
// OFF: oasr.node "SoftmaxGrad"
module {
  func.func @forward(%x: tensor<2x4x8xf32> {oasr.input = "x"},
                     %c: tensor<2x1x4xi1> {oasr.input = "mask"},
                     %wq: tensor<8x8xf32> {oasr.param = "wq"},
                     %wk: tensor<8x4xf32> {oasr.param = "wk"},
                     %wv: tensor<8x8xf32> {oasr.param = "wv"})
      -> (tensor<8x8xf32> {oasr.output = "logits"}) {
    %q = oasr.node "MatMul"(%x, %wq) : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/q")
    %xt = oasr.node "Transpose"(%x) {perm = [0, 2, 1]} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32> loc("/xt")
    %kt = oasr.node "MatMul"(%xt, %wk) : (tensor<2x8x4xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32> loc("/k")
    %v = oasr.node "MatMul"(%x, %wv) : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("/v")
    %zero = oasr.node "Constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %ninf = oasr.node "Constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
    %bias = oasr.node "Where"(%c, %ninf, %zero) : (tensor<2x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4xf32> loc("/attn/Where")
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32> loc("/attn/MatMul")
    %four = oasr.node "Constant"() {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
    %ss = oasr.node "Div"(%s, %four) : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32> loc("/attn/Div")
    %a = oasr.node "Add"(%bias, %ss) : (tensor<2x1x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/attn/Add")
    %p = oasr.node "Softmax"(%a) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/attn/Softmax")
    %y = oasr.node "MatMul"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/attn/MatMul_1")
    %shape = oasr.node "Constant"() {value = dense<[8, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
    %l = oasr.node "Reshape"(%y, %shape) : (tensor<2x4x8xf32>, tensor<2xi64>) -> tensor<8x8xf32> loc("/out")
    return %l : tensor<8x8xf32>
  }
}
