"""The tiny-LLM foundation: the task's splits and reward, TinyQwen against a plain re-derivation of its
forward pass, the checkpoint format, and the identity of fp4emu.torch's wrapper without quantization."""
import json
import math
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")
import fp4emu.torch as ft  # noqa: E402
from studies.tiny_llm import task  # noqa: E402
from studies.tiny_llm.generate import answer_logprob, batch_tokens, exact_match, generate  # noqa: E402
from studies.tiny_llm.model import STUDY_CONFIG, ModelConfig, TinyQwen, load, num_parameters, save  # noqa: E402

ROOT = pathlib.Path(os.environ.get("FP4EMU_ROOT", pathlib.Path(__file__).resolve().parents[3]))


def small_model(seed=0, layers=2):
    torch.manual_seed(seed)
    m = TinyQwen(ModelConfig(vocab_size=len(task.VOCAB), hidden_size=64, intermediate_size=128, num_layers=layers,
                             num_heads=2, num_kv_heads=1))
    for p in m.parameters():  # away from the init's zeros and ones, so every term counts
        p.data += 0.05 * torch.randn_like(p)
    return m.eval()


def test_splits_are_disjoint_and_seeded():
    sets = {n: {p for p, _ in task.problems(n)} for n in task.SPLITS}
    assert not (sets["train"] & sets["test"]) and not (sets["train"] & sets["calib"])
    assert not (sets["test"] & sets["calib"])
    assert sum(map(len, sets.values())) == 3 * 100 * 100 - 100 * 90  # every problem in one split
    a, b = task.make_split("test", 50, 3), task.make_split("test", 50, 3)
    assert a == b and a != task.make_split("test", 50, 4)
    assert all(p in sets["test"] for p, _ in a)


def test_answers_reward_and_tokens():
    assert task.solve("23+45=") == "68" and task.solve("23-45=") == "-22" and task.solve("23*07=") == "161"
    assert task.reward("23-45=", "-22") == 1.0 and task.reward("23-45=", "22") == 0.0
    assert task.decode(task.encode("12*03=36") + [task.EOS_ID, 5]) == "12*03=36"
    with pytest.raises(ValueError, match="not of the form"):
        task.solve("123+4=")
    with pytest.raises(ValueError, match="vocabulary"):
        task.encode("1/2")
    toks, mask = batch_tokens(["23+45=", "23*07="], ["68", "161"])
    # The masked positions predict the answer and <eos>: tokens[t + 1] there.
    for row, m, ans in zip(toks, mask, ["68", "161"]):
        targets = [int(row[t + 1]) for t in range(len(row) - 1) if m[t]]
        assert targets == task.encode(ans) + [task.EOS_ID]


def reference_forward(m: TinyQwen, tokens: torch.Tensor) -> torch.Tensor:
    """Qwen2's forward written out one position at a time, rotary positions as complex rotations."""
    c = m.config
    sd = {k: v.double() for k, v in m.state_dict().items()}
    hd = c.head_dim

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + c.rms_eps) * w

    def rope(v, pos):  # pairs (i, i + hd/2) rotated by pos * theta^(-2i/hd)
        z = torch.complex(v[..., :hd // 2], v[..., hd // 2:])
        ang = pos * c.rope_theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        z = z * torch.polar(torch.ones_like(ang), ang)
        return torch.cat([z.real, z.imag], -1)

    x = sd["embed_tokens.weight"][tokens]
    b, t, _ = x.shape
    for i in range(c.num_layers):
        p = f"layers.{i}."
        h = rms(x, sd[p + "input_layernorm.weight"])
        lin = lambda v, n: v @ sd[p + n + ".weight"].T + sd.get(p + n + ".bias", 0)  # noqa: E731
        q = lin(h, "self_attn.q_proj").view(b, t, c.num_heads, hd)
        k = lin(h, "self_attn.k_proj").view(b, t, c.num_kv_heads, hd)
        v = lin(h, "self_attn.v_proj").view(b, t, c.num_kv_heads, hd)
        att = torch.zeros(b, t, c.num_heads, hd, dtype=torch.float64)
        for s in range(t):
            for hh in range(c.num_heads):
                kv = hh // (c.num_heads // c.num_kv_heads)
                qs = rope(q[:, s, hh], s)
                ks = torch.stack([rope(k[:, u, kv], u) for u in range(s + 1)], 1)
                w = torch.softmax((ks @ qs[:, :, None]).squeeze(-1) / math.sqrt(hd), -1)
                att[:, s, hh] = (w[:, :, None] * v[:, :s + 1, kv]).sum(1)
        x = x + lin(att.reshape(b, t, -1), "self_attn.o_proj")
        h = rms(x, sd[p + "post_attention_layernorm.weight"])
        g, u = lin(h, "mlp.gate_proj"), lin(h, "mlp.up_proj")
        x = x + lin(g * torch.sigmoid(g) * u, "mlp.down_proj")
    return rms(x, sd["norm.weight"]) @ sd["embed_tokens.weight"].T


def test_forward_is_qwen2_written_out():
    m = small_model()
    tokens = batch_tokens(["23+45=", "99*09="], ["68", "891"])[0]
    got = m(tokens).double()
    ref = reference_forward(m, tokens)
    assert torch.allclose(got, ref, rtol=1e-4, atol=1e-4), float((got - ref).abs().max())


def test_w16a16_through_fp4emu_is_the_identity():
    m = small_model()
    tokens = batch_tokens(["23+45=", "99*09="], ["68", "891"])[0]
    plain = m(tokens)
    names = ft.quantize_linear_inputs(m, "mxfp4.ocp", modules="*", inputs=False, weights=False)
    assert len(names) == 14 and all(isinstance(m.get_submodule(n), ft.QuantizedLinear) for n in names)
    assert torch.equal(m(tokens), plain)


def test_checkpoint_round_trip_and_refusals(tmp_path):
    m = small_model()
    save(m, tmp_path / "m.safetensors")
    back = load(tmp_path / "m.safetensors")
    assert back.config == m.config
    for (k, a), (_, b) in zip(m.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), k
    assert json.loads((tmp_path / "config.json").read_text())["hidden_size"] == 64
    raw = (tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(ValueError, match="cut.safetensors"):
        load(tmp_path / "cut.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x10" + b"\0" * 7 + b"not json........")
    with pytest.raises(ValueError, match="junk.safetensors"):
        load(tmp_path / "junk.safetensors")
    with pytest.raises(ValueError, match="multiple of 64"):
        TinyQwen(ModelConfig(hidden_size=96))


def test_generation_scores_and_the_committed_checkpoint():
    m = load(ROOT / "data" / "tiny_llm" / "model.safetensors")
    test = task.problems("test")[::40]
    em = exact_match(m, test)
    assert 0.4 <= em <= 0.9  # useful but imperfect, as pretrain.py promises
    prompts = [p for p, _ in test]
    comps = generate(m, prompts)
    got = answer_logprob(m, prompts, comps)
    ref = answer_logprob(m, prompts, [a for _, a in test])
    assert em == sum(c == a for c, (_, a) in zip(comps, test)) / len(test)
    for g, r, c, (_, a) in zip(got, ref, comps, test):
        assert (abs(float(g) - float(r)) < 1e-5) == (c == a)
        assert float(g) < 0
    # Sampling with a seeded generator reproduces itself.
    s1 = generate(m, prompts, greedy=False, generator=torch.Generator().manual_seed(5))
    s2 = generate(m, prompts, greedy=False, generator=torch.Generator().manual_seed(5))
    assert s1 == s2


def test_the_studies_checkpoint_is_the_1m_model_and_imperfect():
    from studies.tiny_llm.pretrain import CHECKPOINT
    m = load(CHECKPOINT)
    assert CHECKPOINT == ROOT / "data" / "tiny_llm_1m" / "model.safetensors"
    assert m.config == STUDY_CONFIG and num_parameters(m) == 987_392
    assert 0.4 <= exact_match(m, task.problems("test")[::40]) <= 0.9


def test_pretraining_reproduces_itself_and_learns():
    from studies.tiny_llm.pretrain import pretrain
    cfg = ModelConfig(vocab_size=len(task.VOCAB), hidden_size=64, intermediate_size=128, num_layers=1)
    runs = [pretrain(cfg, steps=6, batch=16, lr=3e-3, seed=s, threads=1, eval_every=3, eval_n=8, warmup=2,
                     progress=False) for s in (1, 1, 2)]
    (m1, l1), (m2, l2), (_, l3) = runs
    assert l1["loss"] == l2["loss"] and l1["loss"] != l3["loss"]
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))
    assert l1["loss"][-1] < l1["loss"][0]
    assert [e["step"] for e in l1["eval"]] == [3, 6]


def test_bad_checkpoint_exits_2_with_the_file_named(tmp_path, capsys):
    from studies.tiny_llm import rollout_study
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x02\0\0\0\0\0\0\0{}")
    with pytest.raises(SystemExit) as e:
        rollout_study.main(["--checkpoint", str(bad), "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and "bad.safetensors" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
