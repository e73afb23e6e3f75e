#!/usr/bin/env bash
#===- bench/run_large_models.sh - ViT-B/16 and BERT-base on 2 ranks -------===#
#
# Does a full-size transformer step fit and run data-parallel? Exports
# torchvision's ViT-B/16 (86 M parameters, 224x224 images) and a BERT-base
# encoder (12 layers, 768 wide, 110 M parameters with the embeddings,
# sequence 128, int64 token ids) in training mode with Debian's python3-torch,
# then trains each for STEPS steps at batch 8 per rank on 2 MPI ranks with the
# oasr plan (fused allreduces), 1 thread per rank, and records oasr-run's
# memory line, the plan's group count, step times and peak RSS per rank.
#
#   bench/run_large_models.sh [BUILD] [STEPS]     (defaults: build 3)
#
# Writes bench/results/large-models.md. Needs about 12 GiB of memory.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-$ROOT/build}
STEPS=${2:-3}
OUT=$ROOT/bench/results/large-models.md
WORK=$(mktemp -d /tmp/oasr-large-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

/usr/bin/python3 - "$WORK" <<'EOF'
import sys, torch, torchvision
torch.manual_seed(0)
work = sys.argv[1]
vit = torchvision.models.vit_b_16(num_classes=1000).train()
torch.onnx.export(vit, torch.randn(8, 3, 224, 224), f"{work}/vit_b_16.onnx",
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, opset_version=17,
                  input_names=["input"], output_names=["logits"])


# BERT-base as bench/precision.py defines it (one definition for both).
sys.path.insert(0, "bench")
from precision import BertBase  # noqa: E402

bert = BertBase().train()
torch.onnx.export(bert, torch.randint(1, 30522, (8, 128)), f"{work}/bert_base.onnx",
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, opset_version=17,
                  input_names=["ids"], output_names=["logits"])
EOF

run() { # NAME ONNX EXTRA...
  local name=$1 onnx=$2
  shift 2
  /usr/bin/time -v "$BUILD/bin/oasr-run" "$onnx" --np 2 --batch=8 \
    --steps="$STEPS" --threads=1 "$@" >"$WORK/$name.log" 2>"$WORK/$name.time"
  cat "$WORK/$name.log"
}
run vit "$WORK/vit_b_16.onnx"
run bert "$WORK/bert_base.onnx"

row() { # NAME LABEL
  local log=$WORK/$1.log time=$WORK/$1.time
  local params mem groups iter exposed rss
  params=$(grep -o '[0-9]* parameter/state tensors' "$log" | head -1)
  mem=$(grep -o 'memory: .*' "$log" | sed 's/memory: //')
  groups=$(grep -o 'plan oasr with [0-9]* fused' "$log" | grep -o '[0-9]*')
  iter=$(grep 'mean iteration' "$log" | awk '{print $3, $4}')
  exposed=$(grep 'exposed comm' "$log" | sed 's/ *exposed comm *//')
  rss=$(grep 'Maximum resident' "$time" | awk '{printf "%.1f GiB", $6 / 1048576}')
  echo "| $2 | $params | $groups | $iter | $exposed | $mem | $rss |"
}
{
  echo "# Full-size transformers on 2 ranks"
  echo
  echo "$(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
    "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
  echo "Batch 8 per rank, 2 MPI ranks on this host, 1 thread per rank, oasr plan,"
  echo "$STEPS steps (the first included in the mean). Rerun with"
  echo "\`bench/run_large_models.sh\`."
  echo
  echo "| model | tensors | fused groups | mean step | exposed comm | memory (oasr-run's plan) | peak RSS |"
  echo "|---|---|---|---|---|---|---|"
  row vit "ViT-B/16 (torchvision)"
  row bert "BERT-base encoder (seq 128)"
} >"$OUT"
cat "$OUT"
