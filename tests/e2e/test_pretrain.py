import json

from rlvr.cli import main
from rlvr.config import load_config
from rlvr.log import read_metrics
from rlvr.model.io import load_policy
from rlvr.train.pretrain import base_model, pretrain

from ..conftest import TINY


def test_pretraining_lowers_loss_and_writes_milestones(tmp_path):
    cfg = load_config(None, [*TINY, "pretrain.milestones=[0.25,0.5,1.0]"])
    final = pretrain(cfg.model, cfg.pretrain, tmp_path / "base", progress="none")
    rows = read_metrics(tmp_path / "base")
    assert rows[-1]["loss"] < rows[0]["loss"] - 0.5, (rows[0]["loss"], rows[-1]["loss"])
    assert rows[-1]["flops"] > rows[0]["flops"] > 0 and rows[-1]["tokens"] == json.loads(
        (tmp_path / "base" / "pretrain.json").read_text())["tokens"]
    for frac in ("0.25", "0.50", "1.00"):
        model, tok = load_policy(tmp_path / "base" / f"milestone_{frac}")
        assert model.num_params() > 0
    assert (final / "model.safetensors").exists()


def test_base_model_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    cfg = load_config(None, [*TINY, "pretrain.tokens=8000"])
    first = base_model(cfg.model, cfg.pretrain, "none")
    mtime = (first / "model.safetensors").stat().st_mtime_ns
    again = base_model(cfg.model, cfg.pretrain, "none")
    assert again == first and (again / "model.safetensors").stat().st_mtime_ns == mtime
    meta = json.loads((first.parent / "pretrain.json").read_text())
    assert meta["machine"]["precision"] == "float32" and meta["machine"]["cpu"]  # pretraining is float32
    assert meta["model"]["dtype"] == "float32" and cfg.model.dtype == "auto"


def test_pretrain_cli_bad_input(tmp_path, capsys):
    assert main(["pretrain", "model.kind=hf", "model.path=x"]) == 2
    assert "model.path: x does not exist" in capsys.readouterr().err  # checked at load, before anything
    assert main(["pretrain", "model.kind=hf", f"model.path={tmp_path}"]) == 2
    assert "tiny model only" in capsys.readouterr().err
    assert main(["pretrain", "pretrain.wrong_frac=2"]) == 2
    assert "pretrain.wrong_frac" in capsys.readouterr().err
