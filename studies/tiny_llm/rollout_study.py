"""Study 1: rollout precision decomposition of the tiny model (the paper's Table 1 shape).

From the committed checkpoint (data/tiny_llm_1m/model.safetensors), greedy
exact match and mean answer log-likelihood on the held-out test problems
with every linear layer's operands fake-quantized through fp4emu.torch
(all seven projections of every layer; the tied lm_head stays fp32):

  fp32; per recipe (hif4.v14, mxfp4.ocp, mxfp4.rceil, nvfp4.te)
  W4A16 (weights only), W16A4 (inputs only), W4A4, W4A4 + Rollout-ResQ
  (dense, 2:4, 4:8, channel50), W4A4 + SmoothQuant (alpha 0.5, scales from
  the `calib` split's rollouts, a batch the test never sees), + RHT (the
  recipe's block, seeded signs), + OCC (q = 0.99).

Then the fp32 model's rollout activations on the test prompts (greedy
completions, padded with <eos>) are dumped (fp4emu.torch.dump_activations)
and analysed with the command line: ``fp4emu underflow`` (UR, QSNR per
layer and tensor kind, under each transform; heatmaps) and ``fp4emu resq``
(activation QSNR per pattern, with the model's own weights). A per-tensor
sensitivity run quantizes one activation tensor at a time (W16A4 of that
layer and kind only) to put each tensor's accuracy drop beside its UR and
QSNR. Spearman's rank correlation of QSNR against the accuracy drop is
taken across the configurations and across the tensors.

    PYTHONPATH=build/python /usr/bin/python3 -m studies.tiny_llm.rollout_study

writes studies/results/tiny_llm/1m/rollout_study.{json,csv}, rollout_tensors.csv,
rollout_table.png, rollout_scatter.png, rollout_layers.png, and the
commands' own outputs under rollout_underflow/ and rollout_resq/. The
command line is FP4EMU_CLI, else build/fp4emu. ``--quick`` is the reduced
run of the tests and the notebook.
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import fp4emu.torch as ft

from . import task
from .generate import answer_logprob, generate
from .model import load
from .pretrain import CHECKPOINT, RESULTS, Progress, setup_torch

ROOT = pathlib.Path(os.environ.get("FP4EMU_ROOT", pathlib.Path(__file__).resolve().parents[2]))
RECIPES = ["hif4.v14", "mxfp4.ocp", "mxfp4.rceil", "nvfp4.te"]
PATTERNS = ["dense", "2:4", "4:8", "channel50"]
TRANSFORMS = {"smoothquant": "smoothquant:alpha=0.5", "rht": "rht", "occ": "occ:q=0.99"}
# Activation tensor kinds (fp4emu.tensor_role) and the projections that read each.
KINDS = {"qkv_in": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "o_in": ["self_attn.o_proj"],
         "gateup_in": ["mlp.gate_proj", "mlp.up_proj"], "down_in": ["mlp.down_proj"]}


def configs(recipes: list[str]) -> list[dict]:
    """Every configuration of the table: name, recipe, and quantize_linear_inputs' keywords."""
    out = [{"name": "fp32", "recipe": None, "mode": "fp32", "kw": None}]
    for r in recipes:
        out += [{"name": f"{r} W4A16", "recipe": r, "mode": "W4A16", "kw": {"weights": True, "inputs": False}},
                {"name": f"{r} W16A4", "recipe": r, "mode": "W16A4", "kw": {}},
                {"name": f"{r} W4A4", "recipe": r, "mode": "W4A4", "kw": {"weights": True}}]
        out += [{"name": f"{r} W4A4+ResQ {p}", "recipe": r, "mode": f"ResQ {p}",
                 "kw": {"weights": True, "residual": p}} for p in PATTERNS]
        out += [{"name": f"{r} W4A4+{t}", "recipe": r, "mode": t, "kw": {"weights": True, "transform": spec}}
                for t, spec in TRANSFORMS.items()]
    return out


def rollout_tokens(prompts: list[str], completions: list[str]) -> torch.Tensor:
    """<bos> prompt completion <eos>, padded with <eos> to one length: what a rollout engine runs."""
    rows = [[task.BOS_ID, *task.encode(p), *task.encode(c), task.EOS_ID] for p, c in zip(prompts, completions)]
    t = max(map(len, rows))
    return torch.tensor([r + [task.EOS_ID] * (t - len(r)) for r in rows], dtype=torch.int64)


def evaluate(model: torch.nn.Module, split: list[tuple[str, str]]) -> dict:
    prompts, answers = [p for p, _ in split], [a for _, a in split]
    comps = generate(model, prompts)
    rewards = [task.reward(p, c) for p, c in zip(prompts, comps)]
    by_op = {op: float(np.mean([r for (p, _), r in zip(split, rewards) if task.op_of(p) == op]))
             for op in task.OPS}
    em = float(np.mean(rewards))
    return {"exact_match": em, "exact_match_se": math.sqrt(em * (1 - em) / len(split)),
            "answer_loglik": float(answer_logprob(model, prompts, answers).mean()), "exact_match_by_op": by_op,
            "completions": comps}


def quantized(model: torch.nn.Module, recipe: str, kw: dict, calib: dict, modules: str = "*") -> torch.nn.Module:
    m = copy.deepcopy(model)
    kw = dict(kw)
    if kw.get("transform", "").startswith("smoothquant"):
        kw["calib"] = calib
    ft.quantize_linear_inputs(m, recipe, modules=modules, **kw)
    return m


def spearman(x, y) -> float:
    """Spearman's rank correlation (average ranks on ties); NaN below 3 points or for a constant side."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3:
        return float("nan")

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for u in np.unique(v):  # ties share their mean rank
            r[v == u] = r[v == u].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def cli_path() -> str:
    exe = os.environ.get("FP4EMU_CLI") or str(ROOT / "build" / "fp4emu")
    if not os.path.exists(exe):
        raise SystemExit(f"the fp4emu command line is not at {exe}: build it (target fp4emu_cli) or set FP4EMU_CLI")
    return os.path.abspath(exe)  # the commands run in the work folder


def run_cli(*args, cwd=None) -> None:
    r = subprocess.run([cli_path(), *map(str, args)], capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"fp4emu {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")


def activation_stats(acts: dict) -> list[dict]:
    """Per tensor: the outlier structure (hot channels, massive activations) of the fp32 rollout activations."""
    out = []
    for name, x in acts.items():
        a = x.abs().double()
        ch = a.max(0).values
        med = float(a.median())
        out.append({"tensor": name, "max_abs": float(a.max()), "median_abs": med,
                    "max_over_median": float(a.max()) / med if med > 0 else float("inf"),
                    "top_channel": int(ch.argmax()), "top_channel_max_over_median_channel_max":
                    float(ch.max() / ch.median()),
                    "kurtosis": float(((x.double() - x.double().mean()) ** 4).mean() / x.double().var() ** 2)})
    return out


def run(ckpt: pathlib.Path, out: pathlib.Path, recipes: list[str], n_test: int, n_calib: int, n_dump: int,
        seed: int, threads: int, progress: bool = True, sensitivity: bool = True) -> dict:
    setup_torch(seed, threads)
    t0 = time.monotonic()
    model = load(ckpt).eval()
    test = task.make_split("test", n_test, seed)  # operators equally likely, as pretrain.py's evaluation
    calib_split = task.make_split("calib", n_calib, seed)
    out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="tiny_llm_rollout."))  # the dumps: tens of MB, not kept
    try:
        # Rollouts of the fp32 model: what is dumped, and what SmoothQuant calibrates on (another batch).
        dump_prompts = [p for p, _ in test[:n_dump]]
        roll = rollout_tokens(dump_prompts, generate(model, dump_prompts))
        cal_prompts = [p for p, _ in calib_split]
        cal_roll = rollout_tokens(cal_prompts, generate(model, cal_prompts))
        calib = ft.capture_inputs(model, cal_roll)
        ft.dump_activations(model, roll, work / "rollout.safetensors", modules="*", dtype="fp32")
        ft.dump_activations(model, cal_roll, work / "calib.safetensors", modules="*", dtype="fp32")
        acts = ft.capture_inputs(model, roll)

        cfgs = configs(recipes)
        kinds = list(KINDS)
        sens = [(r, l, k) for r in recipes for l in range(model.config.num_layers) for k in kinds] \
            if sensitivity else []
        bar = Progress(len(cfgs) + len(sens) + 2, "rollout study", progress)
        rows, done = [], 0
        base = None
        for c in cfgs:
            m = model if c["recipe"] is None else quantized(model, c["recipe"], c["kw"], calib)
            ev = evaluate(m, test)
            if base is None:
                base = ev
            flips = sum(a != b for a, b in zip(ev["completions"], base["completions"]))
            rows.append({k: c[k] for k in ("name", "recipe", "mode")} |
                        {k: v for k, v in ev.items() if k != "completions"} |
                        {"em_drop": base["exact_match"] - ev["exact_match"],
                         "loglik_drop": base["answer_loglik"] - ev["answer_loglik"],
                         "changed_completions": flips})
            done += 1
            bar.update(done, f"{c['name']}: {100 * ev['exact_match']:.1f} %")

        # The command line's analysis of the fp32 rollout dump.
        uf, rq = out / "rollout_underflow", out / "rollout_resq"
        for d in (uf, rq):
            shutil.rmtree(d, ignore_errors=True)
        # Run in the work folder with relative dump names, so the reports name no temporary path.
        ckpt_abs, cli_threads = ckpt.resolve(), str(threads)
        run_cli("underflow", "rollout.safetensors", "--recipe", ",".join(recipes), "--transform", "none",
                "--transform", "rht", "--transform", "smoothquant:alpha=0.5,calib=calib.safetensors",
                "--transform", TRANSFORMS["occ"], "--weights", ckpt_abs, "--detail",
                f"layers.{model.config.num_layers - 1}.mlp.down_proj.input",
                "--threads", cli_threads, "--progress", "never", "--out", uf.resolve(), cwd=work)
        done += 1
        bar.update(done, "fp4emu underflow")
        run_cli("resq", "rollout.safetensors", "--recipe", ",".join(recipes), "--weights", ckpt_abs,
                "--pattern", ",".join(["none", *PATTERNS]), "--threads", cli_threads, "--progress", "never",
                "--out", rq.resolve(), cwd=work)
        done += 1
        bar.update(done, "fp4emu resq")
        ufj = json.loads((uf / "summary.json").read_text())
        rqj = json.loads((rq / "resq.json").read_text())

        # Per tensor (layer x kind): accuracy drop with only that tensor in FP4.
        tensor_rows = []
        for r, l, k in sens:
            m = copy.deepcopy(model)
            for proj in KINDS[k]:
                ft.quantize_linear_inputs(m, r, modules=f"layers.{l}.{proj}")
            ev = evaluate(m, test)
            tensor_rows.append({"recipe": r, "layer": l, "kind": k, "exact_match": ev["exact_match"],
                                "em_drop": base["exact_match"] - ev["exact_match"],
                                "loglik_drop": base["answer_loglik"] - ev["answer_loglik"]})
            done += 1
            bar.update(done, f"{r} layer {l} {k}: {100 * ev['exact_match']:.1f} %")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    # UR / QSNR per tensor from the commands' JSON, joined to the rows above.
    per_tensor = cli_per_tensor(ufj)
    for t in tensor_rows:
        t.update(per_tensor.get((t["recipe"], "none", t["layer"], t["kind"]), {}))
    pooled = cli_pooled(ufj, rqj)
    for row in rows:
        row["act_qsnr_db"], row["act_ur"] = pooled.get((row["recipe"], row["mode"]), (None, None))
    pts = [(r["act_qsnr_db"], r["em_drop"]) for r in rows if r["act_qsnr_db"] is not None]
    tpts = [(t["qsnr_db"], t["em_drop"]) for t in tensor_rows if t.get("qsnr_db") is not None]
    # Which kind underflows most: the pooled UR of each kind, per recipe.
    kind_ur = {}
    for (r, tr, l, k), v in per_tensor.items():
        if tr == "none":
            kind_ur.setdefault(r, {}).setdefault(k, []).append(v["underflow_ratio"])
    most = {r: max(d, key=lambda k: np.mean(d[k])) for r, d in kind_ur.items()}
    result = {
        "checkpoint": str(ckpt.relative_to(ROOT) if ckpt.is_relative_to(ROOT) else ckpt),
        "n_test": len(test), "n_calib": n_calib, "n_dump_sequences": n_dump, "seed": seed, "threads": threads,
        "recipes": recipes, "configs": rows, "tensors": tensor_rows,
        "spearman_qsnr_vs_em_drop_configs": spearman(*zip(*pts)) if pts else None,
        "spearman_qsnr_vs_em_drop_tensors": spearman(*zip(*tpts)) if tpts else None,
        "kind_with_most_underflow": most,
        "kind_mean_ur": {r: {k: float(np.mean(v)) for k, v in d.items()} for r, d in kind_ur.items()},
        "activation_outliers": activation_stats(acts),
        "seconds": time.monotonic() - t0, "load_avg": os.getloadavg(),
    }
    write_outputs(result, out)
    return result


def cli_per_tensor(ufj: dict) -> dict:
    """{(recipe, transform kind, layer, kind): underflow_ratio, qsnr_db, rms, n} from underflow's summary.json.

    q/k/v (and gate/up) read one tensor: the command studies it once (its
    ``aliases``), under the first projection's name.
    """
    return {(t["recipe"], t["transform"].split(":")[0], t["layer"], t["kind"]):
            {k: t[k] for k in ("underflow_ratio", "qsnr_db", "rms", "n")} for t in ufj["tensors"]}


def pooled_qsnr(rows: list[dict]) -> float:
    """QSNR of several tensors taken as one: 10 log10(sum x^2 / sum (x - x^)^2), each tensor's sums from rms, n, dB."""
    sig = sum(r["rms"] ** 2 * r["n"] for r in rows)
    err = sum(r["rms"] ** 2 * r["n"] * 10 ** (-r["qsnr_db"] / 10) for r in rows)
    return 10 * math.log10(sig / err) if err > 0 else float("inf")


def cli_pooled(ufj: dict, rqj: dict) -> dict:
    """{(recipe, mode): (pooled activation QSNR dB, pooled UR)} for every mode that quantizes activations.

    W16A4 and W4A4 quantize the same activations (resq's ``none``); ResQ
    patterns from resq's pooled rows; transforms from underflow's tensors
    (QSNR of the reconstruction mapped back, docs/analysis.md §2.1).
    """
    res = {}
    groups: dict = {}
    for t in ufj["tensors"]:
        groups.setdefault((t["recipe"], t["transform"].split(":")[0]), []).append(t)
    urs = {(p["recipe"], p["transform"].split(":")[0]): p["underflow_ratio"] for p in ufj["pooled"]}
    for (rec, tr), ts in groups.items():
        mode = {"none": "W4A4", "rht": "rht", "smoothquant": "smoothquant", "occ": "occ"}[tr]
        res[(rec, mode)] = (pooled_qsnr(ts), urs.get((rec, tr)))
        if tr == "none":
            res[(rec, "W16A4")] = res[(rec, mode)]
    for r in rqj["results"]:
        for p in r["pooled"]:
            if p["pattern"] != "none":
                res[(r["recipe"], f"ResQ {p['pattern']}")] = (p["act_qsnr_db"], None)
    return res


def write_outputs(res: dict, out: pathlib.Path) -> None:
    (out / "rollout_study.json").write_text(json.dumps(res, indent=1) + "\n")
    cols = ["name", "recipe", "mode", "exact_match", "exact_match_se", "em_drop", "answer_loglik", "loglik_drop",
            "changed_completions", "act_qsnr_db", "act_ur"]
    with open(out / "rollout_study.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in res["configs"]:
            w.writerow(["" if r.get(c) is None else r[c] for c in cols])
    tcols = ["recipe", "layer", "kind", "underflow_ratio", "qsnr_db", "exact_match", "em_drop", "loglik_drop"]
    with open(out / "rollout_tensors.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(tcols)
        for r in res["tensors"]:
            w.writerow(["" if r.get(c) is None else r[c] for c in tcols])
    plot(res, out)


def plot(res: dict, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, recipes = res["configs"], res["recipes"]
    fp32 = rows[0]
    modes = [r["mode"] for r in rows if r["recipe"] == recipes[0]]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    wdt = 0.8 / len(recipes)
    for i, rec in enumerate(recipes):
        ems = [next(r["exact_match"] for r in rows if r["recipe"] == rec and r["mode"] == m) for m in modes]
        ses = [next(r["exact_match_se"] for r in rows if r["recipe"] == rec and r["mode"] == m) for m in modes]
        ax.bar(np.arange(len(modes)) + (i - (len(recipes) - 1) / 2) * wdt, [100 * e for e in ems], wdt,
               yerr=[100 * s for s in ses], label=rec, capsize=2)
    ax.axhline(100 * fp32["exact_match"], color="k", ls="--", lw=1, label=f"fp32 {100 * fp32['exact_match']:.1f} %")
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes, rotation=20)
    ax.set_ylabel("greedy exact match (%)")
    ax.set_title(f"Rollout precision: exact match on {res['n_test']} held-out problems (bars: ±1 SE)")
    ax.legend(ncol=5, fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "rollout_table.png", dpi=110)
    plt.close(fig)

    fig, axs = plt.subplots(1, 2, figsize=(12, 4.6))
    marks = dict(zip(recipes, "os^D"))
    for rec in recipes:
        pts = [(r["act_qsnr_db"], 100 * r["em_drop"]) for r in rows if r["recipe"] == rec and r["act_qsnr_db"]]
        if pts:
            axs[0].scatter(*zip(*pts), marker=marks[rec], label=rec)
        tp = [(t["qsnr_db"], 100 * t["em_drop"]) for t in res["tensors"] if t["recipe"] == rec and t.get("qsnr_db")]
        if tp:
            axs[1].scatter(*zip(*tp), marker=marks[rec], label=rec)
    fmt = lambda v: "n/a" if v is None or v != v else f"{v:.2f}"  # noqa: E731
    axs[0].set_title(f"configurations: Spearman ρ = {fmt(res['spearman_qsnr_vs_em_drop_configs'])}")
    axs[0].set_xlabel("pooled activation QSNR of the rollout dump (dB)")
    axs[1].set_title(f"one tensor in FP4 at a time: Spearman ρ = {fmt(res['spearman_qsnr_vs_em_drop_tensors'])}")
    axs[1].set_xlabel("tensor QSNR (dB)")
    for a in axs:
        a.set_ylabel("exact-match drop vs fp32 (points)")
        a.axhline(0, color="0.6", lw=0.8)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "rollout_scatter.png", dpi=110)
    plt.close(fig)

    kinds = list(KINDS)
    layers = sorted({t["layer"] for t in res["tensors"]})
    if layers:
        fig, axs = plt.subplots(1, 3, figsize=(14, 4.2))
        labels = [f"L{l} {k[:-3]}" for l in layers for k in kinds]
        x = np.arange(len(labels))
        for i, rec in enumerate(recipes):
            get = {(t["layer"], t["kind"]): t for t in res["tensors"] if t["recipe"] == rec}
            for a, key, scale in ((axs[0], "underflow_ratio", 100), (axs[1], "qsnr_db", 1), (axs[2], "em_drop", 100)):
                a.bar(x + (i - (len(recipes) - 1) / 2) * wdt, [scale * (get[(l, k)].get(key) or 0)
                                                               for l in layers for k in kinds], wdt, label=rec)
        for a, t in zip(axs, ["underflow ratio (%)", "QSNR (dB)", "exact-match drop, this tensor alone (points)"]):
            a.set_xticks(x)
            a.set_xticklabels(labels, rotation=45, fontsize=8)
            a.set_title(t)
            a.grid(alpha=0.3, axis="y")
        axs[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "rollout_layers.png", dpi=110)
        plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=str(CHECKPOINT))
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--n-test", type=int, default=1000, help="held-out test problems (task.make_split)")
    ap.add_argument("--n-calib", type=int, default=256, help="calibration rollouts (SmoothQuant)")
    ap.add_argument("--n-dump", type=int, default=512, help="test rollouts dumped for underflow / resq")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-sensitivity", action="store_true", help="skip the one-tensor-at-a-time runs")
    ap.add_argument("--quick", action="store_true", help="reduced run: 2 recipes, 200 problems, no sensitivity")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    recipes = [r for r in a.recipes.split(",") if r]
    if a.quick:
        recipes, a.n_test, a.n_calib, a.n_dump, a.no_sensitivity = recipes[:2], 200, 64, 64, True
    for name in ("n_test", "n_calib", "n_dump", "threads"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    known = {r["id"] for r in __import__("fp4emu").recipes()}
    bad = [r for r in recipes if r not in known]
    if bad or not recipes:
        ap.error(f"--recipes {bad or a.recipes!r}: unknown; choose from {sorted(known)}")
    ckpt = pathlib.Path(a.checkpoint)
    if not ckpt.exists():
        ap.error(f"--checkpoint {ckpt} does not exist: run python3 -m studies.tiny_llm.pretrain first")
    try:
        load(ckpt)
    except ValueError as e:  # checked before any work: the message names the file and the field
        ap.error(f"--checkpoint: {e}")
    res = run(ckpt, pathlib.Path(a.out), recipes, a.n_test, a.n_calib, a.n_dump, a.seed, a.threads,
              not a.no_progress, not a.no_sensitivity)
    for r in res["configs"]:
        q = "" if r["act_qsnr_db"] is None else f"  act QSNR {r['act_qsnr_db']:.1f} dB"
        print(f"{r['name']:<28} EM {100 * r['exact_match']:5.1f} %  loglik {r['answer_loglik']:.3f}{q}")
    print(f"Spearman(QSNR, EM drop): configurations {res['spearman_qsnr_vs_em_drop_configs']}, "
          f"tensors {res['spearman_qsnr_vs_em_drop_tensors']}; {res['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
