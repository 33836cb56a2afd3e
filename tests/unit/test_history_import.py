"""``rlvr fit`` on other frameworks' histories (rlvr.analysis.history_io): a W&B history CSV of a verl
run and TensorBoard events of a TRL run. Fixtures: tests/fixtures/importers/README.md."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from rlvr.analysis.curve_io import load_run_curve
from rlvr.analysis.history_io import detect_framework, read_wandb_csv, to_metrics
from rlvr.cli import main
from rlvr.errors import UserError

FIX = Path(__file__).parent.parent / "fixtures" / "importers"


def test_verl_wandb_csv_curve_in_tokens() -> None:
    name, C, R = load_run_curve(FIX / "verl_wandb_history.csv")  # --x flops falls back to tokens
    with (FIX / "verl_wandb_history.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    want_R = [float(r["val-core/openai/gsm8k/acc/mean@1"]) for r in rows if r["val-core/openai/gsm8k/acc/mean@1"]]
    assert R.tolist() == want_R and len(R) == 21
    assert C.tolist() == [2 * 500000.0 * i for i in range(21)]  # summed per-step tokens at each validation
    assert name == "verl_wandb_history"
    _, C_tok, _ = load_run_curve(FIX / "verl_wandb_history.csv", x="tokens")
    assert np.array_equal(C, C_tok)
    with pytest.raises(UserError, match="no 'samples' key"):
        load_run_curve(FIX / "verl_wandb_history.csv", x="samples")


def test_y_key_override_and_missing_key() -> None:
    rows = read_wandb_csv(FIX / "verl_wandb_history.csv")
    assert detect_framework(rows) == "verl"
    lines = to_metrics(rows, FIX, y_key="val-aux/openai/gsm8k/reward/mean@1")
    assert sum("heldout_pass_rate" in r for r in lines) == 21
    with pytest.raises(UserError, match="pass --y KEY"):
        to_metrics([{"_step": 0.0, "train/loss": 1.0}], FIX)


def _trl_events(tmp_path: Path) -> tuple[Path, list[tuple[int, float, float]]]:
    """TensorBoard events under the tags transformers' TensorBoardCallback writes for TRL's GRPO."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    log = tmp_path / "runs" / "Jul01_12-00-00_host"
    w = SummaryWriter(str(log))
    evals = []
    for step in range(1, 31):
        tokens = 12_000.0 * step
        w.add_scalar("train/num_tokens", tokens, step)
        w.add_scalar("train/reward", 0.2 + 0.01 * step, step)
        w.add_scalar("train/frac_reward_zero_std", 0.3, step)
        if step % 3 == 0:
            acc = 0.1 + 0.6 * step / (step + 10)
            w.add_scalar("eval/rewards/accuracy_reward/mean", acc, step)
            w.add_scalar("eval/reward", acc + 0.4, step)  # accuracy + format: not a pass rate
            evals.append((step, tokens, acc))
    w.close()
    return tmp_path / "runs", evals


def test_trl_tensorboard_events_curve(tmp_path) -> None:
    folder, evals = _trl_events(tmp_path)
    _, C, R = load_run_curve(folder)
    assert C.tolist() == [t for _, t, _ in evals]
    assert R.tolist() == pytest.approx([a for _, _, a in evals], abs=1e-6)  # float32 in the event file


def test_rlvr_fit_reads_peer_histories(tmp_path, capsys) -> None:
    folder, _ = _trl_events(tmp_path)
    out = tmp_path / "fit.json"
    assert main(["fit", str(FIX / "verl_wandb_history.csv"), str(folder), "--n-boot", "0", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    text = json.dumps(res)
    assert "verl_wandb_history" in text and "runs" in text
    verl = next(r for r in res["runs"] if r["name"] == "verl_wandb_history")
    # the sigmoid the fixture was written from (A 0.8, B 1.5, C_mid 4e6 tokens, R0 0.1; 4-digit values)
    assert (verl["A"], verl["B"], verl["C_mid"]) == (pytest.approx(0.8, abs=0.01), pytest.approx(1.5, abs=0.05),
                                                     pytest.approx(4e6, rel=0.02))


def test_run_dirs_with_old_flat_or_namespaced_names_fit_the_same(tmp_path) -> None:
    from rlvr.metric_names import namespaced

    old = [{"step": s, "flops": 1e15 * s, "heldout_pass_rate": 0.1 + 0.02 * s} for s in range(0, 12, 2)]
    new = [{"step": r["step"], **{namespaced(k): v for k, v in r.items() if k != "step"}} for r in old]
    for name, rows in (("old", old), ("new", new)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, C_old, R_old = load_run_curve(tmp_path / "old")
    _, C_new, R_new = load_run_curve(tmp_path / "new")
    assert np.array_equal(C_old, C_new) and np.array_equal(R_old, R_new) and len(C_old) == 6


def test_prime_rl_and_nemo_rl_key_maps() -> None:
    """prime-rl: eval/<env>/all/<agent>/avg@G and cumulative progress/total_tokens; NeMo-RL:
    validation/accuracy and per-step train/total_num_tokens (summed). Keys as their W&B histories hold them."""
    prime = [{"_step": 0.0, "step": 0.0, "progress/total_tokens": 0.0, "eval/gsm8k/all/agent/avg@8": 0.25},
             {"_step": 1.0, "step": 1.0, "progress/total_tokens": 1000.0, "train/agg/all/reward/mean": 0.3},
             {"_step": 2.0, "step": 2.0, "progress/total_tokens": 2500.0, "eval/gsm8k/all/agent/avg@8": 0.5}]
    assert detect_framework(prime) == "prime-rl"
    lines = to_metrics(prime, FIX)
    assert [(r["tokens"], r.get("heldout_pass_rate")) for r in lines] == [(0.0, 0.25), (1000.0, None), (2500.0, 0.5)]
    nemo = [{"_step": 1.0, "train/total_num_tokens": 400.0},
            {"_step": 2.0, "train/total_num_tokens": 600.0, "validation/accuracy": 0.4}]
    assert detect_framework(nemo) == "nemo-rl"
    assert [(r["tokens"], r.get("heldout_pass_rate")) for r in to_metrics(nemo, FIX)] == [(400.0, None), (1000.0, 0.4)]
