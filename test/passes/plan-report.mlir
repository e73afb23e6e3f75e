// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp --oasr-layout-gradients --oasr-plan-report -o /dev/null | FileCheck %s --check-prefixes=CHECK,LAYOUT
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp --oasr-plan-report=output=%t.txt -o /dev/null
// RUN: FileCheck %s --check-prefixes=CHECK,NOLAYOUT < %t.txt
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=wfbp --oasr-plan-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=single --oasr-plan-report=format=json -o /dev/null | FileCheck %s --check-prefix=SINGLE
// RUN: oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce=strategy=single --oasr-plan-report -o /dev/null | FileCheck %s --check-prefix=SINGLE-TEXT
// Errors: plan-report-invalid.mlir; statistics: plan-report-statistics.mlir.

// The same numbers as oasr-plan's wfbp line for this profile. The buffer
// column shows the laid-out buffer size, or '-' before layout.
// CHECK-LABEL: oasr plan: model 'mlp3', strategy wfbp, 3 groups, 6 gradients, 1597480 bytes
// CHECK-NEXT: comm: alpha=9.750e-05 s beta=3.060e-10 s/B
// CHECK-NEXT: predicted iteration: 1727.550 us (forward 300.000, backward end 1450.000, comm end 1727.550, update 0.000)
// CHECK-NEXT: lower bound: 1708.559 us (gap 1.11%), non-overlapped comm 277.550 us, overlap 64.5%
// CHECK-NEXT: group  grads        bytes       buffer     ready_us     start_us       end_us  after node -> gradients
// LAYOUT-NEXT: 0      2        20520        20736      350.000      350.000      453.779  /fc3/Gemm -> fc3.weight, fc3.bias
// LAYOUT-NEXT: 1      2      1050624      1050624     1050.000     1050.000     1468.991  /fc2/Gemm -> fc2.weight, fc2.bias
// LAYOUT-NEXT: 2      2       526336       526336     1450.000     1468.991     1727.550  /fc1/Gemm -> fc1.weight, fc1.bias
// NOLAYOUT-NEXT: 0      2        20520            -      350.000      350.000      453.779  /fc3/Gemm -> fc3.weight, fc3.bias
// NOLAYOUT-NEXT: 1      2      1050624            -     1050.000     1050.000     1468.991  /fc2/Gemm -> fc2.weight, fc2.bias
// NOLAYOUT-NEXT: 2      2       526336            -     1450.000     1468.991     1727.550  /fc1/Gemm -> fc1.weight, fc1.bias

// format=json: one strategy entry in oasr-plan's JSON form, every gradient
// name in ready order.
// JSON-LABEL: "groups": [
// JSON-NEXT:    [
// JSON-NEXT:      "fc3.weight",
// JSON-NEXT:      "fc3.bias"
// JSON-NEXT:    ],
// JSON-NEXT:    [
// JSON-NEXT:      "fc2.weight",
// JSON-NEXT:      "fc2.bias"
// JSON-NEXT:    ],
// JSON-NEXT:    [
// JSON-NEXT:      "fc1.weight",
// JSON-NEXT:      "fc1.bias"
// JSON-NEXT:    ]
// JSON-NEXT:  ],
// JSON-NEXT:  "iteration_us": 1727.5497{{[0-9]*}},
// JSON-NEXT:  "lower_bound_us": 1708.5588{{[0-9]*}},
// JSON-NEXT:  "model": "mlp3",
// JSON-NEXT:  "name": "wfbp",
// JSON:       "num_grads": 6,
// JSON-NEXT:  "num_groups": 3,
// JSON:       "total_bytes": 1597480

// More than three gradients in a group: the text form elides, JSON does not.
// SINGLE-LABEL: "groups": [
// SINGLE-NEXT:    [
// SINGLE-NEXT:      "fc3.weight",
// SINGLE-NEXT:      "fc3.bias",
// SINGLE-NEXT:      "fc2.weight",
// SINGLE-NEXT:      "fc2.bias",
// SINGLE-NEXT:      "fc1.weight",
// SINGLE-NEXT:      "fc1.bias"
// SINGLE-NEXT:    ]
// SINGLE-NEXT:  ],
// SINGLE:       "num_groups": 1,
// SINGLE-TEXT-LABEL: oasr plan: model 'mlp3', strategy single, 1 groups, 6 gradients, 1597480 bytes
// SINGLE-TEXT: after node -> gradients
// SINGLE-TEXT-NEXT: 0      6      1597480            -     1450.000     1450.000     2036.329  /fc1/Gemm -> fc3.weight, fc3.bias, fc2.weight, ... (3 more)
