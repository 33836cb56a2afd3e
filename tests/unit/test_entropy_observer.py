"""The observed entropy change of each update (``train.entropy_probe``; docs/methods/losses.md,
"Observed entropy change"): its sums by hand, and a run with it on trains exactly the weights and
metrics of a run with it off."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.algo.diagnostics import CELLS, observed_cell_sums, token_stats_from_logits
from rlvr.config import ConfigError, ModelConfig, load_config
from rlvr.model.io import save_policy
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer

WALL = {"wall_s", "gen_s", "train_s", "score_s", "scored_per_s"}


def test_observed_cell_sums_by_hand():
    """Two rows of two tokens: row 0 has A = +1, row 1 A = -1; token (1, 1) is off the loss mask.
    Each token's change H_after - H_before lands in its cell (peak or valley BEFORE the update)."""
    z_before = torch.tensor([[[3.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[3.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    tokens = torch.tensor([[0, 1], [2, 0]])  # (0,0) peak; (0,1) uniform: p_s = sum p^2, a peak; (1,0) valley
    before = token_stats_from_logits(z_before.double(), tokens)
    after = before["entropy"] + torch.tensor([[0.1, -0.2], [0.3, 5.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [True, False]])
    sums = observed_cell_sums(before, after, torch.tensor([1.0, -1.0]), mask)
    assert float(sums["dH_obs_total"]) == pytest.approx(0.1 - 0.2 + 0.3)  # the masked 5.0 is left out
    assert float(sums["dH_obs_pos_peak"]) == pytest.approx(0.1 - 0.2)
    assert float(sums["dH_obs_neg_valley"]) == pytest.approx(0.3)
    assert float(sums["dH_obs_pos_valley"]) == 0 and float(sums["dH_obs_neg_peak"]) == 0


def test_entropy_probe_is_a_validated_field_left_out_of_cell_keys_when_off():
    from rlvr.config import config_hash
    from rlvr.experiments.models import keyed_config

    with pytest.raises(ConfigError, match="train.entropy_probe"):
        load_config("quickstart", ["train.entropy_probe=-1"])
    off = load_config("quickstart")
    assert "entropy_probe" not in keyed_config(off)["train"]
    on = load_config("quickstart", ["train.entropy_probe=8"])
    assert keyed_config(on)["train"]["entropy_probe"] == 8
    assert config_hash(keyed_config(on)) != config_hash(keyed_config(off))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three steps of the same run with the observer off and on (two mini-batches a step, a reward
    that varies within groups so every update has a gradient)."""
    from rlvr.train.loop import train

    d = tmp_path_factory.mktemp("observer")
    torch.manual_seed(0)
    save_policy(TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=64), CharTokenizer().vocab_size),
                CharTokenizer(), d / "init")
    over = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", f"model.init_from={d / 'init'}",
            "task.train_size=64", "train.eval_problems=4", "train.eval_every=0",
            "algo.prompts_per_step=4", "algo.group_size=4", "algo.minibatches=2", "algo.npr_threshold=0",
            "sampling.max_new_tokens=12", "sampling.interruption_budget=0", "reward.kind=neg_entropy",
            "optim.lr=3e-3", "log.progress=none", "train.steps=3", "train.checkpoint_every=3"]
    out = {"over": over, "dir": d}
    for probe in (0, 6):
        run = train(load_config("quickstart", [*over, f"train.entropy_probe={probe}"]), run_dir=d / f"p{probe}")
        lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        ckpt = sorted(run.glob("checkpoints/step_*"))[-1]
        out[probe] = (lines, ckpt)
    return out


def _weights(ckpt) -> dict:
    from safetensors.torch import load_file

    return load_file(str(ckpt / "model.safetensors"))


def test_the_observer_on_leaves_weights_and_every_metric_of_the_run_unchanged(runs):
    """Fails if a measurement drew a random number, moved a weight or changed a training metric."""
    (off, ckpt_off), (on, ckpt_on) = runs[0], runs[6]
    w_off, w_on = _weights(ckpt_off), _weights(ckpt_on)
    assert w_off.keys() == w_on.keys() and all(torch.equal(w_off[k], w_on[k]) for k in w_off)
    for line_off, line_on in zip(off, on, strict=True):
        assert {k: v for k, v in line_on.items() if k in line_off and k not in WALL} == \
            {k: v for k, v in line_off.items() if k not in WALL}
        added = set(line_on) - set(line_off)
        assert added == {"dH_obs_total", *(f"dH_obs_{c}" for c in CELLS), "probe_entropy_before",
                         "probe_entropy_after", "probe_entropy_change", "probe_s"}


def test_the_probe_is_fixed_and_its_changes_chain_from_step_to_step(runs):
    """Nothing moves the weights between steps: the probe's entropy after step t is its entropy
    before step t + 1 (the same batch, the same policy), and each step's change is after - before."""
    on = runs[6][0]
    for prev, line in zip(on, on[1:]):
        assert line["probe_entropy_before"] == prev["probe_entropy_after"]
    for line in on:
        assert line["probe_entropy_change"] == pytest.approx(line["probe_entropy_after"] - line["probe_entropy_before"])
        cells = sum(line[f"dH_obs_{c}"] for c in CELLS)
        assert math.isfinite(line["dH_obs_total"]) and line["dH_obs_total"] != 0
        assert line["token_share_zero_adv"] == 0  # a continuous reward: every token is in a cell
        assert line["dH_obs_total"] == pytest.approx(cells, rel=1e-9)


def test_a_resumed_run_draws_the_same_probe(runs):
    """The probe is drawn by the starting policy before the checkpoint is restored: after a resume at
    step 2, step 3's probe entropy before its update is the uninterrupted run's, bit for bit."""
    from rlvr.train.loop import train

    run = train(load_config("quickstart", [*runs["over"], "train.entropy_probe=6", "train.steps=2",
                                           "train.checkpoint_every=1"]), run_dir=runs["dir"] / "resumed")
    train(resume=run, extra_steps=3)
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2, 3]
    assert lines[2]["probe_entropy_before"] == lines[1]["probe_entropy_after"]
    assert lines[1]["probe_entropy_after"] == runs[6][0][1]["probe_entropy_after"]
