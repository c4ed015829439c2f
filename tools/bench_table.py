#!/usr/bin/python3
"""Ratio table of bench/quant_bench results, and instruction counts.

Usage:
  build/bench/quant_bench --benchmark_format=json --benchmark_repetitions=3 \\
      --benchmark_enable_random_interleaving=true > bench.json
  FP4EMU_BENCH_TARGET=AVX2 build/bench/quant_bench --benchmark_format=json \\
      --benchmark_filter='stream|fast_all' > bench_avx2.json
  tools/bench_table.py --count build/bench/quant_bench > counts.json
  tools/bench_table.py bench.json [--avx2 bench_avx2.json] [--counts counts.json] [--targets]

Reads Google Benchmark JSON (benchmark names op/recipe/dtype/impl, see
bench/quant_bench.cpp) and prints a Markdown table: throughput of the
reference, the fast path on one thread and on every thread, in millions of
elements per second, and the ratios fast/reference (one thread each: the
speed-up per core), fast/stream (the same thread count: the share of the
memory bandwidth of a plain y[i] = x[i] * c loop measured in the same run),
fast 2 threads / fast 1 thread (scaling), the all-thread stream ratio of a
second run with the fast path forced to AVX2 (--avx2), and instructions per
element of the fast path on one thread and of the reference, and their
ratio: the per-core speed-up the instructions alone allow (--counts).

--count runs `valgrind --tool=callgrind` on `quant_bench --count NAME
--elements N` for the fast_1t and reference benchmarks (a fixed input of N
values, default 65536; callgrind counts only the measured call) and prints
JSON {name: instructions per element}. Counts repeat exactly from run to run,
unlike timings on a shared machine. Valgrind has no AVX-512: the fast path
runs its best target below it (AVX2 on x86-64); the JSON says which.

--targets prints, instead of the ratio table, one row per recipe against the
streaming-loop targets of the fast path on every thread: fake-quant >= 0.8 of
the loop for MXFP4 and NVFP4, >= 0.6 for HiF4, >= 0.5 with AVX2 forced;
quantize >= fake-quant; dequantize >= 1x the loop; each with the bytes it
moves per element (the loop moves 8) and its instructions per element.

With --benchmark_repetitions the medians are shown (ratios are ratios of
medians), and the min-max of the all-thread rates as the spread.
Standard library only.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def base_name(name):
    parts = [p for p in name.split("/") if not p.startswith("min_time:") and p not in ("real_time",)]
    return "/".join(parts)


def load(path):
    with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as f:
        doc = json.load(f)
    runs = {}  # base name -> list of items_per_second (one per repetition)
    for b in doc.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        if "items_per_second" not in b:
            continue
        runs.setdefault(base_name(b.get("run_name", b["name"])), []).append(float(b["items_per_second"]))
    return doc.get("context", {}), runs


def fmt_rate(values):
    return f"{statistics.median(values) / 1e6:,.0f}" if values else "-"


def fmt_ratio(a, b):
    if not a or not b:
        return "-"
    return f"{statistics.median(a) / statistics.median(b):.2f}"


def fmt_spread(values):
    if len(values) < 2:
        return fmt_rate(values)
    return f"{fmt_rate(values)} ({min(values) / 1e6:,.0f}-{max(values) / 1e6:,.0f})"


OP_ORDER = ["fake_quant", "quantize", "dequantize"]
DEFAULTS = ("hif4.v14", "mxfp4.ocp", "nvfp4.te")


# Streaming-loop targets of the fast path on every thread (fraction of the loop).
FAKE_QUANT_TARGET = {"hif4": 0.6, "mxfp4": 0.8, "nvfp4": 0.8}
AVX2_TARGET = 0.5
# Block size and scale bytes per block of each format.
BLOCK = {"hif4": (64, 4), "mxfp4": (32, 1), "nvfp4": (16, 1)}
# NVFP4 rules with no per-tensor scale: their fake-quant skips the tensor amax
# pass, and their quantize takes the amax run by run from cache (driver.cpp).
NV_SINGLE_LEVEL = ("nvfp4.torchao_1l", "nvfp4.torchao_1l_cpu", "nvfp4.ggml")


def bytes_per_element(op, recipe):
    """Bytes the fast path moves per element: 4 per fp32 read or written, the
    packed codes and scales, and NVFP4's extra read of the input (the tensor
    amax pass; nvfp4.te_2d's 16x16 tile pass is that pass, and it writes each
    block's tile amax, 4 bytes per 16 values, that the quantize pass reads)."""
    fmt = recipe.split(".")[0]
    block, scale_bytes = BLOCK[fmt]
    packed = 0.5 + scale_bytes / block
    extra = 0
    if fmt == "nvfp4" and op != "dequantize":
        extra += 0 if recipe in NV_SINGLE_LEVEL else 4
        extra += 2 * 4 / 16 if recipe == "nvfp4.te_2d" else 0
    return {"fake_quant": 8, "quantize": 4 + packed, "dequantize": packed + 4}[op] + extra


def ratio(a, b):
    return statistics.median(a) / statistics.median(b) if a and b else None


def mark(value, target):
    if value is None:
        return "-"
    return f"{value:.2f} {'met' if value >= target else 'MISSED'}"


def targets_table(runs, avx2, counts):
    """One row per recipe: each streaming-loop target, met or missed."""
    stream_all = runs.get("stream/-/f32/all", [])
    avx2_stream = avx2.get("stream/-/f32/all", [])
    recipes = []
    for name in runs:
        op, recipe, dtype, _ = name.split("/")
        if op != "stream" and (recipe, dtype) not in recipes and op == "fake_quant":
            recipes.append((recipe, dtype))
    recipes = [r for r in recipes if r[1] == "f32" or not any(q == r[0] and d == "f32" for q, d in recipes)]
    recipes.sort(key=lambda r: (r[0].split(".")[0], 0 if r[0] in DEFAULTS else 1, r[0]))
    print("| recipe | fake-quant / loop (target) | AVX2 fake-quant / loop (>= 0.5) | quantize / fake-quant (>= 1) "
          "| dequantize / loop (>= 1) | bytes/elem fq, q, dq (loop 8) | instr/elem fast fq, q, dq |")
    print("|---|---|---|---|---|---:|---:|")
    for recipe, dtype in recipes:
        fmt = recipe.split(".")[0]
        fq = runs.get(f"fake_quant/{recipe}/{dtype}/fast_all", [])
        q = runs.get(f"quantize/{recipe}/{dtype}/fast_all", [])
        dq = runs.get(f"dequantize/{recipe}/{dtype}/fast_all", [])
        target = FAKE_QUANT_TARGET[fmt]
        ops = [op for op in OP_ORDER if any(n.startswith(f"{op}/{recipe}/{dtype}/") for n in runs)]
        instr = []
        for op in ops:
            c = counts.get(f"{op}/{recipe}/{dtype}/fast_1t")
            instr.append(f"{c:.1f}" if c is not None else "-")
        row = [f"{recipe} ({dtype})",
               mark(ratio(fq, stream_all), target).replace(" ", f" (>= {target}) ", 1),
               mark(ratio(avx2.get(f"fake_quant/{recipe}/{dtype}/fast_all", []), avx2_stream), AVX2_TARGET),
               mark(ratio(q, fq), 1.0),
               mark(ratio(dq, stream_all), 1.0),
               ", ".join(f"{bytes_per_element(op, recipe):.2f}".rstrip("0").rstrip(".") for op in ops),
               ", ".join(instr)]
        print("| " + " | ".join(row) + " |")
    print()
    print("Fast path on every thread, medians of the same run; ratios of medians. Instructions per element: "
          "callgrind, one thread. '-': not measured (fake-quant-only recipes have no quantize or dequantize).")


def count(argv):
    """--count QUANT_BENCH [--elements N] [--filter REGEX]: callgrind instruction counts as JSON."""
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    bench, elements, pattern = argv[0], 65536, "."
    rest = argv[1:]
    while rest:
        if rest[0] == "--elements" and len(rest) > 1:
            elements, rest = int(rest[1]), rest[2:]
        elif rest[0] == "--filter" and len(rest) > 1:
            pattern, rest = rest[1], rest[2:]
        else:
            sys.stderr.write(f"bench_table.py --count: unknown argument '{rest[0]}'\n")
            return 2
    names = subprocess.run([bench, "--benchmark_list_tests"], check=True, capture_output=True,
                           text=True).stdout.split()
    names = [base_name(n) for n in names]
    names = [n for n in names if n.split("/")[-1] in ("fast_1t", "reference") and re.search(pattern, n)]
    result = {"elements": elements, "target": None, "instructions_per_element": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            out = os.path.join(tmp, "callgrind.out")
            proc = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}",
                                   bench, "--count", name, "--elements", str(elements)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                sys.stderr.write(f"{name}: valgrind failed\n{proc.stderr[-2000:]}\n")
                return 1
            m = re.search(r"target=(\S+)", proc.stdout)
            result["target"] = m.group(1) if m else "?"
            total = None
            with open(out, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("totals:") or line.startswith("summary:"):
                        total = int(line.split()[1])
            if total is None:
                sys.stderr.write(f"{name}: no totals in the callgrind output\n")
                return 1
            result["instructions_per_element"][name] = total / elements
            sys.stderr.write(f"{name}: {total / elements:.1f} instructions per element\n")
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--count":
        return count(argv[2:])
    args = argv[1:]
    avx2_path = counts_path = None
    targets = False
    positional = []
    while args:
        if args[0] == "--targets":
            targets, args = True, args[1:]
        elif args[0] == "--avx2" and len(args) > 1:
            avx2_path, args = args[1], args[2:]
        elif args[0] == "--counts" and len(args) > 1:
            counts_path, args = args[1], args[2:]
        else:
            positional, args = positional + [args[0]], args[1:]
    if len(positional) != 1:
        sys.stderr.write(__doc__)
        return 2
    context, runs = load(positional[0])
    avx2_context, avx2 = load(avx2_path) if avx2_path else ({}, {})
    counts = {}
    count_target = "?"
    if counts_path:
        with open(counts_path, encoding="utf-8") as f:
            doc = json.load(f)
        counts = doc.get("instructions_per_element", {})
        count_target = doc.get("target", "?")
    stream_1t = runs.get("stream/-/f32/1t", [])
    stream_all = runs.get("stream/-/f32/all", [])
    if targets:
        targets_table(runs, avx2, counts)
        return 0
    print(f"Machine: {context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} MHz, "
          f"SIMD target {context.get('simd_target', '?')}, {context.get('threads_all', '?')} threads for 'all'; "
          f"load average at start {', '.join(f'{x:.2f}' for x in context.get('load_avg', []))}")
    print(f"Streaming loop y = x*c (16M fp32, Melem/s, median (min-max)): {fmt_spread(stream_1t)} on 1 thread, "
          f"{fmt_spread(stream_all)} on all")
    if avx2_path:
        print(f"Forced target run: {avx2_context.get('simd_target', '?')}, streaming loop "
              f"{fmt_spread(avx2.get('stream/-/f32/all', []))} on all")
    if counts_path:
        print(f"Instructions per element: callgrind, {doc.get('elements', '?')} values, fast path on {count_target}")
    print()
    has_2t = any(name.endswith("/fast_2t") for name in runs)
    header = ["op", "recipe", "input", "reference", "fast 1t", "fast all (min-max)", "fast/ref per core",
              "fast 1t / stream 1t", "fast all / stream all"] + (["fast 2t / fast 1t"] if has_2t else [])
    if avx2_path:
        header.append(f"{avx2_context.get('simd_target', 'forced')} all / stream all")
    if counts_path:
        header += ["instr/elem fast", "instr/elem ref", "instr ref/fast"]
    print("| " + " | ".join(header) + " |")
    print("|---|---|---|" + "---:|" * (len(header) - 3))
    keys = []
    for name in runs:
        op, recipe, dtype, _ = name.split("/")
        if op != "stream" and (op, recipe, dtype) not in keys:
            keys.append((op, recipe, dtype))
    recipes = []
    for _, recipe, _ in keys:
        if recipe not in recipes:
            recipes.append(recipe)
    recipes.sort(key=lambda r: (r.split(".")[0], 0 if r in DEFAULTS else 1, r))
    keys.sort(key=lambda k: (OP_ORDER.index(k[0]) if k[0] in OP_ORDER else 99, recipes.index(k[1]), k[2] != "f32"))
    for op, recipe, dtype in keys:
        stem = f"{op}/{recipe}/{dtype}"
        ref = runs.get(f"{stem}/reference", [])
        one = runs.get(f"{stem}/fast_1t", [])
        two = runs.get(f"{stem}/fast_2t", [])
        all_ = runs.get(f"{stem}/fast_all", [])
        row = [op, recipe, dtype, fmt_rate(ref), fmt_rate(one), fmt_spread(all_), fmt_ratio(one, ref),
               fmt_ratio(one, stream_1t), fmt_ratio(all_, stream_all)] + ([fmt_ratio(two, one)] if has_2t else [])
        if avx2_path:
            row.append(fmt_ratio(avx2.get(f"{stem}/fast_all", []), avx2.get("stream/-/f32/all", [])))
        if counts_path:
            fast, ref_count = counts.get(f"{stem}/fast_1t"), counts.get(f"{stem}/reference")
            row += [f"{c:.1f}" if c is not None else "-" for c in (fast, ref_count)]
            row.append(f"{ref_count / fast:.1f}" if fast and ref_count else "-")
        print("| " + " | ".join(row) + " |")
    print()
    print("Rates in millions of elements per second, median over the repetitions; ratios are of medians. "
          "The stream ratios compare with the streaming loop at the same thread count "
          "(fake-quant moves the same bytes per element; quantize and dequantize move fewer).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
