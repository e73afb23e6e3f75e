#!/usr/bin/env bash
#===- scripts/fuzz.sh - Build and run the libFuzzer targets, bounded ------===#
#
# Usage: scripts/fuzz.sh [SECONDS]      (default: $OASR_FUZZ_SECONDS or 60)
#
# Configures a clang-14 build with -DOASR_ENABLE_FUZZERS=ON (every oasr
# library instrumented for libFuzzer + AddressSanitizer) in
# $OASR_FUZZ_BUILD_DIR (default build-fuzz), builds the targets, and runs
# each one for SECONDS on a scratch copy of its committed seed corpus:
#   oasr-fuzz-import   a binary ModelProto: ModelFile load, every
#                      initializer read, the full import. Seeds: the text
#                      models of test/Import/Inputs (made binary here, as
#                      the lit tests do; no binary model is committed) and
#                      a model with its own loss (own_loss_model.py).
#   oasr-fuzz-profile  a JSON document: the profile and calibration readers,
#                      toJSON round trip, the wfbp timeline's SVG. Seeds:
#                      test/fuzz/corpus/profile/.
#   oasr-fuzz-image    an image folder's file: the JPEG and PNG decoders to
#                      3 and 1 channels, a random and the evaluation crop
#                      resampled (values in [0, 1]). Seeds:
#                      test/fuzz/corpus/image/.
# Prints one line per target (mutants run, corpus size, crashes) and exits 1
# when a target crashed, leaked, timed out or ran out of memory; the input
# that did is kept under $OASR_FUZZ_BUILD_DIR/fuzz-out/<target>/ (a crash
# found this way becomes a lit test).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${OASR_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
SECONDS_PER_TARGET=${1:-${OASR_FUZZ_SECONDS:-60}}
JOBS=${OASR_JOBS:-$(nproc)}
CXX_FUZZ=${OASR_FUZZ_CXX:-clang++-14}
CC_FUZZ=${OASR_FUZZ_CC:-clang-14}
PYTHON=/usr/bin/python3 # Debian's, with python3-onnx

command -v "$CXX_FUZZ" >/dev/null ||
  { echo "fuzz: $CXX_FUZZ not found (scripts/setup.sh installs clang-14)"; exit 1; }

echo "fuzz: configuring $BUILD ($CXX_FUZZ, libFuzzer + ASan)"
mkdir -p "$BUILD"
CC=$CC_FUZZ CXX=$CXX_FUZZ cmake -G Ninja -S "$ROOT" -B "$BUILD" \
  -DCMAKE_BUILD_TYPE=Release -DOASR_ENABLE_CUDA=OFF -DOASR_ENABLE_FUZZERS=ON \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py \
  >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; echo "fuzz: configure failed"; exit 1; }
ninja -C "$BUILD" -j"$JOBS" oasr-fuzzers >"$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log"; echo "fuzz: build failed"; exit 1; }

# ASan: LLVM's and protobuf's static objects are alive at exit by design.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
failed=0
for target in import profile image; do
  bin="$BUILD/bin/oasr-fuzz-$target"
  out="$BUILD/fuzz-out/oasr-fuzz-$target"
  rm -rf "$out" && mkdir -p "$out/corpus"
  if [ "$target" = import ]; then
    for m in "$ROOT"/test/Import/Inputs/*.txtpb; do
      [ "$(stat -c %s "$m")" -le 65536 ] || continue # the seeds stay small
      "$PYTHON" "$ROOT/test/Import/Inputs/to_binary.py" "$m" \
        "$out/corpus/$(basename "$m" .txtpb).onnx" || exit 1
    done
    "$PYTHON" "$ROOT/test/passes/Inputs/own_loss_model.py" \
      "$out/corpus/own_loss.onnx" sce || exit 1
  else
    cp "$ROOT/test/fuzz/corpus/$target/"* "$out/corpus/"
  fi
  seeds=$(ls "$out/corpus" | wc -l)
  "$bin" "$out/corpus" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 \
    -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$out/" >"$out/log" 2>&1
  rc=$?
  runs=$(grep -E '^stat::number_of_executed_units:' "$out/log" | awk '{print $2}')
  grown=$(ls "$out/corpus" | wc -l)
  artifacts=$(ls "$out" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | wc -l)
  echo "fuzz: oasr-fuzz-$target: ${runs:-?} inputs in ${SECONDS_PER_TARGET} s, corpus $seeds -> $grown, $artifacts crash/leak/timeout/oom artifacts (exit $rc)"
  if [ "$rc" -ne 0 ] || [ "$artifacts" -ne 0 ]; then
    failed=1
    grep -E 'ERROR|SUMMARY|==[0-9]+==' "$out/log" | head -20
  fi
done
exit $failed
