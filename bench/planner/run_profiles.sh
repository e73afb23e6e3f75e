#!/usr/bin/env bash
#===- bench/planner/run_profiles.sh - Strategies on the example profiles --===#
# Usage: bench/planner/run_profiles.sh [BUILD_DIR]   (default: build)
# Plans every examples/profiles/*.json with every strategy on two networks
# (MG-WFBP's 8-worker 56 Gb IB and 16-worker 10 GbE alpha/beta) at the
# measured CPU speed and at 1000x faster compute (about a GPU), plus 10 GbE
# with the real-system extras (100 us per group, packing copies at 5 GB/s
# when gradients are not contiguous), and writes
# bench/results/planner-profiles.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
out="$root/bench/results/planner-profiles.md"
plan="$build/bin/oasr-plan"
{
  echo "# Strategies on measured profiles"
  echo
  echo "Predicted iteration time (ms) and speed-up over wfbp, from \`oasr-plan\` on"
  echo "\`examples/profiles\` (measured on CPU by scripts/gen_profiles.py, batch 8)."
  echo "Compute scale 0.001 asks what a ~1000x faster device (a GPU) would see."
  echo "The extras rows charge 100 us per group and a 2e-4 us/byte packing copy for"
  echo "multi-tensor groups: only oasr plans for them. Cells: time (speed-up, groups)."
  echo "Produced by \`bench/planner/run_profiles.sh\`."
  for net in "IB-8 --alpha=9.75e-5 --beta=3.06e-10" \
             "10GbE-16 --alpha=9.08e-4 --beta=7.40e-10" \
             "10GbE-16+extras --alpha=9.08e-4 --beta=7.40e-10 --group-overhead-us=100 --pack-us-per-byte=2e-4"; do
    set -- $net
    name=$1; shift
    for scale in 1 0.001; do
      echo
      echo "## $name ($*), compute scale $scale"
      echo
      echo "| model | tensors | wfbp | single | ddp | horovod | mgwfbp | optimal | oasr | lower bound |"
      echo "|---|---|---|---|---|---|---|---|---|---|"
      for p in "$root"/examples/profiles/*.json; do
        "$plan" "$p" --format=json --compute-scale=$scale "$@" |
          /usr/bin/python3 "$root/bench/planner/profile_table.py"
      done
    done
  done
} > "$out"
cat "$out"
