#!/bin/sh
# resume_bitwise.sh DIR N LAUNCHER... -- OASR-RUN-ARGS...
#
# Trains 2N steps straight, then N steps with a checkpoint, resumes it for
# the other N, and requires the two saved models to be byte for byte equal.
# LAUNCHER is `oasr-run` or e.g. `mpirun -np 2 oasr-run`.
set -e
dir=$1
half=$2
shift 2
launch=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  launch="$launch $1"
  shift
done
shift
rm -rf "$dir"
mkdir -p "$dir"
$launch "$@" --steps=$((2 * half)) --quiet --save="$dir/straight.onnx" > "$dir/straight.log"
$launch "$@" --steps="$half" --quiet --checkpoint="$dir/ckpt" --checkpoint-every="$half" > "$dir/first.log"
$launch "$@" --steps=$((2 * half)) --quiet --resume="$dir/ckpt" --save="$dir/resumed.onnx" > "$dir/resumed.log"
cmp "$dir/straight.onnx" "$dir/resumed.onnx"
echo "bitwise after resume: $*"
