// RUN: oasr-opt %s --oasr-train-pipeline='precision=bf16 strategy=wfbp' | FileCheck %s

// In the bf16 step the logits' Cast for the loss and the weight gradient's
// Cast back to the f32 master fold into their products.
// CHECK-LABEL: func.func @train_step
// CHECK: "MatMul"({{.*}}) {{.*}}: (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xf32>
// CHECK: "FusedMatMul"({{.*}}) {{.*}}: (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<4x4xf32>
// CHECK-NOT: "Cast"({{.*}}) {{.*}}: (tensor<4x4xbf16>) -> tensor<4x4xf32>
// CHECK: return
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "logits"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/fc")
    return %m : tensor<2x4xf32>
  }
}
