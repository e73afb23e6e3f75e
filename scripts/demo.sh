#!/usr/bin/env bash
#===- scripts/demo.sh - The main job on the bundled default ----------------===#
#
# The README's first command. Installs and builds what is missing, then runs
# oasr end to end on the bundled default model (torchvision's ResNet-18,
# exported to ONNX in training mode by scripts/export_models.py):
#   1. import it into the oasr IR;
#   2. calibrate the allreduce (alpha, beta) on 2 MPI ranks (oasr-bench comm);
#   3. measure a per-layer profile by training 2 steps (oasr-run --profile);
#   4. plan with every strategy on that profile and print the comparison;
#   5. train a few steps on 2 MPI ranks with the oasr plan, printing progress,
#      the summary (predicted vs measured) and a Chrome trace.
# Outputs land in build/demo/. Set OASR_DEMO_MODEL to another model of
# scripts/export_models.py (e.g. resnet50), OASR_DEMO_STEPS for more steps.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${OASR_BUILD_DIR:-$ROOT/build}
MODEL=${OASR_DEMO_MODEL:-resnet18}
STEPS=${OASR_DEMO_STEPS:-6}
BATCH=${OASR_DEMO_BATCH:-8}
OUT=$BUILD/demo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

bash scripts/setup.sh
mkdir -p "$BUILD"
cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py >"$BUILD/configure.log"
ninja -C "$BUILD" oasr-opt oasr-translate oasr-plan oasr-run oasr-bench
BIN=$BUILD/bin
mkdir -p "$OUT"

step() { printf '\n== %s\n' "$*"; }

step "1/5 export $MODEL (torchvision, training mode) and import it"
/usr/bin/python3 scripts/export_models.py --models "$MODEL" "$OUT" 2>/dev/null
"$BIN/oasr-translate" --import-onnx "$OUT/$MODEL.onnx" --batch="$BATCH" -o "$OUT/$MODEL.mlir"
printf '%s: %s nodes, %s parameters -> %s\n' "$MODEL" \
  "$(grep -c 'oasr.node' "$OUT/$MODEL.mlir")" \
  "$(grep -o 'oasr.param = ' "$OUT/$MODEL.mlir" | wc -l)" "$OUT/$MODEL.mlir"

step "2/5 calibrate the allreduce on 2 MPI ranks"
# As training issues them: each allreduce after 20 ms of compute, and the
# overlap rate beside the compute threads oasr-run --np 2 will use (unbound,
# as --np launches).
THREADS=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))
mpirun --oversubscribe --bind-to none -np 2 "$BIN/oasr-bench" comm --max-bytes=$((64 << 20)) \
  --seconds-per-size=0.1 --burst-us=20000 --compute-threads="$THREADS" \
  --out="$OUT/comm.json"

step "3/5 measure a per-layer profile (2 steps, 2 ranks)"
"$BIN/oasr-run" "$OUT/$MODEL.onnx" --np 2 --batch="$BATCH" --steps=2 --quiet \
  --comm="$OUT/comm.json" --profile="$OUT/profile.json"

step "4/5 plan with every strategy on the measured profile"
"$BIN/oasr-plan" "$OUT/profile.json" --comm="$OUT/comm.json" --strategy=all \
  --svg="$OUT/plans.svg" --trace="$OUT/plans.trace.json"
echo "(what-if: the same model on a 50x faster accelerator whose"
echo " communication has a channel of its own, overlap rate 1)"
"$BIN/oasr-plan" "$OUT/profile.json" --comm="$OUT/comm.json" --strategy=all \
  --compute-scale=0.02 --overlap-rate=1

step "5/5 train $STEPS steps on 2 MPI ranks with the oasr plan"
"$BIN/oasr-run" "$OUT/$MODEL.onnx" --np 2 --batch="$BATCH" --steps="$STEPS" \
  --strategy=oasr --comm="$OUT/comm.json" --plan-profile="$OUT/profile.json" \
  --trace="$OUT/train.trace.json" --log-every=1

printf '\nOutputs in %s: %s.mlir (IR), comm.json (alpha/beta), profile.json,\n' "$OUT" "$MODEL"
echo "plans.svg (Gantt of every strategy), plans.trace.json and train.trace.json (open in ui.perfetto.dev)."
