"""`rlvr train code_synth_tool`: code_synth with the run tool trains end to end on the tiny model (a
few steps): the base is pretrained on run traces, every episode's runs go to the sandbox, the
episode metrics are logged."""

from __future__ import annotations

import sys
import time

import pytest

from rlvr.config import load_config
from rlvr.log import read_metrics

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


@pytest.mark.filterwarnings("ignore:step:RuntimeWarning")
def test_code_synth_tool_config_trains_in_seconds(tmp_path, monkeypatch) -> None:
    from rlvr.train.loop import train

    over = ["model.d_model=32", "model.n_head=2", "model.n_layer=1", "pretrain.tokens=6000",
            "pretrain.batch_size=16", "pretrain.seq_len=96", "train.steps=3", "algo.prompts_per_step=2",
            "algo.group_size=4", "train.eval_every=0", "train.eval_problems=2", "train.final_eval_samples=1",
            "log.progress=none", f"train.out_dir={tmp_path}", "algo.zero_var_filter=false",
            "task.knobs={pool_size: 300}"]
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    t0 = time.monotonic()
    run = train(load_config("code_synth_tool", over), run_dir=tmp_path / "run", progress="none")
    assert time.monotonic() - t0 < 30
    steps = [r for r in read_metrics(run) if "reward" in r]
    assert len(steps) == 3
    for key in ("turns", "tool_calls", "failed_call_share", "env_tokens", "pass_rate_with_call"):
        assert all(key in r for r in steps), key
