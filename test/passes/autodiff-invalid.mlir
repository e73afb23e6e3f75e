// RUN: oasr-opt %s --oasr-autodiff -split-input-file -verify-diagnostics

module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "y"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{no gradient rule for 'Hardmax' node "Hardmax_2" on the path from a parameter to the loss}}
    %t = oasr.node "Hardmax"(%m) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %t : tensor<2x4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{the model has no float output to train on}}
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2xi64> {oasr.output = "y"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a = oasr.node "ArgMax"(%m) {axis = 1 : i64, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<2xi64>
    return %a : tensor<2xi64>
  }
}

// -----

// expected-error @+1 {{expected a 'func.func @forward' (the imported model)}}
module {
  func.func @other() {
    return
  }
}

// -----

// expected-error @+1 {{oasr.trained names 'nope', which is not a parameter of @forward}}
module attributes {oasr.trained = ["nope"]} {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"}) -> (tensor<2x4xf32> {oasr.output = "y"}) {
    return %x : tensor<2x4xf32>
  }
}

// -----

// A Clip whose bound is computed has no gradient rule.
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"},
                     %lo: tensor<f32> {oasr.input = "lo"})
      -> (tensor<2x4xf32> {oasr.output = "y"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{cannot differentiate 'Clip' node "Clip_2": min is not a constant}}
    %t = oasr.node "Clip"(%m, %lo) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    return %t : tensor<2x4xf32>
  }
}

// -----

module {
  // expected-warning @+1 {{parameter 'unused' does not reach the loss; its gradient is zero}}
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"},
                     %u: tensor<4xf32> {oasr.param = "unused"})
      -> (tensor<2x4xf32> {oasr.output = "y"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %m : tensor<2x4xf32>
  }
}


// -----

// Slice bounds that depend on an input value cannot be folded.
module {
  func.func @forward(%x: tensor<2x6xf32> {oasr.input = "x"},
                     %w: tensor<6xf32> {oasr.param = "w"},
                     %start: tensor<1xi64> {oasr.input = "start"})
      -> (tensor<2x3xf32> {oasr.output = "y"}) {
    %m = oasr.node "Mul"(%x, %w) : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
    %e = oasr.node "Constant"() {value = dense<6> : tensor<1xi64>} : () -> tensor<1xi64>
    // expected-error @+1 {{cannot differentiate 'Slice' node "Slice_3": starts/ends/axes/steps are not computable at compile time}}
    %y = oasr.node "Slice"(%m, %start, %e) : (tensor<2x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<2x3xf32> {oasr.input = "x"},
                     %s: tensor<3xf32> {oasr.param = "bn.weight"},
                     %b: tensor<3xf32> {oasr.param = "bn.bias"},
                     %m: tensor<3xf32> {oasr.state = "bn.running_mean"})
      -> (tensor<2x3xf32> {oasr.output = "y"}) {
    // expected-error @+1 {{'BatchNormalization' node "BatchNormalization_1" needs 5 operands (X, scale, B, input_mean, input_var), got 4}}
    %y = oasr.node "BatchNormalization"(%x, %s, %b, %m) : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// expected-error @+1 {{module already has a '@train_step'}}
module {
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"}) -> (tensor<2x4xf32> {oasr.output = "y"}) {
    return %x : tensor<2x4xf32>
  }
  func.func @train_step() {
    return
  }
}

// -----

module {
  // expected-error @+1 {{@forward must have exactly one block}}
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"}) -> (tensor<2x4xf32> {oasr.output = "y"}) {
    return %x : tensor<2x4xf32>
  ^bb1:
    return %x : tensor<2x4xf32>
  }
}

// -----

// A rank-1 float output is neither a loss nor logits.
module {
  // expected-error @+1 {{output #0 'y' (tensor<4xf32>) must be a scalar loss or logits [N, C, ...]}}
  func.func @forward(%x: tensor<4xf32> {oasr.input = "x"},
                     %w: tensor<4xf32> {oasr.param = "w"})
      -> (tensor<4xf32> {oasr.output = "y"}) {
    %m = oasr.node "Mul"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %m : tensor<4xf32>
  }
}

// -----

// Only oasr.node ops can be differentiated.
module {
  func.func private @helper(tensor<2x4xf32>) -> tensor<2x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {oasr.input = "x"},
                     %w: tensor<4x4xf32> {oasr.param = "w"})
      -> (tensor<2x4xf32> {oasr.output = "y"}) {
    %m = oasr.node "MatMul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{cannot differentiate 'func.call' on the path from a parameter to the loss}}
    %c = func.call @helper(%m) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %c : tensor<2x4xf32>
  }
}

// -----

// Without oasr.step_source a @train_step alone is not an imported step.
// expected-error @+1 {{expected a 'func.func @forward' (the imported model)}}
module {
  func.func @train_step() {
    return
  }
}
