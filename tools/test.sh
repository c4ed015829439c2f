#!/usr/bin/env bash
# Installs, builds and runs the test suite. `tools/test.sh --long` adds the
# exhaustive tests labelled `long` (all 2^32 fp32 inputs, hours on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh
if [ "${1:-}" = "--long" ]; then
  ctest --test-dir build --output-on-failure -j"$(nproc)"
else
  ctest --test-dir build --output-on-failure -j"$(nproc)" -LE long
fi
