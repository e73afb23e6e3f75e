#!/usr/bin/env bash
#===- scripts/gpu-bundle.sh - oasr's CUDA checks for a GPU machine ---------===#
#
# Packs what the CUDA backend's checks need into one folder that runs on a GPU
# machine without this project's Debian packages (another distribution whose
# python3 has torch and onnx, and the CUDA 13 libraries):
#
#   scripts/gpu-bundle.sh BUILD OUT     BUILD configured with -DOASR_STATIC_LLVM=ON
#   OUT/run.sh [LOGDIR]                 on the GPU machine, from the repo's root
#                                       (OASR_GPU_LIT_FILTER: lit's --filter)
#
# The bundle holds oasr-run, OASRKernelTests, the shared libraries they need
# that are not glibc, libstdc++ or CUDA's (oneDNN, Open MPI's, ONNX,
# protobuf), FileCheck/not/count and lit. run.sh finds the machine's CUDA,
# cuDNN and NCCL libraries, runs the kernel tests' cuda cases against PyTorch
# and lit's cuda tests (test/runtime/cuda-*.test) with the machine's python3,
# and leaves their logs in LOGDIR. Tests that launch mpirun (cuda-errors,
# cuda-shared-gpu, cuda-strategy-invariance) use the machine's mpiexec, or
# where it has none the bundle's: this host's Open MPI launcher (orterun,
# orted, its components and PMIx's, and the libraries they load) under
# ompi/, run relocated (OPAL_PREFIX, PMIX_INSTALL_PREFIX). Each part can be
# chosen:
#   OASR_GPU_KERNELS   gtest filter of the kernel tests (default: the cuda
#                      and cuda_bf16 cases; empty: none)
#   OASR_GPU_LIT_FILTER lit's --filter (default cuda-; empty: no lit)
#   OASR_GPU_MODELS    models of scripts/model_zoo.py to train one step each
#   OASR_GPU_BENCH     options of bench/run_gpu.py: oasr's steps against the
#                      machine's PyTorch, into LOGDIR/gpu-steps.{json,md};
#                      --shared-gpu resnet50:32 adds 2 ranks on one GPU
#                      (--comm-backend=mpi), oasr's plan against wfbp and
#                      single (`--models=` leaves the one-rank rows out)
#
#===----------------------------------------------------------------------===#
set -euo pipefail

build=${1:?usage: gpu-bundle.sh BUILD OUT}
out=${2:?usage: gpu-bundle.sh BUILD OUT}
src=$(cd "$(dirname "$0")/.." && pwd)
llvm_bin=/usr/lib/llvm-19/bin

grep -q '^OASR_STATIC_LLVM:BOOL=ON' "$build/CMakeCache.txt" || {
  echo "gpu-bundle.sh: $build is not configured with -DOASR_STATIC_LLVM=ON" >&2
  exit 1
}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$build/bin/oasr-run" "$build/unittests/OASRKernelTests"
      "$llvm_bin/FileCheck" "$llvm_bin/not" "$llvm_bin/count")
cp "${bins[@]}" "$out/bin/"

# Shared libraries the binaries load, less the C/C++ runtime (the target's is
# newer) and CUDA's (the target's matches its driver).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libgomp|libz\.|libzstd|liblzma|libudev|libcuda|libcublas|libcudnn|libnccl|libnvJitLink)'
# Open MPI's launcher, relocatable (Debian's layout under ompi/, PMIx's
# under ompi/pmix2), for machines without one: what mpirun and its
# components load goes into lib/ with the rest.
ompi_libdir=/usr/lib/x86_64-linux-gnu/openmpi
pmix_dir=/usr/lib/x86_64-linux-gnu/pmix2
loaded=("${bins[@]}")
if [ -x /usr/bin/orterun ] && [ -d "$ompi_libdir" ] && [ -d "$pmix_dir" ]; then
  mkdir -p "$out/ompi/bin" "$out/ompi/lib/x86_64-linux-gnu" "$out/ompi/share"
  cp -L /usr/bin/orterun "$out/ompi/bin/mpirun"
  ln -s mpirun "$out/ompi/bin/mpiexec"
  cp -L /usr/bin/orted "$out/ompi/bin/"
  cp -rL "$ompi_libdir" "$out/ompi/lib/x86_64-linux-gnu/"
  cp -r /usr/share/openmpi "$out/ompi/share/"
  cp -rL "$pmix_dir" "$out/ompi/pmix2"
  loaded+=("$out"/ompi/bin/* "$out"/ompi/lib/x86_64-linux-gnu/openmpi/lib/*.so
           "$out"/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so
           "$out"/ompi/pmix2/lib/pmix/*.so)
else
  echo "gpu-bundle.sh: no Open MPI launcher here; the bundle uses the GPU machine's" >&2
fi
for b in "${loaded[@]}"; do
  ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then cp -L "$path" "$out/lib/$name"; fi
done
# Packed: oneDNN alone is 40 MB, a third of that compressed.
packed=(lib); [ -d "$out/ompi" ] && packed+=(ompi)
tar -C "$out" -cf - "${packed[@]}" | xz -T2 -6 > "$out/lib.tar.xz"
(cd "$out" && rm -rf "${packed[@]}")
cp -r /usr/lib/llvm-19/build/utils/lit/lit "$out/lit"
# The machine's python3 (torch, onnx) without the bundle's libraries.
printf '#!/bin/sh\nexec env -u LD_LIBRARY_PATH python3 "$@"\n' > "$out/bin/python3-clean"
chmod +x "$out/bin/python3-clean"

cat > "$out/lit.site.cfg.py" <<'EOF'
# lit site configuration of a GPU bundle (scripts/gpu-bundle.sh): paths are
# the bundle's and the repository's on the machine it runs on.
import os
bundle = os.environ["OASR_BUNDLE"]
repo = os.environ["OASR_REPO"]
config.llvm_tools_dir = os.path.join(bundle, "bin")
config.oasr_src_root = repo
config.oasr_obj_root = os.path.join(os.environ["OASR_LIT_WORK"], "obj")
config.oasr_tools_dir = os.path.join(bundle, "bin")
config.oasr_python = os.environ["OASR_PYTHON"]
config.oasr_enable_cuda = True
config.mpiexec = "mpiexec"
config.oasr_flatc = "flatc"  # not in the bundle: the tests of it are not cuda-
# The bundle's Open MPI, relocated by run.sh, for the tests' mpiexec.
for v in ("OPAL_PREFIX", "PMIX_INSTALL_PREFIX",
          "OMPI_MCA_mca_base_component_show_load_errors"):
    if v in os.environ:
        config.environment[v] = os.environ[v]
import lit.llvm
lit.llvm.initialize(lit_config, config)
lit_config.load_config(config, os.path.join(repo, "test", "lit.cfg.py"))
EOF

cat > "$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# The CUDA backend's checks on this machine (see scripts/gpu-bundle.sh).
set -uo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
logs=${1:-$PWD/gpu-logs}
mkdir -p "$logs"
[ -d "$bundle/lib" ] || xz -dc "$bundle/lib.tar.xz" | tar -C "$bundle" -xf -
export OASR_REPO=$PWD OASR_SOURCE_DIR=$PWD
# The bundle's libraries for oasr's binaries only: python3 keeps its own.
export OASR_PYTHON=$bundle/bin/python3-clean
cudalibs=$(find /usr/local /usr/lib /opt -xdev \( -name 'libcudnn.so.9' \
  -o -name 'libnccl.so.2' -o -name 'libcublas.so.13' -o -name 'libcudart.so.13' \) \
  2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH=$bundle/lib:$cudalibs
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Without an mpiexec of the machine's, the bundle's Open MPI (relocated).
if ! mpiexec --version > /dev/null 2>&1 && [ -d "$bundle/ompi" ]; then
  export OPAL_PREFIX=$bundle/ompi PMIX_INSTALL_PREFIX=$bundle/ompi/pmix2
  export PATH=$bundle/ompi/bin:$PATH
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$bundle/ompi/lib/x86_64-linux-gnu/openmpi/lib:$bundle/ompi/pmix2/lib
  # Transports whose libraries this machine lacks are skipped quietly.
  export OMPI_MCA_mca_base_component_show_load_errors=0
fi
mpiexec --version > /dev/null 2>&1 && export OASR_MPIRUN=${OASR_MPIRUN:-mpiexec}
{
  echo "== machine"; nvidia-smi -L; head -2 /etc/os-release
  echo "CUDA libraries from: $cudalibs"
  "$OASR_PYTHON" -c 'import torch, onnx; print("torch", torch.__version__, "onnx", onnx.__version__)'
  echo "== oasr-run --list-devices"; "$bundle/bin/oasr-run" --list-devices
  echo "== mpiexec: $(command -v mpiexec || echo none)"; mpiexec --version 2>&1 | head -1
} 2>&1 | tee "$logs/machine.txt"
krc=0
if [ -n "${OASR_GPU_KERNELS-*/cuda:*/cuda_bf16:*OnCuda.*}" ]; then
echo "== kernels against PyTorch on cuda (f32 and bf16)"
"$bundle/bin/OASRKernelTests" --gtest_filter="${OASR_GPU_KERNELS-*/cuda:*/cuda_bf16:*OnCuda.*}" > "$logs/kernels-cuda.txt" 2>&1
krc=$?
grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure' "$logs/kernels-cuda.txt" | tail -40
echo "kernel tests: rc $krc"
fi
lrc=0
if [ -n "${OASR_GPU_LIT_FILTER-cuda-}" ]; then
echo "== lit: the cuda tests"
export OASR_LIT_WORK=${TMPDIR:-/tmp}/oasr-gpu-lit OASR_BUNDLE=$bundle
mkdir -p "$OASR_LIT_WORK/obj/test"
cp "$bundle/lit.site.cfg.py" "$OASR_LIT_WORK/obj/test/lit.site.cfg.py"
# lit itself runs with the bundle's libraries (it probes oasr-run); the
# tests' python3 is started without them (OASR_PYTHON).
PYTHONPATH=$bundle python3 -c 'import sys; from lit.main import main; main()' \
  -v "$OASR_LIT_WORK/obj/test" --filter "${OASR_GPU_LIT_FILTER-cuda-}" 2>&1 |
  tee "$logs/lit-cuda.txt" | tail -60
lrc=${PIPESTATUS[0]}
echo "lit: rc $lrc"
fi
# OASR_GPU_MODELS="vit swin ...": each model of scripts/model_zoo.py trained
# one step on the GPU and checked against PyTorch, going on past failures
# (a survey of which families run; the lit test stops at the first).
survey() {
local rc=0
for m in ${OASR_GPU_MODELS:-}; do
  d=$OASR_LIT_WORK/models/$m
  rm -rf "$d" && mkdir -p "$d"
  data=mnist:$d/data
  [[ $m == bert || $m == gpt ]] && data=tokens:$d/data/tokens.bin
  if "$OASR_PYTHON" scripts/model_zoo.py export "$m" "$d/m.onnx" > "$d/log" 2>&1 &&
     "$OASR_PYTHON" scripts/model_zoo.py batch "$m" "$d/data" >> "$d/log" 2>&1 &&
     "$bundle/bin/oasr-run" "$d/m.onnx" --device=cuda --batch=4 --data="$data" \
       --steps=1 --lr=0 --quiet --dump-grads="$d/g.json" >> "$d/log" 2>&1 &&
     "$OASR_PYTHON" scripts/model_zoo.py check "$m" "$d/g.json" --data "$d/data" > "$d/check" 2>&1; then
    echo "model $m: $(grep -a '^PASS' "$d/check")"
  else
    rc=1
    echo "model $m: FAILED"; grep -a -E 'error|fatal|FAIL' "$d/log" "$d/check" 2>/dev/null | tail -3
  fi
done
return $rc
}
mrc=0
if [ -n "${OASR_GPU_MODELS:-}" ]; then
survey 2>&1 | tee "$logs/models.txt"
mrc=${PIPESTATUS[0]}
fi
# OASR_GPU_BENCH="ARGS": bench/run_gpu.py's step timings against this
# machine's PyTorch (ARGS: its options, e.g. --models resnet50:64), into
# LOGDIR/gpu-steps.{json,md}.
brc=0
if [ -n "${OASR_GPU_BENCH:-}" ]; then
  echo "== steps against PyTorch (bench/run_gpu.py $OASR_GPU_BENCH)"
  # shellcheck disable=SC2086 # the options, split as given
  OASR_LD_LIBRARY_PATH=$LD_LIBRARY_PATH env -u LD_LIBRARY_PATH \
    PYTHONUNBUFFERED=1 python3 bench/run_gpu.py --oasr-run "$bundle/bin/oasr-run" \
    --out "$logs" $OASR_GPU_BENCH
  brc=$?
fi
exit $(( krc || lrc || mrc || brc ))
EOF
chmod +x "$out/run.sh"
du -sh "$out"
