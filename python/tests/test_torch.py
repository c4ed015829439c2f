"""fp4emu.torch: tensors in and out, the straight-through function, a seeded model
whose Linear inputs are dumped (and analysed by the command line) and
fake-quantized (and compared with a hand-written fake-quant)."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import fp4emu  # noqa: E402
import fp4emu.torch as ft  # noqa: E402


def bits(t):
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("recipe", ["hif4.v14", "mxfp4.ocp", "nvfp4.te"])
def test_torch_path_is_the_numpy_path(dtype, recipe):
    t = (torch.randn(16, 128, generator=torch.Generator().manual_seed(1)) * 3).to(dtype)
    if dtype == torch.bfloat16:
        a, kw = t.view(torch.int16).numpy().view(np.uint16), {"input_dtype": "bf16"}
    else:
        a, kw = t.numpy(), {}
    want = fp4emu.fake_quant(a, recipe, **kw)
    got = ft.fake_quant(t, recipe)
    assert got.dtype == torch.float32 and got.shape == t.shape
    assert bits(got) == want.tobytes()
    assert fp4emu.fake_quant(t, recipe).tobytes() == want.tobytes()  # the numpy API takes tensors too
    p = fp4emu.quantize(t, recipe, axis=0)
    assert p.codes.tobytes() == fp4emu.quantize(a, recipe, axis=0, **kw).codes.tobytes()
    assert ft.fake_quant(t, recipe, dtype=dtype).dtype == dtype


class _CudaStandIn(torch.Tensor):
    """A CPU tensor that says it is on a CUDA device: the copy-with-a-warning path, tested without a GPU."""
    __module__ = "torch.cuda"  # fp4emu recognises tensors by their type's module
    copies = 0

    @property
    def device(self):
        return torch.device("cuda", 0)

    def cpu(self):
        type(self).copies += 1
        return self.as_subclass(torch.Tensor).clone()


def test_cuda_tensor_is_copied_with_a_warning(monkeypatch):
    moved = []
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):  # the result's way back to the input's device
        if args and isinstance(args[0], torch.device) and args[0].type == "cuda":
            moved.append(args[0])
            return self.as_subclass(_CudaStandIn)
        return real_to(self, *args, **kwargs)
    monkeypatch.setattr(torch.Tensor, "to", to)
    host = torch.randn(8, 64, generator=torch.Generator().manual_seed(3)) * 5
    t = host.clone().as_subclass(_CudaStandIn)
    _CudaStandIn.copies = 0
    with pytest.warns(UserWarning, match="copying a cuda tensor to the CPU"):
        y = ft.fake_quant(t, "nvfp4.te")
    assert _CudaStandIn.copies == 1 and moved == [torch.device("cuda", 0)]
    assert isinstance(y, _CudaStandIn) and y.device.type == "cuda"
    assert bits(y.as_subclass(torch.Tensor)) == bits(ft.fake_quant(host, "nvfp4.te"))
    with pytest.warns(UserWarning, match="copying a cuda tensor to the CPU"):
        a = fp4emu.fake_quant(t, "mxfp4.ocp")   # the numpy API: the values come back as numpy
    assert isinstance(a, np.ndarray) and a.tobytes() == fp4emu.fake_quant(host, "mxfp4.ocp").tobytes()
    assert _CudaStandIn.copies == 2
    assert torch.equal(t.as_subclass(torch.Tensor), host)  # the input is left as it was


def test_fake_quantize_is_straight_through():
    x = torch.randn(4, 64, requires_grad=True)
    y = ft.FakeQuantize.apply(x, "nvfp4.te")
    assert bits(y.detach()) == bits(ft.fake_quant(x.detach(), "nvfp4.te"))
    (y * torch.arange(64.0)).sum().backward()
    assert torch.equal(x.grad, torch.arange(64.0).expand(4, 64))


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        w = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        return self.o_proj((w @ v).transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.up_proj, self.down_proj = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.gelu(self.up_proj(x)))


class Layer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attn, self.mlp = Attention(d, 4), MLP(d, 4 * d)

    def forward(self, x):
        x = x + self.self_attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Inner(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.layers = nn.ModuleList([Layer(d)])


class TinyModel(nn.Module):
    """One attention block and a 2-layer MLP; names as Hugging Face models have them."""

    def __init__(self, d=64):
        super().__init__()
        self.model = Inner(d)

    def forward(self, x):
        for layer in self.model.layers:
            x = layer(x)
        return x


def tiny_model():
    torch.manual_seed(0)
    return TinyModel().eval()


def inputs():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 16, 64, generator=g)
    x[:, 0, 5] = 40.0  # a massive activation in one channel
    return x


LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj"]
NAMES = [f"model.layers.0.self_attn.{p}" for p in LINEARS] + ["model.layers.0.mlp.up_proj",
                                                              "model.layers.0.mlp.down_proj"]


def captured_inputs(model, x):
    got = {}
    hooks = [model.get_submodule(n).register_forward_pre_hook(
        lambda m, a, n=n: got.__setitem__(n, a[0].detach().reshape(-1, a[0].shape[-1]).clone())) for n in NAMES]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return got


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_dump_activations_is_read_by_the_cli(dtype, cli, tmp_path):
    model, x = tiny_model(), inputs()
    path = tmp_path / "acts.safetensors"
    names = ft.dump_activations(model, x, path, modules="*", dtype=dtype)
    assert names == [n + ".input" for n in NAMES]
    assert list(tmp_path.iterdir()) == [path]  # no temporaries left
    cli("inspect", path, "--json", tmp_path / "i.json")
    inspect = json.loads((tmp_path / "i.json").read_text())
    assert [t["name"] for t in inspect["tensors"]] == names
    assert {t["dtype"] for t in inspect["tensors"]} == {dtype.replace("fp", "f")}
    recipes = "hif4.v14,mxfp4.ocp,nvfp4.te"
    cli("compare", path, "--recipe", recipes, "--json", tmp_path / "c.json")
    report = json.loads((tmp_path / "c.json").read_text())
    want = captured_inputs(model, x)
    for t in report["tensors"]:
        a = want[t["name"][: -len(".input")]]
        if dtype == "bf16":
            a = a.to(torch.bfloat16)
        assert t["shape"] == list(a.shape)
        ours = fp4emu.compare(a, recipes)
        for r in t["results"]:
            assert {k: ours[r["recipe"]][k] for k in r if k != "recipe"} == \
                {k: v for k, v in r.items() if k != "recipe"}


def test_dump_activations_selects_modules(tmp_path):
    names = ft.dump_activations(tiny_model(), (inputs(),), tmp_path / "mlp.safetensors", modules="*.mlp.*")
    assert names == ["model.layers.0.mlp.up_proj.input", "model.layers.0.mlp.down_proj.input"]
    with pytest.raises(ValueError, match="matches no nn.Linear"):
        ft.dump_activations(tiny_model(), inputs(), tmp_path / "none.safetensors", modules="*.nothing.*")
    assert not (tmp_path / "none.safetensors").exists()


def hand_written(model, x, recipe, names, weights=False, residual=None):
    """The forward with fake_quant applied by hand to the input (and weight) of each named Linear."""
    def fq(a):
        return torch.from_numpy(fp4emu.fake_quant(a.detach().numpy(), recipe))

    def pre(m, args):
        a = args[0]
        flat = a.reshape(-1, a.shape[-1])
        q = fq(flat)
        if residual:
            r = fq(flat - q)
            q = q + r * torch.from_numpy(fp4emu.sparsity_mask(r.numpy(), residual)).float()
        return (q.reshape(a.shape),)

    saved = {}
    hooks = []
    for n in names:
        m = model.get_submodule(n)
        hooks.append(m.register_forward_pre_hook(pre))
        if weights:
            saved[n] = m.weight.data
            m.weight.data = fq(m.weight.data)
    with torch.no_grad():
        y = model(x)
    for h in hooks:
        h.remove()
    for n, w in saved.items():
        model.get_submodule(n).weight.data = w
    return y


@pytest.mark.parametrize("recipe, modules, weights, residual", [
    ("nvfp4.te", "*", False, None),
    ("mxfp4.rceil", "*.mlp.*", True, None),
    ("hif4.v14", "*", True, "2:4"),
    ("nvfp4.te", "*.mlp.*", False, "dense"),
])
def test_quantized_forward_is_the_hand_written_one(recipe, modules, weights, residual):
    x = inputs()
    names = [n for n in NAMES if __import__("fnmatch").fnmatchcase(n, modules)]
    want = hand_written(tiny_model(), x, recipe, names, weights, residual)
    model = tiny_model()
    with torch.no_grad():
        exact = model(x)
    assert ft.quantize_linear_inputs(model, recipe, modules=modules, weights=weights, residual=residual) == names
    with torch.no_grad():
        got = model(x)
    assert torch.equal(got, want)
    assert not torch.equal(got, exact)


def test_residual_recovers_error():
    x = inputs()
    model = tiny_model()
    with torch.no_grad():
        exact = model(x)
    errors = {}
    for residual in (None, "2:4", "dense"):
        m = tiny_model()
        ft.quantize_linear_inputs(m, "mxfp4.ocp", modules="*", residual=residual)
        with torch.no_grad():
            errors[residual] = float(((m(x) - exact) ** 2).sum())
    assert errors["dense"] < errors["2:4"] < errors[None]


def test_quantize_linear_inputs_trains():
    model = tiny_model().train()
    ft.quantize_linear_inputs(model, "nvfp4.te", modules="*", weights=True)
    model(inputs()).pow(2).mean().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_quantize_linear_inputs_errors():
    with pytest.raises(ValueError, match="matches no nn.Linear"):
        ft.quantize_linear_inputs(tiny_model(), "nvfp4.te", modules="*.mlp")
    with pytest.raises(ValueError, match="5:4"):
        ft.quantize_linear_inputs(tiny_model(), "nvfp4.te", modules="*", residual="5:4")
    with pytest.raises(ValueError, match="unknown option"):
        ft.quantize_linear_inputs(tiny_model(), "nvfp4.te", modules="*", rnd="rne")
