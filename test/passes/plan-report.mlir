// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp --oasr-layout-gradients --oasr-plan-report -o /dev/null | FileCheck %s
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp --oasr-plan-report=output=%t.txt -o /dev/null
// RUN: FileCheck %s < %t.txt
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-plan-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNPLANNED

// The same numbers as oasr-plan's wfbp line for this profile.
// CHECK: oasr plan: model 'mlp3', strategy wfbp, 3 groups, 6 gradients, 1597480 bytes
// CHECK-NEXT: comm: alpha=9.750e-05 s beta=3.060e-10 s/B
// CHECK-NEXT: predicted iteration: 1727.550 us (forward 300.000, backward end 1450.000, comm end 1727.550, update 0.000)
// CHECK-NEXT: lower bound: 1708.559 us (gap 1.11%)
// CHECK-NEXT: group  grads        bytes       buffer     ready_us     start_us       end_us  after node -> gradients
// CHECK-NEXT: 0      2        20520 {{ *}}{{[-0-9]+}}      350.000      350.000      453.779  /fc3/Gemm -> fc3.weight, fc3.bias
// CHECK-NEXT: 1      2      1050624 {{ *}}{{[-0-9]+}}     1050.000     1050.000     1468.991  /fc2/Gemm -> fc2.weight, fc2.bias
// CHECK-NEXT: 2      2       526336 {{ *}}{{[-0-9]+}}     1450.000     1468.991     1727.550  /fc1/Gemm -> fc1.weight, fc1.bias

// UNPLANNED: error: no 'oasr.plan': run --oasr-plan-allreduce first
