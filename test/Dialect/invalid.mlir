// RUN: oasr-opt %s -split-input-file -verify-diagnostics

func.func @empty_op_type(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.node' op needs a non-empty ONNX op type}}
  %r = oasr.node ""(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @token_never_awaited(%g: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op token must be awaited exactly once, found 0 uses}}
  %t = oasr.allreduce_start %g {group = 0 : i64} : tensor<2xf32>
  return
}

// -----

func.func @token_awaited_twice(%g: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op token must be awaited exactly once, found 2 uses}}
  %t = oasr.allreduce_start %g {group = 0 : i64} : tensor<2xf32>
  %a = oasr.allreduce_wait %t : tensor<2xf32>
  %b = oasr.allreduce_wait %t : tensor<2xf32>
  return
}

// -----

func.func @no_gradients() {
  // expected-error @+1 {{'oasr.allreduce_start' op needs at least one gradient}}
  %t = "oasr.allreduce_start"() {group = 0 : i64} : () -> !oasr.token
  "oasr.allreduce_wait"(%t) : (!oasr.token) -> ()
  return
}

// -----

func.func @negative_group(%g: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op group must be non-negative}}
  %t = oasr.allreduce_start %g {group = -1 : i64} : tensor<2xf32>
  %r = oasr.allreduce_wait %t : tensor<2xf32>
  return
}

// -----

func.func @wire_type_not_a_float16(%g: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op wire_type must be f32, bf16 or f16, got 'i8'}}
  %t = oasr.allreduce_start %g {group = 0 : i64, wire_type = i8} : tensor<2xf32>
  %r = oasr.allreduce_wait %t : tensor<2xf32>
  return
}

// -----

func.func @wire_type_on_f16_gradients(%g: tensor<2xf32>, %h: tensor<2xf16>) {
  // expected-error @+1 {{'oasr.allreduce_start' op gradient #1 is not f32: only f32 gradients travel as 'bf16'}}
  %t = oasr.allreduce_start %g, %h {group = 0 : i64, wire_type = bf16} : tensor<2xf32>, tensor<2xf16>
  %r:2 = oasr.allreduce_wait %t : tensor<2xf32>, tensor<2xf16>
  return
}

// -----

func.func @wait_types_mismatch(%g: tensor<2xf32>) {
  %t = oasr.allreduce_start %g {group = 3 : i64} : tensor<2xf32>
  // expected-error @+1 {{'oasr.allreduce_wait' op result types must match the gradients of group 3}}
  %r = oasr.allreduce_wait %t : tensor<3xf32>
  return
}

// -----

func.func @wait_on_argument(%t: !oasr.token) {
  // expected-error @+1 {{'oasr.allreduce_wait' op token must come from 'oasr.allreduce_start'}}
  %r = oasr.allreduce_wait %t : tensor<2xf32>
  return
}

// -----

func.func @wait_before_start(%g: tensor<2xf32>) {
  // expected-error @+1 {{operand #0 does not dominate this use}}
  %r = oasr.allreduce_wait %t : tensor<2xf32>
  // expected-note @+1 {{operand defined here}}
  %t = oasr.allreduce_start %g {group = 0 : i64} : tensor<2xf32>
  return
}

// -----

func.func @wait_in_other_block(%g: tensor<2xf32>) {
  %t = oasr.allreduce_start %g {group = 0 : i64} : tensor<2xf32>
  cf.br ^bb1
^bb1:
  // expected-error @+1 {{'oasr.allreduce_wait' op must be in the same block as its allreduce_start}}
  %r = oasr.allreduce_wait %t : tensor<2xf32>
  return
}

// -----

func.func @offsets_without_size(%g: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op 'offsets' and 'buffer_bytes' come together}}
  %t = oasr.allreduce_start %g {group = 0 : i64, offsets = array<i64: 0>} : tensor<2xf32>
  %r = oasr.allreduce_wait %t : tensor<2xf32>
  return
}

// -----

func.func @offsets_count(%g: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op has 1 gradients but 2 offsets}}
  %t = oasr.allreduce_start %g {group = 0 : i64, offsets = array<i64: 0, 8>, buffer_bytes = 16 : i64} : tensor<2xf32>
  %r = oasr.allreduce_wait %t : tensor<2xf32>
  return
}

// -----

func.func @offsets_overlap(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op gradient #1 at offset 4 overlaps the previous gradient}}
  %t = oasr.allreduce_start %a, %b {group = 0 : i64, offsets = array<i64: 0, 4>, buffer_bytes = 16 : i64} : tensor<2xf32>, tensor<2xf32>
  %r:2 = oasr.allreduce_wait %t : tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @offsets_past_buffer(%a: tensor<2xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op gradients end at byte 16 past buffer_bytes = 12}}
  %t = oasr.allreduce_start %a, %b {group = 0 : i64, offsets = array<i64: 0, 8>, buffer_bytes = 12 : i64} : tensor<2xf32>, tensor<2xf32>
  %r:2 = oasr.allreduce_wait %t : tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @offsets_dynamic(%a: tensor<?xf32>) {
  // expected-error @+1 {{'oasr.allreduce_start' op gradient #0 needs a static shape}}
  %t = oasr.allreduce_start %a {group = 0 : i64, offsets = array<i64: 0>, buffer_bytes = 12 : i64} : tensor<?xf32>
  %r = oasr.allreduce_wait %t : tensor<?xf32>
  return
}

// -----

func.func @unknown_algo(%p: tensor<2xf32>, %g: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op unknown algo 'lamb', expected 'sgd', 'momentum', 'adagrad', 'adam' or 'adamw'}}
  %r = oasr.optimizer_update "lamb" %p, %g {lr = 0.1 : f64} : tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @momentum_without_state(%p: tensor<2xf32>, %g: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op 'momentum' takes 1 state tensor(s), got 0}}
  %r = oasr.optimizer_update "momentum" %p, %g {lr = 0.1 : f64} : tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @state_type(%p: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<3xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op state must have the parameter's type}}
  %r, %nv = oasr.optimizer_update "momentum" %p, %g, %v {lr = 0.1 : f64} : tensor<2xf32>, tensor<3xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @negative_lr(%p: tensor<2xf32>, %g: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op lr must be non-negative, got -1.000000e-01}}
  %r = oasr.optimizer_update "sgd" %p, %g {lr = -0.1 : f64} : tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @adam_one_state(%p: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op 'adam' takes 2 state tensor(s), got 1}}
  %r, %nv = oasr.optimizer_update "adam" %p, %g, %v {lr = 0.1 : f64} : tensor<2xf32>, tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @negative_epsilon(%p: tensor<2xf32>, %g: tensor<2xf32>, %h: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op epsilon must be non-negative, got -1.000000e+00}}
  %r, %nh = oasr.optimizer_update "adagrad" %p, %g, %h {lr = 0.1 : f64, epsilon = -1.0 : f64} : tensor<2xf32>, tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @beta_above_one(%p: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<2xf32>, %h: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op beta2 must be in [0, 1], got 1.500000e+00}}
  %r, %nv, %nh = oasr.optimizer_update "adam" %p, %g, %v, %h {lr = 0.1 : f64, beta2 = 1.5 : f64} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @dampening_negative(%p: tensor<2xf32>, %g: tensor<2xf32>, %v: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.optimizer_update' op dampening must be in [0, 1], got -2.000000e+00}}
  %r, %nv = oasr.optimizer_update "momentum" %p, %g, %v {lr = 0.1 : f64, dampening = -2.0 : f64} : tensor<2xf32>, tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @negative_cost(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{cost times must be non-negative}}
  %r = oasr.node "Relu"(%x) {oasr.cost = #oasr.cost<forward_us = -1.0>} : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @negative_flops(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{cost flops and bytes must be non-negative}}
  %r = oasr.node "Relu"(%x) {oasr.cost = #oasr.cost<flops = -5>} : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @cost_not_a_cost(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.node' op 'oasr.cost' must be a #oasr.cost attribute}}
  %r = oasr.node "Relu"(%x) {oasr.cost = 3 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

func.func @param_on_op(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'oasr.node' op 'oasr.param' tags function arguments, not operations}}
  %r = oasr.node "Relu"(%x) {oasr.param = "w"} : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// expected-error @+1 {{'func.func' op argument #0: 'oasr.param' must be a non-empty string naming the ONNX initializer}}
func.func @param_not_string(%w: tensor<2xf32> {oasr.param = 1 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0: 'oasr.state' must be a non-empty string naming the ONNX initializer}}
func.func @state_empty(%w: tensor<2xf32> {oasr.state = ""}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0: a parameter must be a ranked tensor}}
func.func @param_unranked(%w: tensor<*xf32> {oasr.param = "w"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument #0: 'oasr.cost' belongs on operations}}
func.func @cost_on_arg(%w: tensor<2xf32> {oasr.cost = #oasr.cost<flops = 1>}) {
  return
}
