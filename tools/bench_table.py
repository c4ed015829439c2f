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

With --benchmark_repetitions the median is shown, and the spread of the
all-thread bandwidth share as min-max over the repetitions.
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


def fmt_ratio(a, b, spread=False):
    if not a or not b:
        return "-"
    text = f"{statistics.median(a) / statistics.median(b):.2f}"
    if spread and len(a) > 1 and len(b) > 1:
        # Pair repetition i of each: with --benchmark_enable_random_interleaving=true
        # the repetitions of all benchmarks are interleaved, so pairs ran close in time.
        ratios = [x / y for x, y in zip(a, b)]
        text += f" ({min(ratios):.2f}-{max(ratios):.2f})"
    return text


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
    print(f"Streaming loop y = x*c (16M fp32): {fmt_rate(stream_1t)} Melem/s on 1 thread, "
          f"{fmt_rate(stream_all)} Melem/s on all")
    print()
    print("| op | recipe | input | reference | fast 1t | fast all | fast/ref per core | "
          "fast 1t/stream 1t | fast all/stream all |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    keys = []
    for name in runs:
        op, recipe, dtype, _ = name.split("/")
        if op != "stream" and (op, recipe, dtype) not in keys:
            keys.append((op, recipe, dtype))
    for op, recipe, dtype in keys:
        ref = runs.get(f"{op}/{recipe}/{dtype}/reference", [])
        one = runs.get(f"{op}/{recipe}/{dtype}/fast_1t", [])
        all_ = runs.get(f"{op}/{recipe}/{dtype}/fast_all", [])
        print(f"| {op} | {recipe} | {dtype} | {fmt_rate(ref)} | {fmt_rate(one)} | {fmt_rate(all_)} | "
              f"{fmt_ratio(one, ref)} | {fmt_ratio(one, stream_1t)} | {fmt_ratio(all_, stream_all, spread=True)} |")
    print()
    print("Rates in millions of elements per second (median over repetitions); "
          "stream ratios compare elements/s with the streaming loop at the same thread count.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
