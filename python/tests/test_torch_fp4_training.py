"""fp4emu.torch.Fp4Linear: all three GEMMs of a linear layer in FP4, each operand in blocks along its GEMM's
reduction axis, checked against fake_quant called by hand; RHT (fp4emu.rht) on the weight-gradient inputs;
stochastic rounding of the gradients, unbiased over seeds and reproducible."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import fp4emu  # noqa: E402
import fp4emu.torch as ft  # noqa: E402

RECIPES = ["hif4.v14", "mxfp4.ocp", "nvfp4.te"]


def _layer(recipe, init=0, **kw):
    torch.manual_seed(init)
    lin = torch.nn.Linear(64, 128)
    return ft.Fp4Linear(lin, recipe, **kw), lin


def _grads(layer, x, gy):
    lin = layer.linear if isinstance(layer, ft.Fp4Linear) else layer
    lin.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    y = layer(x)
    y.backward(gy)
    return y.detach(), x.grad, lin.weight.grad.clone(), lin.bias.grad.clone()


@pytest.mark.parametrize("shape", [(128, 64), (2, 64, 64), (4, 3, 32, 64)])
def test_recipe_none_is_nn_linear_bit_for_bit(shape):
    torch.manual_seed(1)
    x, gy = torch.randn(shape), torch.randn(*shape[:-1], 128)
    fp4, _ = _layer(None)
    ref = torch.nn.Linear(64, 128)
    ref.load_state_dict(fp4.linear.state_dict())
    for a, b in zip(_grads(fp4, x, gy), _grads(ref, x, gy)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_gemm_quantizes_along_its_reduction_axis(recipe):
    torch.manual_seed(2)
    x, gy = torch.randn(2, 64, 64) * 3, torch.randn(2, 64, 128)
    layer, lin = _layer(recipe)
    y, gx, gw, gb = _grads(layer, x, gy)
    w = lin.weight.detach()
    x2, g2 = x.reshape(-1, 64), gy.reshape(-1, 128)
    q = ft.fake_quant
    assert torch.equal(y, torch.nn.functional.linear(q(x, recipe, axis=-1), q(w, recipe, axis=-1), lin.bias.detach()))
    assert torch.equal(gx, (q(g2, recipe, axis=-1) @ q(w, recipe, axis=0)).reshape(x.shape))
    assert torch.equal(gw, q(g2, recipe, axis=0).t() @ q(x2, recipe, axis=0))
    assert torch.equal(gb, g2.sum(0))
    # ... and the check can fail: blocks along the other axis give other numbers.
    assert not torch.equal(gw, q(g2.t().contiguous(), recipe, axis=0) @ q(x2, recipe, axis=-1))
    assert not torch.equal(gx, (q(g2, recipe, axis=0) @ q(w, recipe, axis=-1)).reshape(x.shape))


def test_rht_is_the_projects_transform_and_orthogonal():
    g = np.random.default_rng(3).standard_normal((64, 48)).astype(np.float32)
    r = ft.rht(torch.from_numpy(g), 16, axis=0, signs="te")
    # fp4emu.rht along the last axis of the transpose: the same numbers.
    assert np.array_equal(r.numpy(), fp4emu.rht(g.T.copy(), 16, signs="te").T)
    # H_16 D: orthonormal, and its inverse round-trips.
    np.testing.assert_allclose(r.T @ r, torch.from_numpy(g).T @ torch.from_numpy(g), rtol=1e-5, atol=1e-4)
    back = ft.rht(r, 16, axis=0, signs="te", inverse=True)
    np.testing.assert_allclose(back.numpy(), g, atol=1e-6)
    # One tile of ones: H_b D maps it to sqrt(b) D H e_0 ... its first column is d_j sum / sqrt(b).
    ones = np.ones((1, 16), np.float32)
    sign0 = fp4emu.rht(ones, 16, signs="te")[0, 0] / 4.0
    assert sign0 in (1.0, -1.0) and np.count_nonzero(fp4emu.rht(ones, 16, signs="te")) == 1
    with pytest.raises(ValueError, match="dividing the row length"):
        fp4emu.rht(np.ones((2, 24), np.float32), 16)


@pytest.mark.parametrize("recipe", ["mxfp4.ocp", "nvfp4.te"])
def test_rht_rotates_both_weight_gradient_operands_along_tokens(recipe):
    torch.manual_seed(4)
    x, gy = torch.randn(64, 64), torch.randn(64, 128)
    layer, lin = _layer(recipe, rht=16)
    _, gx, gw, _ = _grads(layer, x, gy)
    q = ft.fake_quant
    gr, xr = ft.rht(gy, 16, axis=0, signs="te"), ft.rht(x, 16, axis=0, signs="te")
    assert torch.equal(gw, q(gr, recipe, axis=0).t() @ q(xr, recipe, axis=0))
    plain, _ = _layer(recipe)
    _, gx0, gw0, _ = _grads(plain, x, gy)
    assert torch.equal(gx, gx0) and not torch.equal(gw, gw0)  # dX is untouched


def test_sr_gradients_are_reproducible_and_advance_per_step():
    torch.manual_seed(5)
    x, gy = torch.randn(64, 64), torch.randn(64, 128)
    runs = []
    for _ in range(2):
        layer, _ = _layer("mxfp4.ocp", sr=True, seed=7, rht=16)
        runs.append([_grads(layer, x, gy)[1:3] for _ in range(3)])
    for a, b in zip(runs[0], runs[1]):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # Step 2 draws other bits than step 1 on the same inputs, and another seed other bits again.
    assert not torch.equal(runs[0][0][1], runs[0][1][1])
    other, _ = _layer("mxfp4.ocp", sr=True, seed=8, rht=16)
    assert not torch.equal(_grads(other, x, gy)[2], runs[0][0][1])
    # Without grad the step counter stays.
    layer, _ = _layer("mxfp4.ocp", sr=True)
    with torch.no_grad():
        layer(x)
    assert layer.steps == 0



@pytest.mark.parametrize("recipe", RECIPES)
def test_sr_gradients_are_the_stated_draws_along_each_axis(recipe):
    # The layer quantizes axis-0 blocks as rows of the transposed operand (the fast contiguous path); the
    # draws must still be fake_quant's along axis 0 of dY with the layer's key and offset, step after step.
    torch.manual_seed(9)
    x, gy = torch.randn(2, 32, 64), torch.randn(2, 32, 128)
    layer, lin = _layer(recipe, sr=True, seed=3, rht=16, index=5)
    w = lin.weight.detach()
    x2, g2 = x.reshape(-1, 64), gy.reshape(-1, 128)
    q = ft.fake_quant
    gr, xr = ft.rht(g2, 16, axis=0, signs="te"), ft.rht(x2, 16, axis=0, signs="te")
    for step in range(2):
        _, gx, gw, _ = _grads(layer, x, gy)
        off = ft._SR_OFFSET_STRIDE * step
        sr = lambda role: dict(rounding="stochastic", seed=layer.sr_seed(role), offset=off)  # noqa: E731
        assert torch.equal(gx, (q(g2, recipe, axis=-1, **sr(0)) @ q(w, recipe, axis=0)).reshape(x.shape))
        assert torch.equal(gw, q(gr, recipe, axis=0, **sr(1)).t() @ q(xr, recipe, axis=0))
    # ... and can fail: the previous step's offset draws other bits.
    assert not torch.equal(gw, q(gr, recipe, axis=0, **sr(1) | {"offset": 0}).t() @ q(xr, recipe, axis=0))

def _unclipped_gradient(rows, cols, seed):
    """Uniform in (-4, 4) with 4 itself in every run of 16 consecutive elements along either axis: every
    block's amax is 4, which each recipe's scale holds without clipping (MXFP4: scale 1, 4 on the grid), so
    only SR's own rounding is left to bias the mean."""
    g = (torch.rand(rows, cols, generator=torch.Generator().manual_seed(seed)) * 2 - 1) * 4
    i, j = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    return torch.where((i - j) % 16 == 0, torch.full_like(g, 4.0), g)


@pytest.mark.parametrize("recipe", RECIPES)
def test_sr_gradients_are_unbiased_over_steps(recipe):
    # E[Q_SR(g)] = g but for the 8-bit rule's shortfall (< step/256 per element, docs/formats.md), so the
    # mean of K steps' gradients (a fresh Philox offset each) approaches the gradient with unquantized dY:
    # its rms error is one step's over sqrt(K) for unbiased draws; bound 2 / sqrt(K). Nearest rounding's
    # error is the same at every step and does not average away.
    torch.manual_seed(6)
    x, gy = torch.randn(64, 64), _unclipped_gradient(64, 128, 6)
    layer, lin = _layer(recipe, sr=True, seed=11)
    w = lin.weight.detach()
    q = ft.fake_quant
    exact = {1: (gy @ q(w, recipe, axis=0)), 2: gy.t() @ q(x, recipe, axis=0)}  # dY unquantized
    k = 64
    draws = [_grads(layer, x, gy) for _ in range(k)]
    nearest = _grads(_layer(recipe)[0], x, gy)
    for i in (1, 2):  # dX, dW
        rms = lambda t: t.pow(2).mean().sqrt()  # noqa: E731
        mean = sum(d[i] for d in draws) / k
        one = rms(draws[0][i] - exact[i])
        assert rms(mean - exact[i]) < 2 * one / math.sqrt(k), (i, rms(mean - exact[i]), one)
        assert rms(mean - exact[i]) < 0.5 * rms(nearest[i] - exact[i]), i


def test_fp4_training_replaces_matching_linears_with_state_dict_names_kept():
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    keys = set(model.state_dict())
    names = ft.fp4_training(model, "mxfp4.ocp", modules="*", sr=True, seed=3)
    assert names == ["0", "2"] and [model[0].index, model[2].index] == [0, 2 - 1]
    rollout = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32))
    ft.quantize_linear_inputs(rollout, "mxfp4.ocp", modules="*", weights=True)
    rollout.load_state_dict(model.state_dict())  # the same names either way
    assert set(k.replace(".linear", "") for k in model.state_dict()) == keys
    with pytest.raises(ValueError, match="matches no nn.Linear"):
        ft.fp4_training(model, "mxfp4.ocp", modules="nothing")
    with pytest.raises(ValueError, match="power-of-two"):
        ft.Fp4Linear(torch.nn.Linear(4, 4), "mxfp4.ocp", rht=12)
