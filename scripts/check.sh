#!/usr/bin/env bash
#===- scripts/check.sh - Install, build and run every oasr test -----------===#
#
# The README's test command. On a fresh machine it installs what the project
# needs (scripts/setup.sh), configures and builds everything, then runs the lit
# suites and the gtest units (through ctest), checks the docs' numbers against
# bench/results/ (scripts/check_claims.py), and closes with one summary line.
#
#   scripts/check.sh              the suite (and the fuzz targets, below)
#   scripts/check.sh --sanitize   the same suite on a build instrumented with
#                                 AddressSanitizer + UndefinedBehaviorSanitizer
#                                 (build-sanitize/; no CUDA, no fuzzing); any
#                                 report fails the test that triggered it
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SANITIZE=0
for arg in "$@"; do
  case "$arg" in
  --sanitize) SANITIZE=1 ;;
  *) echo "check: unknown option '$arg' (expected --sanitize)"; exit 2 ;;
  esac
done
EXTRA_CMAKE=()
if [ "$SANITIZE" = 1 ]; then
  BUILD=${OASR_BUILD_DIR:-$ROOT/build-sanitize}
  EXTRA_CMAKE=(-DOASR_SANITIZE=ON -DOASR_ENABLE_CUDA=OFF)
  # allow_user_poisoning=0: Debian's libMLIR is not instrumented, while the
  # BumpPtrAllocator code inlined into oasr poisons its slabs, which would
  # read as use-after-poison inside MLIR. Leaks are checked in the gtest
  # units (below); the lit suite's MPI processes dlclose Open MPI's plugins
  # before exit, whose process-lifetime allocations then come from an
  # unknown module and cannot be suppressed by name.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:allow_user_poisoning=0:detect_leaks=0}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export OASR_FUZZ_SECONDS=0
else
  BUILD=${OASR_BUILD_DIR:-$ROOT/build}
fi
LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
JOBS=${OASR_JOBS:-$(nproc)}

bash scripts/setup.sh || { echo "check: setup failed"; exit 1; }

echo "check: configuring $BUILD"
mkdir -p "$BUILD"
cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DLLVM_EXTERNAL_LIT=$LIT "${EXTRA_CMAKE[@]}" >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; echo "check: configure failed"; exit 1; }

echo "check: building (ninja -j$JOBS)"
start=$(date +%s)
ninja -C "$BUILD" -j"$JOBS" all oasr-unittests || { echo "check: build failed"; exit 1; }
echo "check: built in $(( $(date +%s) - start )) s"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "check: lit"
/usr/bin/python3 "$LIT" -v "$BUILD/test" 2>&1 | tee "$BUILD/lit.log"
lit_rc=${PIPESTATUS[0]}
echo "check: gtest units (ctest)"
ctest_env=()
[ "$SANITIZE" = 1 ] && ctest_env=(env "ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=0/detect_leaks=1}")
"${ctest_env[@]}" ctest --test-dir "$BUILD" --output-on-failure -j"$JOBS" 2>&1 | tee "$BUILD/ctest.log"
ctest_rc=${PIPESTATUS[0]}

# The ISA-capped pass: what an AVX2 machine computes, on any machine. The
# tests whose results depend on kernel numerics run again with oneDNN capped
# at AVX2 (ONEDNN_MAX_CPU_ISA, which lit passes through and which caps
# oasr's own vector loops too, runtime/cpu/VectorSums.h), and the kernel
# units once more at SSE4.1, where the loops run their baseline x86-64
# variant. On a machine without AVX-512 the AVX2 pass repeats the first.
# Not model-zoo-grads-bf16.test: PyTorch, seeing AVX-512 in cpuid, takes
# oneDNN's bf16 convolution, which the cap removes (a configuration no real
# CPU has); oasr's bf16 kernels run capped in the kernel units.
CAPPED_LIT=(
  runtime/model-zoo-grads.test
  runtime/torchvision-grads.test runtime/torch-grads-onnx.test
  runtime/torch-grads-mlp.test runtime/precision.test
  runtime/steady-plans.test runtime/strategy-invariance.test
  runtime/strategy-invariance-onnx.test runtime/device-options.test
)
capped_rc=0
if [ "$SANITIZE" = 0 ]; then
  echo "check: ISA-capped pass (ONEDNN_MAX_CPU_ISA=AVX2)"
  ONEDNN_MAX_CPU_ISA=AVX2 /usr/bin/python3 "$LIT" -v \
    "${CAPPED_LIT[@]/#/$BUILD/test/}" 2>&1 | tee "$BUILD/lit-avx2.log"
  capped_rc=${PIPESTATUS[0]}
  for isa in AVX2 SSE41; do
    echo "check: kernel units at ONEDNN_MAX_CPU_ISA=$isa"
    ONEDNN_MAX_CPU_ISA=$isa "$BUILD/unittests/OASRKernelTests" --gtest_brief=1 \
      >"$BUILD/kernels-$isa.log" 2>&1 || capped_rc=1
    tail -n 1 "$BUILD/kernels-$isa.log"
  done
fi

# Every time, ratio and percentage that README.md and docs/*.md claim must be
# found in the bench/results/ file it links to (scripts/check_claims.py).
echo "check: claims in README.md and docs/"
/usr/bin/python3 scripts/check_claims.py 2>&1 | tee "$BUILD/claims.log"
claims_rc=${PIPESTATUS[0]}

# The libFuzzer targets for a bounded time each (scripts/fuzz.sh: a clang
# build of the importer and the profile reader with ASan); a crash fails the
# check. OASR_FUZZ_SECONDS=0 skips them.
fuzz_seconds=${OASR_FUZZ_SECONDS:-60}
fuzz_rc=0
if [ "$fuzz_seconds" != 0 ]; then
  echo "check: fuzz ($fuzz_seconds s per target)"
  OASR_FUZZ_BUILD_DIR=${OASR_FUZZ_BUILD_DIR:-$BUILD-fuzz} \
    bash scripts/fuzz.sh "$fuzz_seconds" 2>&1 | tee "$BUILD/fuzz.log"
  fuzz_rc=${PIPESTATUS[0]}
fi

# lit's summary lines: "  Passed: 12" or, aligned with other categories,
# "  Passed     : 12".
count() { grep -aE "^ *$1 *: +[0-9]+" "$2" | sed -E 's/.*: +([0-9]+).*/\1/' | awk '{s+=$1} END {print s+0}'; }
lit_logs=("$BUILD/lit.log")
[ -f "$BUILD/lit-avx2.log" ] && [ "$SANITIZE" = 0 ] && lit_logs+=("$BUILD/lit-avx2.log")
lit_pass=0 lit_fail=0
for log in "${lit_logs[@]}"; do
  lit_pass=$(( lit_pass + $(count Passed "$log") ))
  lit_fail=$(( lit_fail + $(count Failed "$log") + $(count 'Unresolved' "$log") + $(count 'Timed Out' "$log") ))
done
lit_skip=$(count Unsupported "$BUILD/lit.log")
ct_line=$(grep -aE "tests passed, [0-9]+ tests failed out of" "$BUILD/ctest.log" | tail -1)
ct_fail=$(echo "$ct_line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
ct_total=$(echo "$ct_line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
ct_fail=${ct_fail:-0}; ct_total=${ct_total:-0}
passed=$(( lit_pass + ct_total - ct_fail ))
failed=$(( lit_fail + ct_fail ))
echo
echo "lit: $lit_pass passed, $lit_fail failed, $lit_skip unsupported; ctest: $(( ct_total - ct_fail )) passed, $ct_fail failed"
if [ "$fuzz_seconds" != 0 ]; then
  grep -E '^fuzz: oasr-fuzz-' "$BUILD/fuzz.log" || echo "fuzz: did not run (exit $fuzz_rc)"
fi
tail -n 1 "$BUILD/claims.log"
echo "check: $passed passed, $failed failed, $lit_skip skipped"

# Setup installs everything the tests need (PyTorch, ONNX, scikit-learn,
# ONNX Runtime training, network namespaces), so a skipped test means a
# broken install. Only these may skip: tests that need a GPU this machine
# lacks (cuda-device, cuda-devices-2, and the kernel tests' cuda cases),
# those for a build without CUDA
# (!cuda) when it has it, and those that need LLVM built with statistics
# (pass-statistics: Debian's release LLVM has none, no package provides it).
skip_rc=0
while read -r name; do
  [ -n "$name" ] || continue
  requires=$(grep -h -m1 'REQUIRES:' "$ROOT/test/$name" 2>/dev/null | sed 's/.*REQUIRES: *//')
  case ",$(echo "$requires" | tr -d ' ')," in
  # torch-dynamo-export: a PyPI torch >= 2.9 with onnxscript ($OASR_TORCH2_PYTHON),
  # which setup does not install (gigabytes of wheels for one export test;
  # inference-graph.test checks the same refusal on a file of that form).
  *,cuda-device,* | *,cuda-devices-2,* | *,!cuda,* | *,pass-statistics,* | *,torch-dynamo-export,*) ;;
  *)
    echo "check: unexpected skip: test/$name (REQUIRES: ${requires:-nothing}); setup should have enabled it"
    skip_rc=1
    ;;
  esac
done < <(sed -nE 's/^UNSUPPORTED: [A-Za-z]+ :: ([^ ]+) .*/\1/p' "$BUILD/lit.log")
# gtest cases on the cuda backend (Backends/...*/cuda, *OnCuda.*) skip
# where no GPU is visible, as lit's cuda-device tests do.
gpu_cases='/cuda(_bf16)?  #|OnCuda\.'
if "$BUILD/bin/oasr-run" --list-devices 2>/dev/null | grep -q '^cuda:[0-9]'; then
  gpu_cases='^$'
fi
if grep -a '\*\*\*Skipped' "$BUILD/ctest.log" | grep -qvE "$gpu_cases"; then
  grep -a '\*\*\*Skipped' "$BUILD/ctest.log" | grep -vE "$gpu_cases" |
    sed 's/^/check: unexpected skip: /'
  skip_rc=1
fi
if [ "$lit_rc" -ne 0 ] || [ "$ctest_rc" -ne 0 ] || [ "$failed" -ne 0 ] ||
  [ "$capped_rc" -ne 0 ] ||
  [ "$fuzz_rc" -ne 0 ] || [ "$skip_rc" -ne 0 ] || [ "$claims_rc" -ne 0 ]; then
  exit 1
fi
