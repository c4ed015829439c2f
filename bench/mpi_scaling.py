#!/usr/bin/python3
"""Wall and CPU time of a study under mpirun -n 1, 2, ... in one run (docs/analysis.md §1.6).

    bench/mpi_scaling.py --fp4emu build/fp4emu --ranks 1,2 [--repeat 3] [--threads 1] -- \\
        underflow /tmp/dump/acts --out {out}

Runs the fp4emu command after `--` once alone (no launcher) and then under
`mpirun -n N --oversubscribe` for each N of --ranks (--allow-run-as-root when
run as root), --repeat times each, interleaved so that a change in the
machine's load hits every configuration alike. `{out}` in the command is
replaced by a fresh output path per run. Prints, per configuration, the best
and median wall time, the CPU time of the whole job (all ranks: user + sys of
the children), and the wall-time ratio to the single process of the same run;
also checks that every run's outputs are byte-identical to the single process's.
The dump comes from bench/make_study_dump.py.
"""
import argparse
import filecmp
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def files(path):
    if os.path.isfile(path):
        return {"": path}
    return {os.path.relpath(os.path.join(d, f), path): os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4emu", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--ranks", default="1,2", help="comma-separated rank counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="--threads of each rank (0: the command's default)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- fp4emu arguments, {out} for the output path")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd or not any("{out}" in c for c in cmd):
        sys.exit("give the fp4emu command after --, with {out} where its output goes")
    if a.threads > 0:
        cmd = cmd + ["--threads", str(a.threads)]
    ranks = [int(n) for n in a.ranks.split(",")]
    launcher = lambda n: [a.mpirun, "-n", str(n), "--oversubscribe", "--bind-to", "none"] + (
        ["--allow-run-as-root"] if os.geteuid() == 0 else [])
    configs = [("alone", [])] + [(f"mpirun -n {n}", launcher(n)) for n in ranks]
    work = tempfile.mkdtemp(prefix="fp4emu_mpi_bench_")
    times = {name: [] for name, _ in configs}
    cpu = {name: [] for name, _ in configs}
    reference = None
    try:
        for rep in range(a.repeat):
            for name, prefix in configs:
                out = os.path.join(work, f"{rep}_{name.replace(' ', '_')}")
                c0, t0 = children_cpu(), time.perf_counter()
                p = subprocess.run(prefix + [a.fp4emu] + [c.replace("{out}", out) for c in cmd],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(children_cpu() - c0)
                if p.returncode != 0:
                    sys.exit(f"{name}: exit {p.returncode}\n{p.stderr}")
                got = files(out)
                if reference is None:
                    reference = got
                elif sorted(got) != sorted(reference) or any(
                        not filecmp.cmp(reference[k], got[k], shallow=False) for k in got):
                    sys.exit(f"{name}: outputs differ from the single process's")
                if got is not reference:
                    shutil.rmtree(out, ignore_errors=True) if os.path.isdir(out) else os.remove(out)
        base = statistics.median(times["alone"])
        print(f"fp4emu {' '.join(cmd)}")
        print(f"{'configuration':<16} {'best wall s':>11} {'median wall s':>13} {'job CPU s':>10} {'wall / alone':>12}")
        for name, _ in configs:
            med = statistics.median(times[name])
            print(f"{name:<16} {min(times[name]):>11.2f} {med:>13.2f} {statistics.median(cpu[name]):>10.2f} "
                  f"{med / base:>12.2f}")
        print("outputs byte-identical in every run")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
