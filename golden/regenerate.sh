#!/bin/sh
# Regenerates the checked-in golden suite (golden/suite) with the default
# options: level 1, seed 1, recipes hif4.v14 hif4.a6 mxfp4.ocp mxfp4.rceil
# nvfp4.te. The test GoldenSuite.CheckedInSuiteRegeneratesByteForByte runs the
# same generation and requires byte identity with the checked-in copy.
# Usage: golden/regenerate.sh [path/to/fp4emu]   (default: build/fp4emu)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
fp4emu=${1:-"$here/../build/fp4emu"}
exec "$fp4emu" golden generate --out "$here/suite" --level 1 --seed 1
