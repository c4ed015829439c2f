#!/usr/bin/python3
"""Seeded many-file dump for timing the studies at a real model's scale.

    bench/make_study_dump.py OUT_DIR [--fp4emu build/fp4emu] [--layers 8] [--tokens 512]
                             [--hidden 2048] [--intermediate 5504] [--kv 512] [--seed 1]

writes
    OUT_DIR/acts/layer_NN.safetensors   the activations of `fp4emu sample` (bf16, the same
                                        options), one file per layer: a directory dump
    OUT_DIR/weights/model-0000K-of-00002.safetensors + model.safetensors.index.json
                                        bf16 weights q/k/v/o/gate/up/down_proj.weight, N(0, 1/d),
                                        sharded as Hugging Face shards them (k and v: --kv rows)

With the defaults: 8 layers x 4 activations (512 tokens, hidden 2048, intermediate 5504) and
709 MB of weights. The bytes depend on the options only. The dump is not committed; README.md
("A many-file dump") times each study on it.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype string, shape, bytes)."""
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        meta = header.pop("__metadata__", {})
        out = []
        for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            f.seek(base + e["data_offsets"][0])
            out.append((name, e["dtype"], e["shape"], f.read(e["data_offsets"][1] - e["data_offsets"][0])))
    return out, meta


def bf16_bytes(x):
    """float32 array -> bf16 bytes, round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r.tobytes()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--fp4emu", default="build/fp4emu")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=5504)
    p.add_argument("--kv", type=int, default=512, help="rows of k_proj and v_proj (grouped-query attention)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if min(a.layers, a.tokens, a.hidden, a.intermediate, a.kv) < 1:
        sys.exit("make_study_dump.py: every size must be at least 1")

    acts, weights = os.path.join(a.out, "acts"), os.path.join(a.out, "weights")
    os.makedirs(acts, exist_ok=True)
    os.makedirs(weights, exist_ok=True)

    # Activations: one `fp4emu sample` file, split by layer.
    whole = os.path.join(a.out, "sample.safetensors")
    subprocess.run([a.fp4emu, "sample", whole, "--seed", str(a.seed), "--layers", str(a.layers), "--tokens",
                    str(a.tokens), "--hidden", str(a.hidden), "--intermediate", str(a.intermediate)], check=True,
                   stdout=subprocess.DEVNULL)
    tensors, meta = read_safetensors(whole)
    for layer in range(a.layers):
        mine = [t for t in tensors if t[0].startswith(f"model.layers.{layer}.")]
        write_safetensors(os.path.join(acts, f"layer_{layer:02d}.safetensors"), mine, meta)
    os.remove(whole)

    # Weights: N(0, 1/d), one generator stream per tensor, two shards.
    h, i = a.hidden, a.intermediate
    shapes = [("self_attn.q_proj", h, h), ("self_attn.k_proj", a.kv, h), ("self_attn.v_proj", a.kv, h),
              ("self_attn.o_proj", h, h), ("mlp.gate_proj", i, h), ("mlp.up_proj", i, h), ("mlp.down_proj", h, i)]
    shards = 2 if a.layers > 1 else 1
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        out = []
        for layer in range(s * a.layers // shards, (s + 1) * a.layers // shards):
            for k, (proj, n, d) in enumerate(shapes):
                rng = np.random.default_rng([a.seed, layer, k])
                w = rng.standard_normal((n, d), dtype=np.float32) / np.float32(np.sqrt(d))
                name = f"model.layers.{layer}.{proj}.weight"
                out.append((name, "BF16", (n, d), bf16_bytes(w)))
                weight_map[name] = file
        write_safetensors(os.path.join(weights, file), out, {"format": "pt"})
    total = sum(n * d * 2 for _, n, d in shapes) * a.layers
    with open(os.path.join(weights, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    print(f"{acts}: {a.layers} files; {weights}: {shards} shards, {total / 1e6:.0f} MB of bf16 weights")


if __name__ == "__main__":
    main()
