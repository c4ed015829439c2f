"""FP4 training of TinyQwen's linear layers: the study-side names for fp4emu.torch's all-three-GEMMs linear.

The layer itself lives in fp4emu.torch (:class:`fp4emu.torch.Fp4Linear`,
:func:`fp4emu.torch.fp4_training`), where any PyTorch model can use it:
forward Y = Q(X) Q(W)^T (blocks along in_features), input gradient
dX = Q(dY) Q(W) (along out_features), weight gradient dW = Q(dY^T) Q(X^T)
(along the tokens), with an optional RHT of both weight-gradient operands
and stochastic rounding of dY. This module adds what the studies share: the
named training precisions and the padding of a batch to a token count the
token-axis blocks divide.
"""
from __future__ import annotations

import ctypes
import dataclasses
from typing import Optional

import torch

import fp4emu.torch as ft

from . import task
from .generate import batch_tokens

# Rows of the summary's ablation: every format pure, + RHT on the weight-gradient inputs,
# + SR on the gradients (with the RHT, as TransformerEngine's NVFP4 recipe combines them).
FORMATS = ("hif4.v14", "mxfp4.ocp", "nvfp4.te")
# Short names in tables and plots; mxfp4.rceil (the round-up scale, which never clips) on request.
SHORT = {"hif4.v14": "HiF4", "mxfp4.ocp": "MXFP4", "nvfp4.te": "NVFP4", "mxfp4.rceil": "MXFP4-rceil"}
RHT_SIZE = 16  # TransformerEngine's size, with its sign vector (fp4emu.rht signs="te")
# <bos> prompt answer <eos> padded to 16 tokens: B x 16 tokens hold the blocks of 64 along the
# token axis (weight gradient) for any batch B that is a multiple of 4.
SEQ_LEN = 16
assert 2 + task.PROMPT_LEN + task.MAX_ANSWER_LEN <= SEQ_LEN


@dataclasses.dataclass(frozen=True)
class Precision:
    """How a model's linear layers train: ``recipe=None`` is fp32."""
    name: str
    recipe: Optional[str] = None
    rht: bool = False
    sr: bool = False

    def apply(self, model: torch.nn.Module, seed: int, threads: int = 1) -> list[str]:
        """Wrap every linear of ``model`` in an fp4emu.torch.Fp4Linear (nothing for fp32); returns the names."""
        if self.recipe is None:
            return []
        return ft.fp4_training(model, self.recipe, modules="*", rht=RHT_SIZE if self.rht else None,
                               rht_signs="te", sr=self.sr, seed=seed, threads=threads)


def precisions(formats=FORMATS) -> list[Precision]:
    """fp32, then for each format: pure FP4, + RHT, + RHT + SR."""
    out = [Precision("fp32")]
    for f in formats:
        n = SHORT[f]
        out += [Precision(f"{n}", f), Precision(f"{n}+RHT", f, rht=True), Precision(f"{n}+RHT+SR", f, True, True)]
    return out


def blas_threads(n: int) -> bool:
    """Run OpenBLAS (Debian torch's matmul backend) on ``n`` threads; False when torch does not use it.

    torch.set_num_threads does not reach it, and its idle workers spin in sched_yield after every
    product: a profiled FP4 step of the 124 K model spent a fifth of its samples there (docs/analysis.md
    §8.4). Its products split rows and columns, never the reduction, so the numbers do not change."""
    import torch  # noqa: F401  (loads the library)
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/libopenblas" in line}
    for path in sorted(paths):
        ctypes.CDLL(path).openblas_set_num_threads(int(n))
    return bool(paths)


def padded_batch(prompts, answers, seq_len: int = SEQ_LEN) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`generate.batch_tokens` right-padded to ``seq_len``: B x seq_len tokens, so B a multiple of 4
    gives a token count that blocks of 16, 32 and 64 (and the RHT of 16) divide."""
    tokens, mask = batch_tokens(prompts, answers)
    pad = seq_len - tokens.shape[1]
    if pad < 0:
        raise ValueError(f"a batch of {tokens.shape[1]} tokens does not fit seq_len={seq_len}")
    tokens = torch.nn.functional.pad(tokens, (0, pad), value=task.PAD_ID)
    return tokens, torch.nn.functional.pad(mask, (0, pad))
