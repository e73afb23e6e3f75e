// RUN: oasr-opt %s --oasr-layout-gradients -split-input-file -verify-diagnostics

// A dynamically shaped gradient has no place in a fixed buffer.
func.func @dynamic(%a: tensor<4xf32>, %b: tensor<?xf32>) -> (tensor<4xf32>, tensor<?xf32>) {
  // expected-error @+1 {{gradient #1 of group 0 (type 'tensor<?xf32>') has no static byte size to place in the group's buffer}}
  %t = oasr.allreduce_start %a, %b {group = 0 : i64} : tensor<4xf32>, tensor<?xf32>
  %r:2 = oasr.allreduce_wait %t : tensor<4xf32>, tensor<?xf32>
  return %r#0, %r#1 : tensor<4xf32>, tensor<?xf32>
}

// -----

// index tensors have no byte size either.
func.func @index(%a: tensor<4xindex>) -> tensor<4xindex> {
  // expected-error @+1 {{gradient #0 of group 3 (type 'tensor<4xindex>') has no static byte size to place in the group's buffer}}
  %t = oasr.allreduce_start %a {group = 3 : i64} : tensor<4xindex>
  %r = oasr.allreduce_wait %t : tensor<4xindex>
  return %r : tensor<4xindex>
}
