// RUN: oasr-opt %s | FileCheck %s
// RUN: oasr-opt %s | oasr-opt | FileCheck %s
// RUN: oasr-opt %s --mlir-print-op-generic | oasr-opt | FileCheck %s

// CHECK-LABEL: func.func @conv_relu
// CHECK-SAME: %[[X:.*]]: tensor<1x3x8x8xf32>
// CHECK-SAME: %[[W:.*]]: tensor<4x3x3x3xf32> {oasr.param = "conv1.weight"}
// CHECK-SAME: %[[RM:.*]]: tensor<4xf32> {oasr.state = "bn.running_mean"}
func.func @conv_relu(%x: tensor<1x3x8x8xf32>,
                     %w: tensor<4x3x3x3xf32> {oasr.param = "conv1.weight"},
                     %rm: tensor<4xf32> {oasr.state = "bn.running_mean"})
    -> tensor<1x4x8x8xf32> {
  // CHECK: %[[C:.*]] = oasr.node "Conv"(%[[X]], %[[W]]) {pads = [1, 1, 1, 1], strides = [1, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %c = oasr.node "Conv"(%x, %w) {pads = [1, 1, 1, 1], strides = [1, 1]}
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  // CHECK-NEXT: %[[R:.*]] = oasr.node "Relu"(%[[C]]) {oasr.cost = #oasr.cost<forward_us = 1.500000e+00, flops = 256>} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %r = oasr.node "Relu"(%c) {oasr.cost = #oasr.cost<forward_us = 1.5, flops = 256>}
      : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  // CHECK-NEXT: return %[[R]]
  return %r : tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @domains_and_multiple_results
func.func @domains_and_multiple_results(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  // CHECK: oasr.node "com.microsoft"::"Gelu"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
  %g = oasr.node "com.microsoft"::"Gelu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK: %{{.*}}:2 = oasr.node "Dropout"(%{{.*}}) {ratio = 5.000000e-01 : f32} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  %d:2 = oasr.node "Dropout"(%g) {ratio = 0.5 : f32} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  // CHECK: oasr.node "Constant"() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
  %c = oasr.node "Constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  return %d#0, %d#1 : tensor<4xf32>, tensor<4xi1>
}

// CHECK-LABEL: func.func @fused_allreduce
func.func @fused_allreduce(%w: tensor<4x3xf32> {oasr.param = "fc.weight"},
                           %b: tensor<4xf32> {oasr.param = "fc.bias"},
                           %gw: tensor<4x3xf32>, %gb: tensor<4xf32>,
                           %v: tensor<4x3xf32>)
    -> (tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>) {
  // CHECK: %[[T:.*]] = oasr.allreduce_start %{{.*}}, %{{.*}} {buffer_bytes = 64 : i64, group = 0 : i64, offsets = array<i64: 0, 48>} : tensor<4x3xf32>, tensor<4xf32>
  %t = oasr.allreduce_start %gw, %gb {group = 0 : i64, offsets = array<i64: 0, 48>, buffer_bytes = 64 : i64}
      : tensor<4x3xf32>, tensor<4xf32>
  // CHECK-NEXT: %[[R:.*]]:2 = oasr.allreduce_wait %[[T]] : tensor<4x3xf32>, tensor<4xf32>
  %r:2 = oasr.allreduce_wait %t : tensor<4x3xf32>, tensor<4xf32>
  // CHECK-NEXT: %{{.*}}, %{{.*}} = oasr.optimizer_update "momentum" %{{.*}}, %[[R]]#0, %{{.*}} {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64} : tensor<4x3xf32>, tensor<4x3xf32>
  %nw, %nv = oasr.optimizer_update "momentum" %w, %r#0, %v {lr = 0.1 : f64, momentum = 0.9 : f64}
      : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK-NEXT: oasr.optimizer_update "sgd" %{{.*}}, %[[R]]#1 {lr = 1.000000e-01 : f64, weight_decay = 1.000000e-04 : f64} : tensor<4xf32>
  %nb = oasr.optimizer_update "sgd" %b, %r#1 {lr = 0.1 : f64, weight_decay = 1.0e-4 : f64} : tensor<4xf32>
  return %nw, %nb, %nv : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>
}

// The element type a fused allreduce puts on the wire.
// CHECK-LABEL: func.func @wire_types
func.func @wire_types(%g: tensor<8xf32>, %h: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // CHECK: %[[T0:.*]] = oasr.allreduce_start %{{.*}} {group = 0 : i64, wire_type = bf16} : tensor<8xf32>
  %t0 = oasr.allreduce_start %g {group = 0 : i64, wire_type = bf16} : tensor<8xf32>
  // CHECK-NEXT: %[[T1:.*]] = oasr.allreduce_start %{{.*}} {group = 1 : i64, wire_type = f16} : tensor<8xf32>
  %t1 = oasr.allreduce_start %h {group = 1 : i64, wire_type = f16} : tensor<8xf32>
  // CHECK-NEXT: oasr.allreduce_wait %[[T0]] : tensor<8xf32>
  %r0 = oasr.allreduce_wait %t0 : tensor<8xf32>
  %r1 = oasr.allreduce_wait %t1 : tensor<8xf32>
  return %r0, %r1 : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @cost_defaults
// CHECK: #oasr.cost<backward_us = 8.125000e+02>
// CHECK-NOT: forward_us
func.func @cost_defaults(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = oasr.node "ReluGrad"(%x, %x) {oasr.cost = #oasr.cost<backward_us = 812.5>}
      : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// Adagrad keeps one state tensor, Adam two; their hyper-parameters print
// only where they differ from the defaults.
// CHECK-LABEL: func.func @adaptive_optimizers
func.func @adaptive_optimizers(%p: tensor<3xf32>, %g: tensor<3xf32>,
                               %h: tensor<3xf32>, %m: tensor<3xf32>)
    -> (tensor<3xf32>, tensor<3xf32>) {
  // CHECK: oasr.optimizer_update "adagrad" %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64, lr = 1.000000e-01 : f64, lr_decay = 1.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>
  %p1, %h1 = oasr.optimizer_update "adagrad" %p, %g, %h {lr = 0.1 : f64, lr_decay = 0.1 : f64, epsilon = 1.0e-5 : f64}
      : tensor<3xf32>, tensor<3xf32>
  // CHECK: oasr.optimizer_update "adam" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {beta1 = 8.500000e-01 : f64, lr = 1.000000e-03 : f64, weight_decay_post = 1.000000e-02 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  %p2, %v2, %h2 = oasr.optimizer_update "adam" %p1, %g, %m, %h1 {lr = 0.001 : f64, beta1 = 0.85 : f64, beta2 = 0.999 : f64, weight_decay_post = 0.01 : f64}
      : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  // CHECK: oasr.optimizer_update "momentum" %{{.*}}, %{{.*}}, %{{.*}} {dampening = 5.000000e-01 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov = true} : tensor<3xf32>, tensor<3xf32>
  %p3, %v3 = oasr.optimizer_update "momentum" %p2, %g, %v2 {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.5 : f64, nesterov = true}
      : tensor<3xf32>, tensor<3xf32>
  return %p3, %h2 : tensor<3xf32>, tensor<3xf32>
}
