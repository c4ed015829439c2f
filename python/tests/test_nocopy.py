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
