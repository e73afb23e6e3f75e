// RUN: oasr-opt %s --oasr-insert-optimizer -split-input-file | FileCheck %s --check-prefix=SGD
// RUN: oasr-opt %s --oasr-insert-optimizer="algo=momentum lr=0.1 momentum=0.8 weight-decay=1e-4" -split-input-file | FileCheck %s --check-prefix=MOM
// RUN: not oasr-opt %s --oasr-insert-optimizer=algo=lamb -split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// Updates right after each group's wait: group 0's update runs while group 1
// is still being reduced. Results: loss, new params, (new opt state), state.
// SGD-LABEL: func.func @train_step
// SGD-SAME: -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.new_param = "a"}, tensor<2xf32> {oasr.new_param = "b"}, tensor<4xf32> {oasr.new_state = "bn.running_mean"})
// SGD: %[[R0:.*]] = oasr.allreduce_wait %{{.*}} : tensor<2xf32>
// SGD-NEXT: %[[NB:.*]] = oasr.optimizer_update "sgd" %{{.*}}, %[[R0]] {lr = 1.000000e-02 : f64} : tensor<2xf32>
// SGD-NEXT: %[[R1:.*]] = oasr.allreduce_wait %{{.*}} : tensor<4xf32>
// SGD-NEXT: %[[NA:.*]] = oasr.optimizer_update "sgd" %{{.*}}, %[[R1]] {lr = 1.000000e-02 : f64} : tensor<4xf32>
// SGD-NEXT: return %{{.*}}, %[[NA]], %[[NB]], %{{.*}} :

// MOM-LABEL: func.func @train_step
// MOM-SAME: %[[A:[^:]*]]: tensor<4xf32> {oasr.param = "a"}, %[[B:[^:]*]]: tensor<2xf32> {oasr.param = "b"}, %{{[^:]*}}: tensor<4xf32> {oasr.state = "bn.running_mean"}, %[[VA:[^:]*]]: tensor<4xf32> {oasr.opt_state = "a"}, %[[VB:[^:]*]]: tensor<2xf32> {oasr.opt_state = "b"})
// MOM-SAME: -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.new_param = "a"}, tensor<2xf32> {oasr.new_param = "b"}, tensor<4xf32> {oasr.new_opt_state = "a"}, tensor<2xf32> {oasr.new_opt_state = "b"}, tensor<4xf32> {oasr.new_state = "bn.running_mean"})
// MOM: oasr.optimizer_update "momentum" %[[B]], %{{.*}}, %[[VB]] {lr = 1.000000e-01 : f64, momentum = 8.000000e-01 : f64, weight_decay = 1.000000e-04 : f64}
// MOM: oasr.optimizer_update "momentum" %[[A]], %{{.*}}, %[[VA]]

// BAD: error: unknown optimizer 'lamb', expected 'sgd', 'momentum', 'adagrad', 'adam' or 'adamw'
module {
  func.func @train_step(%x: tensor<4xf32> {oasr.input = "x"},
                        %a: tensor<4xf32> {oasr.param = "a"},
                        %b: tensor<2xf32> {oasr.param = "b"},
                        %rm: tensor<4xf32> {oasr.state = "bn.running_mean"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"},
          tensor<2xf32> {oasr.grad = "b"}, tensor<4xf32> {oasr.new_state = "bn.running_mean"}) {
    %l = oasr.node "ReduceMean"(%x) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %gb = oasr.node "Neg"(%b) {oasr.layer = "/b"} : (tensor<2xf32>) -> tensor<2xf32>
    %t0 = oasr.allreduce_start %gb {group = 0 : i64} : tensor<2xf32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    %t1 = oasr.allreduce_start %ga {group = 1 : i64} : tensor<4xf32>
    %r0 = oasr.allreduce_wait %t0 : tensor<2xf32>
    %r1 = oasr.allreduce_wait %t1 : tensor<4xf32>
    return %l, %r1, %r0, %rm : tensor<f32>, tensor<4xf32>, tensor<2xf32>, tensor<4xf32>
  }
}

// -----

// The model's ONNX TrainingInfo (ONNX attribute names) gives the defaults;
// options override them.
// SGD-LABEL: func.func @train_step
// SGD: oasr.optimizer_update "momentum" %{{.*}}, %{{.*}}, %{{.*}} {lr = 5.000000e-02 : f64, momentum = 0.9499{{[0-9]*}} : f64}
// MOM-LABEL: func.func @train_step
// MOM: oasr.optimizer_update "momentum" %{{.*}}, %{{.*}}, %{{.*}} {lr = 1.000000e-01 : f64, momentum = 8.000000e-01 : f64, weight_decay = 1.000000e-04 : f64}
module attributes {oasr.optimizer = {algo = "momentum", lr = 0.05 : f32, alpha = 0.95 : f64}} {
  func.func @train_step(%a: tensor<4xf32> {oasr.param = "a"})
      -> (tensor<f32> {oasr.output = "loss"}, tensor<4xf32> {oasr.grad = "a"}) {
    %l = oasr.node "ReduceMean"(%a) {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    %ga = oasr.node "Neg"(%a) {oasr.layer = "/a"} : (tensor<4xf32>) -> tensor<4xf32>
    return %l, %ga : tensor<f32>, tensor<4xf32>
  }
}
