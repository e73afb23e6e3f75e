#!/bin/sh
# Builds oasr-bench-kernels and writes bench/results/kernels.txt: the cpu
# backend's convolutions (each layout policy) next to PyTorch's on ResNet-50
# shapes. Single-threaded CPU time is the comparable number on a shared box.
# Usage: bench/kernels/run.sh [build-dir] [batch]
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
batch=${2:-8}
ninja -C "$build" oasr-bench-kernels
out=$root/bench/results/kernels.txt
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
  for layout in auto blocked plain; do
    OASR_CPU_CONV_LAYOUT=$layout "$build/bench/oasr-bench-kernels" \
      --batch "$batch" --threads 1 --clock cpu --min-time 1
    echo
  done
  /usr/bin/python3 "$root/bench/kernels/conv_torch.py" \
    --batch "$batch" --threads 1 --clock cpu --min-time 1
} | tee "$out"
