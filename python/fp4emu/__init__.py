"""fp4emu: bit-exact HiF4, MXFP4 and NVFP4 quantization for numpy and PyTorch.

The same library as the ``fp4emu`` command line, in process: every function
gives the command's bits. Inputs are numpy float32 / float16 arrays, bf16 as
``np.uint16`` bit patterns with ``input_dtype="bf16"`` (or an ml_dtypes
``bfloat16`` array), or CPU torch tensors of any of these dtypes. Outputs are
numpy arrays (``fp4emu.torch`` returns tensors).

Example::

    import numpy as np, fp4emu
    x = np.random.default_rng(0).standard_normal((4, 64), dtype=np.float32)
    y = fp4emu.fake_quant(x, "nvfp4.te")          # quantize + dequantize
    p = fp4emu.quantize(x, "mxfp4.rceil")        # codes, scales, metadata
    assert (p.dequantize() == fp4emu.fake_quant(x, "mxfp4.rceil")).all()

Errors: bad arguments or input raise ``ValueError``, files that cannot be
read or written ``OSError``, with the command line's messages.
"""
from __future__ import annotations

import os as _os
from typing import Any, Iterable, Optional, Union

import numpy as _np

from . import _core
from ._core import Packed

__version__ = _core.__version__
__all__ = ["formats", "recipes", "fake_quant", "quantize", "dequantize", "load", "gemm", "compare", "identify",
           "sparsity_mask", "Packed", "golden", "read_tensors", "underflow", "resq", "synthetic_weights",
           "tensor_role", "rht"]


def _torch_array(x: Any):
    """A numpy view of a CPU torch tensor and its input dtype (None if x is not a tensor)."""
    mod = type(x).__module__
    if not mod.startswith("torch"):
        return None
    import torch  # only when a tensor is given: torch is optional
    if not isinstance(x, torch.Tensor):
        return None
    if x.device.type != "cpu":
        import warnings
        warnings.warn(f"fp4emu: copying a {x.device.type} tensor to the CPU (fp4emu runs on the CPU)", stacklevel=3)
        x = x.cpu()
    x = x.detach()
    if x.dtype == torch.bfloat16:
        # Same memory, read as bit patterns: numpy has no bfloat16.
        return x.view(torch.int16).numpy().view(_np.uint16), "bf16"
    if x.dtype == torch.float16:
        return x.numpy(), "f16"
    if x.dtype == torch.float32:
        return x.numpy(), "f32"
    raise ValueError(f"torch tensor of dtype {x.dtype}: fp4emu quantizes float32, float16 and bfloat16 "
                     f"(convert with t.float())")


def _as_input(x: Any, input_dtype: Optional[str]):
    """(numpy array, "f32" | "bf16" | "f16"): a view of x's memory, never a copy of numpy or torch data."""
    t = _torch_array(x)
    if t is not None:
        a, dt = t
        if input_dtype not in (None, dt):
            raise ValueError(f"input_dtype='{input_dtype}' does not match the tensor's dtype ({dt})")
    else:
        a = x if isinstance(x, _np.ndarray) else _np.asarray(x)
        name = a.dtype.name
        if name == "bfloat16":  # ml_dtypes (also jax / tensorflow's bfloat16)
            a, dt = a.view(_np.uint16), "bf16"
        elif a.dtype == _np.float32:
            dt = "f32"
        elif a.dtype == _np.float16:
            dt = "f16"
        elif a.dtype == _np.uint16 or a.dtype == _np.int16:
            if input_dtype not in ("bf16", "f16"):
                raise ValueError(f"a {name} array holds bit patterns: say which with input_dtype='bf16' or 'f16'")
            a, dt = a.view(_np.uint16), input_dtype
        else:
            raise ValueError(f"input dtype {name} is not a float input; fp4emu quantizes float32, float16 and "
                             f"bfloat16 (bf16 as np.uint16 bits with input_dtype='bf16'); convert with "
                             f"x.astype(np.float32)")
        if input_dtype not in (None, dt):
            raise ValueError(f"input_dtype='{input_dtype}' does not match the array's dtype {name} ({dt})")
    if a.ndim == 0:
        raise ValueError("the input is a scalar (shape []): block quantization needs at least one axis")
    if a.strides and any(st % a.itemsize for st in a.strides):  # not whole elements: never from numpy or torch
        a = _np.ascontiguousarray(a)
    return a, dt


def _contiguous(a):
    """The analysis calls (compare, identify, the studies) read a C-contiguous array in place; others are copied."""
    return a if a.flags.c_contiguous else _np.ascontiguousarray(a)


def formats() -> list[dict]:
    """The three formats: name, block size, scale bytes per block, default recipe.

    Example::

        >>> [f["format"] for f in fp4emu.formats()]
        ['hif4', 'mxfp4', 'nvfp4']
    """
    return _core.formats()


def recipes(format: Optional[str] = None) -> list[dict]:
    """Every recipe (of one format when given): the fields of ``fp4emu formats --json``.

    Each dict has ``id``, ``format``, ``default``, ``summary``, ``spec``,
    ``element_rounding``, ``allowed_roundings`` (a list), ``tail``,
    ``nibble_order``, ``fake_quant_only``, ``bf16_input_only``, ``bits_version``.

    Example::

        >>> [r["id"] for r in fp4emu.recipes("mxfp4")][:2]
        ['mxfp4.ocp', 'mxfp4.rceil']
    """
    all_ = _core.recipes()
    if format is None:
        return all_
    if format not in ("hif4", "mxfp4", "nvfp4"):
        raise ValueError(f"format '{format}' is unknown; use hif4, mxfp4 or nvfp4")
    return [r for r in all_ if r["format"] == format]


def _sr_args(seed, offset, rng, rbits, rbits_map):
    """The random-bit keywords of rounding="stochastic" (checked with the command line's rule in _core)."""
    for name, v in (("seed", seed), ("offset", offset)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, _np.integer)) or not 0 <= v < 2**64):
            raise ValueError(f"{name}={v!r} is not a seed; use an integer in 0..18446744073709551615 (2^64 - 1)")
    if rbits is not None:
        if type(rbits).__module__.startswith("torch"):
            rbits = rbits.detach().cpu().numpy()
        rbits = _np.asarray(rbits)
    return _core.SrArgs(None if seed is None else int(seed), None if offset is None else int(offset), rng, rbits,
                        rbits_map)


def fake_quant(x: Any, recipe: str, axis: int = -1, rounding: Optional[str] = None, tail: Optional[str] = None,
               global_amax: Optional[float] = None, threads: int = 0, impl: str = "auto",
               input_dtype: Optional[str] = None, *, seed: Optional[int] = None, offset: Optional[int] = None,
               rng: Optional[str] = None, rbits: Any = None, rbits_map: Optional[str] = None) -> _np.ndarray:
    """Quantize and dequantize ``x`` with ``recipe`` (an id, or a format for its default): float32, x's shape.

    ``axis``: the block axis. ``rounding``: element rounding override
    (rne, rha, rtz, tiesToZero, stochastic) where the recipe allows it.
    ``tail``: pad or error. ``global_amax``: NVFP4's per-tensor amax
    (default: the input's). ``threads``: 0 = every core (OMP_NUM_THREADS),
    else 1..1024. ``impl``: auto, reference or fast. The GIL is released
    while it runs.

    ``rounding="stochastic"`` takes its random bits from exactly one source
    (docs/formats.md, "Stochastic rounding"; the same bits as ``fp4emu
    fake-quant --round stochastic``): ``seed`` (Philox4x32-10 key, with
    ``offset``, default 0, and the stream mapping ``rng``: ``"philox-te"``,
    TransformerEngine's, the default, or ``"philox-index"``), or ``rbits``:
    a uint8 array of x's shape (one byte per element) or a uint32 array
    with the block axis of length ceil(L/4) (one ``cvt.rs`` e2m1x4 word per
    4 elements). ``rbits_map`` (``"te"``, the default, or ``"ptx"``) says
    which byte of a 32-bit word feeds which element.

    Example::

        >>> x = np.linspace(-3, 3, 32, dtype=np.float32)
        >>> fp4emu.fake_quant(x, "mxfp4.ocp")[:4]
        array([-3., -3., -3., -3.], dtype=float32)
        >>> g = np.full((1, 32), 0.25, np.float32); g[0, 0] = 6
        >>> y = fp4emu.fake_quant(g, "mxfp4.ocp", rounding="stochastic", seed=42)
        >>> sorted(set(y[0, 1:].tolist()))   # 0.25 is a quarter of the way from 0 to 1 (the grid step here)
        [0.0, 1.0]
    """
    a, dt = _input(x, input_dtype)
    return _core.fake_quant(a, dt, recipe, axis, rounding, tail, global_amax, threads, impl,
                            _sr_args(seed, offset, rng, rbits, rbits_map))


def quantize(x: Any, recipe: str, axis: int = -1, rounding: Optional[str] = None, tail: Optional[str] = None,
             global_amax: Optional[float] = None, nibble_order: Optional[str] = None,
             scale_bit_order: Optional[str] = None, scale_layout: str = "linear", threads: int = 0,
             impl: str = "auto", input_dtype: Optional[str] = None, *, seed: Optional[int] = None,
             offset: Optional[int] = None, rng: Optional[str] = None, rbits: Any = None,
             rbits_map: Optional[str] = None) -> Packed:
    """The packed form of ``x``: a :class:`Packed` with ``.codes``, ``.scales``, ``.global_scale``.

    Options as :func:`fake_quant` (stochastic rounding's random bits
    included: ``p.meta["stochastic"]`` records them, e.g.
    ``"philox-te seed=42 offset=0 map=te"``), plus the packing: ``nibble_order``
    (low_first, high_first, split_half), ``scale_bit_order`` (HiF4:
    lsb_first, msb_first) and ``scale_layout``: ``linear`` ([..., blocks]),
    ``swizzled_128x4`` (MXFP4/NVFP4, the Blackwell GEMM layout) or
    ``hif4_cube`` (HiF4, Ascend Cube). The arrays are those of the packed
    ``.safetensors`` file ``fp4emu quantize`` writes.

    Example::

        >>> p = fp4emu.quantize(np.ones((2, 32), np.float32), "mxfp4.ocp")
        >>> p.codes.shape, p.scales.shape, p.scales[0, 0]
        ((2, 16), (2, 1), 127)
        >>> fp4emu.quantize(g, "nvfp4.te", rounding="stochastic", seed=7, offset=3).meta["stochastic"]
        'philox-te seed=7 offset=3 map=te'
    """
    a, dt = _input(x, input_dtype)
    return _core.quantize(a, dt, recipe, axis, rounding, tail, global_amax, nibble_order, scale_bit_order,
                          scale_layout, threads, impl, _sr_args(seed, offset, rng, rbits, rbits_map))


def dequantize(packed: Packed, threads: int = 0, impl: str = "auto") -> _np.ndarray:
    """The float32 values of a :class:`Packed` (bit-identical to :func:`fake_quant` with its options).

    Example::

        >>> p = fp4emu.quantize(np.ones((2, 32), np.float32), "mxfp4.ocp")
        >>> fp4emu.dequantize(p)[0, :3]
        array([1., 1., 1.], dtype=float32)
    """
    if not isinstance(packed, Packed):
        raise ValueError("dequantize takes a Packed (from fp4emu.quantize or fp4emu.load)")
    return packed.dequantize(threads=threads, impl=impl)


def load(path: Union[str, _os.PathLike]) -> Packed:
    """Read a packed ``.safetensors`` file (written by ``Packed.save`` or ``fp4emu quantize``).

    The scales come back in the linear layout whatever layout the file
    stores; ``p.with_scale_layout("swizzled_128x4")`` gives another.

    Example::

        >>> fp4emu.quantize(x, "nvfp4.te").save("x.safetensors")
        >>> fp4emu.load("x.safetensors").recipe
        'nvfp4.te'
    """
    return _core.load(_os.fspath(path))


def gemm(a: Any, b: Any, model: str = "block_fp32", recipe: Optional[str] = None,
         recipe_b: Optional[str] = None, blocks_per_step: int = 1, alpha: Optional[float] = None,
         threads: int = 0, impl: str = "simd", b_layout: str = "kn", c: Any = None, beta: float = 1.0,
         bias: Any = None) -> _np.ndarray:
    """D = α′·(Q(A)·Q(B)) + bias + β·C (float32, m×n) with a named accumulation model (docs/gemm.md).

    ``a`` (m×k) and ``b`` (k×n, or with ``b_layout="nk"`` W as n×k, the
    layout of ``nn.Linear.weight``) are :class:`Packed` operands (A blocked
    along k, B along k), or float32 matrices: quantized here with ``recipe``
    (``recipe_b`` for B, default ``recipe``) along k, or, with
    ``recipe=None``, used dense (W4A16). ``model``: exact, block_fp32,
    fma_fp32 or fast. The epilogue, rounded as docs/gemm.md "Epilogue" says:
    ``bias`` (n values) and ``beta``·``c`` (m×n), each only when given.

    Example::

        >>> rng = np.random.default_rng(0)
        >>> a = rng.standard_normal((8, 64), dtype=np.float32); w = rng.standard_normal((4, 64), dtype=np.float32)
        >>> fp4emu.gemm(a, w, recipe="nvfp4.te", model="exact", b_layout="nk", bias=np.ones(4, np.float32)).shape
        (8, 4)
    """
    def operand(v, r, axis):
        if isinstance(v, Packed) or r is None:
            return v if isinstance(v, Packed) else _contiguous(_as_input(v, "f32")[0])
        return quantize(v, r, axis=axis, threads=threads)
    def dense(v):
        return None if v is None else _contiguous(_as_input(v, "f32")[0])
    return _core.gemm(operand(a, recipe, 1), operand(b, recipe_b or recipe, 1 if b_layout == "nk" else 0), model,
                      blocks_per_step, alpha, threads, impl, b_layout, dense(c), beta, dense(bias))


def compare(x: Any, recipes: Union[str, Iterable[str]], axis: int = -1, tail: Optional[str] = None,
            input_dtype: Optional[str] = None) -> dict:
    """What each recipe loses on ``x``: ``{recipe id: metrics}`` with ``fp4emu compare --json``'s keys.

    Metrics: qsnr_db, nmse, rel_l2, cosine, max_abs_error, underflow_ratio,
    zero_ratio_after, saturation_ratio (None for fake-quant-only recipes),
    counts, energies, bits_per_element. A recipe that cannot run on x (e.g.
    hif4.a6 on values not exact in bf16) has ``skipped`` with the reason.
    ``recipes``: ids or format names, a list or a comma-separated string.

    Example::

        >>> m = fp4emu.compare(x, ["mxfp4.ocp", "nvfp4.te"])
        >>> m["nvfp4.te"]["qsnr_db"] > m["mxfp4.ocp"]["qsnr_db"]
        True
    """
    ids = recipes.split(",") if isinstance(recipes, str) else list(recipes)
    a, dt = _input(x, input_dtype)
    return _core.compare(_contiguous(a), dt, ids, axis, tail)


def identify(x: Any, format: str, output: Any = None, packed: Optional[Packed] = None, codes: Any = None,
             scales: Any = None, axis: int = -1, global_amax: Optional[float] = None, threads: int = 0,
             top: int = 3, input_dtype: Optional[str] = None) -> dict:
    """Which recipe does a kernel implement? ``fp4emu identify`` on arrays.

    Give the kernel's input ``x`` and what it wrote: dequantized ``output``
    values, a ``packed`` tensor, or ``codes`` (uint8, two per byte, block
    axis last) and/or ``scales`` (uint8, or uint32 HiF4 words). Returns
    ``{"exact": bool, "best": label, "text": report, "candidates": [...]}``
    with every candidate ranked, best first (the ``--json`` form).

    Example::

        >>> r = fp4emu.identify(x, "mxfp4", output=fp4emu.fake_quant(x, "mxfp4.rceil"))
        >>> r["exact"], r["best"]
        (True, 'mxfp4.rceil')
    """
    import json
    a, dt = _input(x, input_dtype)
    if packed is not None:
        if codes is not None or scales is not None:
            raise ValueError("packed holds codes and scales already; give either packed or codes/scales")
        if packed.scale_layout != "linear":
            packed = packed.with_scale_layout("linear")
        codes, scales = packed.codes, packed.scales
        if global_amax is None and packed.global_scale is not None and 0 < packed.global_scale[0] < _np.inf:
            global_amax = float(packed.global_scale[0])  # the amax the kernel recorded is the one it used
    as_bytes = lambda v: None if v is None else _np.ascontiguousarray(_np.asarray(v)).view(_np.uint8)
    values = None if output is None else _contiguous(_as_input(output, "f32")[0])
    r = _core.identify(_contiguous(a), dt, format, as_bytes(codes), as_bytes(scales), values, axis, global_amax, threads, top)
    out = json.loads(r["json"])
    out.update(exact=r["exact"], best=r["best"], text=r["text"])
    return out


def sparsity_mask(values: Any, pattern: str) -> _np.ndarray:
    """The keep mask (uint8, 1 = keep) of a Rollout-ResQ sparsity pattern on a tokens × features matrix.

    Patterns as ``fp4emu resq --pattern``: dense, N:M, channelP, rowP,
    blockRxC, unstructuredP, randomP (docs/analysis.md).

    Example::

        >>> fp4emu.sparsity_mask(np.array([[1, -4, 2, 3]], np.float32), "2:4")
        array([[0, 1, 0, 1]], dtype=uint8)
    """
    a, _ = _as_input(values, "f32")
    return _core.sparsity_mask(_contiguous(a), pattern)


# ---- activation dumps and studies (docs/analysis.md) ------------------------------------------
def read_tensors(path: Union[str, _os.PathLike], tensors: Optional[Iterable[str]] = None,
                 bf16: str = "bits") -> dict:
    """The tensors of a ``.safetensors`` dump (or one ``.npy``) as ``{name: array}``, in file order.

    ``tensors``: name globs as ``fp4emu compare --tensor`` (each must match).
    bf16 tensors come as ``np.uint16`` bit patterns (``bf16="bits"``: pass
    them with ``input_dtype="bf16"``) or widened exactly (``bf16="float32"``).

    Example::

        >>> acts = fp4emu.read_tensors("data/sample_dump.safetensors", ["model.layers.0.*"])
        >>> sorted(acts)[0]
        'model.layers.0.mlp.down_proj.input'
    """
    if bf16 not in ("bits", "float32"):
        raise ValueError(f"bf16='{bf16}' is unknown; use bits or float32")
    out, bf16_names, _ = _core.read_tensors(_os.fspath(path), list(tensors or []))
    if bf16 == "float32":
        for name in bf16_names:
            out[name] = (out[name].astype(_np.uint32) << 16).view(_np.float32)
    else:
        out = {k: _Bf16Bits(v) if k in bf16_names else v for k, v in out.items()}
    return out


class _Bf16Bits(_np.ndarray):
    """uint16 bf16 bit patterns that every fp4emu call reads as bf16 (read_tensors(bf16="bits"))."""

    def __new__(cls, bits):
        return _np.asarray(bits).view(cls)


def _input(x, input_dtype):
    if isinstance(x, _Bf16Bits):
        return _as_input(x.view(_np.ndarray), input_dtype or "bf16")
    return _as_input(x, input_dtype)


def underflow(x: Any, recipe: str, transform: str = "none", weights: Any = None, threads: int = 0,
              input_dtype: Optional[str] = None) -> dict:
    """``fp4emu underflow`` on one tokens × features tensor: how many nonzero inputs ``recipe`` flushes to zero.

    Blocks run along the last axis. ``transform``: none, rht[:b=N,seed=S],
    smoothquant[:alpha=A] (needs ``weights``, n × d) or occ[:q=Q]. Returns
    underflow_ratio, zero_ratio_after, the block and outlier-block ratios,
    crest factors, qsnr_db, per-token and per-channel UR arrays and the
    log2 magnitude histograms (docs/analysis.md defines each).

    Example::

        >>> fp4emu.underflow(x, "mxfp4.ocp", transform="rht")["underflow_ratio"]
        0.0123
    """
    a, dt = _input(x, input_dtype)
    w = None if weights is None else _contiguous(_as_input(weights, "f32")[0])
    return _core.underflow(_contiguous(a), dt, recipe, transform, w, threads)


def resq(x: Any, weights: Any, recipe: str, patterns: Iterable[str] = ("none", "dense", "2:4"), seed: int = 0,
         threads: int = 0, input_dtype: Optional[str] = None) -> list:
    """Rollout-ResQ (``fp4emu resq``) on one tensor: X^ = Q(X) + S(Q(X − Q(X))) for each sparsity pattern S.

    ``x`` tokens × d, ``weights`` n × d (e.g. :func:`synthetic_weights`).
    One dict per pattern: act_qsnr_db, out_qsnr_db, recovered_fraction,
    kept_density, the deletion measures drop_res_* / drop_prim_*, and
    speedup_vs_fp16 under the cost model of docs/analysis.md.

    Example::

        >>> rows = fp4emu.resq(x, fp4emu.synthetic_weights(128, x.shape[1]), "nvfp4.te", ["none", "2:4"])
        >>> rows[1]["act_qsnr_db"] > rows[0]["act_qsnr_db"]
        True
    """
    a, dt = _input(x, input_dtype)
    return _core.resq(_contiguous(a), dt, _contiguous(_as_input(weights, "f32")[0]), recipe, list(patterns), seed, threads)


def synthetic_weights(n: int, d: int, seed: int = 0) -> _np.ndarray:
    """The seeded N(0, 1/d) weights (n × d, float32) the study commands use when no weights are given.

    Example::

        >>> fp4emu.synthetic_weights(256, 1024).shape
        (256, 1024)
    """
    return _core.synthetic_weights(n, d, seed)


def rht(x: Any, b: int = 16, seed: int = 0, signs: str = "seeded", inverse: bool = False) -> _np.ndarray:
    """The random Hadamard transform of ``--transform rht`` (docs/analysis.md §4.1) along the last axis.

    Tile by tile: X (I ⊗ H_b D), H_b the Sylvester Hadamard matrix over
    sqrt(b), D the signs (``"seeded"``: SplitMix64 from ``seed``; ``"te"``:
    TransformerEngine's 16-entry vector, b=16). ``inverse=True`` undoes it.
    Computed in double, rounded to float32 once; the result is rows x cols
    float32 for an input of any leading shape flattened to rows.

    Example::

        >>> y = fp4emu.rht(np.eye(16, dtype=np.float32), b=16)
        >>> bool(np.allclose(fp4emu.rht(y, b=16, inverse=True), np.eye(16)))
        True
    """
    a = _np.asarray(x, dtype=_np.float32)
    rows = a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a
    return _core.rht(_np.ascontiguousarray(rows), int(b), int(seed), signs, bool(inverse)).reshape(a.shape)


def transform_operands(x: Any, w: Any, recipe: str, transform: str, calib: Any = None) -> tuple:
    """The operands ``--transform`` makes of activations ``x`` (m × d) and weights ``w`` (n × d) before quantization.

    ``transform`` as :func:`underflow` takes it (docs/analysis.md §4): for
    ``rht[...]`` and ``smoothquant[...]``, (X', W', None) with X' W'^T =
    X W^T in exact arithmetic; SmoothQuant's scales come from ``calib``
    (m' × d activations of another batch) when given, else from ``x``. For
    ``occ[:q=Q]``, (clamp(X), W, X - clamp(X)): the compensation is added,
    unquantized, to Q(clamp(X)). ``recipe`` sets the default RHT size (its
    block). float32 arrays.

    Example::

        >>> xs, ws, comp = fp4emu.transform_operands(x, w, "mxfp4.ocp", "smoothquant:alpha=0.5", calib=x_old)
        >>> y4 = fp4emu.fake_quant(xs, "mxfp4.ocp") @ fp4emu.fake_quant(ws, "mxfp4.ocp").T
    """
    f32 = lambda a: _contiguous(_as_input(a, "f32")[0])  # noqa: E731
    return _core.transform_operands(f32(x), f32(w), recipe, transform, None if calib is None else f32(calib))


def tensor_role(name: str) -> dict:
    """What a dump tensor's name says: ``{"layer": int | None, "kind": "qkv_in" | "o_in" | "gateup_in" | "down_in" | "", "proj": ...}``.

    Example::

        >>> fp4emu.tensor_role("model.layers.3.mlp.down_proj.input")
        {'layer': 3, 'kind': 'down_in', 'proj': 'down'}
    """
    return _core.tensor_role(name)


from . import golden  # noqa: E402  (needs the names above)
