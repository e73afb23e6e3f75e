#!/usr/bin/env bash
#===- scripts/demo.sh - The main job on the bundled default ----------------===#
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${OASR_BUILD_DIR:-$ROOT/build}
bash scripts/setup.sh
cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >/dev/null
ninja -C "$BUILD" all
echo "== oasr-opt: the bundled MLP training step, parsed and verified"
"$BUILD/bin/oasr-opt" examples/mlp_train_step.mlir
