#!/usr/bin/env bash
# Installs, builds the command-line tool only (not the tests or benchmarks)
# and runs the main job on the bundled dump: fake-quantizes every tensor of
# data/sample_dump.safetensors (made by `fp4emu sample`) with the default
# recipe of each format and prints the error table per tensor and pooled
# over tensors.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh 1>&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target fp4emu_cli 1>&2
build/fp4emu compare data/sample_dump.safetensors --format hif4,mxfp4,nvfp4 "$@"
