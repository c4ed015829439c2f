"""Supervised fp32 pre-training of TinyQwen on the arithmetic task: the checkpoint the studies start from.

Each step draws a fresh batch of the ``train`` split (task.make_split with
seed ``seed * 1_000_003 + step``), and minimises the mean cross-entropy of
the answer tokens and the final <eos> (the prompt is context, not target),
with AdamW, linear warm-up and cosine decay, gradients clipped to norm 1.
Every ``--eval-every`` steps, greedy exact match on a fixed slice of the
held-out ``test`` split. The same seed and thread count give the same
weights bit for bit (deterministic algorithms, one fixed thread count).

    PYTHONPATH=build/python /usr/bin/python3 -m studies.tiny_llm.pretrain

trains the studies' model (model.STUDY_CONFIG, 1 000 steps) and writes
data/tiny_llm_1m/model.safetensors (+ config.json) and
studies/results/tiny_llm/1m/pretrain.{json,csv,png}: runtime, loss curve and
the final exact match per operator on ``--final-n`` test problems. The
first, 124k-parameter checkpoint (data/tiny_llm/) is ``--steps 1500 --hidden
64 --intermediate 256 --layers 2 --heads 2 --kv-heads 1 --checkpoint
data/tiny_llm/model.safetensors --out studies/results/tiny_llm``.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import pathlib
import sys
import time

import torch

from . import task
from .generate import batch_tokens, exact_match, token_logprobs
from .model import STUDY_CONFIG, ModelConfig, TinyQwen, num_parameters, save

ROOT = pathlib.Path(os.environ.get("FP4EMU_ROOT", pathlib.Path(__file__).resolve().parents[2]))
# The studies' checkpoint and results folder (the 987 392-parameter model.STUDY_CONFIG); every study's default.
CHECKPOINT = ROOT / "data" / "tiny_llm_1m" / "model.safetensors"
RESULTS = ROOT / "studies" / "results" / "tiny_llm" / "1m"


class Progress:
    """A one-line progress bar on stderr: done/total, elapsed, ETA and a status text."""

    def __init__(self, total: int, label: str, enabled: bool = True):
        self.total, self.label, self.enabled = total, label, enabled
        self.start = time.monotonic()

    def update(self, done: int, status: str = "") -> None:
        if not self.enabled:
            return
        el = time.monotonic() - self.start
        eta = el / done * (self.total - done) if done else 0.0
        bar = "#" * int(30 * done / self.total)
        sys.stderr.write(f"\r{self.label} [{bar:<30}] {done}/{self.total} {el:5.0f}s eta {eta:5.0f}s {status}   ")
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def setup_torch(seed: int, threads: int) -> None:
    """Seeded, deterministic torch on ``threads`` threads (the same numbers on a re-run)."""
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def model_config(ap: argparse.ArgumentParser, a: argparse.Namespace) -> ModelConfig:
    """The model of the --hidden, --intermediate, --layers, --heads and --kv-heads options; a bad one is a usage
    error."""
    try:
        cfg = ModelConfig(vocab_size=len(task.VOCAB), hidden_size=a.hidden, intermediate_size=a.intermediate,
                          num_layers=a.layers, num_heads=a.heads, num_kv_heads=a.kv_heads)
        cfg.check()
    except ValueError as e:
        ap.error(str(e))
    return cfg


def portable_args(args: dict) -> dict:
    """``args`` with every absolute path made relative to the repository, or left out when it lies outside
    (a scratch ``--out`` in /tmp): a committed results JSON then reads the same on every clone."""
    res = {}
    for k, v in args.items():
        if isinstance(v, str) and os.path.isabs(v):
            p = pathlib.Path(v).resolve()
            if not p.is_relative_to(ROOT.resolve()):
                continue
            v = str(p.relative_to(ROOT.resolve()))
        res[k] = v
    return res


def write_results(out: str | pathlib.Path, stem: str, payload: dict, rows: list[dict]) -> pathlib.Path:
    """Writes ``payload`` to <stem>.json and ``rows`` (dicts with the same keys) to <stem>.csv in ``out``;
    the paths in ``payload["args"]`` as :func:`portable_args` records them."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if "args" in payload:
        payload = {**payload, "args": portable_args(payload["args"])}
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=1) + "\n")
    with open(out / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return out


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, lr: float, tokens: torch.Tensor,
               mask: torch.Tensor) -> float:
    """One AdamW step at learning rate ``lr`` on the answer cross-entropy of a batch; returns the loss."""
    for g in opt.param_groups:
        g["lr"] = lr
    model.train()
    loss = -(token_logprobs(model, tokens) * mask).sum() / mask.sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss)


def per_op_exact_match(model: torch.nn.Module, split: list[tuple[str, str]]) -> dict[str, float]:
    res = {"all": exact_match(model, split)}
    for op in task.OPS:
        sub = [e for e in split if task.op_of(e[0]) == op]
        res[op] = exact_match(model, sub) if sub else float("nan")
    return res


def pretrain(cfg: ModelConfig, steps: int, batch: int, lr: float, seed: int, threads: int,
             eval_every: int, eval_n: int, warmup: int = 100, progress: bool = True) -> tuple[TinyQwen, dict]:
    """Train from scratch; returns the model and the log (loss per step, evaluations, runtime)."""
    setup_torch(seed, threads)
    model = TinyQwen(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    evalset = task.make_split("test", eval_n, seed)
    log: dict = {"loss": [], "eval": []}
    bar = Progress(steps, "pretrain", progress)
    t0 = time.monotonic()
    for step in range(steps):
        prompts, answers = zip(*task.make_split("train", batch, seed * 1_000_003 + step))
        loss = train_step(model, opt, lr_at(step, steps, lr, warmup), *batch_tokens(prompts, answers))
        log["loss"].append(loss)
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            model.eval()
            em = exact_match(model, evalset)
            log["eval"].append({"step": step + 1, "exact_match": em, "seconds": time.monotonic() - t0})
        last = log["eval"][-1]["exact_match"] if log["eval"] else float("nan")
        bar.update(step + 1, f"loss {loss:.3f} em {last:.3f}")
    log["train_seconds"] = time.monotonic() - t0
    model.eval()
    return model, log


def plot(log: dict, path: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    loss = torch.tensor(log["loss"])
    k = max(1, len(loss) // 100)
    smooth = loss.unfold(0, k, 1).mean(1) if len(loss) >= k else loss
    ax[0].plot(range(1, len(loss) + 1), loss.numpy(), color="0.8", lw=0.6, label="per step")
    ax[0].plot(range(k, len(loss) + 1), smooth.numpy(), color="C0", label=f"mean of {k}")
    ax[0].set_yscale("log")
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("answer cross-entropy (nats/token)")
    ax[0].set_title("pre-training loss (fp32)")
    ax[0].legend()
    ev = log["eval"]
    ax[1].plot([e["step"] for e in ev], [100 * e["exact_match"] for e in ev], "o-", color="C1")
    ax[1].set_xlabel("step")
    ax[1].set_ylabel("greedy exact match (%)")
    ax[1].set_ylim(0, 100)
    ax[1].set_title(f"held-out exact match ({log['args']['eval_n']} test problems)")
    ax[1].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    d = STUDY_CONFIG
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the checkpoint: 1; bits depend on it)")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-n", type=int, default=300)
    ap.add_argument("--final-n", type=int, default=3000, help="test problems of the final exact match")
    ap.add_argument("--hidden", type=int, default=d.hidden_size)
    ap.add_argument("--intermediate", type=int, default=d.intermediate_size)
    ap.add_argument("--layers", type=int, default=d.num_layers)
    ap.add_argument("--heads", type=int, default=d.num_heads)
    ap.add_argument("--kv-heads", type=int, default=d.num_kv_heads)
    ap.add_argument("--checkpoint", default=str(CHECKPOINT))
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    for name in ("steps", "batch", "threads", "eval_every", "eval_n", "final_n"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1 (got {getattr(a, name)})")
    cfg = model_config(ap, a)
    model, log = pretrain(cfg, a.steps, a.batch, a.lr, a.seed, a.threads, a.eval_every, a.eval_n, a.warmup,
                          not a.no_progress)
    t = time.monotonic()
    final = per_op_exact_match(model, task.make_split("test", a.final_n, 12345))
    log.update(args=portable_args(vars(a)), config=json.loads(cfg.to_json()), parameters=num_parameters(model),
               final_exact_match=final, final_eval_seconds=time.monotonic() - t, load_avg=os.getloadavg())
    save(model, a.checkpoint)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pretrain.json").write_text(json.dumps(log, indent=1) + "\n")
    with open(out / "pretrain.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "exact_match"])
        ev = {e["step"]: e["exact_match"] for e in log["eval"]}
        for i, l in enumerate(log["loss"], 1):
            w.writerow([i, f"{l:.6f}", "" if i not in ev else f"{ev[i]:.4f}"])
    plot(log, out / "pretrain.png")
    print(f"{num_parameters(model)} parameters, {a.steps} steps in {log['train_seconds']:.0f} s; "
          f"exact match on {a.final_n} test problems: " + ", ".join(f"{k} {100 * v:.1f} %" for k, v in final.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
