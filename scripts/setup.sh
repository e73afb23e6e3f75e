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
  # ONNX Runtime training checkpoints (a FlatBuffer): flatc and the headers
  libflatbuffers-dev flatbuffers-compiler
  # distributed runtime and CPU kernels
  libopenmpi-dev openmpi-bin libdnnl-dev ocl-icd-opencl-dev opencl-headers
  # JSON input files (profiles, calibrations, checkpoint manifests)
  libsimdjson-dev
  # image folders: JPEG (libjpeg-turbo's TurboJPEG API) and PNG decoding
  libturbojpeg0-dev libpng-dev pkg-config
  # build tools
  cmake ninja-build ccache g++ libgtest-dev libbenchmark-dev zlib1g-dev libzstd-dev libedit-dev libcurl4-openssl-dev libxml2-dev
  # the libFuzzer targets (scripts/fuzz.sh): clang with its runtimes
  clang-14 libclang-rt-14-dev
  # the emulated cluster (scripts/cluster.sh): namespaces and links, packet loss
  iproute2 iptables
  # Python used only to generate test models and reference numbers
  python3-onnx python3-numpy python3-torch python3-torchvision python3-sklearn
  # the virtual environment for PyPI's onnxruntime-training (below)
  python3-venv
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages already installed"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime's training package (PyPI), for the tests that compare with
# ORT's own training step (test/runtime/ort-artifacts.test, lit feature
# `ort-training`). It imports torch when loaded, so the virtual environment
# sees Debian's python3-torch and python3-onnx. Made once; a failed install
# (no PyPI) leaves those tests unsupported, not the build broken.
ORT_VENV=${OASR_ORT_VENV:-/root/venv-ort}
ORT_VERSION=1.19.2
if "$ORT_VENV/bin/python" -c "import onnxruntime.training.api" >/dev/null 2>&1; then
  echo "setup: $ORT_VENV has onnxruntime-training"
else
  echo "setup: making $ORT_VENV with onnxruntime-training==$ORT_VERSION"
  if /usr/bin/python3 -m venv --system-site-packages "$ORT_VENV" &&
     "$ORT_VENV/bin/pip" install -q "onnxruntime-training==$ORT_VERSION"; then
    echo "setup: $ORT_VENV ready"
  else
    echo "setup: warning: could not install onnxruntime-training into $ORT_VENV;" \
         "the ORT comparison tests will be unsupported"
  fi
fi
# PyPI's safetensors in the same environment: the tests read oasr-run's
# --save=FILE.safetensors with it (lit feature `py-safetensors`).
if [ -x "$ORT_VENV/bin/python" ] && ! "$ORT_VENV/bin/python" -c "import safetensors" >/dev/null 2>&1; then
  "$ORT_VENV/bin/pip" install -q "safetensors==0.8.0" ||
    echo "setup: warning: could not install safetensors into $ORT_VENV"
fi
# oasr's Python package (python/oasr: `python3 -m oasr.export`, `from oasr
# import export`) for Debian's python3 and the virtual environments made from
# it: a .pth file pointing at this checkout. In a virtual environment of your
# own: `pip install ./python`.
OASR_PYTHON_DIR=$(cd "$(dirname "$0")/../python" && pwd)
SITE=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ "$(cat "$SITE/oasr.pth" 2>/dev/null)" != "$OASR_PYTHON_DIR" ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "$OASR_PYTHON_DIR" | $SUDO tee "$SITE/oasr.pth" >/dev/null
  echo "setup: python3 imports oasr from $OASR_PYTHON_DIR ($SITE/oasr.pth)"
fi
echo "setup: done"
