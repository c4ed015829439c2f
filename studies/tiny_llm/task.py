"""A seeded arithmetic task with exact-match answers, and its character tokenizer.

Prompts have one fixed width, ``dd<op>dd=`` (operands zero-padded to two
digits), so that a batch of prompts needs no padding and every position
means the same thing in every example; answers are the plain decimal result
(``-`` for a negative one, no padding), followed by ``<eos>``:

    "23+45="  -> "68"      a, b in [0, 99]
    "23-45="  -> "-22"     a, b in [0, 99]
    "23*07="  -> "161"     a in [0, 99], b in [0, 9] (the hard part: imperfect on purpose)

The splits are disjoint by construction: a problem's bucket is the CRC-32 of
its prompt modulo 10; bucket 0 is the held-out ``test`` split, bucket 1 the
``calib`` split (SmoothQuant calibration, a batch the test never sees),
buckets 2-9 ``train``. The same (name, n, seed) gives the same list on every
machine (Python's ``random.Random`` with an integer seed, and CRC-32).
"""
from __future__ import annotations

import random
import zlib

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
VOCAB: list[str] = [PAD, BOS, EOS, *"0123456789", "+", "-", "*", "="]
_INDEX = {s: i for i, s in enumerate(VOCAB)}
PAD_ID, BOS_ID, EOS_ID = _INDEX[PAD], _INDEX[BOS], _INDEX[EOS]

OPS = ("+", "-", "*")
DIGITS = 2
PROMPT_LEN = 2 * DIGITS + 2   # "dd?dd="
MAX_ANSWER_LEN = 3            # "-99", "198", "891"
SPLITS = {"test": (0,), "calib": (1,), "train": tuple(range(2, 10))}


def encode(text: str) -> list[int]:
    """Token ids of the characters of ``text`` (no <bos>/<eos> added)."""
    try:
        return [_INDEX[c] for c in text]
    except KeyError as e:
        raise ValueError(f"character {e.args[0]!r} is not in the task's vocabulary {VOCAB[3:]}") from None


def decode(tokens: list[int]) -> str:
    """The text of ``tokens`` up to the first <eos>; <bos> and <pad> are dropped."""
    out = []
    for t in tokens:
        t = int(t)
        if t == EOS_ID:
            break
        if t not in (PAD_ID, BOS_ID):
            out.append(VOCAB[t])
    return "".join(out)


def solve(prompt: str) -> str:
    """The exact answer of a prompt ``dd<op>dd=``."""
    d = DIGITS
    if len(prompt) != PROMPT_LEN or prompt[d] not in OPS or prompt[-1] != "=" or \
            not (prompt[:d] + prompt[d + 1:-1]).isdigit():
        raise ValueError(f"prompt {prompt!r} is not of the form dd<op>dd= with op in {OPS}")
    a, op, b = int(prompt[:d]), prompt[d], int(prompt[d + 1:-1])
    return str(a + b if op == "+" else a - b if op == "-" else a * b)


def bucket(prompt: str) -> int:
    return zlib.crc32(prompt.encode()) % 10


def split_of(prompt: str) -> str:
    b = bucket(prompt)
    return next(name for name, bs in SPLITS.items() if b in bs)


def _draw(rng: random.Random) -> str:
    op = OPS[rng.randrange(3)]
    return f"{rng.randint(0, 99):02d}{op}{rng.randint(0, 9 if op == '*' else 99):02d}="


def make_split(name: str, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` (prompt, answer) pairs of split ``name`` ("train", "test" or "calib"), drawn with ``seed``.

    Operators are equally likely; a drawn problem of another split is
    rejected, so the splits never share a prompt. Pairs may repeat within a
    split (the test split holds about 2 100 distinct problems).
    """
    if name not in SPLITS:
        raise ValueError(f"split {name!r} is unknown; use one of {sorted(SPLITS)}")
    rng = random.Random(f"tiny_llm:{name}:{seed}")
    out = []
    while len(out) < n:
        p = _draw(rng)
        if bucket(p) in SPLITS[name]:
            out.append((p, solve(p)))
    return out


def reward(prompt: str, completion: str) -> float:
    """1.0 when ``completion`` (text up to <eos>, surrounding spaces ignored) is the exact answer, else 0.0."""
    return 1.0 if completion.strip() == solve(prompt) else 0.0


def example_tokens(prompt: str, answer: str) -> tuple[list[int], list[int]]:
    """<bos> prompt answer <eos> as ids, and the 0/1 mask of the positions whose next token is the answer's.

    mask[t] = 1 where the model, reading tokens[:t+1], predicts an answer
    character or the final <eos> (the supervised targets).
    """
    toks = [BOS_ID, *encode(prompt), *encode(answer), EOS_ID]
    start = 1 + len(prompt)  # index of the first answer token
    mask = [1 if start - 1 <= t < len(toks) - 1 else 0 for t in range(len(toks))]
    return toks, mask


def op_of(prompt: str) -> str:
    """The operator of a prompt."""
    return prompt[DIGITS]


def problems(name: str) -> list[tuple[str, str]]:
    """Every distinct (prompt, answer) of split ``name``, in prompt order (the test split: 2 165 problems)."""
    if name not in SPLITS:
        raise ValueError(f"split {name!r} is unknown; use one of {sorted(SPLITS)}")
    out = []
    for op in OPS:
        for a in range(100):
            for b in range(10 if op == "*" else 100):
                p = f"{a:02d}{op}{b:02d}="
                if bucket(p) in SPLITS[name]:
                    out.append((p, solve(p)))
    return sorted(out)
