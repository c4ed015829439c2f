"""Study 1 (studies/tiny_llm/rollout_study.py) at a reduced size: the fp32 row is the plain model, quantized
runs change the outputs, ResQ dense beats no residual on activation QSNR, the command line's per-tensor
numbers join the table, and a seed reproduces the same numbers."""
import copy
import json
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")
import fp4emu.torch as ft  # noqa: E402
from studies.tiny_llm import rollout_study as rs  # noqa: E402
from studies.tiny_llm import task  # noqa: E402
from studies.tiny_llm.model import load  # noqa: E402

ROOT = pathlib.Path(os.environ.get("FP4EMU_ROOT", pathlib.Path(__file__).resolve().parents[3]))
CKPT = ROOT / "data" / "tiny_llm" / "model.safetensors"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    if not os.path.exists(os.environ.get("FP4EMU_CLI", str(ROOT / "build" / "fp4emu"))):
        pytest.skip("FP4EMU_CLI does not name the fp4emu binary (ctest sets it)")
    out = tmp_path_factory.mktemp("rollout")
    res = rs.run(CKPT, out, ["mxfp4.ocp"], n_test=80, n_calib=16, n_dump=16, seed=0, threads=1, progress=False,
                 sensitivity=True)
    return res, out


def test_fp32_row_is_the_plain_model(study):
    res, _ = study
    fp32 = res["configs"][0]
    assert fp32["name"] == "fp32" and fp32["em_drop"] == 0 and fp32["changed_completions"] == 0
    test = task.make_split("test", 80, 0)
    plain = rs.evaluate(load(CKPT).eval(), test)
    assert plain["exact_match"] == fp32["exact_match"] and plain["answer_loglik"] == fp32["answer_loglik"]


def test_quantized_runs_change_the_outputs(study):
    res, _ = study
    rows = {r["mode"]: r for r in res["configs"]}
    assert set(rows) == {"fp32", "W4A16", "W16A4", "W4A4", "ResQ dense", "ResQ 2:4", "ResQ 4:8", "ResQ channel50",
                         "smoothquant", "rht", "occ"}
    for mode, r in rows.items():
        if mode != "fp32":
            assert r["answer_loglik"] != rows["fp32"]["answer_loglik"], mode


def test_resq_dense_beats_none_on_activation_qsnr(study):
    res, out = study
    rows = {r["mode"]: r for r in res["configs"]}
    assert rows["ResQ dense"]["act_qsnr_db"] > rows["W4A4"]["act_qsnr_db"] + 10
    assert rows["ResQ dense"]["act_qsnr_db"] > rows["ResQ 2:4"]["act_qsnr_db"] > rows["W4A4"]["act_qsnr_db"]
    # The W4A4 value is the command's own pooled QSNR of the dump (resq, pattern none).
    rq = json.loads((out / "rollout_resq" / "resq.json").read_text())["results"][0]["pooled"]
    none = next(p for p in rq if p["pattern"] == "none")
    assert abs(none["act_qsnr_db"] - rows["W4A4"]["act_qsnr_db"]) < 1e-6


def test_tensor_rows_and_outputs(study):
    res, out = study
    kinds = {(t["layer"], t["kind"]) for t in res["tensors"]}
    assert kinds == {(l, k) for l in range(2) for k in rs.KINDS}
    assert all(0 < t["underflow_ratio"] < 1 and t["qsnr_db"] > 5 for t in res["tensors"])
    assert res["kind_with_most_underflow"]["mxfp4.ocp"] in rs.KINDS
    for f in ("rollout_study.json", "rollout_study.csv", "rollout_tensors.csv", "rollout_table.png",
              "rollout_scatter.png", "rollout_layers.png", "rollout_underflow/summary_heatmap.png",
              "rollout_underflow/detail_heatmap.png"):
        assert (out / f).stat().st_size > 0, f


def test_a_seed_reproduces_the_numbers():
    m = load(CKPT).eval()
    test = task.problems("test")[::60]
    a = rs.evaluate(rs.quantized(m, "hif4.v14", {"weights": True, "residual": "2:4"}, {}), test)
    b = rs.evaluate(rs.quantized(m, "hif4.v14", {"weights": True, "residual": "2:4"}, {}), test)
    assert a == b
    c = rs.evaluate(m, test)
    assert c["completions"] == rs.evaluate(copy.deepcopy(m), test)["completions"]


def test_smoothquant_takes_the_calibration_batch():
    m = load(CKPT).eval()
    cal = ft.capture_inputs(m, rs.rollout_tokens(["12+34="], ["46"]))
    q = rs.quantized(m, "mxfp4.ocp", {"weights": True, "transform": "smoothquant:alpha=0.5"}, cal)
    lin = q.get_submodule("layers.0.mlp.down_proj")
    assert torch.equal(lin.calib, cal["layers.0.mlp.down_proj"])


def test_spearman():
    assert rs.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1)
    assert rs.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1)
    assert rs.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)  # ties take their mean rank
    assert rs.spearman([1, 2], [1, 2]) != rs.spearman([1, 2], [1, 2])  # NaN below 3 points
