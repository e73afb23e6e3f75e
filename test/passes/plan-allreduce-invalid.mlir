// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=strategy=fastest -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOCOMM
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=alpha=1e-4 -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALPHA
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost --oasr-plan-allreduce=comm=%S/Inputs/missing.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMMFILE
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-plan-allreduce="alpha=1e-4 beta=1e-9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOCOST
// RUN: not oasr-opt %S/Inputs/mlp3.mlir --oasr-autodiff --oasr-annotate-cost=profile=%S/Inputs/mlp3.profile.json --oasr-plan-allreduce --oasr-plan-allreduce -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE

// STRATEGY: error: unknown strategy: {{.*}}fastest
// NOCOMM: error: no communication model: give 'alpha' and 'beta', 'comm', or a profile with a 'comm' object to --oasr-annotate-cost
// ALPHA: error: 'alpha' needs 'beta'
// COMMFILE: error: cannot read the communication model: {{.*}}missing.json
// NOCOST: error: nodes without 'oasr.cost': run --oasr-annotate-cost first
// TWICE: error: @train_step is already planned
