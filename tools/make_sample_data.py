#!/usr/bin/python3
"""Writes data/sample_activations.npy: a small, seeded, LLM-like activation
tensor (tokens x hidden, fp32 values that are exact in bf16).

Shape of the data, as seen in linear-layer inputs of LLMs: a Gaussian body,
a few persistent outlier channels tens of times larger, and a first token with
massive activations. Values are rounded to bf16 so every recipe, including
the bf16-only hif4.a6, accepts the file.

Regenerate with: /usr/bin/python3 tools/make_sample_data.py (same bytes every run).
"""
import pathlib

import numpy as np

TOKENS, HIDDEN, SEED = 256, 1024, 20261202
OUTLIER_CHANNELS = (7, 300, 777, 1000)


def bf16_round(x: np.ndarray) -> np.ndarray:
    """Round fp32 to the nearest bf16 (ties to even), returned as fp32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def main() -> None:
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((TOKENS, HIDDEN))
    for c in OUTLIER_CHANNELS:
        x[:, c] *= rng.uniform(20.0, 60.0)
    x[0, :] *= 8.0  # massive-activation first token
    out = pathlib.Path(__file__).resolve().parent.parent / "data" / "sample_activations.npy"
    np.save(out, bf16_round(x.astype(np.float32)))
    print(f"wrote {out} {TOKENS}x{HIDDEN}")


if __name__ == "__main__":
    main()
