"""fp4emu for PyTorch models: fake-quant on tensors, a straight-through autograd
function, FP4 linear-layer inputs (with the optional Rollout-ResQ residual),
and activation dumps for the ``fp4emu`` analysis commands.

Example::

    import torch, fp4emu.torch as ft
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(4, 64)
    ft.dump_activations(model, x, "acts.safetensors", modules="*")   # for `fp4emu compare`
    wrapped = ft.quantize_linear_inputs(model, "nvfp4.te", modules="*")
    y = model(x)                                                   # inputs of both layers in NVFP4

fp4emu runs on the CPU: a CUDA tensor is copied to the CPU (with a warning)
and the result copied back to its device.
"""
from __future__ import annotations

import fnmatch
import json
import os
import tempfile
from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from . import _as_input, _core, _sr_args

__all__ = ["fake_quant", "FakeQuantize", "QuantizedLinear", "quantize_linear_inputs", "capture_inputs",
           "dump_activations", "rht", "Fp4Linear", "fp4_training"]


def fake_quant(t: torch.Tensor, recipe: str, axis: int = -1, rounding: Optional[str] = None,
               tail: Optional[str] = None, global_amax: Optional[float] = None, threads: int = 0,
               impl: str = "auto", dtype: Optional[torch.dtype] = None, *, seed: Optional[int] = None,
               offset: Optional[int] = None, rng: Optional[str] = None, rbits: Any = None,
               rbits_map: Optional[str] = None) -> torch.Tensor:
    """Quantize and dequantize a tensor: :func:`fp4emu.fake_quant` on tensors (no gradient).

    ``rounding="stochastic"`` with ``seed`` (``offset``, ``rng``) or
    ``rbits`` (``rbits_map``): the random bits as :func:`fp4emu.fake_quant`
    takes them, e.g. a gradient rounded as TransformerEngine's NVFP4 recipe
    does with rng_state (seed, offset):
    ``fp4emu.torch.fake_quant(g, "nvfp4.te", rounding="stochastic", seed=s, offset=o)``.

    The result is float32 (every fake-quantized value is exact there) on
    t's device, or ``dtype`` when given (e.g. ``t.dtype``; NVFP4 values
    with a per-tensor scale may round in bf16). A CPU tensor is read in
    place, whatever its strides.

    Example::

        >>> t = torch.randn(2, 32, dtype=torch.bfloat16)
        >>> fp4emu.torch.fake_quant(t, "mxfp4.ocp").dtype
        torch.float32
    """
    a, dt = _as_input(t, None)
    y = torch.from_numpy(_core.fake_quant(a, dt, recipe, axis, rounding, tail, global_amax, threads, impl,
                                          _sr_args(seed, offset, rng, rbits, rbits_map)))
    if t.device.type != "cpu":
        y = y.to(t.device)
    return y if dtype is None else y.to(dtype)


class FakeQuantize(torch.autograd.Function):
    """Straight-through fake-quant: forward Q(x) (in x's dtype), backward the gradient unchanged.

    Example::

        >>> x = torch.randn(4, 64, requires_grad=True)
        >>> y = fp4emu.torch.FakeQuantize.apply(x, "nvfp4.te")
        >>> y.sum().backward(); bool((x.grad == 1).all())
        True
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, recipe: str, axis: int = -1, options: Optional[dict] = None):  # noqa: D102
        return fake_quant(x, recipe, axis=axis, dtype=x.dtype, **(options or {}))

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        return grad, None, None, None


def _resq(x: torch.Tensor, recipe: str, pattern: str, options: dict) -> torch.Tensor:
    """Q(X) + S(Q(X - Q(X))) (docs/analysis.md, Rollout-ResQ; order qs) on a tokens x features view of x."""
    x2 = x.detach().reshape(-1, x.shape[-1]).float().cpu()
    q = fake_quant(x2, recipe, **options)
    r = fake_quant(x2 - q, recipe, **options)  # a fresh tensor: its own block (and per-tensor) scales
    if pattern != "dense":
        r = r * torch.from_numpy(_core.sparsity_mask(r.numpy(), pattern)).to(r.dtype)
    return (q + r).reshape(x.shape).to(device=x.device, dtype=x.dtype)


class _ResQ(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, recipe, pattern, options):  # noqa: D102
        return _resq(x, recipe, pattern, options)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        return grad, None, None, None


class QuantizedLinear(nn.Module):
    """An ``nn.Linear`` whose input (and, with ``weights=True``, weight) is fake-quantized.

    Blocks run along the reduction axis (in_features) for both. ``residual``:
    None, or a Rollout-ResQ sparsity pattern ("dense", "2:4", "channel50",
    ... as ``fp4emu resq --pattern``): the input becomes Q(X) + S(Q(X - Q(X))).
    ``inputs=False`` leaves the input in full precision (W4A16 with
    ``weights=True``). ``transform`` ("rht[...]", "smoothquant[...]",
    "occ[...]", as ``fp4emu underflow --transform``) maps X and W to the
    operands of :func:`fp4emu.transform_operands` before they are quantized
    (OCC's compensation is added unquantized); ``calib`` is the activation
    batch SmoothQuant's scales are calibrated on (default: each input itself).
    Gradients pass straight through the quantizers (and the transform).
    """

    def __init__(self, linear: nn.Linear, recipe: str, residual: Optional[str] = None, weights: bool = False,
                 options: Optional[dict] = None, inputs: bool = True, transform: Optional[str] = None,
                 calib: Optional[torch.Tensor] = None):
        super().__init__()
        self.linear = linear
        self.recipe = recipe
        self.residual = None if residual in (None, "none") else residual
        self.weights = weights
        self.inputs = inputs
        self.transform = None if transform in (None, "none") else transform
        self.calib = None if calib is None else calib.detach().reshape(-1, calib.shape[-1]).float().cpu().contiguous()
        self.options = dict(options or {})
        if self.residual is not None and self.residual != "dense":
            # Checked now, not at the first forward.
            _core.sparsity_mask(np.zeros((1, 1), np.float32), self.residual)
        if self.residual is not None and not inputs:
            raise ValueError(f"residual='{self.residual}' is a correction of the quantized input: it needs inputs=True")
        if self.transform is not None:  # parsed and fitted to the layer now, not at the first forward
            _core.transform_operands(np.ones((1, linear.in_features), np.float32),
                                     linear.weight.detach().float().cpu().numpy(), recipe, self.transform,
                                     None if self.calib is None else self.calib.numpy())

    def _quantize_input(self, x: torch.Tensor) -> torch.Tensor:
        if not self.inputs:
            return x
        if self.residual is None:
            return FakeQuantize.apply(x, self.recipe, -1, self.options)
        return _ResQ.apply(x, self.recipe, self.residual, self.options)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        w = self.linear.weight
        if self.transform is not None:
            return self._transformed(x, w)
        xq = self._quantize_input(x)
        if self.weights:
            w = FakeQuantize.apply(w, self.recipe, -1, self.options)
        return nn.functional.linear(xq, w, self.linear.bias)

    def _transformed(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x2 = x.detach().reshape(-1, x.shape[-1]).float().cpu().contiguous()
        xo, wo, comp = _core.transform_operands(x2.numpy(), w.detach().float().cpu().contiguous().numpy(),
                                                self.recipe, self.transform,
                                                None if self.calib is None else self.calib.numpy())
        xq = self._quantize_input(torch.from_numpy(xo))
        if comp is not None:
            xq = xq + torch.from_numpy(comp)
        wq = FakeQuantize.apply(torch.from_numpy(wo), self.recipe, -1, self.options) if self.weights \
            else torch.from_numpy(wo)
        with torch.no_grad():
            yq = (xq @ wq.T).reshape(*x.shape[:-1], w.shape[0]).to(device=x.device, dtype=x.dtype)
        # The transformed, quantized product forward; the plain layer's gradient backward.
        y = nn.functional.linear(x, w)
        y = y + (yq - y).detach()
        return y if self.linear.bias is None else y + self.linear.bias

    def extra_repr(self) -> str:  # noqa: D102
        return (f"recipe={self.recipe}, residual={self.residual}, weights={self.weights}, inputs={self.inputs}, "
                f"transform={self.transform}")


def _selected_linears(model: nn.Module, modules: str):
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and fnmatch.fnmatchcase(name, modules)]


def quantize_linear_inputs(model: nn.Module, recipe: str, modules: str = "*.mlp.*", residual: Optional[str] = None,
                           weights: bool = False, inputs: bool = True, transform: Optional[str] = None,
                           calib: Optional[dict] = None, **options: Any) -> list[str]:
    """Replace every ``nn.Linear`` of ``model`` whose name matches ``modules`` by a :class:`QuantizedLinear`.

    ``modules`` is a shell glob over the module's full name (``*`` also
    crosses dots), as ``fp4emu compare --tensor``. ``options`` go to
    :func:`fake_quant` (rounding, tail, threads, impl). ``inputs``,
    ``transform``: as :class:`QuantizedLinear`; ``calib``: {module name:
    activation batch} for SmoothQuant's calibration (e.g. the inputs
    :func:`capture_inputs` records on another batch). Returns the names
    replaced; ValueError when none matches.

    Example::

        >>> names = fp4emu.torch.quantize_linear_inputs(model, "hif4.v14", modules="*.mlp.*", residual="2:4")
        >>> out_fp4 = model(x)
    """
    unknown = set(options) - {"rounding", "tail", "threads", "impl", "global_amax"}
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)}; use rounding, tail, threads, impl or global_amax")
    selected = _selected_linears(model, modules)
    missing = [] if calib is None else [n for n, _ in selected if n not in calib]
    if missing:
        raise ValueError(f"calib has no activations for {missing[:3]}; give one per selected module")
    if not selected:
        raise ValueError(f"modules='{modules}' matches no nn.Linear of the model; names look like "
                         f"{[n for n, m in model.named_modules() if isinstance(m, nn.Linear)][:3]}")
    for name, lin in selected:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, QuantizedLinear(lin, recipe, residual=residual, weights=weights, options=options,
                                              inputs=inputs, transform=transform,
                                              calib=None if calib is None else calib[name]))
    return [n for n, _ in selected]


def _call(model, inputs) -> None:
    """Runs ``model`` on ``inputs``: keyword arguments (a dict), positional ones (a tuple or list) or one tensor."""
    if isinstance(inputs, dict):
        model(**inputs)
    elif isinstance(inputs, (tuple, list)):
        model(*inputs)
    else:
        model(inputs)


def capture_inputs(model: nn.Module, inputs: Any, modules: str = "*") -> dict:
    """Run ``model(inputs)`` without gradients and return {module name: its input, tokens x features, float32}.

    The in-memory form of :func:`dump_activations` (a module called several
    times: its inputs concatenated along tokens), e.g. the calibration batch
    of ``quantize_linear_inputs(..., transform="smoothquant", calib=...)``.
    """
    selected = _selected_linears(model, modules)
    if not selected:
        raise ValueError(f"modules='{modules}' matches no nn.Linear of the model")
    got: dict = {}

    def hook(name):
        def record(module, args):
            x = args[0].detach()
            got.setdefault(name, []).append(x.reshape(-1, x.shape[-1]).float().cpu())
        return record

    handles = [m.register_forward_pre_hook(hook(n)) for n, m in selected]
    try:
        with torch.no_grad():
            _call(model, inputs)
    finally:
        for h in handles:
            h.remove()
    return {n: torch.cat(v) for n, v in got.items()}


def rht(t: torch.Tensor, b: int = 16, axis: int = -1, seed: int = 0, signs: str = "seeded",
        inverse: bool = False) -> torch.Tensor:
    """:func:`fp4emu.rht` (docs/analysis.md §4.1) on a tensor along ``axis``: float32 on t's device, no gradient.

    Example::

        >>> g = torch.randn(64, 8)
        >>> r = fp4emu.torch.rht(g, b=16, axis=0, signs="te")   # tiles of 16 rows
        >>> bool(torch.allclose(r.T @ r, g.T @ g, atol=1e-4))   # orthogonal: inner products kept
        True
    """
    x = t.detach().to(device="cpu", dtype=torch.float32).movedim(axis, -1)
    shape = x.shape
    y = _core.rht(np.ascontiguousarray(x.reshape(-1, shape[-1]).numpy()), int(b), int(seed), signs, bool(inverse))
    return torch.from_numpy(y).reshape(shape).movedim(-1, axis).to(t.device)


# Offsets of one (seed, role) Philox stream advance by this much per training step:
# philox-te draws ceil(block / 16) counters per block (docs/formats.md, "Stochastic
# rounding"), at most 16 for blocks up to 256, so consecutive steps never reuse a draw.
_SR_OFFSET_STRIDE = 16


class _Fp4LinearFn(torch.autograd.Function):
    """Y = Q(X) Q(W)^T; dX = Q(dY) Q(W); dW = Q(dY^T) Q(X^T): each GEMM's operands in blocks along its reduction axis."""

    @staticmethod
    def forward(ctx, x, w, bias, layer, offset):  # noqa: D102
        ctx.layer, ctx.offset = layer, offset
        ctx.save_for_backward(x, w)
        ctx.has_bias = bias is not None
        if layer.recipe is None:
            return nn.functional.linear(x, w, bias)
        xq = layer._q(x, -1)  # along in_features
        wq = layer._q(w, -1)
        return nn.functional.linear(xq, wq, bias)

    @staticmethod
    def backward(ctx, gy):  # noqa: D102
        x, w = ctx.saved_tensors
        layer, offset = ctx.layer, ctx.offset
        gy2 = gy.reshape(-1, gy.shape[-1])
        x2 = x.reshape(-1, x.shape[-1])
        gx = gw = gb = None
        if layer.recipe is None:
            if ctx.needs_input_grad[0]:
                gx = gy.matmul(w)
            if ctx.needs_input_grad[1]:
                gw = gy2.t().mm(x2)
        else:
            # Blocks along axis 0 are quantized as rows of the transposed operand (one torch transpose):
            # the same blocks and bits (SR draws included; test_torch_fp4_training checks), through the
            # library's contiguous path, several times faster than its strided one on a leading axis.
            if ctx.needs_input_grad[0]:
                # dX = dY W: the reduction runs over out_features, axis -1 of dY and axis 0 of W.
                wq = layer._q(w.t().contiguous(), -1).t()
                gx = layer._q(gy2, -1, grad_role=0, offset=offset).mm(wq).reshape(x.shape)
            if ctx.needs_input_grad[1]:
                # dW = dY^T X: the reduction runs over the tokens, axis 0 of both (the last of dY^T and
                # X^T); an RHT along it (orthogonal, so dY^T H H^T X = dY^T X) spreads outliers first.
                g, a = gy2.t().contiguous(), x2.t().contiguous()
                if layer.rht is not None:
                    g = rht(g, layer.rht, axis=-1, seed=layer.rht_seed, signs=layer.rht_signs)
                    a = rht(a, layer.rht, axis=-1, seed=layer.rht_seed, signs=layer.rht_signs)
                gw = layer._q(g, -1, grad_role=1, offset=offset).mm(layer._q(a, -1).t())
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = gy2.sum(0)
        return gx, gw, gb, None, None


class Fp4Linear(nn.Module):
    """An ``nn.Linear`` trained with all three GEMMs in FP4 (fake-quantized through fp4emu).

    Forward Y = Q(X) Q(W)^T with X and W in blocks along in_features; input
    gradient dX = Q(dY) Q(W) along out_features; weight gradient
    dW = Q(dY^T) Q(X^T) along the token axis (all leading dims of X
    flattened). ``recipe=None``: the GEMMs of ``nn.Linear``, unquantized.
    ``rht``: None or a size b: a random Hadamard transform (:func:`rht`,
    ``rht_signs``, ``rht_seed``) of both weight-gradient operands along the
    tokens, which must then be a multiple of b. ``sr=True``: the gradient
    dY is rounded stochastically in both backward GEMMs, with Philox key
    ``seed`` mixed with the layer's ``index`` and the GEMM, and an offset
    that advances with every training forward (:data:`_SR_OFFSET_STRIDE`),
    so a run reproduces and no two steps share random bits. X and W always
    round to nearest. Blocks along the token axis need the token count to be
    a multiple of the block (``options={"tail": "pad"}`` otherwise).

    Example::

        >>> lin = fp4emu.torch.Fp4Linear(torch.nn.Linear(64, 32), "mxfp4.ocp", rht=16, sr=True, seed=1)
        >>> lin(torch.randn(4, 16, 64)).sum().backward()     # 64 tokens
    """

    def __init__(self, linear: nn.Linear, recipe: Optional[str], rht: Optional[int] = None, rht_signs: str = "te",
                 rht_seed: int = 0, sr: bool = False, seed: int = 0, index: int = 0,
                 options: Optional[dict] = None):
        super().__init__()
        self.linear = linear
        self.recipe = recipe
        self.rht = rht
        self.rht_signs = rht_signs
        self.rht_seed = rht_seed
        self.sr = sr
        self.seed = seed
        self.index = index
        self.options = dict(options or {})
        self.steps = 0  # training forwards so far: the SR offset
        if rht is not None and (rht < 2 or rht & (rht - 1)):
            raise ValueError(f"rht={rht} is not a power-of-two size >= 2; use e.g. 16")

    def sr_seed(self, role: int) -> int:
        """The Philox key of this layer's gradient quantizer ``role`` (0: input gradient, 1: weight gradient)."""
        return (self.seed * 0x9E3779B97F4A7C15 + self.index * 2 + role + 1) % 2**64

    def _q(self, t: torch.Tensor, axis: int, grad_role: Optional[int] = None, offset: int = 0) -> torch.Tensor:
        opts = dict(self.options)
        if grad_role is not None and self.sr:
            opts.update(rounding="stochastic", seed=self.sr_seed(grad_role), offset=offset)
        return fake_quant(t, self.recipe, axis=axis, dtype=t.dtype, **opts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        offset = 0
        if torch.is_grad_enabled() and (x.requires_grad or self.linear.weight.requires_grad):
            offset = self.steps * _SR_OFFSET_STRIDE
            self.steps += 1
        return _Fp4LinearFn.apply(x, self.linear.weight, self.linear.bias, self, offset)

    def extra_repr(self) -> str:  # noqa: D102
        return f"recipe={self.recipe}, rht={self.rht}, sr={self.sr}"


def fp4_training(model: nn.Module, recipe: Optional[str], modules: str = "*", rht: Optional[int] = None,
                 rht_signs: str = "te", rht_seed: int = 0, sr: bool = False, seed: int = 0,
                 **options: Any) -> list[str]:
    """Replace every ``nn.Linear`` whose name matches ``modules`` by an :class:`Fp4Linear` (all three GEMMs in FP4).

    Layers are numbered in ``named_modules`` order (their ``index``: each
    has its own SR streams). ``options`` go to :func:`fake_quant` (tail,
    threads, impl). The state dict keeps :class:`QuantizedLinear`'s names
    (``<name>.linear.weight``), so one model's weights load into the other.
    Returns the names replaced; ValueError when none matches.

    Example::

        >>> names = fp4emu.torch.fp4_training(model, "hif4.v14", rht=16)
        >>> loss_fn(model(x), y).backward()
    """
    unknown = set(options) - {"tail", "threads", "impl"}
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)}; use tail, threads or impl")
    selected = _selected_linears(model, modules)
    if not selected:
        raise ValueError(f"modules='{modules}' matches no nn.Linear of the model")
    for i, (name, lin) in enumerate(selected):
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, Fp4Linear(lin, recipe, rht=rht, rht_signs=rht_signs, rht_seed=rht_seed, sr=sr,
                                        seed=seed, index=i, options=options))
    return [n for n, _ in selected]


_ST_DTYPES = {"bf16": "BF16", "fp32": "F32"}


def dump_activations(model: nn.Module, inputs: Any, path: "str | os.PathLike", modules: str = "*",
                     dtype: Optional[str] = None, prefix: str = "") -> list[str]:
    """Run ``model(inputs)`` and write the input of every selected ``nn.Linear`` to a safetensors dump.

    Tensors are named ``<prefix><module name>.input`` (e.g.
    ``model.layers.0.mlp.down_proj.input``, as ``fp4emu sample`` names
    them), shaped tokens x features (leading dims flattened). ``dtype``:
    "bf16" or "fp32" (default: bf16 for bf16 activations, fp32 otherwise).
    Each input is written to disk as the forward pass produces it (memory:
    one activation at a time); the file appears complete or not at all. A
    module called several times adds ``.input.1``, ``.input.2``, ...
    ``inputs``: a tensor, a tuple of positional arguments, or a dict of
    keyword arguments. Returns the tensor names.

    Example::

        >>> fp4emu.torch.dump_activations(model, x, "acts.safetensors", modules="*.mlp.*")
        ['layers.0.mlp.up.input', 'layers.0.mlp.down.input']
        # then: fp4emu compare acts.safetensors --format hif4,mxfp4,nvfp4
    """
    if dtype not in (None, "bf16", "fp32"):
        raise ValueError(f"dtype='{dtype}' is unknown; use bf16 or fp32")
    selected = _selected_linears(model, modules)
    if not selected:
        raise ValueError(f"modules='{modules}' matches no nn.Linear of the model")
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    entries = []  # (name, st dtype, shape, begin, end)
    calls: dict[str, int] = {}
    data = tempfile.NamedTemporaryFile(dir=folder, prefix=os.path.basename(path) + ".data.", delete=False)
    offset = 0

    def hook(name):
        def record(module, args):
            nonlocal offset
            x = args[0].detach()
            k = calls.get(name, 0)
            calls[name] = k + 1
            x = x.reshape(-1, x.shape[-1]) if x.dim() > 1 else x
            want = dtype or ("bf16" if x.dtype == torch.bfloat16 else "fp32")
            x = x.to(device="cpu", dtype=torch.bfloat16 if want == "bf16" else torch.float32).contiguous()
            raw = (x.view(torch.int16) if want == "bf16" else x).numpy()
            data.write(memoryview(raw).cast("B"))
            n = raw.nbytes
            tensor = f"{prefix}{name}.input" + (f".{k}" if k else "")
            entries.append((tensor, _ST_DTYPES[want], list(x.shape), offset, offset + n))
            offset += n
        return record

    handles = [m.register_forward_pre_hook(hook(n)) for n, m in selected]
    final_tmp = None
    try:
        with torch.no_grad():
            _call(model, inputs)
        data.flush()
        header = {"__metadata__": {"source": "fp4emu.torch.dump_activations", "modules": modules}}
        for name, st, shape, b, e in entries:
            header[name] = {"dtype": st, "shape": shape, "data_offsets": [b, e]}
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-(8 + len(text)) % 8)  # data starts on an 8-byte boundary
        fd, final_tmp = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".tmp.")
        with os.fdopen(fd, "wb") as out:
            out.write(len(text).to_bytes(8, "little"))
            out.write(text)
            data.seek(0)
            while chunk := data.read(1 << 24):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(final_tmp, path)
        final_tmp = None
    finally:
        for h in handles:
            h.remove()
        data.close()
        os.unlink(data.name)
        if final_tmp is not None:
            os.unlink(final_tmp)
    return [e[0] for e in entries]
