"""Rollouts and scores of a TinyQwen on the arithmetic task: generation, answer log-likelihood, exact match.

Every function runs under ``torch.no_grad`` (except :func:`batch_tokens`,
which only builds tensors) in batches of ``batch_size``; the model's
linear layers may be wrapped by fp4emu.torch (the study's quantized runs).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from . import task


def batch_tokens(prompts: Sequence[str], answers: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """<bos> prompt answer <eos>, right-padded with <pad>: tokens [B, T] (int64) and the answer mask [B, T].

    mask[b, t] = 1 where logits[b, t] predict an answer token or the final
    <eos> (task.example_tokens); padding never enters a masked position's
    context because attention is causal.
    """
    rows = [task.example_tokens(p, a) for p, a in zip(prompts, answers, strict=True)]
    t = max(len(r[0]) for r in rows)
    tokens = torch.full((len(rows), t), task.PAD_ID, dtype=torch.int64)
    mask = torch.zeros((len(rows), t), dtype=torch.float32)
    for i, (toks, m) in enumerate(rows):
        tokens[i, :len(toks)] = torch.tensor(toks)
        mask[i, :len(m)] = torch.tensor(m, dtype=torch.float32)
    return tokens, mask


def token_logprobs(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """log p(tokens[:, t+1] | tokens[:, :t+1]) at every position t < T-1, and 0 at t = T-1: [B, T]."""
    logp = torch.log_softmax(model(tokens).float(), dim=-1)
    out = torch.zeros(tokens.shape, dtype=torch.float32)
    out[:, :-1] = logp[:, :-1].gather(-1, tokens[:, 1:, None]).squeeze(-1)
    return out


@torch.no_grad()
def generate(model: torch.nn.Module, prompts: Sequence[str], max_new_tokens: int = task.MAX_ANSWER_LEN + 1,
             greedy: bool = True, temperature: float = 1.0, generator: Optional[torch.Generator] = None,
             batch_size: int = 512) -> list[str]:
    """Completions of ``prompts`` (text up to <eos>, which is not included), in order.

    Greedy: argmax at every step (ties to the lower token id). Otherwise
    samples from softmax(logits / temperature) with ``generator`` (a seeded
    ``torch.Generator`` reproduces the same completions). Prompts are
    grouped by length, so each batch needs no padding; a batch stops when
    every row has produced <eos> or after ``max_new_tokens``.
    """
    if not greedy and temperature <= 0:
        raise ValueError(f"temperature={temperature} must be > 0 when sampling (or use greedy=True)")
    out: list[Optional[str]] = [None] * len(prompts)
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    for idx in by_len.values():
        for s in range(0, len(idx), batch_size):
            chunk = idx[s:s + batch_size]
            seq = torch.tensor([[task.BOS_ID, *task.encode(prompts[i])] for i in chunk], dtype=torch.int64)
            start = seq.shape[1]
            done = torch.zeros(len(chunk), dtype=torch.bool)
            for _ in range(max_new_tokens):
                logits = model(seq)[:, -1].float()
                if greedy:
                    nxt = logits.argmax(-1)
                else:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
                nxt = torch.where(done, torch.full_like(nxt, task.EOS_ID), nxt)
                seq = torch.cat([seq, nxt[:, None]], dim=1)
                done |= nxt == task.EOS_ID
                if bool(done.all()):
                    break
            for j, i in enumerate(chunk):
                out[i] = task.decode(seq[j, start:].tolist())
    return out  # type: ignore[return-value]


@torch.no_grad()
def answer_logprob(model: torch.nn.Module, prompts: Sequence[str], answers: Sequence[str],
                   batch_size: int = 512) -> torch.Tensor:
    """Per example, the mean log-likelihood per token of the reference answer and its <eos>: [N] float32."""
    res = []
    for s in range(0, len(prompts), batch_size):
        tokens, mask = batch_tokens(prompts[s:s + batch_size], answers[s:s + batch_size])
        lp = token_logprobs(model, tokens)
        res.append((lp * mask).sum(1) / mask.sum(1))
    return torch.cat(res) if res else torch.zeros(0)


def exact_match(model: torch.nn.Module, split: Sequence[tuple[str, str]], batch_size: int = 512) -> float:
    """The share of (prompt, answer) pairs whose greedy completion is exactly the answer."""
    if not split:
        raise ValueError("exact_match of an empty split")
    prompts = [p for p, _ in split]
    comps = generate(model, prompts, batch_size=batch_size)
    return sum(task.reward(p, c) for p, c in zip(prompts, comps)) / len(split)
