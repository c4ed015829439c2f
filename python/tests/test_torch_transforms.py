"""fp4emu.torch.QuantizedLinear's W4A16 mode and transforms, each against docs/analysis.md §4's formula by hand."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp4emu  # noqa: E402
import fp4emu.torch as ft  # noqa: E402

R = "mxfp4.ocp"


def q(a):
    return torch.from_numpy(fp4emu.fake_quant(np.ascontiguousarray(a, dtype=np.float32), R))


@pytest.fixture
def layer():
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 24)
    x = torch.randn(10, 64) * torch.linspace(0.1, 8, 64)  # channels of growing scale, as outliers
    return lin, x


def test_weights_only_keeps_the_input(layer):
    lin, x = layer
    y = ft.QuantizedLinear(lin, R, weights=True, inputs=False)(x)
    ref = torch.nn.functional.linear(x, q(lin.weight.detach().numpy()), lin.bias)
    assert torch.equal(y, ref)
    assert not torch.equal(y, lin(x))


def test_residual_needs_quantized_inputs(layer):
    with pytest.raises(ValueError, match="inputs=True"):
        ft.QuantizedLinear(layer[0], R, residual="2:4", inputs=False)


def test_rht_is_the_hadamard_of_both_operands(layer):
    lin, x = layer
    w = lin.weight.detach()
    y = ft.QuantizedLinear(lin, R, weights=True, transform="rht")(x)
    # The recipe's block (32) is the default size; signs seeded from 0.
    xh = fp4emu.rht(x.numpy(), b=32, seed=0)
    wh = fp4emu.rht(w.numpy(), b=32, seed=0)
    ref = q(xh) @ q(wh).T + lin.bias.detach()
    assert torch.allclose(y, ref, rtol=1e-6, atol=1e-6)
    # Without quantization the rotation cancels: X W^T back.
    y0 = ft.QuantizedLinear(lin, R, inputs=False, transform="rht")(x)
    assert torch.allclose(y0, lin(x), rtol=1e-5, atol=1e-5)


def test_smoothquant_scales_come_from_the_calibration_batch(layer):
    lin, x = layer
    w = lin.weight.detach().numpy().astype(np.float64)
    calib = torch.randn(7, 64) * 3
    y = ft.QuantizedLinear(lin, R, weights=True, transform="smoothquant:alpha=0.5", calib=calib)(x)
    s = np.clip(np.abs(calib.numpy()).max(0).astype(np.float64) ** 0.5 / np.abs(w).max(0) ** 0.5, 1e-5, 1e5)
    xs = (x.numpy().astype(np.float64) / s).astype(np.float32)
    ws = (w * s).astype(np.float32)
    ref = q(xs) @ q(ws).T + lin.bias.detach()
    assert torch.allclose(y, ref, rtol=1e-5, atol=1e-5)
    # Calibrated on the input itself, the scales (and outputs) differ.
    y_self = ft.QuantizedLinear(lin, R, weights=True, transform="smoothquant:alpha=0.5")(x)
    assert not torch.equal(y, y_self)


def test_occ_adds_the_clamped_part_back_unquantized(layer):
    lin, x = layer
    y = ft.QuantizedLinear(lin, R, weights=True, transform="occ:q=0.9")(x)
    xn = x.numpy()
    lo, hi = np.float32(np.quantile(xn, 0.1)), np.float32(np.quantile(xn, 0.9))
    c = np.clip(xn, lo, hi)
    ref = (q(c) + torch.from_numpy(xn - c)) @ q(lin.weight.detach().numpy()).T + lin.bias.detach()
    assert torch.allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_transform_gradient_is_the_plain_layers(layer):
    lin, x = layer
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ft.QuantizedLinear(lin, R, weights=True, transform="rht")(xa).sum().backward()
    gw = lin.weight.grad.clone()
    lin.weight.grad = None
    lin(xb).sum().backward()
    assert torch.equal(xa.grad, xb.grad) and torch.equal(gw, lin.weight.grad)


def test_bad_transform_and_missing_calibration_are_refused(layer):
    lin, _ = layer
    with pytest.raises(Exception, match="rht"):
        ft.QuantizedLinear(lin, R, transform="rht:b=48")
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
    with pytest.raises(ValueError, match="calib has no activations"):
        ft.quantize_linear_inputs(model, R, modules="*", transform="smoothquant", calib={"0": torch.zeros(1, 64)})


def test_capture_inputs_equals_the_dump(layer, tmp_path):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(3, 5, 64)
    got = ft.capture_inputs(model, x)
    ft.dump_activations(model, x, tmp_path / "a.safetensors", dtype="fp32")
    dump = fp4emu.read_tensors(tmp_path / "a.safetensors")
    assert sorted(got) == ["0", "2"]
    for name, t in got.items():
        assert t.shape == (15, 64) and np.array_equal(t.numpy(), dump[f"{name}.input"])
