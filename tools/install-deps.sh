#!/usr/bin/env bash
# Installs the Debian packages fp4emu needs, only those that are missing.
# Idempotent: prints nothing to install and exits 0 when all are present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev
  libeigen3-dev libhwy-dev libomp-dev libpng-dev
  libmpfr-dev libgmp-dev libssl-dev
  # The `fast` GEMM model's sgemm (optional: without it CMake falls back to Eigen).
  libopenblas-dev
  # The studies' pictures: cairo (PNG and SVG) and the font it draws text with.
  libcairo2-dev fonts-dejavu-core
  python3 python3-numpy python3-pytest
  # The Python module (python/): headers, pybind11, PyTorch for fp4emu.torch and its tests.
  python3-dev pybind11-dev python3-pybind11 python3-torch
  # bench/quant_bench --count and tools/bench_table.py --count: callgrind
  # instruction counts (its client-request header too).
  valgrind
  python3-matplotlib python3-nbconvert jupyter-nbconvert python3-ipykernel
  # tests/html_report_test.cpp renders the --report pages in headless Chromium.
  chromium
  # Checked builds (tools/test.sh): clang with its sanitizer and libFuzzer
  # runtimes, LLVM's OpenMP with the archer tool for ThreadSanitizer, and the
  # symbolizer for readable sanitizer stacks.
  clang libclang-rt-14-dev libomp-14-dev llvm
  # MPI across machines (FP4EMU_MPI, README.md "Across machines"): Open MPI and mpirun.
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} Debian packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
