// RUN: oasr-opt %s --oasr-fuse-matmul-transpose -split-input-file | FileCheck %s
// RUN: oasr-opt %s --oasr-train-pipeline='precision=bf16 strategy=wfbp' -split-input-file | FileCheck %s --check-prefix=PIPE
// RUN: oasr-opt %s --oasr-train-pipeline='strategy=wfbp' -split-input-file | FileCheck %s --check-prefix=F32

// An exported linear layer, MatMul(x, Transpose(W)), reads W through its
// strides; the Transpose goes.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<5x4xf32>
// CHECK-NOT: "Transpose"
// CHECK: %[[Y:.*]] = oasr.node "com.microsoft"::"FusedMatMul"(%[[X]], %[[W]]) {transA = 0 : i64, transB = 1 : i64} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[Y]]
// In the bf16 step the forward product reads W transposed, and W's
// gradient, (Xᵀ · dY)ᵀ, is computed as dYᵀ · X: no Transpose is left (x
// is an input, so there is no dX).
// PIPE-LABEL: func.func @train_step
// PIPE-NOT: "Transpose"
// PIPE: "FusedMatMul"({{.*}}) {{.*}}transA = 0 : i64, transB = 1 : i64
// PIPE-NOT: "Transpose"
// PIPE: "FusedMatMul"({{.*}}) {{.*}}transA = 1 : i64, transB = 0 : i64{{.*}} -> tensor<5x4xf32>
// PIPE-NOT: "Transpose"
// PIPE: return
// F32-LABEL: func.func @train_step
// F32-NOT: "FusedMatMul"
// F32: "Transpose"
module {
  func.func @forward(%x: tensor<2x3x4xf32> {oasr.input = "x"},
                     %w: tensor<5x4xf32> {oasr.param = "w"})
      -> (tensor<2x3x5xf32> {oasr.output = "logits"}) {
    %t = oasr.node "Transpose"(%w) {perm = [1, 0]} : (tensor<5x4xf32>) -> tensor<4x5xf32> loc("/fc/t")
    %y = oasr.node "MatMul"(%x, %t) : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32> loc("/fc/mm")
    return %y : tensor<2x3x5xf32>
  }
}

