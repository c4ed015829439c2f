"""Nearest versus stochastic rounding: the bias of each FP4 format (docs/analysis.md §7).

For each recipe, the element rounding of the recipe's own round-to-nearest
("nearest": RNE for MXFP4 and NVFP4, round-half-away for HiF4 V14) and
stochastic rounding (Philox4x32-10, TransformerEngine's stream) on

  (a) the bundled activation dump (data/*.safetensors),
  (b) seeded gradient-like heavy-tailed tensors,
  (c) a long accumulation: a weight's update sum_k Q(u_k) over N steps, where
      each update u_k = drift + noise is fake-quantized on its own (a fresh
      Philox offset per step, as TE advances its rng_state) and summed in
      double, against the exact sum_k u_k.

Metrics (all sums in double, over finite pairs):
  bias      mean(Q(x) - x) / rms(x), with its standard error
  shrink    mean(sign(x) (Q(x) - x)) / mean(|x|): the magnitude bias
            (negative: Q shrinks values toward zero), with its standard error
  z         shrink / its standard error
  sr_truncation  the most SR's 8-bit rule shrinks the unclipped elements on
            average (E[SR(x)] falls short of x by less than a 2^-8 of the
            grid step), on shrink's scale: SR's shrink_unclipped lies
            between it and 0, up to sampling error
  clip      share of elements beyond their block's largest value (the top
            code, |x| > |Q_nearest(x)|): every rounding clips them, SR too, so
            `shrink_unclipped` repeats shrink without them
  acc_rel   rms over elements of (sum_k Q(u_k) - sum_k u_k) / rms(sum_k u_k)
  acc_abs   the same error in units of rms(u)
  acc_walk  the same error in units of sqrt(N) rms(u), a random walk's scale:
            flat for errors that cancel (SR), growing like sqrt(N) for a bias

Run (any build with -DFP4EMU_BUILD_PYTHON=ON):

    PYTHONPATH=build/python /usr/bin/python3 studies/sr_bias.py --out studies/results

writes sr_bias.json, sr_bias_tensors.csv, sr_bias_accumulation.csv and
sr_bias.png. The same seed gives the same bytes. ``run(quick=True)`` is the
reduced size the notebook (notebooks/sr_bias.ipynb) and the test
(python/tests/test_sr_study.py) use.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import pathlib

import numpy as np

import fp4emu

RECIPES = ["hif4.v14", "mxfp4.ocp", "mxfp4.rceil", "nvfp4.te"]
ROUNDINGS = ["nearest", "stochastic"]
ROOT = pathlib.Path(os.environ.get("FP4EMU_ROOT", pathlib.Path(__file__).resolve().parents[1]))


def quantize(x, recipe, rounding, seed, offset=0, input_dtype=None):
    """Fake-quant along the last axis: the recipe's nearest rounding, or SR with Philox (seed, offset)."""
    if rounding == "nearest":
        return fp4emu.fake_quant(x, recipe, input_dtype=input_dtype)
    return fp4emu.fake_quant(x, recipe, rounding="stochastic", seed=seed, offset=offset, input_dtype=input_dtype)


def clipped(x, recipe, input_dtype, xf, q_nearest):
    """Elements beyond their block's (HiF4: group's) largest value, which every rounding clips to it.

    The top element code (magnitude 7: E2M1 6, HiF4 S1P2 1.75) with |x|
    above |Q(x)|; xf, q_nearest: x and its nearest fake-quant as rows x cols.
    """
    p = fp4emu.quantize(x, recipe, nibble_order="low_first", input_dtype=input_dtype)
    c = np.asarray(p.codes).reshape(xf.shape[0], -1)
    mag = np.stack([c & 7, (c >> 4) & 7], axis=-1).reshape(xf.shape)
    return (mag == 7) & (np.abs(xf) > np.abs(q_nearest))


def truncation_bound(x, recipe, input_dtype, xf):
    """Per element, the most the 8-bit rule of SR rounds toward zero on average.

    SR rounds away from zero iff floor(delta * 2^8) + r >= 2^8 (delta: the
    position between the grid neighbours lo and hi, r: the random byte), so
    E[SR(x)] = lo + (hi - lo) floor(delta * 2^8) / 2^8: short of x by less
    than (hi - lo) / 2^8. r = 0 gives lo, r = 255 gives hi unless delta <
    2^-8, where the shortfall is x - lo itself.
    """
    runs = [fp4emu.fake_quant(x, recipe, rounding="stochastic", rbits=np.full(x.shape, r, np.uint8),
                              input_dtype=input_dtype).reshape(xf.shape).astype(np.float64) for r in (0, 255)]
    lo, hi = runs
    return np.where(hi != lo, np.abs(hi - lo) / 256, np.abs(xf - lo))


def tensor_metrics(x, q, clip, trunc):
    """bias, shrink (and their standard errors) of Q on x; float64 sums over finite pairs."""
    x, q = x.astype(np.float64).ravel(), q.astype(np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(q)
    x, q, clip, trunc = x[ok], q[ok], clip.ravel()[ok], trunc.ravel()[ok]
    e = q - x
    s = np.sign(x) * e
    n = x.size
    rms = math.sqrt(np.mean(x * x))
    mabs = np.mean(np.abs(x))
    keep = ~clip
    su = s[keep]
    return {
        "n": int(n),
        "bias": float(np.mean(e) / rms),
        "bias_se": float(np.std(e) / math.sqrt(n) / rms),
        "shrink": float(np.mean(s) / mabs),
        "shrink_se": float(np.std(s) / math.sqrt(n) / mabs),
        "z": float(np.mean(s) / (np.std(s) / math.sqrt(n))) if np.std(s) > 0 else 0.0,
        "clip": float(np.mean(clip)),
        "shrink_unclipped": float(np.mean(su) / mabs),
        "shrink_unclipped_se": float(np.std(su) / math.sqrt(su.size) / mabs),
        "sr_truncation": float(-np.sum(trunc[keep]) / su.size / mabs),
        "qsnr_db": float(10 * math.log10(np.sum(x * x) / np.sum(e * e))),
    }


def gradient_like(rows, cols, seed):
    """Heavy-tailed 'gradients': Student-t (3 d.o.f.) values times log-normal row and column scales, ~1e-3."""
    g = np.random.default_rng(seed)
    t = g.standard_t(3, size=(rows, cols))
    rs = np.exp(g.normal(0, 1.0, size=(rows, 1)))
    cs = np.exp(g.normal(0, 0.5, size=(1, cols)))
    return (1e-3 * t * rs * cs).astype(np.float32)


def study_tensors(tensors, recipes, seed):
    """(a) and (b): one row per tensor set x recipe x rounding, pooled over the set's tensors."""
    rows = []
    for set_name, named in tensors.items():
        for recipe in recipes:
            parts = {r: ([], [], [], []) for r in ROUNDINGS}
            for i, (name, (x, dtype)) in enumerate(named.items()):
                xf = x if dtype is None else (x.astype(np.uint32) << 16).view(np.float32)
                xf = xf.reshape(-1, xf.shape[-1])
                qn = quantize(x, recipe, "nearest", seed, input_dtype=dtype).reshape(xf.shape)
                clip = clipped(x, recipe, dtype, xf, qn)
                trunc = truncation_bound(x, recipe, dtype, xf)
                for r in ROUNDINGS:
                    q = qn if r == "nearest" else quantize(x, recipe, r, seed, i, dtype).reshape(xf.shape)
                    parts[r][0].append(xf.ravel())
                    parts[r][1].append(q.ravel())
                    parts[r][2].append(clip.ravel())
                    parts[r][3].append(trunc.ravel())
            for r in ROUNDINGS:
                xs, qs, cs, ts = (np.concatenate(p) for p in parts[r])
                rows.append({"set": set_name, "recipe": recipe, "rounding": r, **tensor_metrics(xs, qs, cs, ts)})
    return rows


def study_accumulation(recipes, steps, rows, cols, noises, seed, checkpoints, chunk=500):
    """(c): rms error of sum_k Q(u_k) against sum_k u_k after each checkpoint N, per noise x recipe x rounding.

    u_k = 1e-3 (drift + noise * eps_k): a fixed heavy-tailed drift per weight
    (Student-t, 3 d.o.f.) plus fresh N(0, 1) noise each step. Steps are
    quantized `chunk` at a time as one (chunk * rows) x cols tensor (blocks
    never span two steps); SR takes Philox offset = the chunk's first step.
    NVFP4's per-tensor amax is held at the amax of all updates (a fixed
    per-tensor scale, as a delayed-scaling recipe holds it).
    """
    out = []
    for noise in noises:
        g = np.random.default_rng([seed, int(noise * 1000)])
        drift = g.standard_t(3, size=(rows, cols))
        us = [((drift + noise * g.standard_normal((min(chunk, steps - k0), rows, cols))) * 1e-3).astype(np.float32)
              for k0 in range(0, steps, chunk)]
        amax = float(max(np.abs(u).max() for u in us))
        for recipe in recipes:
            amax_kw = {"global_amax": amax} if recipe.startswith("nvfp4") else {}
            for r in ROUNDINGS:
                exact = np.zeros((rows, cols))
                acc = np.zeros((rows, cols))
                u_sq = 0.0
                for c, u in enumerate(us):
                    flat = u.reshape(-1, cols)
                    sr = {} if r == "nearest" else {"rounding": "stochastic", "seed": seed, "offset": c * chunk}
                    q = fp4emu.fake_quant(flat, recipe, **amax_kw, **sr).reshape(u.shape).astype(np.float64)
                    ex = np.cumsum(u.astype(np.float64), axis=0) + exact
                    ac = np.cumsum(q, axis=0) + acc
                    sq = np.cumsum(np.mean(u.astype(np.float64) ** 2, axis=(1, 2))) + u_sq
                    for i in range(u.shape[0]):
                        n = c * chunk + i + 1
                        if n in checkpoints:
                            err = math.sqrt(np.mean((ac[i] - ex[i]) ** 2))
                            out.append({"noise": noise, "recipe": recipe, "rounding": r, "N": n,
                                        "acc_rel": err / math.sqrt(np.mean(ex[i] ** 2)),
                                        "acc_abs": err / math.sqrt(sq[i] / n),
                                        "acc_walk": err / math.sqrt(sq[i])})
                    exact, acc, u_sq = ex[-1], ac[-1], float(sq[-1])
    return out


def checkpoints_up_to(steps):
    """1, 2, 5, 10, 20, 50, ... up to steps (and steps)."""
    c = sorted({m * 10 ** e for e in range(7) for m in (1, 2, 5) if m * 10 ** e <= steps} | {steps})
    return c


def run(quick=False, seed=20260303, recipes=RECIPES, dump=None):
    """The whole study as a dict (quick: reduced sizes, a few seconds)."""
    dump = dump or sorted(glob.glob(str(ROOT / "data" / "*.safetensors")))[0]
    acts = fp4emu.read_tensors(dump, ["model.layers.0.*"] if quick else [])
    tensors = {
        "dump": {k: (np.asarray(v), "bf16") for k, v in acts.items()},
        "gradients": {f"g{i}": (gradient_like(64 if quick else 256, 1024, seed + i), None)
                      for i in range(2 if quick else 4)},
    }
    steps = 1000 if quick else 10_000
    cfg = {"seed": seed, "quick": quick, "dump": os.path.relpath(dump, ROOT), "steps": steps,
           "acc_shape": [4, 256] if quick else [16, 256], "noise": [0.25, 1.0]}
    return {
        "config": cfg,
        "tensors": study_tensors(tensors, recipes, seed),
        "accumulation": study_accumulation(recipes, steps, *cfg["acc_shape"], cfg["noise"], seed,
                                           set(checkpoints_up_to(steps))),
    }


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def plot(res, path):
    """Two panels: the magnitude bias per set (a, b) and the accumulated error against N (c)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recipes = list(dict.fromkeys(r["recipe"] for r in res["tensors"]))
    sets = list(dict.fromkeys(r["set"] for r in res["tensors"]))
    colors = dict(zip(recipes, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.4))

    ax = axes[0]
    width = 0.8 / len(recipes)
    for i, recipe in enumerate(recipes):
        for j, r in enumerate(ROUNDINGS):
            vals = [next(t for t in res["tensors"] if t["set"] == s and t["recipe"] == recipe
                         and t["rounding"] == r) for s in sets]
            xs = np.arange(len(sets)) * 2 + j + (i - (len(recipes) - 1) / 2) * width
            ax.bar(xs, [100 * v["shrink"] for v in vals], width, yerr=[300 * v["shrink_se"] for v in vals],
                   color=colors[recipe], alpha=1.0 if r == "nearest" else 0.45, ecolor="0.45",
                   label=recipe if j == 0 else None)
            ax.scatter(xs, [100 * v["shrink_unclipped"] for v in vals], marker="D", s=14, facecolor="white",
                       edgecolor="k", zorder=3, label="without clipped elements" if i == 0 and j == 0 else None)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks([2 * s + j for s in range(len(sets)) for j in range(2)],
                  [f"{s}\n{r}" for s in sets for r in ROUNDINGS], fontsize=8)
    ax.set_ylabel("magnitude bias mean(sign(x)(Q(x)-x)) / mean|x|  (%)")
    ax.set_title("(a, b) magnitude bias (error bars: 3 SE)", fontsize=10)

    acc = res["accumulation"]
    for k, noise in enumerate(res["config"]["noise"]):
        ax = axes[1 + k]
        pts_n = [a for a in acc if a["noise"] == noise]
        for recipe in recipes:
            for r, style in zip(ROUNDINGS, ["-", "--"]):
                pts = [a for a in pts_n if a["recipe"] == recipe and a["rounding"] == r]
                ax.loglog([a["N"] for a in pts], [a["acc_walk"] for a in pts], style, color=colors[recipe],
                          marker="o" if r == "nearest" else "x", ms=3, label=f"{recipe} {r}")
        ns = np.array(sorted({a["N"] for a in pts_n}), dtype=float)
        start = min(a["acc_walk"] for a in pts_n if a["N"] == ns[0])
        ax.loglog(ns, 0.5 * start * np.sqrt(ns / ns[0]), ":", color="k", lw=1.2,
                  label="slope 1/2: a bias (error ~ N)" if k == 0 else None)
        ax.set_xlabel("N (updates accumulated)")
        ax.set_ylabel("rms(sum Q(u) - sum u) / (sqrt(N) rms(u))")
        ax.set_title(f"(c) accumulated error, noise/drift = {noise:g}", fontsize=10)
        ax.grid(True, which="both", lw=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.suptitle("nearest (solid / dark) vs stochastic rounding (dashed / light), "
                 f"seed {res['config']['seed']}{' (quick run)' if res['config']['quick'] else ''}", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(res, out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sr_bias.json").write_text(json.dumps(res, indent=1) + "\n")
    write_csv(out / "sr_bias_tensors.csv", res["tensors"])
    write_csv(out / "sr_bias_accumulation.csv", res["accumulation"])
    plot(res, out / "sr_bias.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for sr_bias.json, the CSVs and sr_bias.png")
    ap.add_argument("--quick", action="store_true", help="reduced sizes (seconds)")
    ap.add_argument("--seed", type=int, default=20260303)
    a = ap.parse_args()
    write(run(quick=a.quick, seed=a.seed), a.out)


if __name__ == "__main__":
    main()
