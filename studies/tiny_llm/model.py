"""TinyQwen: a decoder-only transformer laid out like Qwen2.5, in plain PyTorch.

Per layer: RMSNorm -> attention (q/k/v projections with bias, grouped-query
heads, rotary positions in the rotate-half form, causal softmax, o_proj
without bias) -> residual; RMSNorm -> SwiGLU MLP (down(silu(gate(x)) *
up(x))) -> residual. A final RMSNorm and an lm_head tied to the embedding
(so it is not an ``nn.Linear``: ``modules="*"`` quantizes only the seven
projections of each layer, as the study quantizes the transformer's GEMMs).

Module names follow Hugging Face's Qwen2 (``layers.{i}.self_attn.q_proj``,
``layers.{i}.mlp.down_proj``) so that fp4emu.torch's globs
(``modules="*.mlp.*"``) and ``fp4emu underflow``'s layer/kind parsing apply.

Checkpoints are safetensors, written and read here with the format's plain
layout (8-byte little-endian header length, JSON header, raw little-endian
data); the config rides in the header's ``__metadata__``.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import tempfile

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass
class ModelConfig:
    vocab_size: int = 17           # len(task.VOCAB)
    hidden_size: int = 64           # multiple of 64: blocks of 16, 32 and 64 tile it
    intermediate_size: int = 256    # multiple of 64
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 1
    max_seq_len: int = 16
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "ModelConfig":
        d = json.loads(text)
        known = {f.name for f in dataclasses.fields(ModelConfig)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"model config has unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        return ModelConfig(**d)

    def check(self) -> None:
        for name in ("hidden_size", "intermediate_size"):
            if getattr(self, name) % 64:
                raise ValueError(f"{name}={getattr(self, name)} must be a multiple of 64 (FP4 blocks of 16/32/64)")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads or self.head_dim % 2:
            raise ValueError(f"hidden_size={self.hidden_size}, num_heads={self.num_heads}, "
                             f"num_kv_heads={self.num_kv_heads}: heads must divide evenly with an even head_dim")


# The studies' model (docs/analysis.md §8.1): 987 392 parameters, pre-trained by pretrain.py's defaults into
# data/tiny_llm_1m/. The dataclass defaults above are the first, 124 544-parameter model (data/tiny_llm/), whose
# results docs/analysis.md keeps beside it and which the reduced test runs load.
STUDY_CONFIG = ModelConfig(hidden_size=128, intermediate_size=512, num_layers=4, num_heads=4, num_kv_heads=2)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg: ModelConfig, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [length, head_dim] of rotary positions (Qwen2's rotate-half layout)."""
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
    ang = torch.outer(torch.arange(length, dtype=torch.float32), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * hd, bias=True)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * hd, bias=True)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * hd, bias=True)
        self.o_proj = nn.Linear(cfg.num_heads * hd, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:  # noqa: D102
        b, t, _ = x.shape
        c = self.cfg
        q = self.q_proj(x).view(b, t, c.num_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, c.num_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.num_kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = c.num_heads // c.num_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(c.head_dim)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(b, t, c.num_heads * c.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):  # noqa: D102
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyQwen(nn.Module):
    """``forward(tokens[B, T]) -> logits[B, T, V]`` (causal; no KV cache: sequences are short)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.check()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        cos, sin = rope_tables(cfg, cfg.max_seq_len)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)

    def hidden_states(self, tokens: torch.Tensor) -> torch.Tensor:
        """The final normed hidden states [B, T, hidden]."""
        t = tokens.shape[1]
        if t > self.config.max_seq_len:
            raise ValueError(f"sequence of {t} tokens is longer than max_seq_len={self.config.max_seq_len}")
        x = self.embed_tokens(tokens)
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return F.linear(self.hidden_states(tokens), self.embed_tokens.weight)


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------ safetensors --
def save(model: TinyQwen, path: "str | os.PathLike") -> None:
    """Write the fp32 weights and config as safetensors; the file appears whole or not at all.

    Tensors in state_dict order; ``config.json`` with the same config is
    written beside it for readers.
    """
    path = pathlib.Path(path)
    header: dict = {"__metadata__": {"format": "pt", "config": model.config.to_json(),
                                     "source": "studies/tiny_llm"}}
    blobs, offset = [], 0
    for name, t in model.state_dict().items():
        a = t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4", copy=False)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, [len(text).to_bytes(8, "little"), text, *blobs])
    _atomic_write(path.with_name("config.json"), [(json.dumps(dataclasses.asdict(model.config), indent=2,
                                                             sort_keys=True) + "\n").encode()])


def _atomic_write(path: pathlib.Path, chunks: list[bytes]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".tmp.")
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 is for the temporary name only
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load(path: "str | os.PathLike") -> TinyQwen:
    """Read a checkpoint written by :func:`save`; ValueError naming the file and the field if it is malformed."""
    path = pathlib.Path(path)
    raw = path.read_bytes()
    try:
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        cfg = ModelConfig.from_json(header.pop("__metadata__")["config"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a tiny_llm safetensors checkpoint (header or config unreadable: {e})") from None
    model = TinyQwen(cfg)
    want = model.state_dict()
    if set(header) != set(want):
        raise ValueError(f"{path}: tensors {sorted(set(header) ^ set(want))} differ from the model's")
    state = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        if h["dtype"] != "F32" or list(want[name].shape) != h["shape"] or e - b != 4 * want[name].numel() \
                or 8 + n + e > len(raw):
            raise ValueError(f"{path}: tensor {name} has dtype {h['dtype']}, shape {h['shape']}, offsets {b}..{e}; "
                             f"expected F32 {list(want[name].shape)} within the file")
        state[name] = torch.from_numpy(np.frombuffer(raw, "<f4", (e - b) // 4, 8 + n + b).copy()).view(h["shape"])
    model.load_state_dict(state)
    return model
