#!/usr/bin/env bash
#===- scripts/setup.sh - Install everything oasr needs on a fresh machine -===#
#
# Idempotent: run as root on Debian 12 (bookworm). Installs only the Debian
# packages that are missing, so a second run takes a second or two.
set -euo pipefail

PKGS=(
  # compiler infrastructure: MLIR/LLVM 19 (FileCheck, not, lit under /usr/lib/llvm-19)
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  # ONNX import
  libonnx-dev libprotobuf-dev protobuf-compiler
  # distributed runtime and CPU kernels
  libopenmpi-dev openmpi-bin libdnnl-dev ocl-icd-opencl-dev opencl-headers
  # build tools
  cmake ninja-build ccache g++ libgtest-dev libbenchmark-dev zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev libxml2-dev
  # the libFuzzer targets (scripts/fuzz.sh): clang with its runtimes
  clang-14 libclang-rt-14-dev
  # Python used only to generate test models and reference numbers
  python3-onnx python3-numpy python3-torch python3-torchvision python3-sklearn
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
