"""Inputs are read in place: quantizing an array (numpy or torch) allocates the
outputs, never a second copy of the input (or its fp32 widening). Measured as the
process's peak resident memory during the call (VmHWM, reset just before
it through /proc/self/clear_refs) in a fresh interpreter, with an input large
enough (64 MiB) that a copy could not hide in the noise."""
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import sys
import numpy as np
import fp4emu
kind, call = sys.argv[1], sys.argv[2]
n = 16 << 20                                  # 16 Mi values
if kind == "torch":
    import torch
    x = torch.ones(n // 1024, 1024).mul_(1.5)
    x_bytes = x.numel() * 4
elif kind == "bf16":
    x = np.full((n // 1024, 1024), 0x3fc0, np.uint16)   # 1.5 in bf16
    x_bytes = x.nbytes
elif kind == "f32_transposed":               # strided: blocks along axis 0 of the view
    x = np.full((n // 1024, 1024), 1.5, np.float32).T
    x_bytes = x.nbytes
else:
    x = np.full((n // 1024, 1024), 1.5, np.float32)
    x_bytes = x.nbytes
fp4emu.fake_quant(np.ones((4, 64), np.float32), "mxfp4.ocp")   # loads the library, starts OpenMP
def status(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                              # the peak (VmHWM) restarts from the current RSS
before = status("VmRSS")
dt = "bf16" if kind == "bf16" else None
if call == "fake_quant":
    y = fp4emu.fake_quant(x, "mxfp4.ocp", input_dtype=dt, axis=0 if kind == "f32_transposed" else -1)
    out = y.nbytes
else:
    p = fp4emu.quantize(x, "mxfp4.ocp", input_dtype=dt)
    out = p.codes.nbytes + p.scales.nbytes
print(status("VmHWM") - before, out, x_bytes)
"""


@pytest.mark.parametrize("kind, call", [("f32", "fake_quant"), ("f32", "quantize"), ("bf16", "fake_quant"),
                                        ("torch", "fake_quant"), ("f32_transposed", "fake_quant")])
def test_no_input_sized_allocation(kind, call):
    if kind == "torch":
        pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", SCRIPT, kind, call], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert r.returncode == 0, r.stderr
    grew, out, x_bytes = map(int, r.stdout.split())
    # The outputs, plus a margin far below the size of a copy of the input
    # (and of its fp32 widening for bf16).
    assert grew < out + x_bytes // 4, f"peak memory grew by {grew} bytes; outputs {out}, input {x_bytes}"


# The analysis calls read a C-contiguous float32 input in place too; bf16 (or
# fp16) bits are widened once into an fp32 buffer of the input's size, since
# every analysis reads each value several times. So the same values given as
# bf16 must cost about one fp32 input more than given as float32: if the
# float32 path copied its input, the two would cost the same.
ANALYSIS = r"""
import sys
import numpy as np
import fp4emu
call, kind = sys.argv[1], sys.argv[2]
rows = 1 << 12 if call == "identify" else 1 << 14   # identify runs every mxfp4 candidate: a smaller input
x = np.full((rows, 1024), 1.5, np.float32)
x[:, ::7] = -0.375                                    # exact in bf16: both kinds hold the same values
arg, dt = (x, None) if kind == "f32" else ((x.view(np.uint32) >> 16).astype(np.uint16), "bf16")
w = fp4emu.synthetic_weights(16, 1024)
y = fp4emu.fake_quant(x, "mxfp4.rceil")               # the kernel output identify compares with
fp4emu.fake_quant(np.ones((4, 64), np.float32), "mxfp4.ocp")   # loads the library, starts OpenMP
def status(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                                      # the peak (VmHWM) restarts from the current RSS
before = status("VmRSS")
if call == "compare":
    fp4emu.compare(arg, ["mxfp4.ocp"], input_dtype=dt)
elif call == "underflow":
    fp4emu.underflow(arg, "mxfp4.ocp", input_dtype=dt)
elif call == "resq":
    fp4emu.resq(arg, w, "mxfp4.ocp", ["none"], input_dtype=dt)
else:
    assert fp4emu.identify(arg, "mxfp4", output=y, input_dtype=dt)["exact"]   # (several recipes agree here)
print(status("VmHWM") - before, x.nbytes)
"""


def analysis_peak(call, kind):
    r = subprocess.run([sys.executable, "-c", ANALYSIS, call, kind], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert r.returncode == 0, r.stderr
    return tuple(map(int, r.stdout.split()))


@pytest.mark.parametrize("call", ["compare", "underflow", "resq", "identify"])
def test_analysis_reads_float32_in_place(call):
    grew_f32, x_bytes = analysis_peak(call, "f32")
    grew_bf16, _ = analysis_peak(call, "bf16")
    assert grew_bf16 - grew_f32 > 3 * x_bytes // 4, \
        f"{call}: float32 input grew the peak by {grew_f32} bytes, bf16 by {grew_bf16}; input {x_bytes}"
    if call == "compare":
        # Its whole working set: the fake-quantized values (x's size) and the codes (1/8 of it).
        assert grew_f32 < x_bytes + x_bytes // 8 + x_bytes // 4, f"compare grew the peak by {grew_f32} bytes"
