"""Learning, not just running: a short seeded RL run raises the reward it optimises.

The verifier-reward learning of the default recipe needs the full base model (minutes of
pretraining): it is measured by `rlvr run` (see the closing notes / docs). Here the reward is the
intrinsic self-certainty (ScaleRL/RLIF), which a 1-layer model can raise in seconds: a broken sign,
normaliser, mask or optimiser step makes this test fail.
"""

from rlvr.config import load_config
from rlvr.log import read_metrics
from rlvr.train.loop import train


def test_rl_raises_the_optimised_reward(tiny_overrides, tmp_path):
    cfg = load_config("quickstart", [*tiny_overrides, "reward.kind=self_certainty", "optim.lr=1e-3",
                                     "optim.warmup_steps=0", "algo.prompts_per_step=8", "algo.group_size=4",
                                     "algo.npr_threshold=0", "train.steps=16", "train.eval_every=0",
                                     "train.eval_problems=8", "sampling.max_new_tokens=16",
                                     "sampling.interruption_budget=0", "train.seed=3"])
    rows = read_metrics(train(cfg, run_dir=tmp_path / "r", progress="none"))
    first = sum(r["reward"] for r in rows[:4]) / 4
    last = sum(r["reward"] for r in rows[-4:]) / 4
    assert last > first + 0.25 * abs(first) + 0.05, (first, last)
    assert all("gt_accuracy" in r for r in rows)  # ground truth is logged beside the proxy
