"""rounding="stochastic" from Python: the command line's bits for every random-bit source, the
metadata of packed tensors, and its refusals with the command line's messages."""
import re

import numpy as np
import pytest

import fp4emu


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def bits(a):
    return np.asarray(a).tobytes()


X_SHAPE = (6, 128)
AXIS0_WORDS = (2, 128)  # axis 0 (length 6) holds ceil(6 / 4) = 2 words per column

# (Python keywords, command-line flags, the file's 'stochastic' metadata); arrays by name.
SOURCES = [
    (dict(seed=42), ["--seed", "42"], "philox-te seed=42 offset=0 map=te"),
    (dict(seed=42, offset=7, rbits_map="ptx"), ["--seed", "42", "--offset", "7", "--rbits-map", "ptx"],
     "philox-te seed=42 offset=7 map=ptx"),
    (dict(seed=2**64 - 1, offset=3, rng="philox-index"),
     ["--seed", str(2**64 - 1), "--offset", "3", "--rng", "philox-index"],
     f"philox-index seed={2**64 - 1} offset=3"),
    (dict(rbits="u8"), ["--rbits", "u8"], "given bytes"),
    (dict(rbits="u32"), ["--rbits", "u32"], "given words map=te"),
    (dict(rbits="u32", rbits_map="ptx"), ["--rbits", "u32", "--rbits-map", "ptx"], "given words map=ptx"),
]


def random_bits(axis):
    g = np.random.default_rng(5)
    words_shape = AXIS0_WORDS if axis == 0 else (X_SHAPE[0], X_SHAPE[1] // 4)
    return {"u8": g.integers(0, 256, X_SHAPE, dtype=np.uint8),
            "u32": g.integers(0, 2**32, words_shape, dtype=np.uint32)}


def resolve(kwargs, flags, arrays, tmp_path):
    kw = {k: arrays[v] if k == "rbits" else v for k, v in kwargs.items()}
    args = []
    for f in flags:
        if f in arrays:
            path = tmp_path / f"{f}.npy"
            np.save(path, arrays[f])
            f = str(path)
        args.append(f)
    return kw, args


@pytest.mark.parametrize("recipe", ["mxfp4.ocp", "mxfp4.rceil", "nvfp4.te", "hif4.v14"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("source", range(len(SOURCES)))
def test_python_bits_are_the_cli_bits(cli, tmp_path, recipe, axis, source):
    kwargs, flags, meta = SOURCES[source]
    x = rand(X_SHAPE, seed=source) * 3
    np.save(tmp_path / "x.npy", x)
    kw, args = resolve(kwargs, flags, random_bits(axis), tmp_path)
    common = ["--recipe", recipe, "--axis", str(axis), "--round", "stochastic", *args]
    cli("fake-quant", tmp_path / "x.npy", tmp_path / "y.npy", *common)
    y = fp4emu.fake_quant(x, recipe, axis=axis, rounding="stochastic", **kw)
    assert bits(y) == bits(np.load(tmp_path / "y.npy"))
    assert bits(y) != bits(fp4emu.fake_quant(x, recipe, axis=axis))  # the bits were used
    cli("quantize", tmp_path / "x.npy", tmp_path / "q.safetensors", *common)
    theirs = fp4emu.load(tmp_path / "q.safetensors")
    p = fp4emu.quantize(x, recipe, axis=axis, rounding="stochastic", **kw)
    assert bits(p.codes) == bits(theirs.codes) and bits(p.scales) == bits(theirs.scales)
    assert p.meta == theirs.meta and p.meta["stochastic"] == meta and p.meta["rounding"] == "stochastic"
    assert bits(p.dequantize()) == bits(y)


def test_torch_fake_quant_takes_the_same_bits():
    torch = pytest.importorskip("torch")
    import fp4emu.torch as ft
    x = rand((4, 64))
    u8 = np.random.default_rng(1).integers(0, 256, x.shape, dtype=np.uint8)
    for kw in (dict(seed=9, offset=2), dict(rbits=u8), dict(rbits=torch.from_numpy(u8))):
        want = fp4emu.fake_quant(x, "nvfp4.te", rounding="stochastic", **kw)
        got = ft.fake_quant(torch.from_numpy(x), "nvfp4.te", rounding="stochastic", **kw)
        assert bits(got.numpy()) == bits(want)


def test_seeds_and_offsets_reproduce_and_differ():
    x = rand((32, 64))
    a = fp4emu.fake_quant(x, "mxfp4.ocp", rounding="stochastic", seed=1)
    assert bits(a) == bits(fp4emu.fake_quant(x, "mxfp4.ocp", rounding="stochastic", seed=1, threads=3))
    assert bits(a) != bits(fp4emu.fake_quant(x, "mxfp4.ocp", rounding="stochastic", seed=2))
    assert bits(a) != bits(fp4emu.fake_quant(x, "mxfp4.ocp", rounding="stochastic", seed=1, offset=1))
    # A non-contiguous rbits view gives the bits of its contiguous copy.
    u8 = np.random.default_rng(2).integers(0, 256, (64, 32), dtype=np.uint8).T
    assert bits(fp4emu.fake_quant(x, "mxfp4.ocp", rounding="stochastic", rbits=u8)) == \
        bits(fp4emu.fake_quant(x, "mxfp4.ocp", rounding="stochastic", rbits=np.ascontiguousarray(u8)))


# ---- refusals: the command line's message, in the keywords' spelling ----------------------------------
def python_spelling(message):
    """A command-line message with its flags written as the Python keywords."""
    m = message.replace("--rbits FILE.npy", "rbits=ARRAY").replace("--round stochastic", "rounding='stochastic'")
    m = re.sub(r"--rbits \S+\.npy", "rbits", m)  # the file the command read is the array given
    m = re.sub(r"--([a-z-]+) ('|S |philox)", lambda g: g[1].replace("-", "_") + "=" + g[2], m)
    m = re.sub(r"--([a-z-]+)", lambda g: g[1].replace("-", "_"), m)
    return m.replace("dtype f32", "dtype float32")


REFUSALS = [
    (dict(rounding="stochastic"), ["--round", "stochastic"]),
    (dict(seed=1), ["--seed", "1"]),
    (dict(rounding="rne", rbits="u8"), ["--round", "rne", "--rbits", "u8"]),
    (dict(rounding="rne", rbits_map="te"), ["--round", "rne", "--rbits-map", "te"]),
    (dict(rounding="stochastic", seed=1, rbits="u8"), ["--round", "stochastic", "--seed", "1", "--rbits", "u8"]),
    (dict(rounding="stochastic", rbits="u8", offset=2), ["--round", "stochastic", "--rbits", "u8", "--offset", "2"]),
    (dict(rounding="stochastic", rbits="u8", rng="philox-te"),
     ["--round", "stochastic", "--rbits", "u8", "--rng", "philox-te"]),
    (dict(rounding="stochastic", rbits="u8", rbits_map="ptx"),
     ["--round", "stochastic", "--rbits", "u8", "--rbits-map", "ptx"]),
    (dict(rounding="stochastic", seed=1, rng="philox-index", rbits_map="te"),
     ["--round", "stochastic", "--seed", "1", "--rng", "philox-index", "--rbits-map", "te"]),
    (dict(rounding="stochastic", seed=1, rng="mt19937"), ["--round", "stochastic", "--seed", "1", "--rng", "mt19937"]),
    (dict(rounding="stochastic", seed=1, rbits_map="msb"),
     ["--round", "stochastic", "--seed", "1", "--rbits-map", "msb"]),
    (dict(rounding="stochastic", rbits="u8_short"), ["--round", "stochastic", "--rbits", "u8_short"]),
    (dict(rounding="stochastic", rbits="u32_wrong"), ["--round", "stochastic", "--rbits", "u32_wrong"]),
    (dict(rounding="stochastic", rbits="f32"), ["--round", "stochastic", "--rbits", "f32"]),
    (dict(recipe="mxfp4.ceil", rounding="stochastic", seed=1), ["--round", "stochastic", "--seed", "1"]),
    (dict(recipe="hif4.a6", rounding="stochastic", seed=1), ["--round", "stochastic", "--seed", "1"]),
]


@pytest.mark.parametrize("case", range(len(REFUSALS)))
def test_refusals_carry_the_cli_message(cli, tmp_path, case):
    kwargs, flags = REFUSALS[case]
    kwargs = dict(kwargs)
    recipe = kwargs.pop("recipe", "mxfp4.ocp")
    x = np.full((2, 64), 1.3, np.float32)
    arrays = {"u8": np.ones((2, 64), np.uint8), "u8_short": np.ones((2, 32), np.uint8),
              "u32_wrong": np.ones((2, 64), np.uint32), "f32": x}
    np.save(tmp_path / "x.npy", x)
    kw, args = resolve(kwargs, flags, arrays, tmp_path)
    r = cli("fake-quant", tmp_path / "x.npy", tmp_path / "y.npy", "--recipe", recipe, *args, check=False)
    assert r.returncode == 2, r.stderr
    cli_message = re.sub(r"^fp4emu: error: ", "", r.stderr.strip().splitlines()[-1])
    for call in (lambda: fp4emu.fake_quant(x, recipe, **kw), lambda: fp4emu.quantize(x, recipe, **kw)):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == python_spelling(cli_message), r.stderr


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, True, "7"])
def test_seed_must_be_a_64_bit_integer(bad):
    with pytest.raises(ValueError, match="is not a seed; use an integer in 0..18446744073709551615"):
        fp4emu.fake_quant(rand((1, 32)), "mxfp4.ocp", rounding="stochastic", seed=bad)
    with pytest.raises(ValueError, match="offset=.* is not a seed"):
        fp4emu.fake_quant(rand((1, 32)), "mxfp4.ocp", rounding="stochastic", seed=0, offset=bad)
