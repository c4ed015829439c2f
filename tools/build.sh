#!/usr/bin/env bash
# Installs missing Debian packages, configures and builds fp4emu in ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DFP4EMU_BUILD_PYTHON=ON >/dev/null
cmake --build build -j"$(nproc)"
