"""``rlvr eval --samples``: JSON round trip, pair mode, plots, and clean errors (exit code 2)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlvr.cli import main
from rlvr.eval.samples import load_samples, write_samples
from rlvr.eval.summary import compare, summarize


def fake_rows(p_correct: np.ndarray, n: int, seed: int) -> list[dict]:
    """n samples for each problem i, correct with probability p_correct[i]."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, p in enumerate(p_correct):
        for _ in range(n):
            ok = bool(rng.random() < p)
            ans = "7" if ok else str(int(rng.integers(0, 5)))
            rows.append(
                {
                    "problem_id": f"q{i}",
                    "completion": f"work {int(rng.integers(0, 3))} answer {ans}",
                    "answer": ans if rng.random() > 0.1 else None,
                    "reward": float(ok),
                    "correct": ok,
                    "num_tokens": int(rng.integers(5, 50)),
                    "mean_logp": float(-rng.random()),
                    "finish_reason": "eos" if rng.random() > 0.2 else "length",
                    "mean_entropy": float(rng.random()),
                }
            )
    return rows


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    base_p = rng.beta(0.4, 1.5, size=30)
    trained_p = np.where(base_p > 0.2, np.minimum(1.0, base_p * 2.5), 0.0)  # sharpened, narrower
    base = write_samples(tmp_path / "base.jsonl", fake_rows(base_p, 16, seed=1))
    trained = write_samples(tmp_path / "trained.jsonl", fake_rows(trained_p, 16, seed=2))
    return base, trained


def test_samples_round_trip(files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _, trained = files
    out = tmp_path / "eval.json"
    assert main(["eval", "--samples", str(trained), "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written == summarize(load_samples(trained))
    assert list(written["pass_at_k"]) == ["1", "2", "4", "8", "16"]
    assert "pass@k" in capsys.readouterr().out


def test_pair_round_trip_and_plots(files: tuple[Path, Path], tmp_path: Path) -> None:
    base, trained = files
    out, plots = tmp_path / "pair.json", tmp_path / "plots"
    argv = ["eval", "--samples", str(trained), "--base-samples", str(base), "--json", str(out)]
    assert main([*argv, "--plots", str(plots), "--ks", "1,4,16"]) == 0
    written = json.loads(out.read_text())
    assert written == compare(load_samples(base), load_samples(trained), ks=[1, 4, 16])
    assert set(written) >= {"base", "trained", "support", "crossover_k"}
    counts = written["support"]["counts"]
    assert sum(counts.values()) == 30 and counts["expanded"] == 0  # trained_p is 0 where base_p <= 0.2
    for name in ("pass_at_k.png", "entropy.png", "support.png"):
        png = (plots / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_bad_inputs_exit_2(files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _, trained = files
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem_id": "a", "correct": true}\n{"problem_id": "a", "reward": "x"}\n')
    assert main(["eval", "--samples", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "line 2" in err and "'reward'" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["eval", "--samples", str(empty)]) == 2
    assert "is empty" in capsys.readouterr().err
    assert main(["eval", "--samples", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["eval"]) == 2
    assert main(["eval", "--base-samples", str(trained)]) == 2
    assert main(["eval", "--samples", str(trained), "--ks", "1,a"]) == 2
    assert main(["eval", "--samples", str(trained), "--ks", "64"]) == 2
    assert main(["eval", "ckpt", "--samples", str(trained)]) == 2
    assert main(["eval", "ckpt", "--out", str(tmp_path)]) == 2  # a missing checkpoint is said first
    assert "checkpoint ckpt does not exist" in capsys.readouterr().err
    assert main(["eval", str(tmp_path), "--out", str(tmp_path)]) == 2  # no --task
    assert "--task" in capsys.readouterr().err


def test_checkpoint_eval_records_the_machine(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import torch

    from rlvr.config import ModelConfig
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer

    tok = CharTokenizer()
    torch.manual_seed(0)
    save_policy(TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=64), tok.vocab_size), tok,
                tmp_path / "ck")
    assert main(["eval", str(tmp_path / "ck"), "--task", "arithmetic", "--n", "2", "--problems", "2",
                 "--out", str(tmp_path / "out")]) == 0
    machine = json.loads((tmp_path / "out" / "eval.json").read_text())["machine"]
    assert machine["precision"] == "float32" and machine["cpu"]  # auto, pinned to float32 by conftest
    out = capsys.readouterr().out
    assert "machine: " in out and "precision float32" in out


def test_checkpoint_eval_streams_chunks_and_resumes_after_a_kill(tmp_path: Path, monkeypatch) -> None:
    """`rlvr eval CKPT --out DIR` writes chunk files as it samples; killed after the first chunk, the
    rerun samples only the missing chunks and writes exactly the samples of an uninterrupted run."""
    import torch

    import rlvr.eval.stream as stream
    from rlvr.config import ModelConfig
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer

    tok = CharTokenizer()
    torch.manual_seed(0)
    save_policy(TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=64), tok.vocab_size), tok,
                tmp_path / "ck")
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 8)  # 2 problems of n=4 per chunk: 3 chunks for 6 problems
    cmd = ["eval", str(tmp_path / "ck"), "--task", "arithmetic", "--n", "4", "--problems", "6"]
    assert main([*cmd, "--out", str(tmp_path / "whole")]) == 0
    whole = (tmp_path / "whole" / "samples.jsonl").read_text()
    assert not (tmp_path / "whole" / "samples.jsonl.chunks").exists()  # removed once the file is written

    real, calls = stream.samples_for, []

    def dies_on_second_chunk(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the kill
        return real(*a, **k)

    monkeypatch.setattr(stream, "samples_for", dies_on_second_chunk)
    assert main([*cmd, "--out", str(tmp_path / "cut")]) == 130  # interrupted
    chunks = tmp_path / "cut" / "samples.jsonl.chunks"
    assert sorted(p.name for p in chunks.glob("chunk_*")) == ["chunk_0000.jsonl"]
    assert not (tmp_path / "cut" / "samples.jsonl").exists()
    calls.clear()
    monkeypatch.setattr(stream, "samples_for", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main([*cmd, "--out", str(tmp_path / "cut")]) == 0
    assert len(calls) == 2  # only the two missing chunks were sampled
    assert (tmp_path / "cut" / "samples.jsonl").read_text() == whole
    # another protocol (seed) clears the chunks of the old one instead of mixing them in
    monkeypatch.setattr(stream, "samples_for", dies_on_second_chunk)
    calls.clear()
    assert main([*cmd, "--seed", "1", "--out", str(tmp_path / "cut2")]) == 130
    calls.clear()
    monkeypatch.setattr(stream, "samples_for", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main([*cmd, "--seed", "2", "--out", str(tmp_path / "cut2")]) == 0
    assert len(calls) == 3


def test_a_resumed_eval_never_mixes_two_models_samples(tmp_path: Path, monkeypatch) -> None:
    """Killed, then resumed after the checkpoint's weights changed in place: the chunks of the old
    weights are cleared (b87d620 keyed them by the path and mixed both models' samples, exit 0)."""
    import torch

    import rlvr.eval.stream as stream
    from rlvr.config import ModelConfig
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer

    tok, cfg = CharTokenizer(), ModelConfig(n_layer=1, d_model=32, n_head=2, context=64)
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 8)
    cmd = ["eval", str(tmp_path / "ck"), "--task", "arithmetic", "--n", "4", "--problems", "6"]
    torch.manual_seed(1)
    save_policy(TinyGPT(cfg, tok.vocab_size), tok, tmp_path / "ck")  # model B, evaluated whole
    assert main([*cmd, "--out", str(tmp_path / "b")]) == 0
    want = (tmp_path / "b" / "samples.jsonl").read_text()

    torch.manual_seed(0)
    save_policy(TinyGPT(cfg, tok.vocab_size), tok, tmp_path / "ck")  # model A at the same path: killed run
    real, calls = stream.samples_for, []

    def dies_on_second_chunk(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(stream, "samples_for", dies_on_second_chunk)
    assert main([*cmd, "--out", str(tmp_path / "cut")]) == 130
    torch.manual_seed(1)
    save_policy(TinyGPT(cfg, tok.vocab_size), tok, tmp_path / "ck")  # B again, in place, then resume
    calls.clear()
    monkeypatch.setattr(stream, "samples_for", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main([*cmd, "--out", str(tmp_path / "cut")]) == 0
    assert len(calls) == 3  # all three chunks sampled again: none of A's kept
    assert (tmp_path / "cut" / "samples.jsonl").read_text() == want


def test_model_fingerprint_follows_content_not_path(tmp_path: Path) -> None:
    import shutil

    from rlvr.model.fingerprint import model_fingerprint

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "model.safetensors").write_bytes(b"w1")
    (tmp_path / "a" / "config.json").write_text("{}")
    fp = model_fingerprint(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "optimizer.pt").write_bytes(b"opt")  # training state: not the model
    (tmp_path / "b" / "samples.jsonl").write_text("x")
    assert model_fingerprint(tmp_path / "b") == fp
    (tmp_path / "b" / "model.safetensors").write_bytes(b"w2")
    assert model_fingerprint(tmp_path / "b") != fp


def test_a_run_checkpoint_is_evaluated_on_the_runs_task(tmp_path: Path, capsys) -> None:
    """b87d620 demanded --task although the run's config.yaml names it."""
    import torch

    from rlvr.config import ModelConfig
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer

    tok = CharTokenizer()
    torch.manual_seed(0)
    ck = tmp_path / "run" / "checkpoints" / "step_000001"
    save_policy(TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=64), tok.vocab_size), tok, ck)
    assert main(["eval", str(ck), "--n", "2", "--problems", "2", "--out", str(tmp_path / "o")]) == 2
    assert "needs a task" in capsys.readouterr().err  # no run config: still asked for
    (tmp_path / "run" / "config.yaml").write_text("name: x\ntask:\n  name: countdown\n")
    assert main(["eval", str(ck), "--n", "2", "--problems", "2", "--out", str(tmp_path / "o")]) == 0
    assert f"task: countdown (from {tmp_path / 'run' / 'config.yaml'}" in capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "o" / "samples.jsonl").read_text().splitlines()]
    assert rows and all(r["problem_id"].startswith("countdown") for r in rows), rows[0]["problem_id"]


CLI = [sys.executable, "-c", "import sys; from rlvr.cli import main; sys.exit(main(sys.argv[1:]))"]


def _refuse(error: OSError):
    def replace(src, dst):
        raise error
    return replace


@pytest.mark.parametrize("error, said", [
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device (ENOSPC); the disk is full"),
    (PermissionError(errno.EACCES, "Permission denied"), "Permission denied (EACCES); check its permissions"),
    (OSError(errno.EROFS, "Read-only file system"), "Read-only file system (EROFS); that file system is read-only")])
def test_a_failed_json_write_is_one_line_and_nothing_is_printed(files, tmp_path, capsys, monkeypatch, error, said):
    """b87d620: a traceback (the JSON lost). Runs as root too: the write itself is made to fail."""
    import rlvr.paths

    _, trained = files
    out = tmp_path / "out" / "eval.json"
    error.filename = str(out)
    monkeypatch.setattr(rlvr.paths.os, "replace", _refuse(error))
    assert main(["eval", "--samples", str(trained), "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {out}: {said}")
    assert len(captured.err.splitlines()) == 1 and captured.out == ""  # no result shown as if it were saved
    assert not out.exists() and list(out.parent.iterdir()) == []  # no temporary file left


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_output_folder_is_refused_before_any_work(files, tmp_path):
    _, trained = files
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        proc = subprocess.run([*CLI, "eval", "--samples", str(trained), "--json", str(locked / "e.json")],
                              capture_output=True, text=True)
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: --json {locked / 'e.json'}: cannot write in {locked}")


def test_output_paths_of_the_wrong_kind_are_one_line(files, tmp_path):
    """b87d620: `--out FILE`, `--json FOLDER` and a binary samples file were tracebacks."""
    _, trained = files
    afile = tmp_path / "afile"
    afile.write_text("x")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    cases = [(["eval", str(tmp_path), "--task", "arithmetic", "--out", str(afile)], "is a file, not a folder"),
             (["eval", "--samples", str(trained), "--json", str(tmp_path)], "is a folder; give a file path"),
             (["eval", "--samples", str(trained), "--plots", str(afile / "p")], "is a file, not a folder"),
             (["eval", "--samples", str(binary)], "bin.jsonl")]
    for argv, said in cases:
        proc = subprocess.run([*CLI, *argv], capture_output=True, text=True)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], proc.stderr
    assert afile.read_text() == "x"


def test_disk_full_while_sampling_a_checkpoint_is_one_line_and_resumes(tmp_path, capsys, monkeypatch):
    """`rlvr eval CKPT --out DIR` with the disk full after the first chunk: one error line, the
    finished chunk kept whole, no temporary file; rerun, it completes to the samples of a clean run."""
    import torch

    import rlvr.eval.stream as stream
    import rlvr.paths
    from rlvr.config import ModelConfig
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer

    tok = CharTokenizer()
    torch.manual_seed(0)
    save_policy(TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=64), tok.vocab_size), tok,
                tmp_path / "ck")
    monkeypatch.setattr(stream, "ROWS_PER_CHUNK", 8)
    cmd = ["eval", str(tmp_path / "ck"), "--task", "arithmetic", "--n", "4", "--problems", "6"]
    assert main([*cmd, "--out", str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    real, calls = rlvr.paths.os.replace, []

    def full_after_first_chunk(src, dst):
        if "chunk_" in str(dst):
            calls.append(dst)
            if len(calls) == 2:
                raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst)

    monkeypatch.setattr(rlvr.paths.os, "replace", full_after_first_chunk)
    assert main([*cmd, "--out", str(tmp_path / "cut")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("error: ") and "chunk_0001.jsonl: No space left on device (ENOSPC)" in err[-1]
    assert [line for line in err if "error" in line.lower()] == [err[-1]]  # one error line after the progress
    names = {p.name for p in (tmp_path / "cut" / "samples.jsonl.chunks").iterdir()}
    assert "chunk_0000.jsonl" in names and "chunk_0001.jsonl" not in names
    assert not [n for n in names if n.endswith(".tmp")] and not (tmp_path / "cut" / "samples.jsonl").exists()
    monkeypatch.setattr(rlvr.paths.os, "replace", real)
    assert main([*cmd, "--out", str(tmp_path / "cut")]) == 0
    assert (tmp_path / "cut" / "samples.jsonl").read_text() == (tmp_path / "whole" / "samples.jsonl").read_text()


def test_eval_from_samples_files_does_not_import_torch(tmp_path: Path) -> None:
    """Reading samples files (rlvr's own, a peer's JSONL dump) and every statistic after them need no
    tensor library: importing torch alone took about 3 s of a 1.8 GB file's read (docs/performance.md)."""
    rows = fake_rows(np.array([0.2, 0.7, 0.9]), 8, seed=1)
    for r in rows:
        r["answer"] = "4" if r["correct"] else "5"
    trained, base = write_samples(tmp_path / "a.jsonl", rows), write_samples(tmp_path / "b.jsonl", rows[::-1])
    verl = tmp_path / "verl.jsonl"
    verl.write_text("".join(json.dumps({"input": f"q{i % 3}", "output": "x", "gts": "4", "score": float(i % 2),
                                        "step": 1}) + "\n" for i in range(12)))
    code = ("import sys; from rlvr.cli import main\n"
            f"assert main(['eval', '--samples', {str(trained)!r}, '--base-samples', {str(base)!r}, '--quiet',"
            f" '--json', {str(tmp_path / 'e.json')!r}]) == 0\n"
            f"assert main(['eval', '--samples', {str(verl)!r}, '--quiet']) == 0\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    trained_result = json.loads((tmp_path / "e.json").read_text())["trained"]
    assert trained_result["problems"] == 3 and trained_result["maj_at_k"]  # the vote ran, without torch
