"""fp4emu_golden.assert_matches with a toy numpy MXFP4 kernel (recipe mxfp4.ocp, written
from docs/formats.md's MXFP4 table): it passes, a planted rounding bug and a wrong
scale layout are caught, and damaged manifests are refused.

The suite is $FP4EMU_GOLDEN_SUITE (ctest generates a fresh one), else golden/suite."""

import json
import os
import re
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import fp4emu_golden as fg  # noqa: E402

SUITE = os.environ.get("FP4EMU_GOLDEN_SUITE", os.path.join(os.path.dirname(HERE), "suite"))
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)


def e2m1_stochastic(mag, r):
    """E2M1 magnitude codes with stochastic rounding (docs/formats.md, "Stochastic rounding"):
    between grid neighbours lo < hi, away from zero iff floor(256 (mag - lo) / (hi - lo)) + r >= 256;
    6 and beyond saturate. The steps are powers of two: exact in float64."""
    m = np.nan_to_num(mag.astype(np.float64), nan=0.0)
    lo = np.clip(np.searchsorted(E2M1, m, side="right") - 1, 0, 6)
    with np.errstate(over="ignore", invalid="ignore"):  # Inf lanes: saturated below
        frac = np.floor(256 * (m - E2M1[lo]) / (E2M1[lo + 1] - E2M1[lo]))
    return np.where(m >= 6, 7, lo + (frac + r >= 256)).astype(np.uint8)


def toy_mxfp4_ocp(x, case, tie_bug=False, swizzle_bug=False, ignore_rbits=False):
    if case.tail == "error" and case.shape[case.axis] % 32:
        raise ValueError("block axis is not a multiple of 32")
    rows = fg.to_rows(x.astype(np.float32), case)
    blocks = rows.reshape(case.rows, case.blocks_per_row, 32)
    mag_bits = blocks.view(np.uint32) & 0x7FFFFFFF
    special = (mag_bits >= 0x7F800000).any(axis=-1)  # NaN or Inf amax
    amax_bits = mag_bits.max(axis=-1)
    # floor(log2 amax) from the exponent bits, minus 2 (6 = 1.5 * 2^2), clamped at -127
    s = np.where(amax_bits == 0, -127, np.maximum((amax_bits >> 23).astype(np.int64) - 127 - 2, -127))
    inv = ((127 - s).astype(np.uint32) << 23).view(np.float32)  # 2^-s, a normal float
    with np.errstate(invalid="ignore", over="ignore"):
        y = blocks * inv[..., None]
    mag = np.abs(y)
    # E2M1 round-to-nearest-even: a tie goes to the even mantissa, saturating at 6
    upper_tie = (mag >= 2.5) if tie_bug else (mag > 2.5)
    code = ((mag > 0.25).astype(np.uint8) + (mag >= 0.75) + (mag > 1.25) + (mag >= 1.75) + upper_tie
            + (mag >= 3.5) + (mag > 5)).astype(np.uint8)
    if case.stochastic is not None and not ignore_rbits:  # each element rounded with its random byte
        r = fg.to_rows(case.rbits(), case).reshape(blocks.shape).astype(np.int64)
        code = e2m1_stochastic(mag, r)
    code |= (np.signbit(y).astype(np.uint8) << 3)
    code[special] = 0x4  # NaN block: torchao on CUDA
    scale = (s + 127).astype(np.uint8)
    scale[special] = 0xFF
    x_scale = np.where(scale == 0, np.float32(2.0**-127), (scale.astype(np.uint32) << 23).view(np.float32))
    with np.errstate(over="ignore"):
        deq = E2M1[code & 7] * x_scale[..., None]
    deq = np.where(code & 8, -deq, deq)
    deq[special] = np.nan
    out = {
        "codes": fg.pack_codes(code.reshape(case.rows, case.padded_len), case),
        "scales": scale,
        "dequant": fg.from_rows(deq.reshape(case.rows, case.padded_len), case),
    }
    if "scales_swizzled_128x4.npy" in case.files:
        swz = fg.swizzle_128x4(scale, case)
        out["scales_swizzled_128x4"] = swz[::-1].copy() if swizzle_bug else swz
    return out


def test_correct_toy_kernel_matches():
    fg.assert_matches(toy_mxfp4_ocp, SUITE, "mxfp4.ocp")


def test_planted_tie_bug_is_caught():
    with pytest.raises(AssertionError, match=r"codes\.npy: element .*expected 0x4, got 0x5"):
        fg.assert_matches(lambda x, c: toy_mxfp4_ocp(x, c, tie_bug=True), SUITE, "mxfp4.ocp")


def test_stochastic_cases_need_their_random_bytes():
    sr = [c for c in fg.cases(SUITE, "mxfp4.ocp") if c.stochastic is not None]
    assert len(sr) >= 4, "the suite has no mxfp4.ocp stochastic-rounding cases"
    assert all(c.rbits().dtype == np.uint8 and c.rbits().shape == c.shape for c in sr)
    assert any("rng" in c.stochastic for c in sr) and any("rng" not in c.stochastic for c in sr)
    with pytest.raises(AssertionError, match=r"mxfp4\.ocp/sr_grid codes\.npy: element"):
        fg.assert_matches(lambda x, c: toy_mxfp4_ocp(x, c, ignore_rbits=True), SUITE, "mxfp4.ocp")


def test_wrong_scale_layout_is_caught():
    with pytest.raises(AssertionError, match=r"scales_swizzled_128x4\.npy"):
        fg.assert_matches(lambda x, c: toy_mxfp4_ocp(x, c, swizzle_bug=True), SUITE, "mxfp4.ocp")


def test_kernel_that_accepts_a_ragged_tail_is_caught():
    assert any(c.expect_error for c in fg.cases(SUITE, "mxfp4.ocp")), "the suite has no expect-error case"
    def no_refusal(x, case):
        case.tail = "pad"
        return toy_mxfp4_ocp(x, case)
    with pytest.raises(AssertionError, match="expected the kernel to refuse"):
        fg.assert_matches(no_refusal, SUITE, "mxfp4.ocp")


def test_every_layout_case_is_checked():
    layout = [c for c in fg.cases(SUITE, "mxfp4.ocp") if "scales_swizzled_128x4.npy" in c.files]
    assert layout, "the suite has no mxfp4.ocp case with swizzled scales"


GOOD_CASE = {"id": "m/c", "family": "codes", "format": "mxfp4", "recipe": "mxfp4.ocp", "expect": "output",
             "block_size": 32, "input_dtype": "f32", "shape": [2, 33], "options": {"axis": 1, "tail": "pad", "nibble_order": "low_first"},
             "rows": 2, "padded_len": 64, "blocks_per_row": 2, "files": []}


SR_CASE = dict(GOOD_CASE, options=dict(GOOD_CASE["options"], rounding="stochastic"),
               stochastic={"rbits": "rbits.npy"},
               files=[{"path": "m/c/rbits.npy", "role": "input", "dtype": "u8", "shape": [2, 33]}])
SR_KEY = {"rbits": "rbits.npy", "rng": "philox-te", "seed": 7, "offset": 0, "rbits_map": "te"}


def _manifest(cases, **top):
    m = {"schema": "fp4emu-golden", "schema_version": 1, "cases": cases}
    m.update(top)
    return json.dumps(m)


@pytest.mark.parametrize("text, field", [
    ("", "not a readable JSON"),
    ("{", "not a readable JSON"),
    ("[" * 100000, "not a readable JSON"),
    (_manifest([], schema="other"), "'schema'"),
    (_manifest([], schema_version=2), "'schema_version'"),
    (_manifest({}), "'cases'"),
    (_manifest([dict(GOOD_CASE, id="../x")]), "'id'"),
    (_manifest([dict(GOOD_CASE, padded_len=32)]), "'padded_len'"),
    (_manifest([dict(GOOD_CASE, rows=3)]), "'rows'"),
    (_manifest([dict(GOOD_CASE, shape=[2, -1])]), "'shape'"),
    (_manifest([dict(GOOD_CASE, options={"axis": 5})]), "'options.axis'"),
    (_manifest([dict(GOOD_CASE, options={"axis": 1, "nibble_order": "odd"})]), "'options.nibble_order'"),
    (_manifest([dict(GOOD_CASE, files=[{"path": "other/c/codes.npy"}])]), "'files[].path'"),
    (_manifest([dict(GOOD_CASE, stochastic={"rbits": "rbits.npy"})]), "'stochastic'"),
    (_manifest([dict(SR_CASE, stochastic={"rbits": "../rbits.npy"})]), "'stochastic.rbits'"),
    (_manifest([dict(SR_CASE, stochastic={"rbits": "codes.npy"})]), "'stochastic.rbits'"),
    (_manifest([dict(SR_CASE, files=[])]), "'stochastic.rbits'"),
    (_manifest([dict(SR_CASE, stochastic=dict(SR_KEY, rng="philox-x"))]), "'stochastic.rng'"),
    (_manifest([dict(SR_CASE, stochastic=dict(SR_KEY, seed=-1))]), "'stochastic.seed'"),
    (_manifest([dict(SR_CASE, stochastic=dict(SR_KEY, offset=1 << 64))]), "'stochastic.offset'"),
    (_manifest([dict(SR_CASE, stochastic=dict(SR_KEY, rbits_map="le"))]), "'stochastic.rbits_map'"),
    (_manifest([dict(SR_CASE, stochastic={"rbits": "rbits.npy", "seed": 3})]), "'stochastic.rng'"),
], ids=lambda v: None if len(str(v)) < 40 else "manifest")
def test_damaged_manifest_is_refused(tmp_path, text, field):
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(fg.SuiteError, match=re.escape(field)) as e:
        fg.load_suite(str(tmp_path))
    assert "manifest.json" in str(e.value)


def test_good_manifest_is_read(tmp_path):
    (tmp_path / "manifest.json").write_text(_manifest([GOOD_CASE]))
    _, cs = fg.load_suite(str(tmp_path))
    assert [c.id for c in cs] == ["m/c"] and cs[0].rows == 2


def test_swizzle_128x4_matches_the_documented_offset():
    case = type("C", (), {"scale_rows": 130, "blocks_per_row": 5, "scale_batch": 1})()
    lin = (np.arange(130 * 5) % 251 + 1).astype(np.uint8).reshape(130, 5)
    flat = fg.swizzle_128x4(lin, case).reshape(-1)
    for r in range(130):
        for c in range(5):  # golden/README.md: ((r/128)(C'/4) + c/4)*512 + (r%32)*16 + ((r%128)/32)*4 + c%4
            assert flat[((r // 128) * 2 + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4] == lin[r, c]
    assert np.count_nonzero(flat) == lin.size


def test_fifo_manifest_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "manifest.json")
    with pytest.raises(fg.SuiteError, match="not a regular file"):
        fg.load_suite(str(tmp_path))


def test_layout_helpers_reproduce_the_layout_files():
    checked = 0
    for case in fg.cases(SUITE):
        for name, helper in (("scales_swizzled_128x4.npy", fg.swizzle_128x4), ("scales_hif4_cube.npy", fg.hif4_cube)):
            if name in case.files:
                want = case.load(name)
                got = helper(case.load("scales.npy"), case)
                assert not fg.compare(case, name, want, got.reshape(want.shape)), case.id
                checked += 1
    assert checked, "the suite has no layout case"


def test_code_positions_agree_with_blocks_txt():
    """unpack_codes in every nibble order of the suite against blocks.txt (one hex digit per element)."""
    blocks = 0
    for case in fg.cases(SUITE):
        if case.expect_error or "blocks.txt" not in case.files:
            continue
        codes = fg.unpack_codes(case.load("codes.npy"), case)
        assert np.array_equal(fg.unpack_codes(fg.pack_codes(codes, case), case), codes), case.id
        with open(os.path.join(SUITE, case.id, "blocks.txt")) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                _, row, k = (int(v) for v in line.split("|")[0].split())
                digits = line.rsplit("|", 1)[1].strip()
                got = codes[row, k * case.block_size:(k + 1) * case.block_size]
                assert "".join(f"{v:X}" for v in got) == digits.upper(), (case.id, row, k)
                blocks += 1
    assert blocks, "the suite has no blocks.txt"
