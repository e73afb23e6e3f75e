#===- bench/lib.sh - shared by the bench/run_*.sh scripts ------------------===#
# Source it: `. "$ROOT/bench/lib.sh"`.

# bench_model WORK NAME: the path of WORK/NAME.onnx, exported on first use:
# mlp-wide (784-4x2048-10) by bench/runtime.py, any other name by
# scripts/export_models.py (torchvision and the transformer models).
bench_model() {
  local work=$1 name=$2 model="$1/$2.onnx"
  if [ ! -f "$model" ]; then
    if [ "$name" = mlp-wide ]; then
      /usr/bin/python3 "$ROOT/bench/runtime.py" mlp-wide --export "$model" >/dev/null 2>&1
    else
      /usr/bin/python3 "$ROOT/scripts/export_models.py" "$work" --models "$name" >/dev/null 2>&1
    fi
  fi
  echo "$model"
}

# bench_fresh_out SCRIPT OUT: fails unless OUT is a new file (results files
# are never overwritten; bench/results/README.md).
bench_fresh_out() {
  if [ -e "$2" ]; then
    echo "$1: $2 exists; results files are never overwritten" >&2
    exit 1
  fi
}
