"""Study 3: FP4 pre-training from scratch, the HiF4 pre-training summary's ablation in miniature.

TinyQwen is trained from scratch on the arithmetic task with every linear
layer's three GEMMs in FP4 (fp4emu.torch.Fp4Linear: forward, input gradient
and weight gradient, each operand in blocks along its GEMM's reduction axis),
for hif4.v14, mxfp4.ocp and nvfp4.te: pure FP4; + RHT (TransformerEngine's
16-point sign vector) on both weight-gradient operands along the tokens;
+ RHT + stochastic rounding of the gradient dY in both backward GEMMs
(Philox, a fresh offset per step). The embedding (tied to the LM head),
RMSNorm, attention scores and softmax stay fp32, as in FP4 training recipes.

Every precision trains on the same batches for a seed (task.make_split with
seed * 1_000_003 + step) from the same initial weights, so the comparison is
paired. The final loss is the answer cross-entropy on ``--loss-n`` fixed
held-out problems through the run's own (FP4) forward (the mean training
loss of the last ``--tail`` of the steps is reported beside it, noisier);
its relative error to fp32, (L - L_fp32) / L_fp32, per seed, then mean and
spread over seeds: the summary's form (its 1B-30B figures: pure
HiF4 1.11 %, MXFP4 3.85 %; + RHT 0.97 % and 2.06 %; MXFP4 + SR + RHT 1.42 %).
Greedy exact match on ``--eval-n`` held-out problems closes each run.

    PYTHONPATH=build/python /usr/bin/python3 -m studies.tiny_llm.fp4_pretrain_study

(the defaults are the run of docs/analysis.md §8.4: the studies' model
model.STUDY_CONFIG, seeds 0 1 2, 500 steps of 48, all three formats) writes
fp4_pretrain.{json,csv,png} to ``--out`` (studies/results/tiny_llm/1m).
The same seeds, sizes and thread count give the same numbers, whatever ``--jobs``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import statistics
import sys
import time

import torch

from . import task
from .fp4_linear import FORMATS, SHORT, Precision, blas_threads, padded_batch, precisions
from .generate import exact_match, token_logprobs
from .model import STUDY_CONFIG, ModelConfig, TinyQwen, num_parameters
from .pretrain import RESULTS, Progress, lr_at, model_config, setup_torch, train_step, write_results

ROOT = pathlib.Path(os.environ.get("FP4EMU_ROOT", pathlib.Path(__file__).resolve().parents[2]))

# The summary's relative errors of the final loss (1B-30B models), beside ours in the table and plot.
PAPER = {"HiF4": 1.11, "MXFP4": 3.85, "HiF4+RHT": 0.97, "MXFP4+RHT": 2.06, "MXFP4+RHT+SR": 1.42}


def heldout_loss(model: torch.nn.Module, n: int, batch: int = 256) -> float:
    """Mean answer cross-entropy per token on ``n`` fixed held-out problems, through the model's own (training
    precision) forward: the final loss, less noisy than a few training batches."""
    pairs = task.make_split("test", n, 999)
    tot = cnt = 0.0
    with torch.no_grad():
        for s in range(0, n, batch):
            prompts, answers = zip(*pairs[s:s + batch])
            tokens, mask = padded_batch(prompts, answers)
            tot += float(-(token_logprobs(model, tokens) * mask).sum())
            cnt += float(mask.sum())
    return tot / cnt


def train(cfg: ModelConfig, prec: Precision, seed: int, steps: int, batch: int, lr: float, warmup: int,
          threads: int, eval_n: int, loss_n: int = 2048) -> dict:
    """One pre-training run; returns its per-step losses, the final held-out loss and exact match, seconds."""
    if batch % 4:
        raise ValueError(f"batch={batch} must be a multiple of 4 (token-axis FP4 blocks of 64)")
    setup_torch(seed, threads)
    blas_threads(threads)
    model = TinyQwen(cfg)  # the same initial weights for every precision of a seed
    prec.apply(model, seed, threads)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    losses = []
    t0 = time.monotonic()
    for step in range(steps):
        prompts, answers = zip(*task.make_split("train", batch, seed * 1_000_003 + step))
        losses.append(train_step(model, opt, lr_at(step, steps, lr, warmup), *padded_batch(prompts, answers)))
    seconds = time.monotonic() - t0
    model.eval()
    em = exact_match(model, task.make_split("test", eval_n, 777)) if eval_n else float("nan")
    return {"precision": prec.name, "recipe": prec.recipe, "rht": prec.rht, "sr": prec.sr, "seed": seed,
            "loss": losses, "heldout_loss": heldout_loss(model, loss_n) if loss_n else float("nan"),
            "exact_match": em, "seconds": seconds}


def final_loss(losses: list[float], tail: float) -> float:
    k = max(1, int(round(len(losses) * tail)))
    return sum(losses[-k:]) / k


def summarize(runs: list[dict], tail: float) -> list[dict]:
    """Per precision: the final held-out loss and its relative error to fp32 (%, paired by seed: mean, sd, min,
    max), and the same for the training loss of the last ``tail`` of the steps."""
    def rel(key_fn):
        fp32 = {r["seed"]: key_fn(r) for r in runs if r["recipe"] is None}
        return lambda r: 100 * (key_fn(r) - fp32[r["seed"]]) / fp32[r["seed"]]

    held = rel(lambda r: r["heldout_loss"])
    trained = rel(lambda r: final_loss(r["loss"], tail))
    rows = []
    for name in dict.fromkeys(r["precision"] for r in runs):
        rs = [r for r in runs if r["precision"] == name]
        e = [held(r) for r in rs]
        t = [trained(r) for r in rs]
        sd = (lambda v: statistics.stdev(v) if len(v) > 1 else float("nan"))
        rows.append({"precision": name, "recipe": rs[0]["recipe"], "rht": rs[0]["rht"], "sr": rs[0]["sr"],
                     "seeds": len(rs), "final_loss": statistics.fmean(r["heldout_loss"] for r in rs),
                     "rel_err_pct": statistics.fmean(e), "rel_err_sd_pct": sd(e),
                     "rel_err_min_pct": min(e), "rel_err_max_pct": max(e),
                     "train_loss": statistics.fmean(final_loss(r["loss"], tail) for r in rs),
                     "train_rel_err_pct": statistics.fmean(t), "train_rel_err_sd_pct": sd(t),
                     "diverged": sum(not math.isfinite(final_loss(r["loss"], tail)) for r in rs),
                     "exact_match": statistics.fmean(r["exact_match"] for r in rs),
                     "seconds_per_run": statistics.fmean(r["seconds"] for r in rs),
                     "paper_rel_err_pct": PAPER.get(name)})
    return rows


def plot(runs: list[dict], rows: list[dict], path: pathlib.Path, smooth: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    names = [r["precision"] for r in rows]
    fp32 = {r["seed"]: np.array(r["loss"]) for r in runs if r["recipe"] is None}
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.6))
    colors = {"fp32": "k", "HiF4": "C0", "MXFP4": "C3", "NVFP4": "C2", "MXFP4-rceil": "C1"}
    styles = {"": "-", "+RHT": "--", "+RHT+SR": ":"}
    kern = np.ones(smooth) / smooth
    for name in names:
        fmt, _, var = name.partition("+")
        var = "+" + var if var else ""
        rs = [r for r in runs if r["precision"] == name]
        curves = np.array([np.convolve(r["loss"], kern, "valid") for r in rs])
        x = np.arange(smooth, smooth + curves.shape[1])
        c, ls = colors.get(fmt, "C7"), styles.get(var, "-")
        ax[0].plot(x, curves.mean(0), ls, color=c, lw=1.2, label=name)
        ax[0].fill_between(x, curves.min(0), curves.max(0), color=c, alpha=0.12)
        if name != "fp32" and fp32:
            rel = np.array([100 * (np.convolve(r["loss"], kern, "valid") - np.convolve(fp32[r["seed"]], kern, "valid"))
                            / np.convolve(fp32[r["seed"]], kern, "valid") for r in rs])
            ax[1].plot(x, rel.mean(0), ls, color=c, lw=1.2, label=name)
            ax[1].fill_between(x, rel.min(0), rel.max(0), color=c, alpha=0.12)
    ax[0].set_yscale("log")
    ax[0].set_xlabel("step")
    ax[0].set_ylabel(f"training loss (mean of {smooth} steps)")
    ax[0].set_title("loss: mean over seeds, band = min..max")
    ax[0].legend(fontsize=7, ncol=2)
    ax[1].axhline(0, color="k", lw=0.6)
    ax[1].set_xlabel("step")
    ax[1].set_ylabel("relative error to fp32 (%)")
    ax[1].set_title("loss relative to fp32 (paired by seed)")
    ax[1].legend(fontsize=7, ncol=2)
    q = [r for r in rows if r["recipe"] is not None]
    y = np.arange(len(q))
    bars = ax[2].barh(y, [r["rel_err_pct"] for r in q],
                      color=[colors.get(r["precision"].split("+")[0], "C7") for r in q], alpha=0.7,
                      label="this model (mean over seeds)")
    for b, r in zip(bars, q):  # the variant by hatching, as the curves' line styles
        b.set_hatch({"": "", "RHT": "//", "RHT+SR": ".."}[r["precision"].partition("+")[2]])
    starred = False
    for i, r in enumerate(q):
        ax[2].plot([r["rel_err_min_pct"], r["rel_err_max_pct"]], [i, i], color="k", lw=1)
        if r["paper_rel_err_pct"] is not None:
            ax[2].plot(r["paper_rel_err_pct"], i, "k*", ms=9, label=None if starred else "summary, 1B-30B")
            starred = True
    ax[2].set_yticks(y, [r["precision"] for r in q])
    ax[2].invert_yaxis()
    ax[2].axvline(0, color="k", lw=0.6)
    ax[2].set_xlabel("final-loss relative error to fp32 (%)")
    ax[2].set_title("final loss vs fp32 (bar: mean, line: min..max)")
    ax[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def map_runs(fn, todo: list[tuple], jobs: int, label: str, progress: bool = True) -> list:
    """[fn(*t) for t in todo], in ``jobs`` processes when jobs > 1 (spawned: no forked torch threads); a
    progress bar counts finished runs. Each run seeds itself, so the results do not depend on ``jobs``."""
    bar = Progress(len(todo), label, progress)
    if jobs <= 1:
        out = []
        for i, t in enumerate(todo):
            out.append(fn(*t))
            bar.update(i + 1)
        return out
    import concurrent.futures as cf
    import multiprocessing
    with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(fn, *t) for t in todo]
        for i, _ in enumerate(cf.as_completed(futures)):
            bar.update(i + 1)
        return [f.result() for f in futures]


def run(seeds, steps, batch, lr, warmup, threads, eval_n, tail, cfg: ModelConfig, formats=FORMATS,
        progress: bool = True, jobs: int = 1, loss_n: int = 2048) -> tuple[list[dict], list[dict]]:
    """Every precision x seed, in ``jobs`` processes; returns the runs and the summary rows."""
    todo = [(cfg, p, seed, steps, batch, lr, warmup, threads, eval_n, loss_n) for seed in seeds
            for p in precisions(formats)]
    runs = map_runs(train, todo, jobs, "fp4 pretrain (runs)", progress)
    return runs, summarize(runs, tail)


def main(argv=None) -> int:
    d = STUDY_CONFIG
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch", type=int, default=48)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1, help="torch and fp4emu threads per run")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel processes")
    ap.add_argument("--eval-n", type=int, default=200, help="held-out problems of the final exact match")
    ap.add_argument("--loss-n", type=int, default=2048, help="held-out problems of the final loss")
    ap.add_argument("--tail", type=float, default=0.1, help="share of the last steps whose mean loss is final")
    ap.add_argument("--formats", nargs="+", default=list(FORMATS))
    ap.add_argument("--hidden", type=int, default=d.hidden_size)
    ap.add_argument("--intermediate", type=int, default=d.intermediate_size)
    ap.add_argument("--layers", type=int, default=d.num_layers)
    ap.add_argument("--heads", type=int, default=d.num_heads)
    ap.add_argument("--kv-heads", type=int, default=d.num_kv_heads)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    for name in ("steps", "batch", "threads", "jobs"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be >= 1 (got {getattr(a, name)})")
    if a.batch % 4:
        ap.error(f"--batch {a.batch}: use a multiple of 4 (the token axis holds FP4 blocks of up to 64)")
    if not 0 < a.tail <= 1:
        ap.error(f"--tail {a.tail}: use a share in (0, 1]")
    bad = [f for f in a.formats if f not in SHORT]
    if bad:
        ap.error(f"--formats {bad}: use some of {list(SHORT)}")
    cfg = model_config(ap, a)
    t0 = time.monotonic()
    runs, rows = run(a.seeds, a.steps, a.batch, a.lr, a.warmup, a.threads, a.eval_n, a.tail, cfg, a.formats,
                     not a.no_progress, a.jobs, a.loss_n)
    meta = {"args": vars(a), "config": json.loads(cfg.to_json()), "parameters": num_parameters(TinyQwen(cfg)),
            "seconds": time.monotonic() - t0, "load_avg_at_end": os.getloadavg()}
    out = write_results(a.out, "fp4_pretrain", {**meta, "summary": rows, "runs": runs}, rows)
    plot(runs, rows, out / "fp4_pretrain.png", max(1, a.steps // 20))
    print(f"{meta['parameters']} parameters, {len(runs)} runs of {a.steps} steps in {meta['seconds']:.0f} s")
    for r in rows:
        print(f"  {r['precision']:<14} held-out loss {r['final_loss']:.4f}  rel. err {r['rel_err_pct']:+7.2f} % "
              f"(sd {r['rel_err_sd_pct']:.2f}, {r['rel_err_min_pct']:+.2f}..{r['rel_err_max_pct']:+.2f}); "
              f"training loss {r['train_rel_err_pct']:+.2f} % (sd {r['train_rel_err_sd_pct']:.2f})  "
              f"exact match {100 * r['exact_match']:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
