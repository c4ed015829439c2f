"""The bias study (studies/sr_bias.py, docs/analysis.md §7) at a reduced size, asserting its invariants:
stochastic rounding's mean error is zero off clipped elements but for its 8-bit rule's shortfall
(nearest rounding's is not), nearest
rounding's accumulated error grows like a bias while SR's stays a random walk, and seeds reproduce."""
import importlib.util

import numpy as np
import pytest

import fp4emu

# Five standard errors: a zero-mean sample mean lands beyond it with probability ~6e-7 (the
# errors of distinct elements are independent given x: each has its own Philox byte).
Z = 5.0


@pytest.fixture(scope="module")
def study(root):
    spec = importlib.util.spec_from_file_location("sr_bias", root / "studies" / "sr_bias.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tensor_rows(study, root):
    acts = fp4emu.read_tensors(root / "data" / "sample_dump.safetensors", ["model.layers.0.mlp.*"])
    tensors = {"dump": {k: (np.asarray(v), "bf16") for k, v in acts.items()},
               "gradients": {"g0": (study.gradient_like(64, 1024, 1), None)}}
    return study.study_tensors(tensors, study.RECIPES, seed=11)


def test_sr_mean_error_is_zero_off_clipping(tensor_rows):
    # Off clipped elements SR's mean error lies between 0 and the shortfall of its 8-bit rule
    # (sr_truncation: less than 2^-8 of each element's grid step, toward zero), up to sampling error.
    for r in tensor_rows:
        if r["rounding"] == "stochastic":
            assert r["sr_truncation"] < 0, r
            assert r["sr_truncation"] - Z * r["shrink_unclipped_se"] <= r["shrink_unclipped"], r
            assert r["shrink_unclipped"] <= Z * r["shrink_unclipped_se"], r


def test_nearest_shrinks_values_and_the_check_sees_it(tensor_rows):
    # The same check fails for nearest rounding on the activations: it rounds magnitudes down on average.
    for r in tensor_rows:
        if r["rounding"] == "nearest" and r["set"] == "dump":
            assert r["shrink_unclipped"] < r["sr_truncation"] - Z * r["shrink_unclipped_se"], r
    # Only mxfp4.rceil's scale (rounded up) never lets an element pass the top code.
    assert all(r["clip"] == 0 for r in tensor_rows if r["recipe"] == "mxfp4.rceil")
    assert all(r["clip"] > 0 for r in tensor_rows if r["recipe"] != "mxfp4.rceil")


def test_accumulated_error_grows_for_nearest_not_for_sr(study):
    steps = 1000
    rows = study.study_accumulation(study.RECIPES, steps, 4, 256, [0.25], seed=3, checkpoints={10, steps})
    walk = {(a["recipe"], a["rounding"], a["N"]): a["acc_walk"] for a in rows}
    for recipe in study.RECIPES:
        # A bias b per step gives an error b*N: sqrt(N) times the random-walk scale, x10 from 10 to 1000.
        assert walk[recipe, "nearest", steps] >= 3 * walk[recipe, "nearest", 10], recipe
        assert walk[recipe, "stochastic", steps] < walk[recipe, "nearest", steps], recipe
    # Without clipping SR's errors cancel: the random-walk-scaled error stays flat (its rms over 1024
    # elements fluctuates by a few per cent, far inside 1.5x; a bias would give x10).
    assert walk["mxfp4.rceil", "stochastic", steps] <= 1.5 * walk["mxfp4.rceil", "stochastic", 10]


def test_seeds_reproduce(study):
    def once(seed):
        return study.study_accumulation(["mxfp4.ocp", "nvfp4.te"], 40, 2, 64, [1.0], seed, {1, 40}, chunk=16)
    assert once(5) == once(5)
    assert once(5) != once(6)
    x = study.gradient_like(8, 256, 2)
    assert np.array_equal(x, study.gradient_like(8, 256, 2))
    a = study.quantize(x, "hif4.v14", "stochastic", seed=5, offset=1)
    assert a.tobytes() == study.quantize(x, "hif4.v14", "stochastic", seed=5, offset=1).tobytes()
    assert a.tobytes() != study.quantize(x, "hif4.v14", "stochastic", seed=5, offset=2).tobytes()
