#!/usr/bin/python3
"""Ratio table of bench/quant_bench results.

Usage:
  build/bench/quant_bench --benchmark_format=json --benchmark_repetitions=5 \
      --benchmark_enable_random_interleaving=true > bench.json
  tools/bench_table.py bench.json            (or: ... | tools/bench_table.py -)

Reads Google Benchmark JSON (benchmark names op/recipe/dtype/impl, see
bench/quant_bench.cpp) and prints a Markdown table: throughput of the
reference, the fast path on one thread and on every thread, in millions of
elements per second, and the ratios fast/reference (one thread each: the
speed-up per core) and fast/stream (the same thread count: the share of the
memory bandwidth of a plain y[i] = x[i] * c loop measured in the same run).

With --benchmark_repetitions the medians are shown (ratios are ratios of
medians), and the min-max of the all-thread rates as the spread.
Standard library only.
"""
import json
import statistics
import sys


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


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    context, runs = load(argv[1])
    stream_1t = runs.get("stream/-/f32/1t", [])
    stream_all = runs.get("stream/-/f32/all", [])
    print(f"Machine: {context.get('num_cpus', '?')} CPUs at {context.get('mhz_per_cpu', '?')} MHz, "
          f"SIMD target {context.get('simd_target', '?')}, {context.get('threads_all', '?')} threads for 'all'; "
          f"load average at start {', '.join(f'{x:.2f}' for x in context.get('load_avg', []))}")
    print(f"Streaming loop y = x*c (16M fp32, Melem/s, median (min-max)): {fmt_spread(stream_1t)} on 1 thread, "
          f"{fmt_spread(stream_all)} on all")
    print()
    print("| op | recipe | input | reference | fast 1t | fast all (min-max) | fast/ref per core | "
          "fast 1t / stream 1t | fast all / stream all |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    keys = []
    for name in runs:
        op, recipe, dtype, _ = name.split("/")
        if op != "stream" and (op, recipe, dtype) not in keys:
            keys.append((op, recipe, dtype))
    recipes = []
    for _, recipe, _ in keys:
        if recipe not in recipes:
            recipes.append(recipe)
    recipes.sort(key=lambda r: (r.split(".")[0], 0 if r in ("hif4.v14", "mxfp4.ocp", "nvfp4.te") else 1, r))
    keys.sort(key=lambda k: (OP_ORDER.index(k[0]) if k[0] in OP_ORDER else 99, recipes.index(k[1]), k[2] != "f32"))
    for op, recipe, dtype in keys:
        ref = runs.get(f"{op}/{recipe}/{dtype}/reference", [])
        one = runs.get(f"{op}/{recipe}/{dtype}/fast_1t", [])
        all_ = runs.get(f"{op}/{recipe}/{dtype}/fast_all", [])
        print(f"| {op} | {recipe} | {dtype} | {fmt_rate(ref)} | {fmt_rate(one)} | {fmt_spread(all_)} | "
              f"{fmt_ratio(one, ref)} | {fmt_ratio(one, stream_1t)} | {fmt_ratio(all_, stream_all)} |")
    print()
    print("Rates in millions of elements per second, median over the repetitions; ratios are of medians. "
          "The stream ratios compare with the streaming loop at the same thread count "
          "(fake-quant moves the same bytes per element; quantize and dequantize move fewer).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
