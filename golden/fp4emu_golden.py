"""Check a quantization kernel against an fp4emu golden suite (numpy only).

The suite layout is golden/README.md. Typical pytest use:

    import fp4emu_golden as fg

    def my_kernel(x, case):          # x: float32, the case's input shape
        ...                          # quantize along case.axis, blocks of case.block_size
        return {"codes": codes, "scales": scales}   # any of the case's output files

    def test_kernel():
        fg.assert_matches(my_kernel, "golden/suite", "mxfp4.ocp")

For every quantize case of the recipe, assert_matches calls the kernel on the
case's input (bf16 and f16 inputs widened to float32) and compares each output
it returns bit for bit with the file of that name (codes.npy, scales.npy,
dequant.npy, scales_swizzled_128x4.npy, ...). A case that expects an error
(tail policy 'error') passes when the kernel raises. The AssertionError lists
the first mismatches of every failing case.

A stochastic-rounding case (case.stochastic is not None) carries its random
bits as an input: case.rbits() is one uint8 byte per element, in the input's
shape; the kernel rounds each element with its byte (golden/README.md,
"Stochastic rounding cases"). case.stochastic also holds the Philox key
(rng, seed, offset, rbits_map) when the bytes came from one.

The manifest is untrusted input: malformed fields raise SuiteError naming the
file and the field. Helpers for kernels: to_rows / from_rows (the block axis
moved last and zero-padded), pack_codes (two codes per byte, low nibble first),
swizzle_128x4 (the Blackwell block-scaled GEMM scale layout), hif4_cube (the
Ascend Cube layout of HiF4 scales).
"""

import json
import os

import numpy as np

__all__ = [
    "SuiteError", "Case", "load_suite", "cases", "to_rows", "from_rows", "pack_codes", "unpack_codes",
    "swizzle_128x4", "hif4_cube", "compare", "assert_matches",
]


class SuiteError(ValueError):
    """The suite is damaged, hostile or of another schema."""


_MAX_ELEMENTS = 1 << 34


class Case:
    """One quantize case of a suite, its manifest fields checked."""

    def __init__(self, suite_dir, entry, manifest_path, index):
        def bad(field, why):
            cid = entry.get("id", "?") if isinstance(entry, dict) else "?"
            return SuiteError(f"{manifest_path}: case {index} ({cid!s:.200}): field '{field}' {why}; "
                              "regenerate the suite")

        if not isinstance(entry, dict):
            raise bad("cases[]", "is not an object")

        def text(field):
            v = entry.get(field)
            if not isinstance(v, str) or not v or len(v) > 255:
                raise bad(field, "is missing or not a short string")
            return v

        def size(obj, field, where=None):
            v = obj.get(field) if isinstance(obj, dict) else None
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > _MAX_ELEMENTS:
                raise bad(where or field, "is not a non-negative integer")
            return v

        self.suite_dir = suite_dir
        self.id = text("id")
        parts = self.id.split("/")
        if self.id.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in self.id:
            raise bad("id", "is not a relative path of plain names")
        self.family = text("family")
        self.format = text("format")
        self.recipe = text("recipe")
        expect = text("expect")
        if expect not in ("output", "error"):
            raise bad("expect", "is not 'output' or 'error'")
        self.expect_error = expect == "error"
        self.is_gemm = self.family == "gemm"
        self.block_size = size(entry, "block_size")
        if not 1 <= self.block_size <= 4096:
            raise bad("block_size", "is not in 1..4096")
        self.entry = entry
        if self.is_gemm:
            return
        self.input_dtype = text("input_dtype")
        shape = entry.get("shape")
        if not isinstance(shape, list) or not 1 <= len(shape) <= 8:
            raise bad("shape", "is not a list of 1..8 integers")
        self.shape = tuple(size({"d": d}, "d", "shape") for d in shape)
        if int(np.prod(self.shape, dtype=object)) > _MAX_ELEMENTS:
            raise bad("shape", "has too many elements")
        self.options = entry.get("options")
        if not isinstance(self.options, dict):
            raise bad("options", "is not an object")
        self.axis = size(self.options, "axis", "options.axis")
        if self.axis >= len(self.shape):
            raise bad("options.axis", "is not an axis of the shape")
        self.tail = self.options.get("tail")
        self.nibble_order = self.options.get("nibble_order")
        if self.nibble_order not in ("low_first", "high_first", "split_half"):
            raise bad("options.nibble_order", "is not low_first, high_first or split_half")
        self.rows = size(entry, "rows")
        self.padded_len = size(entry, "padded_len")
        self.blocks_per_row = size(entry, "blocks_per_row")
        n = self.shape[self.axis]
        if self.rows != int(np.prod([d for i, d in enumerate(self.shape) if i != self.axis], dtype=object)):
            raise bad("rows", "is not the product of the shape without the block axis")
        if self.padded_len != -(-n // self.block_size) * self.block_size:
            raise bad("padded_len", "is not the block axis rounded up to the block size")
        if self.blocks_per_row * self.block_size != self.padded_len:
            raise bad("blocks_per_row", "is not padded_len / block_size")
        files = entry.get("files")
        if not isinstance(files, list):
            raise bad("files", "is not a list")
        self.files = {}
        for f in files:
            path = f.get("path") if isinstance(f, dict) else None
            if not isinstance(path, str) or path.rsplit("/", 1)[0] != self.id:
                raise bad("files[].path", "is not a file of the case's directory")
            self.files[path.rsplit("/", 1)[1]] = f
        # Stochastic rounding: the random bytes' file and, for Philox bytes, their key.
        self.rounding = self.options.get("rounding")
        sr = entry.get("stochastic")
        if (self.rounding == "stochastic") != (sr is not None):
            raise bad("stochastic", "is given without options.rounding stochastic, or missing with it")
        self.stochastic = None
        if sr is not None:
            if not isinstance(sr, dict):
                raise bad("stochastic", "is not an object")
            name = sr.get("rbits")
            if (not isinstance(name, str) or "/" in name or name.startswith(".") or not name.endswith(".npy")
                    or name in ("input.npy", "codes.npy", "scales.npy", "dequant.npy", "global_scale.npy")):
                raise bad("stochastic.rbits", "is not the plain .npy name of the case's random bytes")
            f = self.files.get(name)
            if not f or f.get("role") != "input" or f.get("dtype") != "u8" or f.get("shape") != list(self.shape):
                raise bad("stochastic.rbits", "is not a u8 input file of the input's shape in 'files'")
            if "rng" in sr:
                if sr["rng"] not in ("philox-te", "philox-index"):
                    raise bad("stochastic.rng", "is not philox-te or philox-index")
                for k in ("seed", "offset"):
                    v = sr.get(k)
                    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 64:
                        raise bad(f"stochastic.{k}", "is not an integer in 0..2^64-1")
                if (sr["rng"] == "philox-te") != (sr.get("rbits_map") in ("te", "ptx")):
                    raise bad("stochastic.rbits_map", "is not te or ptx for philox-te, or given for philox-index")
            elif any(k in sr for k in ("seed", "offset", "rbits_map")):
                raise bad("stochastic.rng", "is missing beside a Philox seed, offset or rbits_map")
            self.stochastic = sr
        # The scale matrix of the swizzled layout (golden/README.md, "Kernel-ready scale layouts").
        if self.axis == len(self.shape) - 1:
            self.scale_rows = self.shape[-2] if len(self.shape) >= 2 else 1
        else:
            self.scale_rows = int(np.prod(self.shape[self.axis + 1:], dtype=np.int64))
        self.scale_batch = self.rows // self.scale_rows if self.scale_rows else 0

    def __repr__(self):
        return f"Case({self.id!r})"

    def rbits(self):
        """A stochastic case's random bytes: uint8, the input's shape, one per element."""
        if self.stochastic is None:
            raise SuiteError(f"{self.id}: not a stochastic-rounding case (no random bytes)")
        r = self.load(self.stochastic["rbits"])
        if r.dtype != np.uint8:
            raise SuiteError(f"{self.id}: {self.stochastic['rbits']} is {r.dtype}, not uint8; regenerate the suite")
        return r

    def load(self, name):
        """A file of the case as an array; float inputs widened to float32."""
        if "/" in name or name.startswith(".") or name not in getattr(self, "files", {name: None}):
            raise SuiteError(f"{self.id}: no file '{name}' in the manifest")
        path = os.path.join(self.suite_dir, self.id, name)
        if not os.path.isfile(path):  # a FIFO would block np.load
            raise SuiteError(f"{path}: missing or not a regular file; regenerate the suite")
        try:
            a = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise SuiteError(f"{path}: not a readable .npy file ({e}); regenerate the suite") from None
        if a.dtype == np.dtype("<V2"):  # bf16 as numpy writes ml_dtypes.bfloat16
            a = (a.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif a.dtype in (np.float16, np.float32):
            a = a.astype(np.float32)
        want = self.files.get(name, {}).get("shape") if hasattr(self, "files") else None
        if want is not None and list(a.shape) != want:
            raise SuiteError(f"{path}: shape {list(a.shape)}, the manifest says {want}; regenerate the suite")
        return a


def load_suite(path):
    """The suite's manifest, checked: (directory, list of Case)."""
    manifest_path = os.path.join(path, "manifest.json")
    if not os.path.isfile(manifest_path):  # a FIFO would block the read
        raise SuiteError(f"{manifest_path}: missing or not a regular file: not a golden suite")
    try:
        with open(manifest_path, "rb") as f:
            m = json.loads(f.read())
    except (OSError, ValueError, RecursionError) as e:
        raise SuiteError(f"{manifest_path}: not a readable JSON manifest ({e!s:.200})") from None
    if not isinstance(m, dict) or m.get("schema") != "fp4emu-golden":
        raise SuiteError(f"{manifest_path}: field 'schema' is not \"fp4emu-golden\": not a golden suite manifest")
    if m.get("schema_version") != 1:
        raise SuiteError(f"{manifest_path}: field 'schema_version' is not 1, the version this module reads")
    entries = m.get("cases")
    if not isinstance(entries, list):
        raise SuiteError(f"{manifest_path}: field 'cases' is not a list")
    return path, [Case(path, e, manifest_path, i) for i, e in enumerate(entries)]


def cases(suite, recipe=None):
    """The quantize cases (not GEMM) of a suite path, of one recipe if given."""
    _, all_cases = load_suite(suite) if isinstance(suite, (str, os.PathLike)) else suite
    return [c for c in all_cases if not c.is_gemm and (recipe is None or c.recipe == recipe)]


def to_rows(x, case):
    """[rows, padded_len]: the block axis moved last, other axes flattened, zero-padded."""
    r = np.moveaxis(np.asarray(x), case.axis, -1).reshape(case.rows, case.shape[case.axis])
    out = np.zeros((case.rows, case.padded_len), dtype=r.dtype)
    out[:, :r.shape[1]] = r
    return out


def from_rows(rows, case):
    """The inverse of to_rows: padding dropped, the input's shape."""
    n = case.shape[case.axis]
    moved = [d for i, d in enumerate(case.shape) if i != case.axis] + [n]
    return np.moveaxis(np.asarray(rows)[:, :n].reshape(moved), -1, case.axis)


def pack_codes(codes, case=None):
    """[rows, padded_len] 4-bit codes to [rows, padded_len/2] bytes in the case's nibble order
    (low_first without a case: element 2i in the low nibble)."""
    c = np.asarray(codes, dtype=np.uint8) & 0xF
    order = case.nibble_order if case is not None else "low_first"
    if order == "split_half":  # byte j of a block: elements j (low) and j + block/2 (high)
        b = c.reshape(c.shape[0], -1, 2, case.block_size // 2)
        return (b[:, :, 0, :] | (b[:, :, 1, :] << 4)).reshape(c.shape[0], -1)
    first, second = c[:, 0::2], c[:, 1::2]
    return first | (second << 4) if order == "low_first" else (first << 4) | second


def unpack_codes(packed, case):
    """The inverse of pack_codes: [rows, padded_len] codes."""
    p = np.asarray(packed, dtype=np.uint8).reshape(case.rows, -1)
    lo, hi = p & 0xF, p >> 4
    if case.nibble_order == "split_half":
        b = np.stack([lo.reshape(case.rows, -1, case.block_size // 2),
                      hi.reshape(case.rows, -1, case.block_size // 2)], axis=2)
        return b.reshape(case.rows, -1)
    pair = [lo, hi] if case.nibble_order == "low_first" else [hi, lo]
    return np.stack(pair, axis=-1).reshape(case.rows, -1)


def swizzle_128x4(scales, case):
    """Linear [rows, blocks] u8 scales in the swizzled 128x4 layout, torchao's shape [R'/4, 4C']
    (a leading batch dimension when there are several scale matrices)."""
    r, c, batch = case.scale_rows, case.blocks_per_row, case.scale_batch
    rp, cp = -(-r // 128) * 128, -(-c // 4) * 4
    m = np.zeros((batch, rp, cp), dtype=np.uint8)
    m[:, :r, :c] = np.asarray(scales, dtype=np.uint8).reshape(batch, r, c)
    # Tile (r/128, c/4) of 512 bytes, inside it [r mod 32][(r mod 128)/32][c mod 4].
    t = m.reshape(batch, rp // 128, 4, 32, cp // 4, 4).transpose(0, 1, 4, 3, 2, 5)
    out = t.reshape(batch, rp // 4, 4 * cp)
    return out[0] if batch == 1 else out


def hif4_cube(words, case):
    """Linear [rows, blocks] HiF4 u32 scale words in the Ascend Cube layout [R'/16, C, 64]
    (batches follow each other along the first axis)."""
    r, c, batch = case.scale_rows, case.blocks_per_row, case.scale_batch
    rp = -(-r // 16) * 16
    w = np.zeros((batch, rp, c), dtype=np.uint32)
    w[:, :r, :] = np.asarray(words, dtype=np.uint32).reshape(batch, r, c)
    b = np.stack([(w >> (8 * i)) & 0xFF for i in range(4)], axis=-1).astype(np.uint8)  # [batch, rp, c, 4]
    # A cell holds (byte 0, byte 1) of its 16 rows, then (byte 2, byte 3).
    cells = b.reshape(batch, rp // 16, 16, c, 2, 2).transpose(0, 1, 3, 4, 2, 5)
    return cells.reshape(batch * rp // 16, c, 64)


def compare(case, name, expected, got, max_report=8):
    """Bit-exact comparison (every NaN equals every NaN); the first mismatches as lines."""
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.ndim > 2 and got.shape == (int(np.prod(expected.shape[:-1])), expected.shape[-1]):
        got = got.reshape(expected.shape)  # [rows, n] is the same row-major array
    if got.shape != expected.shape:
        return [f"{case.id} {name}: shape {list(got.shape)}, expected {list(expected.shape)}"]
    if expected.dtype == np.float32:
        e, g = expected.view(np.uint32), got.astype(np.float32).view(np.uint32)
        differ = (e != g) & ~(np.isnan(expected) & np.isnan(got))
    else:
        e, g = expected, got.astype(expected.dtype)
        differ = e != g
    if name == "codes.npy":  # compare the 4-bit codes, element by element: [row, element]
        e, g = unpack_codes(e, case), unpack_codes(g, case)
        differ = e != g
    where = np.argwhere(differ)
    lines = []
    for idx in where[:max_report]:
        ti = tuple(idx)
        what = "element" if name == "codes.npy" else "index"
        block = f" (block {idx[-1] // case.block_size})" if name == "codes.npy" else ""
        lines.append(f"{case.id} {name}: {what} {list(idx)}{block}: expected {_hex(e[ti])}, got {_hex(g[ti])}")
    if len(where) > max_report:
        lines.append(f"{case.id} {name}: ... {len(where)} mismatches in all")
    return lines


def _hex(v):
    return f"0x{int(v):0{2 * v.dtype.itemsize if v.dtype.itemsize > 1 else 1}X}"


def assert_matches(kernel_fn, suite, recipe, max_report=8, require=("codes", "scales")):
    """Runs kernel_fn(x, case) on every quantize case of recipe in suite; raises AssertionError
    with the first mismatches. kernel_fn returns a dict {output name: array}, names as the
    case's files without '.npy'; each name in require must be among them."""
    selected = cases(suite, recipe)
    if not selected:
        raise AssertionError(f"{suite}: no quantize cases of recipe {recipe}")
    failures = []
    for case in selected:
        x = case.load("input.npy")
        if case.expect_error:
            try:
                kernel_fn(x, case)
            except Exception:  # the refusal the case expects
                continue
            failures.append(f"{case.id}: expected the kernel to refuse the input ({case.entry.get('error', '')})")
            continue
        out = kernel_fn(x, case)
        missing = [n for n in require if n not in out]
        if missing:
            failures.append(f"{case.id}: the kernel returned no {', '.join(missing)}")
        for name, got in out.items():
            fname = name + ".npy"
            if fname not in case.files or case.files[fname].get("role") != "output":
                failures.append(f"{case.id}: '{name}' is not an output file of this case")
                continue
            failures += compare(case, fname, case.load(fname), got, max_report)
    if failures:
        raise AssertionError(f"{recipe}: {len(selected)} cases, mismatches:\n" + "\n".join(failures))
