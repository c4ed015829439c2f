"""The numpy API: options, inputs, packed files, compare / gemm / identify against
the command line, errors, threads and the GIL."""
import json
import threading

import numpy as np
import pytest

import fp4emu


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def bits(a):
    return np.asarray(a).tobytes()


def test_formats_and_recipes():
    assert [f["format"] for f in fp4emu.formats()] == ["hif4", "mxfp4", "nvfp4"]
    assert [f["block_size"] for f in fp4emu.formats()] == [64, 32, 16]
    ids = [r["id"] for r in fp4emu.recipes()]
    assert "nvfp4.te" in ids and "hif4.a6" in ids and len(ids) == len(set(ids))
    assert all(r["format"] == "mxfp4" for r in fp4emu.recipes("mxfp4"))
    te = next(r for r in fp4emu.recipes("nvfp4") if r["id"] == "nvfp4.te")
    assert te["default"] and "rne" in te["allowed_roundings"]


def test_formats_json_of_the_cli(cli):
    ours = {r["id"]: r for r in fp4emu.recipes()}
    for f in json.loads(cli("formats", "--json").stdout):
        for r in f["recipes"]:
            mine = dict(ours[r["id"]], allowed_roundings=",".join(ours[r["id"]]["allowed_roundings"]))
            assert {k: mine[k] for k in r} == r


@pytest.mark.parametrize("recipe", ["hif4.v14", "mxfp4.rceil", "nvfp4.te", "nvfp4.torchao"])
@pytest.mark.parametrize("axis", [0, -1])
def test_quantize_dequantize_is_fake_quant(recipe, axis):
    x = rand((48, 96))
    p = fp4emu.quantize(x, recipe, axis=axis)
    assert p.recipe == recipe and p.shape == (48, 96) and p.axis == axis % 2
    assert bits(p.dequantize()) == bits(fp4emu.fake_quant(x, recipe, axis=axis))
    assert bits(fp4emu.dequantize(p)) == bits(p.dequantize())
    assert p.meta["recipe"] == recipe


def test_format_name_is_its_default_recipe():
    x = rand((4, 64))
    assert bits(fp4emu.fake_quant(x, "mxfp4")) == bits(fp4emu.fake_quant(x, "mxfp4.ocp"))


def test_threads_and_impl_give_the_same_bits():
    x = rand((256, 512))
    ref = fp4emu.fake_quant(x, "nvfp4.te", impl="reference")
    for threads in (1, 2, 7):
        assert bits(fp4emu.fake_quant(x, "nvfp4.te", threads=threads, impl="fast")) == bits(ref)


def test_packed_arrays_and_files(tmp_path):
    x = rand((130, 64))
    p = fp4emu.quantize(x, "nvfp4.te")
    assert p.codes.dtype == np.uint8 and p.codes.shape == (130, 32)
    assert p.scales.dtype == np.uint8 and p.scales.shape == (130, 4)
    assert p.global_scale.dtype == np.float32 and p.global_scale[0] == np.abs(x).max()
    assert not p.codes.flags.writeable
    h = fp4emu.quantize(x, "hif4.v14")
    assert h.scales.dtype == np.uint32 and h.scales.shape == (130, 1) and h.global_scale is None
    p.save(tmp_path / "p.safetensors")
    q = fp4emu.load(tmp_path / "p.safetensors")
    assert bits(q.codes) == bits(p.codes) and bits(q.scales) == bits(p.scales) and q.meta == p.meta
    sw = fp4emu.quantize(x, "nvfp4.te", scale_layout="swizzled_128x4")
    assert sw.scale_layout == "swizzled_128x4" and sw.scales.shape == (64, 16)  # R' = 256 rows / 4, 4 * C'
    sw.save(tmp_path / "sw.safetensors")
    back = fp4emu.load(tmp_path / "sw.safetensors")
    assert back.scale_layout == "linear" and bits(back.scales) == bits(p.scales)
    assert bits(back.dequantize()) == bits(p.dequantize())


def test_packed_file_is_the_cli_file(cli, tmp_path):
    x = rand((32, 64))
    np.save(tmp_path / "x.npy", x)
    cli("quantize", tmp_path / "x.npy", tmp_path / "cli.safetensors", "--recipe", "mxfp4.rceil",
        "--scale-layout", "swizzled_128x4")
    fp4emu.quantize(x, "mxfp4.rceil", scale_layout="swizzled_128x4").save(tmp_path / "py.safetensors")
    assert (tmp_path / "py.safetensors").read_bytes() == (tmp_path / "cli.safetensors").read_bytes()
    cli("dequantize", tmp_path / "py.safetensors", tmp_path / "dq.npy")
    assert bits(np.load(tmp_path / "dq.npy")) == bits(fp4emu.fake_quant(x, "mxfp4.rceil"))


def test_input_dtypes():
    x = rand((8, 64))
    bf = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bf16 bit patterns
    widened = (bf.astype(np.uint32) << 16).view(np.float32)
    assert bits(fp4emu.fake_quant(bf, "hif4.a6", input_dtype="bf16")) == \
        bits(fp4emu.fake_quant(widened, "hif4.a6"))  # fp32 values exact in bf16
    assert bits(fp4emu.fake_quant(bf, "nvfp4.te", input_dtype="bf16")) == bits(fp4emu.fake_quant(widened, "nvfp4.te"))
    h = x.astype(np.float16)
    assert bits(fp4emu.fake_quant(h, "mxfp4.ocp")) == bits(fp4emu.fake_quant(h.astype(np.float32), "mxfp4.ocp"))
    t = x.T  # not C-contiguous: copied, same values
    assert bits(fp4emu.fake_quant(t, "mxfp4.ocp", axis=0)) == \
        bits(fp4emu.fake_quant(np.ascontiguousarray(t), "mxfp4.ocp", axis=0))
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert bits(fp4emu.fake_quant(widened.astype(ml_dtypes.bfloat16), "nvfp4.te")) == \
        bits(fp4emu.fake_quant(widened, "nvfp4.te"))


@pytest.mark.parametrize("call, message, error", [
    (lambda x: fp4emu.fake_quant(x, "mxfp4.nope"), "mxfp4.nope", ValueError),
    (lambda x: fp4emu.fake_quant(x, "mxfp4.ocp", axis=5), "axis", ValueError),
    (lambda x: fp4emu.fake_quant(x, "mxfp4.ocp", rounding="up"), "rounding='up' is unknown", ValueError),
    (lambda x: fp4emu.fake_quant(x, "hif4.amct", rounding="rtp"), "does not define element rounding", ValueError),
    (lambda x: fp4emu.fake_quant(x[:, :33], "hif4.v14", tail="error"), "not a multiple of the hif4 block size",
     ValueError),
    (lambda x: fp4emu.fake_quant(x, "mxfp4.ocp", global_amax=1.0), "applies to NVFP4 only", ValueError),
    (lambda x: fp4emu.fake_quant(x, "mxfp4.ocp", threads=-1), "thread count -1 is invalid", ValueError),
    (lambda x: fp4emu.compare(x, "mxfp4.ocp", axis=0) and fp4emu.underflow(x, "mxfp4.ocp", threads=1025),
     "thread count 1025 is invalid", ValueError),
    (lambda x: fp4emu.fake_quant(x, "mxfp4.ocp", impl="gpu"), "impl='gpu' is unknown", ValueError),
    (lambda x: fp4emu.fake_quant(x.astype(np.float64), "mxfp4.ocp"), "x.astype(np.float32)", ValueError),
    (lambda x: fp4emu.fake_quant(x.view(np.uint32), "mxfp4.ocp"), "not a float input", ValueError),
    (lambda x: fp4emu.fake_quant(x[:, :32].astype(np.float16).view(np.uint16), "mxfp4.ocp"), "input_dtype='bf16'",
     ValueError),
    (lambda x: fp4emu.fake_quant(np.float32(1), "mxfp4.ocp"), "scalar", ValueError),
    (lambda x: fp4emu.fake_quant(x, "hif4.a6"), "bf16", ValueError),
    (lambda x: fp4emu.quantize(x, "nvfp4.modelopt_fq"), "nvfp4.modelopt_fq", ValueError),
    (lambda x: fp4emu.quantize(x, "hif4.v14", scale_layout="swizzled_128x4"), "does not apply to hif4", ValueError),
    (lambda x: fp4emu.load("/nonexistent/p.safetensors"), "/nonexistent/p.safetensors", OSError),
    (lambda x: fp4emu.quantize(x, "mxfp4.ocp").save("/nonexistent/dir/p.safetensors"), "/nonexistent/dir", OSError),
    (lambda x: fp4emu.gemm(x, x, recipe="mxfp4.ocp"), "", ValueError),
    (lambda x: fp4emu.gemm(x, x.T, recipe="mxfp4.ocp", model="fastest"), "model='fastest' is unknown", ValueError),
    (lambda x: fp4emu.compare(x, ["mxfp4.nope"]), "mxfp4.nope", ValueError),
    (lambda x: fp4emu.sparsity_mask(x, "3:2"), "3:2", ValueError),
])
def test_bad_input_raises_with_the_message(call, message, error):
    x = rand((4, 64)) * 1.001  # not exact in bf16
    with pytest.raises(error) as e:
        call(x)
    assert message in str(e.value)


def test_load_of_a_damaged_file_is_a_value_error(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\0\0\0\0\0\0\0{not json}      ")
    with pytest.raises(ValueError, match="bad.safetensors"):
        fp4emu.load(tmp_path / "bad.safetensors")


def test_library_messages_are_the_cli_messages(cli, tmp_path):
    x = rand((4, 65))
    np.save(tmp_path / "x.npy", x)
    r = cli("fake-quant", tmp_path / "x.npy", tmp_path / "y.npy", "--recipe", "hif4.v14", "--tail", "error",
            check=False)
    assert r.returncode == 2
    with pytest.raises(ValueError) as e:
        fp4emu.fake_quant(x, "hif4.v14", tail="error")
    assert str(e.value) in r.stderr


@pytest.mark.parametrize("g", [1e-45, 1e-38, 7.8e-36])
def test_global_amax_below_the_encode_scale_range_is_refused(g):
    """A given NVFP4 amax G must keep S_enc = 2688/G finite in fp32 (docs/spec/nvfp4.md §2.2): the
    library refuses it, so every call that takes global_amax does."""
    x = rand((4, 64))
    calls = [lambda: fp4emu.fake_quant(x, "nvfp4.te", global_amax=g),
             lambda: fp4emu.quantize(x, "nvfp4.te", global_amax=g),
             lambda: fp4emu.fake_quant(x, "nvfp4.te", global_amax=g, impl="reference"),
             lambda: fp4emu.identify(x, "nvfp4", output=x, global_amax=g)]
    for call in calls:
        with pytest.raises(ValueError, match=r"2688/G overflows fp32 \(G must be 0 or at least 7\.899"):
            call()
    for ok in (0.0, 8e-36):  # 2688/8e-36 = 3.36e38 is finite
        assert fp4emu.quantize(x, "nvfp4.te", global_amax=ok).global_scale[0] == np.float32(ok)


def test_global_amax_refusal_is_the_cli_message(cli, tmp_path):
    x = rand((4, 64))
    np.save(tmp_path / "x.npy", x)
    r = cli("fake-quant", tmp_path / "x.npy", tmp_path / "y.npy", "--recipe", "nvfp4.te", "--global-amax", "1e-38",
            check=False)
    assert r.returncode == 2 and not (tmp_path / "y.npy").exists()
    with pytest.raises(ValueError) as e:
        fp4emu.fake_quant(x, "nvfp4.te", global_amax=1e-38)
    assert "2688/G overflows fp32" in str(e.value) and str(e.value) in r.stderr


def test_compare_is_the_cli_compare(cli, tmp_path):
    x = rand((64, 128)) * np.linspace(0.01, 10, 128, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("compare", tmp_path / "x.npy", "--recipe", "hif4.v14,mxfp4.ocp,nvfp4.te,nvfp4.modelopt_fq",
        "--json", tmp_path / "c.json")
    theirs = json.loads((tmp_path / "c.json").read_text())["tensors"][0]["results"]
    ours = fp4emu.compare(x, "hif4.v14,mxfp4.ocp,nvfp4.te,nvfp4.modelopt_fq")
    assert list(ours) == [r["recipe"] for r in theirs]
    for r in theirs:
        assert {k: ours[r["recipe"]][k] for k in r if k != "recipe"} == pytest.approx(
            {k: v for k, v in r.items() if k != "recipe"}, rel=0, abs=0)
    skipped = fp4emu.compare(x * 1.001, ["hif4.a6"])["hif4.a6"]
    assert "bf16" in skipped["skipped"]


def test_gemm_matches_the_cli(cli, tmp_path):
    a, b = rand((16, 96), 1), rand((96, 8), 2)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    for model, bps in (("exact", 1), ("block_fp32", 1), ("block_fp32", 2), ("fma_fp32", 1)):
        cli("gemm", tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.npy", "--format", "nvfp4", "--recipe",
            "nvfp4.te", "--model", model, *(["--blocks-per-step", bps] if bps > 1 else []))
        ours = fp4emu.gemm(a, b, recipe="nvfp4.te", model=model, blocks_per_step=bps)
        assert bits(ours) == bits(np.load(tmp_path / "c.npy"))
    pa = fp4emu.quantize(a, "mxfp4.ocp", axis=1)
    w4a16 = fp4emu.gemm(pa, b, model="exact")  # B dense
    assert w4a16.shape == (16, 8)
    np.testing.assert_allclose(w4a16, pa.dequantize().astype(np.float64) @ b.astype(np.float64), rtol=1e-5,
                               atol=1e-5)



def test_gemm_b_layout_and_epilogue_match_the_cli(cli, tmp_path):
    a, w = rand((16, 96), 3), rand((8, 96), 4)  # W as nn.Linear holds it: n x k
    c, bias = rand((16, 8), 5), rand((8,), 6)
    for name, v in (("a", a), ("w", w), ("c", c), ("bias", bias)):
        np.save(tmp_path / f"{name}.npy", v)
    cli("gemm", tmp_path / "a.npy", tmp_path / "w.npy", tmp_path / "d.npy", "--recipe", "nvfp4.te", "--model",
        "fma_fp32", "--b-layout", "nk", "--c", tmp_path / "c.npy", "--beta", "-0.5", "--bias", tmp_path / "bias.npy")
    ours = fp4emu.gemm(a, w, recipe="nvfp4.te", model="fma_fp32", b_layout="nk", c=c, beta=-0.5, bias=bias)
    assert bits(ours) == bits(np.load(tmp_path / "d.npy"))
    # W n x k is B k x n transposed: the same bits, with no epilogue too.
    assert bits(fp4emu.gemm(a, w, recipe="nvfp4.te", model="exact", b_layout="nk")) == bits(
        fp4emu.gemm(a, np.ascontiguousarray(w.T), recipe="nvfp4.te", model="exact"))
    with pytest.raises(ValueError, match="b_layout='mn' is unknown"):
        fp4emu.gemm(a, w, recipe="nvfp4.te", b_layout="mn")

def test_identify_names_the_recipe():
    x = rand((64, 64))
    r = fp4emu.identify(x, "mxfp4", output=fp4emu.fake_quant(x, "mxfp4.rceil"))
    assert r["exact"] and r["best"].startswith("mxfp4.rceil")
    p = fp4emu.quantize(x, "nvfp4.te", global_amax=1000.0)
    r = fp4emu.identify(x, "nvfp4", packed=p)
    assert r["exact"] and r["best"].startswith("nvfp4.te")
    assert "exact match" in r["text"]


def test_sparsity_mask():
    m = fp4emu.sparsity_mask(np.array([[1, -4, 2, 3, 0, 0, 5, 1]], np.float32), "2:4")
    assert m.tolist() == [[0, 1, 0, 1, 0, 0, 1, 1]]


def test_gil_is_released_while_quantizing():
    """A Python thread keeps running while another quantizes (it would stall if the GIL were held)."""
    x = rand((1 << 22,))
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        progress = []
        for _ in range(3):
            before = count[0]
            fp4emu.fake_quant(x, "hif4.v14", impl="reference", threads=1)
            progress.append(count[0] - before)
    finally:
        stop.set()
        t.join()
    assert max(progress) > 1000, progress


def test_python_threads_quantize_concurrently():
    xs = [rand((128, 256), seed) for seed in range(8)]
    want = [fp4emu.quantize(x, "nvfp4.te").codes.tobytes() for x in xs]
    got = [None] * len(xs)

    def work(i):
        for _ in range(5):
            got[i] = fp4emu.quantize(xs[i], "nvfp4.te", threads=2).codes.tobytes()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


def test_golden_generate_and_verify(tmp_path):
    s = fp4emu.golden.generate(tmp_path / "suite", recipes=["mxfp4.ocp"], families=["special", "codes"])
    cand = tmp_path / "cand"
    manifest = json.loads((tmp_path / "suite" / "manifest.json").read_text())
    assert s["cases"] == len(manifest["cases"]) >= 2
    assert {c["family"] for c in manifest["cases"]} == {"special", "codes"}
    for case in manifest["cases"]:
        x = np.load(tmp_path / "suite" / case["id"] / "input.npy")
        p = fp4emu.quantize(x, case["recipe"], axis=case["options"]["axis"], rounding=case["options"]["rounding"])
        (cand / case["id"]).mkdir(parents=True)
        np.save(cand / case["id"] / "codes.npy", p.codes)
        np.save(cand / case["id"] / "scales.npy", p.scales)
        np.save(cand / case["id"] / "dequant.npy", p.dequantize())
    r = fp4emu.golden.verify(tmp_path / "suite", cand)
    assert r.passed and r.count("pass") == s["cases"], r.text
    codes = np.load(cand / "mxfp4.ocp/special/codes.npy")
    codes[0, 0] ^= 0x1
    np.save(cand / "mxfp4.ocp/special/codes.npy", codes)
    r = fp4emu.golden.verify(tmp_path / "suite", cand)
    assert r.exit_code == 1 and r.count("fail") == 1 and r.mismatches[0]["kind"] == "code", r.text
    with pytest.raises(ValueError, match="nope"):
        fp4emu.golden.verify(tmp_path / "suite", cand, recipes=["mxfp4.nope"])
