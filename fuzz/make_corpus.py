#!/usr/bin/python3
"""Regenerates the seed corpora in fuzz/corpus/<harness>/.

    fuzz/make_corpus.py [path/to/fp4emu] [path/to/golden/suite]

Seeds are small files of each kind the tool reads (written by numpy and by
fp4emu itself) plus reproducers of hostile inputs that once broke a reader:
deep nesting, integers past 64 bits, float dims, wrong metadata numbers,
paths leaving the suite. Every seed stays a few KB so fuzzing stays fast;
the deep-nesting reproducers are the exception (they need the depth).
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FP4EMU = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "fp4emu")
SUITE = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "golden", "suite")
CORPUS = os.path.join(HERE, "corpus")


def put(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def npy_with_header(header, data=b""):
    """An npy 1.0 file whose header dict text is given verbatim."""
    h = header + " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data


def safetensors_bytes(header_text, data=b""):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h)) + h + data


def split_safetensors(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def with_metadata(blob, **changes):
    """The packed file `blob` with some __metadata__ values replaced."""
    header, data = split_safetensors(blob)
    header["__metadata__"].update(changes)
    return safetensors_bytes(json.dumps(header, separators=(",", ":")), data)


def fp4emu(*args):
    subprocess.run([FP4EMU, *args], check=True, stdout=subprocess.DEVNULL)


def npy_corpus():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    put("npy", "f32.npy", npy_bytes(x))
    put("npy", "f16_big_endian.npy", npy_bytes(x.astype(">f2")))
    put("npy", "f64_fortran.npy", npy_bytes(np.asfortranarray(x.astype(np.float64))))
    put("npy", "bf16_v2.npy", npy_bytes((x.view(np.uint32) >> 16).astype(np.uint16).view("V2")))
    put("npy", "u8.npy", npy_bytes(np.arange(12, dtype=np.uint8).reshape(3, 4)))
    put("npy", "i4_big_endian_3d.npy", npy_bytes(np.arange(24, dtype=">i4").reshape(2, 3, 4)))
    put("npy", "u4_scalar.npy", npy_bytes(np.uint32(7)))
    put("npy", "empty_dim.npy", npy_bytes(np.zeros((0, 4), np.float32)))
    v2 = npy_bytes(x).replace(b"\x93NUMPY\x01\x00", b"\x93NUMPY\x02\x00", 1)
    n = struct.unpack("<H", v2[8:10])[0]
    put("npy", "version2.npy", v2[:8] + struct.pack("<I", n - 2) + v2[10:10 + n - 2] + v2[10 + n:])
    with tempfile.TemporaryDirectory() as t:
        np.save(os.path.join(t, "x.npy"), rng.standard_normal((2, 64)).astype(np.float32))
        fp4emu("fake-quant", os.path.join(t, "x.npy"), os.path.join(t, "y.npy"), "--format", "mxfp4")
        put("npy", "fake_quant_output.npy", open(os.path.join(t, "y.npy"), "rb").read())
    # Hostile headers.
    put("npy", "deep_nesting.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': " +
                                                   "(" * 5000 + ")" * 5000 + ", }"))
    put("npy", "huge_int_shape.npy", npy_with_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (340282366920938463463374607431768211456, 4), }"))
    put("npy", "float_shape.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1e300, 4), }"))
    put("npy", "negative_shape.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }"))
    put("npy", "overflowing_shape.npy", npy_with_header(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4), }"))
    put("npy", "truncated_data.npy", npy_bytes(x)[:-7])
    put("npy", "header_length_past_end.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'")


def safetensors_corpus():
    with tempfile.TemporaryDirectory() as t:
        out = os.path.join(t, "s.safetensors")
        fp4emu("sample", out, "--layers", "1", "--tokens", "2", "--hidden", "32", "--intermediate", "48")
        put("safetensors", "sample_dump.safetensors", open(out, "rb").read())
    a = np.arange(6, dtype="<f4").tobytes()
    b = np.arange(4, dtype="<u2").tobytes()
    good = {"__metadata__": {"k": "v"},
            "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
            "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
            "c": {"dtype": "I32", "shape": [0], "data_offsets": [32, 32]}}
    put("safetensors", "three_dtypes.safetensors", safetensors_bytes(json.dumps(good), a + b))
    def variant(name, **tensor_a):
        h = json.loads(json.dumps(good))
        h["a"].update(tensor_a)
        put("safetensors", name, safetensors_bytes(json.dumps(h), a + b))
    variant("float_shape.safetensors", shape=[1e300, 3])
    variant("huge_int_shape.safetensors", shape=[18446744073709551616, 3])
    variant("negative_offsets.safetensors", data_offsets=[-8, 24])
    variant("overlapping.safetensors", data_offsets=[8, 32])
    variant("offsets_past_end.safetensors", data_offsets=[0, 4294967296])
    put("safetensors", "duplicate_names.safetensors", safetensors_bytes(
        '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
        '"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', a[:16]))
    put("safetensors", "metadata_not_strings.safetensors", safetensors_bytes('{"__metadata__":{"k":[1,{"x":2}]}}'))
    put("safetensors", "deep_nesting.safetensors", safetensors_bytes("[" * 100000))
    put("safetensors", "header_length_past_end.safetensors", struct.pack("<Q", 1 << 62) + b"{}")
    put("safetensors", "pytorch_zip.safetensors", b"PK\x03\x04" + b"\0" * 60)


def packed_corpus():
    rng = np.random.default_rng(2)
    with tempfile.TemporaryDirectory() as t:
        x = os.path.join(t, "x.npy")
        np.save(x, rng.standard_normal((2, 70)).astype(np.float32) * 3)
        blobs = {}
        for recipe, extra in [("hif4.v14", []), ("hif4.amct", ["--tail", "pad"]), ("mxfp4.ocp", []),
                              ("mxfp4.ggml", []), ("nvfp4.te", []), ("nvfp4.torchao_1l", [])]:
            out = os.path.join(t, recipe + ".safetensors")
            fp4emu("quantize", x, out, "--recipe", recipe, *extra)
            blobs[recipe] = open(out, "rb").read()
            put("packed", recipe + ".safetensors", blobs[recipe])
        out = os.path.join(t, "axis0.safetensors")
        fp4emu("quantize", x, out, "--format", "mxfp4", "--axis", "0", "--nibble-order", "split_half")
        put("packed", "mxfp4_axis0_split_half.safetensors", open(out, "rb").read())
        nan = rng.standard_normal((1, 32)).astype(np.float32)
        nan[0, 5] = np.nan
        np.save(x, nan)
        out = os.path.join(t, "nan.safetensors")
        fp4emu("quantize", x, out, "--recipe", "nvfp4.torchao")
        put("packed", "nvfp4_torchao_nan.safetensors", open(out, "rb").read())
    m = blobs["mxfp4.ocp"]
    put("packed", "axis_wraps_32_bits.safetensors", with_metadata(m, axis="4294967297"))
    put("packed", "block_size_wraps_32_bits.safetensors", with_metadata(m, block_size="4294967328"))
    put("packed", "float_shape.safetensors", with_metadata(m, shape="[3.9, 70]"))
    put("packed", "huge_float_shape.safetensors", with_metadata(m, shape="[1e300, 70]"))
    put("packed", "block_size_zero.safetensors", with_metadata(m, block_size="0"))
    put("packed", "recipe_of_another_format.safetensors", with_metadata(m, recipe="nvfp4.te"))


def stochastic_manifest_corpus(manifest):
    """A stochastic-rounding case with its Philox key, and hostile edits of its random-bit fields."""
    one = next(c for c in manifest["cases"] if c.get("stochastic", {}).get("rng") == "philox-te")

    def variant(name, edit):
        c = json.loads(json.dumps(one))
        edit(c)
        put("manifest", name, json.dumps(dict(manifest, cases=[c])))
    variant("stochastic_case.json", lambda c: None)
    variant("stochastic_seed_2_64.json", lambda c: c["stochastic"].update(seed=1 << 64))
    variant("stochastic_rbits_traversal.json", lambda c: c["stochastic"].update(rbits="../../rbits.npy"))
    variant("stochastic_rbits_is_codes.json", lambda c: c["stochastic"].update(rbits="codes.npy"))
    variant("stochastic_without_rounding.json", lambda c: c["options"].update(rounding="rne"))


def manifest_corpus():
    manifest = json.load(open(os.path.join(SUITE, "manifest.json")))
    picked, seen = [], set()
    for c in manifest["cases"]:
        key = (c["family"], c["recipe"].split(".")[0])
        if key not in seen and len(json.dumps(c)) < 1500:
            seen.add(key)
            picked.append(c)
    small = dict(manifest, cases=picked[:10])
    put("manifest", "suite_manifest.json", json.dumps(small, indent=1))
    sums = [l for l in open(os.path.join(SUITE, "SHA256SUMS")) if any(l[66:].startswith(c["id"] + "/") for c in picked[:3])]
    put("manifest", "SHA256SUMS", "".join(sums))
    put("manifest", "sums_path_traversal.txt", "0" * 64 + "  ../../../../etc/hostname\n" + "1" * 64 + "  /etc/shadow\n")
    one = picked[0]

    def variant(name, edit):
        c = json.loads(json.dumps(one))
        edit(c)
        put("manifest", name, json.dumps(dict(manifest, cases=[c])))
    variant("block_size_zero.json", lambda c: c.update(block_size=0))
    variant("axis_7.json", lambda c: c["options"].update(axis=7))
    variant("axis_minus_5.json", lambda c: c["options"].update(axis=-5))
    variant("shape_1e300.json", lambda c: c.update(shape=[1e300, 4]))
    variant("enlarged_shape.json", lambda c: c.update(shape=[c["shape"][0] * 1000] + c["shape"][1:]))
    variant("path_traversal.json", lambda c: c["files"][0].update(path="../../../../etc/hostname"))
    variant("absolute_path.json", lambda c: c["files"][0].update(path="/etc/shadow"))
    variant("case_id_traversal.json", lambda c: c.update(id="../outside"))
    variant("role_number.json", lambda c: c["files"][0].update(role=3))
    variant("huge_int.json", lambda c: c.update(rows=18446744073709551616))
    stochastic_manifest_corpus(manifest)
    put("manifest", "no_cases.json", json.dumps({k: v for k, v in manifest.items() if k != "cases"}))
    put("manifest", "deep_nesting.json", "[" * 100000)


if __name__ == "__main__":
    shutil.rmtree(CORPUS, ignore_errors=True)
    npy_corpus()
    safetensors_corpus()
    packed_corpus()
    manifest_corpus()
