"""Every case of the checked-in golden suite (golden/suite, written by `fp4emu golden
generate`) through the Python API gives the suite's bits; every recipe gives the
command line's bits on the suite's inputs."""
import json

import numpy as np
import pytest

import fp4emu

from conftest import ROOT

SUITE = ROOT / "golden" / "suite"
MANIFEST = json.loads((SUITE / "manifest.json").read_text())


def load(rel):
    a = np.load(SUITE / rel)
    return a.view(np.uint16) if a.dtype.kind == "V" else a  # bf16 arrays are stored as <V2


def case_input(case):
    f = next(f for f in case["files"] if f["role"] == "input")
    return load(f["path"]), {"f32": None, "bf16": "bf16", "f16": "f16"}[case["input_dtype"]]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    assert a.tobytes() == b.tobytes(), np.argwhere(a.view(np.uint8) != b.view(np.uint8))[:5]


QUANT_CASES = [c for c in MANIFEST["cases"] if c["family"] != "gemm"]


@pytest.mark.parametrize("impl", ["auto", "reference"])
@pytest.mark.parametrize("case", QUANT_CASES, ids=[c["id"] for c in QUANT_CASES])
def test_suite_case(case, impl):
    o = case["options"]
    x, dt = case_input(case)
    kw = dict(axis=o["axis"], tail=o["tail"], rounding=o["rounding"], nibble_order=o["nibble_order"],
              scale_bit_order=o["scale_bit_order"], impl=impl, input_dtype=dt,
              global_amax=None if o["global_amax"] is None else float.fromhex(o["global_amax"]))
    if "stochastic" in case:  # the case's random bytes, one per element (golden/README.md)
        kw["rbits"] = load(f'{case["id"]}/{case["stochastic"]["rbits"]}')
    if case["expect"] == "error":
        with pytest.raises(ValueError) as e:
            fp4emu.quantize(x, case["recipe"], **kw)
        assert case["error"] in str(e.value)
        return
    p = fp4emu.quantize(x, case["recipe"], **kw)
    outputs = {f["path"].rsplit("/", 1)[1]: f["path"] for f in case["files"] if f["role"] == "output"}
    same_bits(p.codes, load(outputs["codes.npy"]))
    same_bits(p.scales, load(outputs["scales.npy"]))
    dq = p.dequantize(impl=impl)
    same_bits(dq, load(outputs["dequant.npy"]))
    fq = {k: v for k, v in kw.items() if k not in ("nibble_order", "scale_bit_order")}
    same_bits(fp4emu.fake_quant(x, case["recipe"], **fq), dq)
    if "global_scale.npy" in outputs:
        same_bits(p.global_scale, load(outputs["global_scale.npy"]))
    for layout in o["scale_layouts"]:
        if layout != "linear":
            same_bits(p.with_scale_layout(layout).scales, load(outputs[f"scales_{layout}.npy"]))
            again = fp4emu.quantize(x, case["recipe"], scale_layout=layout, **kw)
            same_bits(again.scales, load(outputs[f"scales_{layout}.npy"]))


KEYED_CASES = [c for c in QUANT_CASES if "rng" in c.get("stochastic", {})]


@pytest.mark.parametrize("case", KEYED_CASES, ids=[c["id"] for c in KEYED_CASES])
def test_suite_philox_key_regenerates_the_bytes(case):
    """A stochastic case's Philox key (seed, offset, rng, rbits_map) gives the suite's codes, and the
    packed metadata records that key."""
    k, o = case["stochastic"], case["options"]
    x, dt = case_input(case)
    p = fp4emu.quantize(x, case["recipe"], axis=o["axis"], tail=o["tail"], rounding="stochastic", input_dtype=dt,
                        seed=k["seed"], offset=k["offset"], rng=k["rng"], rbits_map=k.get("rbits_map"))
    same_bits(p.codes, load(f'{case["id"]}/codes.npy'))
    assert p.meta["stochastic"].startswith(f'{k["rng"]} seed={k["seed"]} offset={k["offset"]}')


def test_suite_has_stochastic_cases_of_every_sr_recipe():
    assert len(KEYED_CASES) == 12
    assert {c["recipe"] for c in QUANT_CASES if c["family"] == "stochastic"} == {
        "hif4.v14", "mxfp4.ocp", "mxfp4.rceil", "nvfp4.te"}


GEMM_CASES = [c for c in MANIFEST["cases"] if c["family"] == "gemm" and not c["random_scales"]]


@pytest.mark.parametrize("case", GEMM_CASES, ids=[c["id"] for c in GEMM_CASES])
def test_suite_gemm(case):
    d = case["id"]
    dt = {"f32": None, "bf16": "bf16"}[case["input_dtype"]]
    ops = []
    for side in ("a", "b"):
        s = case[side]
        p = fp4emu.quantize(load(f"{d}/{side.upper()}.npy"), case["recipe"], axis=s["axis"], tail=s["tail"],
                            nibble_order=s["nibble_order"], input_dtype=dt)
        same_bits(p.codes, load(f"{d}/{side}_codes.npy"))
        same_bits(p.scales, load(f"{d}/{side}_scales.npy"))
        ops.append(p)
    alpha = None if case["alpha"] is None else float.fromhex(case["alpha"])
    # The epilogue's inputs, where the case has them (gemm_epilogue).
    names = {f["path"].rsplit("/", 1)[1] for f in case["files"]}
    epilogue = {}
    if "c.npy" in names:
        epilogue.update(c=load(f"{d}/c.npy"), beta=float.fromhex(case["beta"]))
    if "bias.npy" in names:
        epilogue["bias"] = load(f"{d}/bias.npy")
    for out in case["outputs"]:
        c = fp4emu.gemm(ops[0], ops[1], model=out["model"], blocks_per_step=out["blocks_per_step"], alpha=alpha,
                        impl=case["implementation"], **epilogue)
        same_bits(c, load(f"{d}/{out['file']}"))


# Inputs for the recipes the suite does not hold: the special values and random
# rows of each format's default-recipe cases (shapes fit the format's block).
def inputs_for(fmt):
    default = next(f["default_recipe"] for f in fp4emu.formats() if f["format"] == fmt)
    for name in ("special", "random_gaussian_rows", "random_llm_bf16", "tail_03"):
        case = next((c for c in MANIFEST["cases"] if c["id"] == f"{default}/{name}"), None)
        if case:
            yield name, case_input(case)[0], case["input_dtype"], case["options"]["axis"]


@pytest.mark.parametrize("recipe", [r["id"] for r in fp4emu.recipes()])
def test_every_recipe_matches_the_cli(recipe, cli, tmp_path):
    r = next(r for r in fp4emu.recipes() if r["id"] == recipe)
    ran = 0
    for name, x, dtype, axis in inputs_for(r["format"]):
        if r["bf16_input_only"] and dtype != "bf16":
            continue
        src = tmp_path / f"{name}.npy"
        np.save(src, x.view("V2") if dtype == "bf16" else x)  # the CLI reads bf16 as <V2
        dt = "bf16" if dtype == "bf16" else None
        fq = tmp_path / f"{name}_fq.npy"
        r_cli = cli("fake-quant", src, fq, "--recipe", recipe, "--axis", axis, check=False)
        if r_cli.returncode == 2:  # refused (a ragged axis under tail policy error): the same message
            with pytest.raises(ValueError) as e:
                fp4emu.fake_quant(x, recipe, axis=axis, input_dtype=dt)
            assert str(e.value) in r_cli.stderr
            continue
        assert r_cli.returncode == 0, r_cli.stderr
        same_bits(fp4emu.fake_quant(x, recipe, axis=axis, input_dtype=dt), np.load(fq))
        if not r["fake_quant_only"]:
            packed = tmp_path / f"{name}.safetensors"
            cli("quantize", src, packed, "--recipe", recipe, "--axis", axis)
            mine = fp4emu.quantize(x, recipe, axis=axis, input_dtype=dt)
            theirs = fp4emu.load(packed)
            same_bits(mine.codes, theirs.codes)
            same_bits(mine.scales, theirs.scales)
            assert mine.meta == theirs.meta
            mine.save(tmp_path / "mine.safetensors")
            assert (tmp_path / "mine.safetensors").read_bytes() == packed.read_bytes()
        ran += 1
    assert ran >= 1
