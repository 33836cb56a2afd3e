"""rlvr.eval.runner.evaluate_pair (what `rlvr run` evaluates): its progress display per stage."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr.config import load_config
from rlvr.eval.runner import evaluate_pair
from rlvr.model.io import save_policy
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer

TOK = CharTokenizer()
OVERRIDES = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.dtype=float32",
             "train.eval_problems=3", "train.final_eval_samples=2", "task.retention_problems=2",
             "sampling.max_new_tokens=6"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    cfg = load_config(None, OVERRIDES)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ckpt") / "model"
    save_policy(TinyGPT(cfg.model, TOK.vocab_size), TOK, path)
    return cfg, path


def test_plain_progress_names_every_stage_and_changes_no_number(checkpoint, tmp_path, capsys):
    cfg, ckpt = checkpoint
    quiet = evaluate_pair(cfg, ckpt, ckpt, tmp_path / "quiet")
    assert capsys.readouterr().err == ""  # progress="none" (the default) prints nothing
    shown = evaluate_pair(cfg, ckpt, ckpt, tmp_path / "plain", progress="plain")
    lines = capsys.readouterr().err.splitlines()
    last = {}
    for line in lines:
        stage, count = line[1:].split("] ", 1)
        last[stage] = count.split(" eta")[0]
    assert last == {"eval: sample base model, 3 problems x 2": "6/6 decoding steps",
                    "eval: sample trained model, 3 problems x 2": "6/6 decoding steps",
                    "eval: perplexity under the base": "12/12 completions",
                    "eval: retention (strings)": "2/2 models"}
    quiet.pop("machine"), shown.pop("machine")
    assert json.dumps(quiet, sort_keys=True) == json.dumps(shown, sort_keys=True)
    for name in ("samples.jsonl", "base_samples.jsonl"):
        assert (tmp_path / "quiet" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes()
