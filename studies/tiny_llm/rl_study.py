"""Study 2: FP4 RL fine-tuning of the pre-trained TinyQwen, the paper's training curves in miniature.

A GRPO-style loop, no critic: each step samples ``--prompts`` training
problems, ``--group`` completions each (temperature ``--temperature``, a
seeded generator) from the *rollout* model; the verifiable reward is exact
match (task.reward); advantages are group-normalised, (r - mean) / (std +
1e-4) within each prompt's group; the *training* model then takes
``--epochs`` AdamW steps (``--lr`` 1e-5, optional linear ``--warmup``: at
1e-4 and above the fp32 policy drifts down here; 3e-5 or 4x the prompts
gain no more in 100 steps, docs/analysis.md §8.3) on the clipped policy loss
-min(rho A, clip(rho, 1 - eps, 1 + eps) A), rho = p_new / p_old per completion
token (p_old: the training model before the step's updates), averaged over
the completion tokens.

Precisions, as the paper places them:
  fp32           rollout fp32, training fp32
  HiF4, MXFP4    rollout W4A4 (every linear's input and weight fake-quantized,
                 fp4emu.torch.quantize_linear_inputs), training with all three
                 GEMMs in FP4 (fp4emu.torch.Fp4Linear: the quantizers pass the
                 gradient straight through to the fp32 master weights)
  ...+ResQ       the same, the rollout inputs as Rollout-ResQ 2:4,
                 Q(X) + S_2:4(Q(X - Q(X)))
  ...-fp32train  the control: rollout W4A4, training fp32 (a mismatch
                 between the policy that samples and the one trained)

Held-out greedy exact match every ``--eval-every`` steps with the rollout
model (the policy as deployed), on ``--eval-n`` test problems, and the mean
reward per step, for each seed.

    PYTHONPATH=build/python /usr/bin/python3 -m studies.tiny_llm.rl_study --seeds 0 1 2 --jobs 2

(the defaults are the run of docs/analysis.md §8.3: 120 steps, exact match on
1000 test problems every 30 steps) reads data/tiny_llm_1m/model.safetensors and
writes rl.{json,csv,png} to ``--out`` (studies/results/tiny_llm/1m). The same
seeds, sizes and thread count give the same numbers, whatever ``--jobs``.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import statistics
import sys
import time
from typing import Optional

import torch

import fp4emu.torch as ft

from . import task
from .fp4_linear import SEQ_LEN, SHORT
from .generate import exact_match, token_logprobs
from .model import load
from .fp4_pretrain_study import map_runs
from .pretrain import CHECKPOINT, RESULTS, setup_torch, write_results



@dataclasses.dataclass(frozen=True)
class Setting:
    """Where FP4 sits: the rollout's recipe (W4A4, optional ResQ pattern) and the training's."""
    name: str
    rollout: Optional[str] = None
    residual: Optional[str] = None
    train: Optional[str] = None


def settings(formats=("hif4.v14", "mxfp4.ocp")) -> list[Setting]:
    out = [Setting("fp32")]
    for f in formats:
        n = SHORT[f]
        out += [Setting(n, f, None, f), Setting(f"{n}+ResQ", f, "2:4", f), Setting(f"{n}-fp32train", f, None, None)]
    return out


def build_models(ckpt, s: Setting, seed: int, threads: int, train_sr: bool = False):
    """The training model (every linear an Fp4Linear; recipe None is nn.Linear's GEMMs) and the rollout model,
    whose state dict has the same names, so the rollout takes the trained weights with load_state_dict."""
    policy = load(ckpt)
    ft.fp4_training(policy, s.train, modules="*", sr=train_sr, seed=seed, threads=threads)
    rollout = load(ckpt)
    if s.rollout is None:
        ft.fp4_training(rollout, None, modules="*")
    else:
        ft.quantize_linear_inputs(rollout, s.rollout, modules="*", residual=s.residual, weights=True,
                                  threads=threads)
    rollout.eval()
    return policy, rollout


@torch.no_grad()
def sample(model, prompts: list[str], group: int, temperature: float, gen: torch.Generator):
    """``group`` sampled completions per prompt: tokens [P*G, SEQ_LEN] (<bos> prompt completion, <pad> after
    <eos>), the mask of positions whose next token was sampled (up to and including <eos>), and the texts."""
    rows = [[task.BOS_ID, *task.encode(p)] for p in prompts for _ in range(group)]
    seq = torch.tensor(rows, dtype=torch.int64)
    start = seq.shape[1]
    done = torch.zeros(len(rows), dtype=torch.bool)
    mask = torch.zeros(len(rows), SEQ_LEN, dtype=torch.float32)
    for t in range(SEQ_LEN - start):
        probs = torch.softmax(model(seq)[:, -1].float() / temperature, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
        nxt = torch.where(done, torch.full_like(nxt, task.PAD_ID), nxt)
        mask[:, start + t - 1] = (~done).float()
        seq = torch.cat([seq, nxt[:, None]], dim=1)
        done |= nxt == task.EOS_ID
        if bool(done.all()):
            break
    seq = torch.nn.functional.pad(seq, (0, SEQ_LEN - seq.shape[1]), value=task.PAD_ID)
    texts = [_completion_text(r[start:].tolist()) for r in seq]
    return seq, mask, texts


def _completion_text(tokens: list[int]) -> str:
    """The completion up to <eos>; a <pad> or <bos> sampled before it makes the text "?" (reward 0), so the
    policy cannot earn a reward with tokens that task.decode would silently drop."""
    body = tokens[:tokens.index(task.EOS_ID)] if task.EOS_ID in tokens else tokens
    return "?" if any(t in (task.PAD_ID, task.BOS_ID) for t in body) else task.decode(body)


def group_advantages(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """(r - group mean) / (group std + 1e-4): one value per completion; 0 where a group's rewards are equal."""
    r = rewards.view(-1, group)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, unbiased=False, keepdim=True) + 1e-4)).view(-1)


def policy_loss(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                clip: float) -> torch.Tensor:
    """The clipped surrogate, averaged over the sampled tokens (mask), negated for minimisation."""
    ratio = torch.exp(logp - logp_old)
    a = adv[:, None]
    obj = torch.minimum(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a)
    return -(obj * mask).sum() / mask.sum()


def train_run(ckpt, s: Setting, seed: int, steps: int, prompts: int, group: int, lr: float, epochs: int,
              clip: float, temperature: float, threads: int, eval_every: int, eval_n: int,
              train_sr: bool = False, warmup: int = 0) -> dict:
    setup_torch(seed, threads)
    policy, rollout = build_models(ckpt, s, seed, threads, train_sr)
    opt = torch.optim.AdamW(policy.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    evalset = task.make_split("test", eval_n, 4242)
    log = {"setting": s.name, "rollout": s.rollout, "residual": s.residual, "train": s.train, "seed": seed,
           "reward": [], "eval": [], "seconds": {"rollout": 0.0, "train": 0.0, "eval": 0.0}}

    def evaluate(step):
        t = time.monotonic()
        log["eval"].append({"step": step, "exact_match": exact_match(rollout, evalset)})
        log["seconds"]["eval"] += time.monotonic() - t

    evaluate(0)
    for step in range(steps):
        t = time.monotonic()
        rollout.load_state_dict(policy.state_dict())
        batch = [p for p, _ in task.make_split("train", prompts, seed * 1_000_003 + 500_000 + step)]
        tokens, mask, texts = sample(rollout, batch, group, temperature, gen)
        rewards = torch.tensor([task.reward(p, c) for p, c in zip([p for p in batch for _ in range(group)], texts)])
        adv = group_advantages(rewards, group)
        log["seconds"]["rollout"] += time.monotonic() - t
        t = time.monotonic()
        for g in opt.param_groups:  # linear warm-up, then constant
            g["lr"] = lr * min(1.0, (step + 1) / max(1, warmup))
        policy.train()
        with torch.no_grad():
            logp_old = token_logprobs(policy, tokens)
        for _ in range(epochs):
            loss = policy_loss(token_logprobs(policy, tokens), logp_old, adv, mask, clip)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
        log["seconds"]["train"] += time.monotonic() - t
        log["reward"].append(float(rewards.mean()))
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            rollout.load_state_dict(policy.state_dict())
            evaluate(step + 1)
    return log


def summarize(runs: list[dict]) -> list[dict]:
    rows = []
    for name in dict.fromkeys(r["setting"] for r in runs):
        rs = [r for r in runs if r["setting"] == name]
        first = [r["eval"][0]["exact_match"] for r in rs]
        last = [r["eval"][-1]["exact_match"] for r in rs]
        gain = [b - a for a, b in zip(first, last)]
        k = max(1, len(rs[0]["reward"]) // 5)
        rew = [statistics.fmean(r["reward"][-k:]) for r in rs]
        secs = [sum(r["seconds"].values()) / max(1, len(r["reward"])) for r in rs]
        rows.append({"setting": name, "rollout": rs[0]["rollout"], "residual": rs[0]["residual"],
                     "train": rs[0]["train"], "seeds": len(rs), "em_start": statistics.fmean(first),
                     "em_end": statistics.fmean(last), "em_gain": statistics.fmean(gain),
                     "em_gain_sd": statistics.stdev(gain) if len(gain) > 1 else float("nan"),
                     "em_gain_min": min(gain), "em_gain_max": max(gain),
                     "reward_end": statistics.fmean(rew), "seconds_per_step": statistics.fmean(secs)})
    return rows


def plot(runs: list[dict], rows: list[dict], path: pathlib.Path, smooth: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    colors = {"fp32": "k", "HiF4": "C0", "MXFP4": "C3", "NVFP4": "C2", "MXFP4-rceil": "C1"}
    styles = {"": "-", "+ResQ": "--", "-fp32train": ":"}
    fig, ax = plt.subplots(1, 2, figsize=(13, 5.2))
    kern = np.ones(smooth) / smooth
    for r0 in rows:
        name = r0["setting"]
        fmt = "fp32" if r0["rollout"] is None else SHORT[r0["rollout"]]
        var = "+ResQ" if r0["residual"] else "-fp32train" if r0["rollout"] and r0["train"] is None else ""
        c, ls = colors.get(fmt, "C7"), styles[var]
        rs = [r for r in runs if r["setting"] == name]
        rew = np.array([np.convolve(r["reward"], kern, "valid") for r in rs])
        x = np.arange(smooth, smooth + rew.shape[1])
        ax[0].plot(x, rew.mean(0), ls, color=c, lw=1.2, label=name)
        ax[0].fill_between(x, rew.min(0), rew.max(0), color=c, alpha=0.1)
        em = np.array([[100 * e["exact_match"] for e in r["eval"]] for r in rs])
        xs = [e["step"] for e in rs[0]["eval"]]
        ax[1].plot(xs, em.mean(0), ls, marker="o", ms=3, color=c, lw=1.2, label=name)
        ax[1].fill_between(xs, em.min(0), em.max(0), color=c, alpha=0.1)
    ax[0].set_xlabel("RL step")
    ax[0].set_ylabel(f"mean reward of the rollouts (mean of {smooth} steps)")
    ax[0].set_title("training reward: mean over seeds, band = min..max")
    ax[1].set_xlabel("RL step")
    ax[1].set_ylabel("held-out greedy exact match (%), rollout precision")
    ax[1].set_title("held-out accuracy: mean over seeds, band = min..max")
    # One legend under both panels, so that it hides no curve.
    fig.legend(*ax[1].get_legend_handles_labels(), loc="lower center", ncol=len(rows), fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(ckpt, seeds, steps, prompts, group, lr, epochs, clip, temperature, threads, eval_every, eval_n,
        formats=("hif4.v14", "mxfp4.ocp"), names=None, progress=True, train_sr=False, jobs=1, warmup=0):
    """Every setting x seed, in ``jobs`` processes; returns the runs and the summary rows."""
    sets = [s for s in settings(formats) if names is None or s.name in names]
    todo = [(str(ckpt), s, seed, steps, prompts, group, lr, epochs, clip, temperature, threads, eval_every, eval_n,
             train_sr, warmup) for seed in seeds for s in sets]
    runs = map_runs(train_run, todo, jobs, "rl (runs)", progress)
    return runs, summarize(runs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=str(CHECKPOINT))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step")
    ap.add_argument("--group", type=int, default=8, help="completions per prompt (a multiple of 4 with --prompts)")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--warmup", type=int, default=0, help="steps of linear learning-rate warm-up")
    ap.add_argument("--epochs", type=int, default=2, help="policy updates per rollout batch")
    ap.add_argument("--clip", type=float, default=0.2)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1, help="torch and fp4emu threads per run")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel processes")
    ap.add_argument("--eval-every", type=int, default=30)
    ap.add_argument("--eval-n", type=int, default=1000)
    ap.add_argument("--formats", nargs="+", default=["hif4.v14", "mxfp4.ocp"])
    ap.add_argument("--settings", nargs="+", default=None, help="only these settings (names as in the table)")
    ap.add_argument("--train-sr", action="store_true", help="stochastic rounding of the FP4 training gradients")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    for name in ("steps", "prompts", "group", "epochs", "threads", "jobs", "eval_every", "eval_n"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    if a.warmup < 0:
        ap.error(f"--warmup must be >= 0 (got {a.warmup})")
    if a.prompts * a.group % 4:
        ap.error(f"--prompts {a.prompts} x --group {a.group} must be a multiple of 4 (token-axis FP4 blocks of 64)")
    if set(a.formats) - set(SHORT):
        ap.error(f"--formats {sorted(set(a.formats) - set(SHORT))}: use some of {list(SHORT)}")
    known = [s.name for s in settings(a.formats)]
    if a.settings and set(a.settings) - set(known):
        ap.error(f"--settings {sorted(set(a.settings) - set(known))} unknown; use some of {known}")
    if not pathlib.Path(a.checkpoint).is_file():
        ap.error(f"--checkpoint {a.checkpoint} does not exist; run studies.tiny_llm.pretrain first")
    t0 = time.monotonic()
    runs, rows = run(a.checkpoint, a.seeds, a.steps, a.prompts, a.group, a.lr, a.epochs, a.clip, a.temperature,
                     a.threads, a.eval_every, a.eval_n, a.formats, a.settings, not a.no_progress, a.train_sr, a.jobs,
                     a.warmup)
    meta = {"args": vars(a), "seconds": time.monotonic() - t0, "load_avg_at_end": os.getloadavg()}
    out = write_results(a.out, "rl", {**meta, "summary": rows, "runs": runs}, rows)
    plot(runs, rows, out / "rl.png", max(1, a.steps // 10))
    print(f"{len(runs)} runs of {a.steps} steps in {meta['seconds']:.0f} s")
    for r in rows:
        print(f"  {r['setting']:<16} exact match {100 * r['em_start']:.1f} -> {100 * r['em_end']:.1f} % "
              f"(gain {100 * r['em_gain']:+.1f}, {100 * r['em_gain_min']:+.1f}..{100 * r['em_gain_max']:+.1f}), "
              f"reward {r['reward_end']:.3f}, {r['seconds_per_step']:.2f} s/step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
