// RUN: oasr-opt %s --oasr-fuse-attention -split-input-file 2>%t.remarks | FileCheck %s
// RUN: FileCheck %s --check-prefix=REMARK < %t.remarks

// nn.TransformerEncoderLayer as torch 1.13 exports it: Q scaled before the
// product, the scores times Cast(1), the padding mask added as
// Where(c, -inf, 0) * Cast(1). One FusedAttention reads Q/4, KT, V and c;
// the softmax, the mask arithmetic and the scale go.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME: %[[KT:[^:]*]]: tensor<2x8x4xf32>
// CHECK-SAME: %[[V:[^:]*]]: tensor<2x4x8xf32>
// CHECK-SAME: %[[C:[^:]*]]: tensor<2x1x4xi1>
// CHECK: %[[QS:.*]] = oasr.node "Div"(%[[Q]]
// CHECK-NEXT: %[[Y:.*]] = oasr.node "FusedAttention"(%[[QS]], %[[KT]], %[[V]], %[[C]]) {scale = 1.000000e+00 : f32} : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>, tensor<2x1x4xi1>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: "Softmax"
// CHECK-NOT: "Where"
// REMARK: remark: oasr-fuse-attention: 1 attention(s) fused, 0 left unfused
module {
  func.func @forward(%q: tensor<2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<2x4x8xf32> {oasr.param = "v"},
                     %c: tensor<2x1x4xi1> {oasr.input = "mask"})
      -> (tensor<2x4x8xf32> {oasr.output = "logits"}) {
    %one = oasr.node "Constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %zero = oasr.node "Constant"() {value = dense<0.0> : tensor<2x1x4xf32>} : () -> tensor<2x1x4xf32>
    %ninf = oasr.node "Constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
    %bias = oasr.node "Where"(%c, %ninf, %zero) : (tensor<2x1x4xi1>, tensor<f32>, tensor<2x1x4xf32>) -> tensor<2x1x4xf32> loc("/attn/Where")
    %four = oasr.node "Constant"() {value = dense<4.0> : tensor<f32>} : () -> tensor<f32>
    %qs = oasr.node "Div"(%q, %four) : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32> loc("/attn/Div")
    %s = oasr.node "MatMul"(%qs, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32> loc("/attn/MatMul")
    %k1 = oasr.node "Cast"(%one) {to = 1 : i64} : (tensor<i64>) -> tensor<f32> loc("/attn/Cast")
    %ss = oasr.node "Mul"(%s, %k1) : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32> loc("/attn/Mul")
    %k2 = oasr.node "Cast"(%one) {to = 1 : i64} : (tensor<i64>) -> tensor<f32> loc("/attn/Cast_1")
    %bs = oasr.node "Mul"(%bias, %k2) : (tensor<2x1x4xf32>, tensor<f32>) -> tensor<2x1x4xf32> loc("/attn/Mul_1")
    %a = oasr.node "Add"(%ss, %bs) : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32> loc("/attn/Add")
    %p = oasr.node "Softmax"(%a) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/attn/Softmax")
    %y = oasr.node "MatMul"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("/attn/MatMul_1")
    return %y : tensor<2x4x8xf32>
  }
}

// -----

// The GPT block's form: 4-d heads, the scale a Pow/Reciprocal chain of
// constants, the causal mask a Where(c, -inf, scores) over [S, S].
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[Q:[^:]*]]: tensor<1x2x4x8xf32>
// CHECK-SAME: %[[KT:[^:]*]]: tensor<1x2x8x4xf32>
// CHECK-SAME: %[[V:[^:]*]]: tensor<1x2x4x8xf32>
// CHECK: %[[C:.*]] = oasr.node "Trilu"
// CHECK-NEXT: %[[Y:.*]] = oasr.node "FusedAttention"(%[[Q]], %[[KT]], %[[V]], %[[C]]) {scale = 2.500000e-01 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>, tensor<4x4xi1>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: "Pow"
// CHECK-NOT: "Reciprocal"
module {
  func.func @forward(%q: tensor<1x2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<1x2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<1x2x4x8xf32> {oasr.param = "v"})
      -> (tensor<1x2x4x8xf32> {oasr.output = "logits"}) {
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
    %c16 = oasr.node "Constant"() {value = dense<16.0> : tensor<f32>} : () -> tensor<f32>
    %half = oasr.node "Constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %pw = oasr.node "Pow"(%c16, %half) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %r = oasr.node "Reciprocal"(%pw) : (tensor<f32>) -> tensor<f32>
    %c1 = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %k = oasr.node "Mul"(%r, %c1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %ss = oasr.node "Mul"(%s, %k) : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
    %t = oasr.node "Constant"() {value = dense<true> : tensor<4x4xi1>} : () -> tensor<4x4xi1>
    %zero = oasr.node "Constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %c = oasr.node "Trilu"(%t, %zero) {upper = 1 : i64} : (tensor<4x4xi1>, tensor<i64>) -> tensor<4x4xi1>
    %ninf = oasr.node "Constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
    %w = oasr.node "Where"(%c, %ninf, %ss) : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %p = oasr.node "Softmax"(%w) {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %y = oasr.node "MatMul"(%p, %v) : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
    return %y : tensor<1x2x4x8xf32>
  }
}

// -----

// ViT's form: no mask, odd sizes (M = N = 5, D = 3, E = 7).
// CHECK-LABEL: func.func @forward
// CHECK: oasr.node "FusedAttention"(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) {scale = 1.000000e+00 : f32} : (tensor<3x5x3xf32>, tensor<3x3x5xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
// CHECK-NOT: "Softmax"
module {
  func.func @forward(%q: tensor<3x5x3xf32> {oasr.param = "q"},
                     %kt: tensor<3x3x5xf32> {oasr.param = "kt"},
                     %v: tensor<3x5x7xf32> {oasr.param = "v"})
      -> (tensor<3x5x7xf32> {oasr.output = "logits"}) {
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<3x5x3xf32>, tensor<3x3x5xf32>) -> tensor<3x5x5xf32>
    %p = oasr.node "Softmax"(%s) {axis = -1 : i64} : (tensor<3x5x5xf32>) -> tensor<3x5x5xf32>
    %y = oasr.node "MatMul"(%p, %v) : (tensor<3x5x5xf32>, tensor<3x5x7xf32>) -> tensor<3x5x7xf32>
    return %y : tensor<3x5x7xf32>
  }
}

// -----

// BERT-base's export keeps the mask's zeros [384, 1, 128] as a resource
// blob (a large initializer): zeros all the same.
// CHECK-LABEL: func.func @forward
// CHECK: oasr.node "FusedAttention"
// CHECK-NOT: "Where"
module {
  func.func @forward(%q: tensor<2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<2x4x8xf32> {oasr.param = "v"},
                     %c: tensor<2x1x4xi1> {oasr.input = "mask"})
      -> (tensor<2x4x8xf32> {oasr.output = "logits"}) {
    %zero = oasr.node "Constant"() {value = dense_resource<zeros> : tensor<2x1x4xf32>} : () -> tensor<2x1x4xf32>
    %ninf = oasr.node "Constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
    %bias = oasr.node "Where"(%c, %ninf, %zero) : (tensor<2x1x4xi1>, tensor<f32>, tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %a = oasr.node "Add"(%s, %bias) : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
    %p = oasr.node "Softmax"(%a) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/blob/Softmax")
    %y = oasr.node "MatMul"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      zeros: "0x040000000000000000000000000000000000000000000000000000000000000000000000"
    }
  }
#-}

// -----

// A blob with a nonzero element is a bias, not a mask: unfused.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: "FusedAttention"
// CHECK: oasr.node "Softmax"
// REMARK: remark: loc("/blob/Softmax"): attention left unfused: an additive bias that is not a -inf mask
module {
  func.func @forward(%q: tensor<2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<2x4x8xf32> {oasr.param = "v"},
                     %c: tensor<2x1x4xi1> {oasr.input = "mask"})
      -> (tensor<2x4x8xf32> {oasr.output = "logits"}) {
    %zero = oasr.node "Constant"() {value = dense_resource<ones> : tensor<2x1x4xf32>} : () -> tensor<2x1x4xf32>
    %ninf = oasr.node "Constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
    %bias = oasr.node "Where"(%c, %ninf, %zero) : (tensor<2x1x4xi1>, tensor<f32>, tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %a = oasr.node "Add"(%s, %bias) : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
    %p = oasr.node "Softmax"(%a) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/blob/Softmax")
    %y = oasr.node "MatMul"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      ones: "0x04000000000000000000000000000000000000000000000000000000000000000000803f"
    }
  }
#-}

// -----

// Dropout on the probabilities (a training export with dropout > 0): left
// unfused, and the remark says why.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: "FusedAttention"
// CHECK: oasr.node "Softmax"
// CHECK: oasr.node "Dropout"
// REMARK: remark: loc("/drop/Softmax"): attention left unfused: dropout on the attention probabilities; its probabilities are saved for backward
// REMARK: remark: oasr-fuse-attention: 0 attention(s) fused, 1 left unfused
module {
  func.func @forward(%q: tensor<2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<2x4x8xf32> {oasr.param = "v"})
      -> (tensor<2x4x8xf32> {oasr.output = "logits"}) {
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %p = oasr.node "Softmax"(%s) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/drop/Softmax")
    %ratio = oasr.node "Constant"() {value = dense<0.1> : tensor<f32>} : () -> tensor<f32>
    %on = oasr.node "Constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    %d = oasr.node "Dropout"(%p, %ratio, %on) : (tensor<2x4x4xf32>, tensor<f32>, tensor<i1>) -> tensor<2x4x4xf32>
    %y = oasr.node "MatMul"(%d, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}

// -----

// A masked fill with a finite value is not a -inf mask: unfused.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: "FusedAttention"
// CHECK: oasr.node "Softmax"
// REMARK: remark: loc("/fill/Softmax"): attention left unfused: masked fill with a value other than -inf
module {
  func.func @forward(%q: tensor<2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<2x4x8xf32> {oasr.param = "v"},
                     %c: tensor<4x4xi1> {oasr.input = "mask"})
      -> (tensor<2x4x8xf32> {oasr.output = "logits"}) {
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %big = oasr.node "Constant"() {value = dense<-1.0e+09> : tensor<f32>} : () -> tensor<f32>
    %w = oasr.node "Where"(%c, %big, %s) : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %p = oasr.node "Softmax"(%w) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/fill/Softmax")
    %y = oasr.node "MatMul"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}

// -----

// A learned additive bias (a relative position bias) needs its own
// gradient: unfused.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: "FusedAttention"
// CHECK: oasr.node "Softmax"
// REMARK: remark: loc("/bias/Softmax"): attention left unfused: an additive bias that is not a -inf mask
// REMARK-NEXT: remark: oasr-fuse-attention: 0 attention(s) fused, 1 left unfused
module {
  func.func @forward(%q: tensor<2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<2x4x8xf32> {oasr.param = "v"},
                     %b: tensor<4x4xf32> {oasr.param = "bias"})
      -> (tensor<2x4x8xf32> {oasr.output = "logits"}) {
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %a = oasr.node "Add"(%s, %b) : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %p = oasr.node "Softmax"(%a) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("/bias/Softmax")
    %y = oasr.node "MatMul"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}

// -----

// Probabilities read elsewhere too (returned), a softmax over another axis,
// a softmax that feeds no product: no attention, nothing said.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: "FusedAttention"
// REMARK-NOT: remark
module {
  func.func @forward(%q: tensor<2x4x8xf32> {oasr.param = "q"},
                     %kt: tensor<2x8x4xf32> {oasr.param = "kt"},
                     %v: tensor<2x4x8xf32> {oasr.param = "v"})
      -> (tensor<2x4x8xf32> {oasr.output = "logits"}, tensor<2x4x4xf32> {oasr.output = "probs"},
          tensor<2x4x8xf32> {oasr.output = "other"}, tensor<2x4x4xf32> {oasr.output = "plain"}) {
    %s = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %p = oasr.node "Softmax"(%s) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %y = oasr.node "MatMul"(%p, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %s2 = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %p2 = oasr.node "Softmax"(%s2) {axis = 1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %y2 = oasr.node "MatMul"(%p2, %v) : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %s3 = oasr.node "MatMul"(%q, %kt) : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
    %p3 = oasr.node "Softmax"(%s3) {axis = -1 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    return %y, %p, %y2, %p3 : tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>
  }
}
