#!/usr/bin/env bash
# Installs, builds and runs the main job on the bundled sample: fake-quantizes
# data/sample_activations.npy with every format's default recipe and prints
# the error table (QSNR, underflow, max abs error).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh 1>&2
build/fp4emu compare data/sample_activations.npy "$@"
