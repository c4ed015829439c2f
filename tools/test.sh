#!/usr/bin/env bash
# Installs, builds and runs the test suite; see usage() or the README's
# "Testing" section.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
Usage: tools/test.sh [--long] [--sanitize] [--shared] [--fuzz SECONDS] [--help]

Installs the Debian packages (tools/install-deps.sh), builds into build/ and
runs the default test suite (ctest, label `long` excluded). Then, when clang
is installed, builds in build-fuzzers/ (clang, ASan + UBSan, baseline SIMD
target) the libFuzzer harnesses of fuzz/ and the sanitizer subset of the
suite, runs that subset (the file readers and writers, golden verify and
generate, the hostile-input CLI test, the thread-count rule, the fuzz seed
corpora), and fuzzes each harness for 60 seconds.

  --long          also run the tests labelled `long` (every fp32 input: hours)
  --sanitize      also build the whole default suite with AddressSanitizer +
                  UndefinedBehaviorSanitizer (-fno-sanitize-recover=all, every
                  SIMD target) in build-asan/ and run it, then build with
                  ThreadSanitizer (clang, libomp with its archer tool) in
                  build-tsan/ and run the multi-threaded tests (fast path
                  driver, SIMD, GEMM, golden fast path)
  --shared        also build libfp4emu as a shared library (BUILD_SHARED_LIBS=ON,
                  build-shared/: the library, the CLI and the Python module),
                  install it into a prefix and build and run the consumer
                  project against it (ctest package_consumer), run the
                  installed CLI, and import the installed Python module
  --fuzz SECONDS  fuzz each harness for SECONDS instead of 60; 0 skips fuzzing
  -h, --help      show this help

Fuzzing keeps its growing corpus in build-fuzzers/corpus/<harness>/ (seeded
from fuzz/corpus/<harness>/); an input that fails is saved in
build-fuzzers/findings/ and fails the run.
EOF
}

long=0
sanitize=0
shared=0
fuzz_seconds=60
while [ $# -gt 0 ]; do
  case "$1" in
    --long) long=1 ;;
    --sanitize) sanitize=1 ;;
    --shared) shared=1 ;;
    --fuzz)
      if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]]; then
        echo "tools/test.sh: --fuzz needs a whole number of seconds, e.g. --fuzz 600" >&2
        exit 2
      fi
      fuzz_seconds=$2
      shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "tools/test.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

jobs=$(nproc)
label_filter=(-LE long)
if [ "$long" = 1 ]; then label_filter=(); fi
have_clang=0
if command -v clang++ >/dev/null && command -v clang >/dev/null; then have_clang=1; fi

# Times each step, so the README's runtimes can be checked on any machine: the
# wall time, and the CPU time (user + sys, children included), which a shared
# machine's load does not inflate.
step() {
  local name=$1
  shift
  echo "== $name"
  local TIMEFORMAT="== $name: %0R s (CPU: %0U s user + %0S s sys)"
  time "$@"
}

clang_compilers=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang)

# A build tree of its own for each checked build; only the targets it runs.
build_checked() {
  local dir=$1 targets=$2
  shift 2
  # Without MPI: OpenMPI's own allocations read as leaks under LeakSanitizer,
  # and the mpi_* tests run in the default build.
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DFP4EMU_BUILD_BENCHMARKS=OFF -DFP4EMU_MPI=OFF "$@" >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$dir" -j"$jobs" ${targets:+--target $targets}
}

# Default suite.
step "build" tools/build.sh
step "tests" ctest --test-dir build --output-on-failure -j"$jobs" "${label_filter[@]}"

if [ "$shared" = 1 ]; then
  # The shared-library package: only what is installed is built (no test
  # binary), then the install checks of the default suite run on it.
  step "shared build" build_checked build-shared "fp4emu fp4emu_cli fp4emu_python" -DBUILD_SHARED_LIBS=ON \
    -DFP4EMU_BUILD_PYTHON=ON -DFP4EMU_TEST_FILES='/public_headers_test\.cpp$'
  step "shared tests" ctest --test-dir build-shared --output-on-failure -R '^package_consumer$'
  step "shared python install" env FP4EMU_BUILD_DIR="$PWD/build-shared" PYTHONPATH="$PWD/build-shared/python" \
    PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests/test_readme.py
fi

harnesses=$(cd fuzz && ls -- *_fuzz.cpp | sed 's/_fuzz\.cpp$//')
# Tests a checked build leaves out: the kernel harnesses of golden/ (their
# programs are not built there).
harness_tests='^golden_(harness_suite|c_harness|python_harness|cuda_example)'
# alloc_dealloc_mismatch=0: clang 14's ASan with libstdc++ 12 reports every
# std::stable_sort that takes a temporary buffer as "operator new vs free"
# (libstdc++ allocates it with nothrow new and frees it through its own
# delete); the 23 reports of the whole suite were all that, none ours.
sanitizer_env=(ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1:alloc_dealloc_mismatch=0
               LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp" UBSAN_OPTIONS=print_stacktrace=1)

if [ "$sanitize" = 1 ]; then
  # clang when present (it also checks that the project builds with clang),
  # else GCC, which has ASan and UBSan too.
  asan_options=(-DFP4EMU_SANITIZE=address,undefined)
  if [ "$have_clang" = 1 ]; then asan_options+=("${clang_compilers[@]}"); fi
  step "asan+ubsan build" build_checked build-asan "" "${asan_options[@]}"
  step "asan+ubsan tests" env "${sanitizer_env[@]}" \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" "${label_filter[@]}"

  if [ "$have_clang" = 1 ]; then
    # Only the tests that run OpenMP regions with several threads: the fast
    # path driver and kernels, the GEMM, the golden generator's fast path, the
    # thread-count rule.
    tsan_files='/(simd_quant|quantize_driver|gemm_impl|golden_fastpath|threads)_test\.cpp$'
    # Debian's clang links OpenMP programs with LLVM's libomp; its archer tool
    # tells TSan about OpenMP's barriers and tasks. It is loaded only when
    # named in OMP_TOOL_LIBRARIES, and libomp itself is not instrumented
    # (ignore_noninstrumented_modules): without either, TSan reports races
    # inside libomp in a race-free program.
    archer=$(ls /usr/lib/llvm-*/lib/libarcher.so 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -z "$archer" ]; then
      echo "tools/test.sh: LLVM's libarcher.so is missing (libomp-14-dev; tools/install-deps.sh)" >&2
      exit 1
    fi
    # -O1 and the baseline SIMD target only: the threads share out work in
    # the driver, the same for every target, and each target costs build time.
    step "tsan build" build_checked build-tsan "fp4emu_tests fp4emu_cli" "${clang_compilers[@]}" \
      "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS=-DHWY_COMPILE_ONLY_STATIC=1 \
      -DFP4EMU_SANITIZE=thread -DFP4EMU_TEST_FILES="$tsan_files"
    step "tsan tests" env OMP_TOOL_LIBRARIES="$archer" OMP_NUM_THREADS=4 \
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1 \
      ctest --test-dir build-tsan --output-on-failure -j"$jobs" -LE long -E "^fuzz_corpus_|$harness_tests"
  else
    echo "tools/test.sh: clang is not installed: ThreadSanitizer run skipped (tools/install-deps.sh installs it)" >&2
  fi
fi

if [ "$have_clang" = 0 ]; then
  echo "tools/test.sh: clang is not installed: the ASan + UBSan subset and fuzzing are skipped" \
       "(tools/install-deps.sh installs it)" >&2
else
  fuzz_dir=build-fuzzers
  # -O1, as libFuzzer recommends: a fraction of -O3's build time. The same
  # instrumented library serves the sanitizer subset of the suite: the tests
  # of code that reads or writes the files a user hands over, the thread-count
  # rule, and the corpus replays (the whole suite is --sanitize).
  asan_subset='/(io_[a-z_]+|golden_(verify|sha256|generate_write)|cli_hostile|inspect_cli|threads)_test\.cpp$'
  step "fuzzer + asan subset build" build_checked $fuzz_dir \
    "$(printf 'fuzz_%s ' $harnesses)$(printf '%s_corpus ' $harnesses)fp4emu_tests fp4emu_cli" \
    "${clang_compilers[@]}" "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DFP4EMU_SANITIZE=address,undefined \
    -DFP4EMU_BUILD_FUZZERS=ON -DFP4EMU_BUILD_TESTS=ON -DFP4EMU_TEST_FILES="$asan_subset"
  step "asan+ubsan subset tests" env "${sanitizer_env[@]}" \
    ctest --test-dir $fuzz_dir --output-on-failure -j"$jobs" -LE long -E "$harness_tests"
  mkdir -p "$fuzz_dir/findings"
  if [ "$fuzz_seconds" -gt 0 ]; then
    for name in $harnesses; do
      mkdir -p "$fuzz_dir/corpus/$name"
      # -max_len: the seeds are a few KB; the deep-nesting reproducers are
      # replayed whole by the corpus test, not grown by the fuzzer.
      step "fuzz $name (${fuzz_seconds} s)" "$fuzz_dir/fuzz/fuzz_$name" \
        -max_total_time="$fuzz_seconds" -max_len=16384 -timeout=25 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$fuzz_dir/findings/$name-" \
        "$fuzz_dir/corpus/$name" "fuzz/corpus/$name" \
        || { echo "tools/test.sh: fuzz_$name found an input that fails ($fuzz_dir/findings/$name-*);" \
                  "fix the reader and add the input to fuzz/corpus/$name/" >&2; exit 1; }
    done
  fi
fi
echo "tools/test.sh: all passed"
