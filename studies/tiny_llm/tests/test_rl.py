"""Study 2 (studies/tiny_llm/rl_study.py) at a reduced size: the GRPO pieces (group-normalised advantages,
clipped loss, sampling masks), the fp32 path equal to plain PyTorch, W4A4 rollouts changing the outputs,
the rollout taking the trained weights, and seeds reproducing the same curves."""
import pytest

torch = pytest.importorskip("torch")
import fp4emu.torch as ft  # noqa: E402
from studies.tiny_llm import rl_study as rl  # noqa: E402
from studies.tiny_llm import task  # noqa: E402
from studies.tiny_llm.generate import token_logprobs  # noqa: E402
from studies.tiny_llm.model import ModelConfig, TinyQwen, load, save  # noqa: E402


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("rl") / "model.safetensors"
    save(TinyQwen(ModelConfig(vocab_size=len(task.VOCAB), hidden_size=64, intermediate_size=128, num_layers=1)), path)
    return path


def test_group_advantages_are_normalised_within_each_group():
    r = torch.tensor([1.0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1])
    a = rl.group_advantages(r, 4).view(3, 4)
    assert torch.allclose(a.mean(1), torch.zeros(3), atol=1e-6)
    assert torch.equal(a[1], torch.zeros(4))  # all rewards equal: no signal
    assert torch.allclose(a[0], torch.tensor([1.0, -1, -1, 1]), atol=1e-3)
    assert torch.allclose(a[2], torch.tensor([-1 / 3 ** 0.5, -1 / 3 ** 0.5, -1 / 3 ** 0.5, 3 ** 0.5]), atol=1e-3)


def test_clipped_loss_stops_the_gradient_beyond_the_clip():
    mask = torch.ones(2, 3)
    adv = torch.tensor([1.0, -1.0])
    old = torch.zeros(2, 3)
    lp = torch.zeros(2, 3, requires_grad=True)
    rl.policy_loss(lp, old, adv, mask, 0.2).backward()
    assert torch.allclose(lp.grad, -adv[:, None].expand(2, 3) / 6)  # ratio 1: the policy gradient
    lp = torch.full((2, 3), 0.5, requires_grad=True)  # ratio e^0.5 > 1.2: the positive advantage is clipped
    rl.policy_loss(lp, old, adv, mask, 0.2).backward()
    assert torch.equal(lp.grad[0], torch.zeros(3)) and bool((lp.grad[1] > 0).all())


def test_sample_masks_the_sampled_tokens_up_to_eos(ckpt):
    model = load(ckpt)
    prompts = [p for p, _ in task.make_split("train", 2, 0)]
    runs = [rl.sample(model, prompts, 3, 1.0, torch.Generator().manual_seed(5)) for _ in range(2)]
    (tokens, mask, texts), (tokens2, _, texts2) = runs
    assert torch.equal(tokens, tokens2) and texts == texts2 and tokens.shape == (6, 16)
    for row, m, text in zip(tokens, mask, texts):
        pos = m.nonzero().flatten()
        assert pos[0] == task.PROMPT_LEN and bool((pos.diff() == 1).all())  # from the last prompt token on
        sampled = row[pos + 1].tolist()
        assert rl._completion_text(sampled) == text and (task.EOS_ID not in sampled[:-1])
        assert bool((row[pos[-1] + 2:] == task.PAD_ID).all())


def test_fp32_setting_is_plain_pytorch_and_w4a4_rollout_changes_outputs(ckpt):
    plain = load(ckpt)
    tokens = torch.randint(3, len(task.VOCAB), (4, 16))
    ref = plain(tokens)
    policy, rollout = rl.build_models(ckpt, rl.Setting("fp32"), 0, 1)
    assert torch.equal(policy(tokens), ref) and torch.equal(rollout(tokens), ref)
    x = tokens.clone()
    plain_lp = token_logprobs(plain, x)
    token_logprobs(policy, x).sum().backward()
    plain_lp.sum().backward()
    for (n, p), (n2, q) in zip(policy.named_parameters(), plain.named_parameters()):
        assert n.replace(".linear", "") == n2 and torch.equal(p.grad, q.grad), n
    for s in rl.settings():
        if s.rollout is None:
            continue
        policy, rollout = rl.build_models(ckpt, s, 0, 1)
        assert not torch.equal(rollout(tokens), ref), s
        assert torch.equal(policy(tokens), ref) == (s.train is None), s
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.01)
        rollout.load_state_dict(policy.state_dict())  # the rollout takes the trained weights
        assert torch.equal(rollout.layers[0].mlp.up_proj.linear.weight, policy.layers[0].mlp.up_proj.linear.weight)


def test_resq_rollout_is_closer_to_fp32_than_plain_w4a4(ckpt):
    tokens = torch.randint(3, len(task.VOCAB), (8, 16))
    ref = load(ckpt)(tokens)
    err = {}
    for s in rl.settings(("mxfp4.ocp",)):
        if s.train is not None:
            err[s.name] = (rl.build_models(ckpt, s, 0, 1)[1](tokens) - ref).pow(2).mean().item()
    assert err["MXFP4+ResQ"] < err["MXFP4"]


def test_reduced_runs_reproduce(ckpt):
    kw = dict(steps=2, prompts=4, group=4, lr=1e-3, epochs=2, clip=0.2, temperature=1.0, threads=1,
              eval_every=2, eval_n=8)
    a = rl.train_run(ckpt, rl.Setting("MXFP4+ResQ", "mxfp4.ocp", "2:4", "mxfp4.ocp"), 0, **kw)
    b = rl.train_run(ckpt, rl.Setting("MXFP4+ResQ", "mxfp4.ocp", "2:4", "mxfp4.ocp"), 0, **kw)
    assert a["reward"] == b["reward"] and a["eval"] == b["eval"]
    assert [e["step"] for e in a["eval"]] == [0, 2]
    rows = rl.summarize([a, b])
    assert rows[0]["seeds"] == 2 and rows[0]["em_gain_sd"] == 0


def test_command_line_refuses_bad_input(capsys, tmp_path):
    for args, msg in ((["--checkpoint", str(tmp_path / "none")], "does not exist"),
                      (["--prompts", "3", "--group", "3"], "multiple of 4"),
                      (["--settings", "bogus"], "unknown"), (["--steps", "0"], "must be >= 1"),
                      (["--warmup", "-1"], "--warmup must be >= 0")):
        with pytest.raises(SystemExit) as e:
            rl.main(args + ["--no-progress"])
        assert e.value.code == 2 and msg in capsys.readouterr().err, args


def test_one_command_writes_json_csv_and_png(ckpt, tmp_path):
    assert rl.main(["--checkpoint", str(ckpt), "--seeds", "0", "--steps", "1", "--prompts", "4", "--group", "4",
                    "--eval-n", "4", "--eval-every", "1", "--formats", "mxfp4.ocp", "--settings", "fp32",
                    "MXFP4-fp32train", "--jobs", "1", "--threads", "1", "--out", str(tmp_path), "--no-progress"]) == 0
    import json
    got = json.loads((tmp_path / "rl.json").read_text())
    assert [r["setting"] for r in got["summary"]] == ["fp32", "MXFP4-fp32train"]
    assert "out" not in got["args"] and "checkpoint" not in got["args"]  # scratch paths: not recorded
    assert (tmp_path / "rl.csv").read_text().startswith("setting,") and (tmp_path / "rl.png").stat().st_size > 0


def test_a_completion_with_pad_or_bos_earns_nothing():
    p, a = task.make_split("train", 1, 3)[0]
    ok = [*task.encode(a), task.EOS_ID, task.PAD_ID]
    assert rl._completion_text(ok) == a and task.reward(p, rl._completion_text(ok)) == 1.0
    sneaky = [*task.encode(a[:1]), task.PAD_ID, *task.encode(a[1:]), task.EOS_ID]
    assert task.decode(sneaky) == a and task.reward(p, rl._completion_text(sneaky)) == 0.0


def test_results_json_records_paths_relative_to_the_repository(tmp_path):
    from studies.tiny_llm.pretrain import ROOT, portable_args
    got = portable_args({"out": str(tmp_path), "checkpoint": str(ROOT / "data" / "m.safetensors"), "lr": 1e-5,
                         "formats": ["hif4.v14"]})
    assert got == {"checkpoint": "data/m.safetensors", "lr": 1e-5, "formats": ["hif4.v14"]}
