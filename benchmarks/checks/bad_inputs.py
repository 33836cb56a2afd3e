"""Bad-input battery: what each command does with a wrong config, override, file or flag.

Every case runs ``rlvr`` in a fresh process on the tiny model (a private ``RLVR_CACHE``) and is
classified by its exit code and stderr: ``error`` (non-zero exit, one ``error:`` line), ``ok``
(exit 0) or ``TRACEBACK``. A case says what it should get; a bad input that exits 0 is a silent
wrong result, and a case may also check that nothing was changed or half-written (``check``).
Prints the markdown table (input, what it gets, exit code), writes it into docs/reliability.md
(between the ``bad-inputs`` markers) unless ``--no-docs``, and ends with a JSON summary line; exits 1
if any case gave a traceback or an unexpected outcome.

    nice python benchmarks/checks/bad_inputs.py [--work /tmp/bad_inputs] [--no-docs] [-k SUBSTRING]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- bad-inputs:begin -->", "<!-- bad-inputs:end -->"
MAIN = "import sys; from rlvr.cli import main; sys.exit(main(sys.argv[1:]))"
DISTRIBUTED = "import runpy; runpy.run_module('rlvr.commands.distributed', run_name='__main__')"
TINY = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.context=96", "pretrain.tokens=30000",
        "pretrain.batch_size=16", "pretrain.seq_len=64", "algo.prompts_per_step=4", "algo.group_size=4",
        "sampling.max_new_tokens=24", "sampling.interruption_budget=16", "train.eval_problems=8",
        "algo.overlong_cache=12", "log.progress=none", "train.steps=2"]


@dataclasses.dataclass
class Case:
    """One bad input. ``argv`` may hold ``{W}`` (the work folder), ``{RUN}`` (a finished run: copied
    fresh for each case that names it), ``{CK}`` (that run's checkpoint) and ``{SAMPLES}``."""

    command: str
    what: str
    argv: list[str]
    expect: str = "error"  # error | ok
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path], str | None] | None = None  # a problem in the files, or None
    entry: str = MAIN
    tiny: bool = False  # append the tiny-model overrides


def _write(rel: str, data: str | bytes) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        p = w / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return setup


def _both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        for s in setups:
            s(w)
    return setup


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _run_unchanged(w: Path) -> str | None:
    """The run copy holds what it held before the command (its files, byte for byte)."""
    before = (w / "run.digest").read_text()
    return None if _digest(w / "run") == before else "the run folder changed"


def _no_file(rel: str) -> Callable[[Path], str | None]:
    def check(w: Path) -> str | None:
        return f"{rel} was written" if (w / rel).exists() else None
    return check


BINARY = bytes(range(256)) * 8


def cases() -> list[Case]:
    c = Case
    return [
        # ---------------------------------------------------------------- train: configs and overrides
        c("train", "train.steps=0", ["train", "train.steps=0"], tiny=True),
        c("train", "optim.lr=-1", ["train", "optim.lr=-1"], tiny=True),
        c("train", "optim.lr=abc (not a number)", ["train", "optim.lr=abc"], tiny=True),
        c("train", "train.steps=1.5", ["train", "train.steps=1.5"], tiny=True),
        c("train", "loss.eps_high=-0.1", ["train", "loss.eps_high=-0.1"], tiny=True),
        c("train", "model.n_head=3 with model.d_model=32", ["train", "model.n_head=3"], tiny=True),
        c("train", "sampling.temperature=-1", ["train", "sampling.temperature=-1"], tiny=True),
        c("train", "algo.group_size=0", ["train", "algo.group_size=0"], tiny=True),
        c("train", "task.name= (empty)", ["train", "task.name="], tiny=True),
        c("train", "nosuchsection.x=1", ["train", "nosuchsection.x=1"], tiny=True),
        c("train", "train=5 (a section set to a number)", ["train", "train=5"], tiny=True),
        c("train", "override with an unclosed bracket: task.retention_tasks=[strings",
          ["train", "task.retention_tasks=[strings"], tiny=True),
        c("train", "override key with a trailing dot: train.=3", ["train", "train.=3"], tiny=True),
        c("train", "YAML indented with a tab", ["train", "{W}/tab.yaml"],
          setup=_write("tab.yaml", "train:\n\tsteps: 3\n")),
        c("train", "YAML whose top level is a string", ["train", "{W}/s.yaml"], setup=_write("s.yaml", "hello\n")),
        c("train", "YAML with a misspelt nested key (optim.lrr)", ["train", "{W}/k.yaml"],
          setup=_write("k.yaml", "optim:\n  lrr: 0.1\n")),
        c("train", "YAML repeating a key inside a section (optim.lr twice)", ["train", "{W}/d.yaml"],
          setup=_write("d.yaml", "optim:\n  lr: 0.1\n  lr: 0.2\n")),
        c("train", "YAML with a list as a key", ["train", "{W}/lk.yaml"], setup=_write("lk.yaml", "? [a, b]\n: 1\n")),
        c("train", "a binary file as the config", ["train", "{W}/bin.yaml"], setup=_write("bin.yaml", BINARY)),
        c("train", "a folder as the config", ["train", "{W}/cfgdir"], setup=lambda w: (w / "cfgdir").mkdir()),
        c("train", "a comments-only YAML", ["train", "{W}/c.yaml"], setup=_write("c.yaml", "# nothing\n")),
        c("train", "train.out_dir is a file", ["train", "train.out_dir={W}/afile"], tiny=True,
          setup=_write("afile", "x")),
        # ---------------------------------------------------------------- train: run folders and flags
        c("train", "--run-dir is a file", ["train", "--run-dir", "{W}/afile"], tiny=True, setup=_write("afile", "x")),
        c("train", "--run-dir inside a file (FILE/run)", ["train", "--run-dir", "{W}/afile/run"], tiny=True,
          setup=_write("afile", "x")),
        c("train", "--run-dir: a folder holding other files", ["train", "--run-dir", "{W}/full"], tiny=True,
          setup=_write("full/notes.txt", "mine"), check=lambda w: None if (w / "full/notes.txt").read_text() == "mine"
          else "notes.txt changed"),
        c("train", "--run-dir: a finished run, again", ["train", "--run-dir", "{RUN}"], tiny=True,
          check=_run_unchanged),
        c("train", "--overwrite without --run-dir", ["train", "--overwrite"], tiny=True),
        c("train", "--steps 5 without --resume", ["train", "--steps", "5"], tiny=True),
        c("train", "--resume RUN --steps 0", ["train", "--resume", "{RUN}", "--steps", "0"], check=_run_unchanged),
        c("train", "--resume RUN --steps -3", ["train", "--resume", "{RUN}", "--steps", "-3"], check=_run_unchanged),
        c("train", "--resume RUN --run-dir X", ["train", "--resume", "{RUN}", "--run-dir", "{W}/x"],
          check=_run_unchanged),
        c("train", "--resume RUN --overwrite", ["train", "--resume", "{RUN}", "--overwrite"], check=_run_unchanged),
        c("train", "--resume RUN --variants grpo", ["train", "--resume", "{RUN}", "--variants", "grpo"],
          check=_run_unchanged),
        c("train", "--resume a file", ["train", "--resume", "{W}/afile"], setup=_write("afile", "x")),
        c("train", "--resume RUN whose config.yaml has an unknown key",
          ["train", "--resume", "{RUN}"], setup=lambda w: _append(w / "run/config.yaml", "colour: red\n")),
        c("train", "--resume RUN whose config.yaml is binary", ["train", "--resume", "{RUN}"],
          setup=_write("run/config.yaml", BINARY)),
        c("train", "--resume RUN with a corrupt resume.json", ["train", "--resume", "{RUN}", "--steps", "3"],
          setup=_write("run/resume.json", "{not json")),
        c("train", "--resume RUN whose checkpoints are all corrupt", ["train", "--resume", "{RUN}", "--steps", "3"],
          setup=lambda w: [p.write_bytes(b"junk") for p in (w / "run/checkpoints").glob("*/model.safetensors")],
          expect="ok"),
        c("train", "--resume RUN, finished, no --steps (nothing to do: a warning)", ["train", "--resume", "{RUN}"],
          expect="ok"),
        c("train", "--variants nosuch", ["train", "--variants", "nosuch"], tiny=True),
        c("train", "--variants grpo --seeds a,b", ["train", "--variants", "grpo", "--seeds", "a,b"], tiny=True),
        c("train", "--variants grpo --run-dir X", ["train", "--variants", "grpo", "--run-dir", "{W}/x"], tiny=True),
        c("train", "--variants grpo into a sweep folder holding another config's cell",
          ["train", "--variants", "grpo", "train.out_dir={W}/sw"], tiny=True,
          setup=lambda w: _sweep_cell(w)),
        # ---------------------------------------------------------------- run
        c("run", "--resume RUN dapo", ["run", "--resume", "{RUN}", "dapo"], check=_run_unchanged),
        c("run", "--run-dir: a finished run", ["run", "--run-dir", "{RUN}"], tiny=True, check=_run_unchanged),
        c("run", "--resume a missing folder", ["run", "--resume", "{W}/nope"]),
        c("run", "--overwrite without --run-dir", ["run", "--overwrite"], tiny=True),
        c("run", "train.final_eval_samples=0", ["run", "train.final_eval_samples=0"], tiny=True),
        # ---------------------------------------------------------------- eval
        c("eval", "--samples: a binary file", ["eval", "--samples", "{W}/bin.jsonl"],
          setup=_write("bin.jsonl", BINARY)),
        c("eval", "--samples: an empty file", ["eval", "--samples", "{W}/e.jsonl"], setup=_write("e.jsonl", "")),
        c("eval", "--samples: a line that is a list", ["eval", "--samples", "{W}/l.jsonl"],
          setup=_write("l.jsonl", "[1, 2]\n")),
        c("eval", "--samples: rows without a correct field or task", ["eval", "--samples", "{W}/nc.jsonl"],
          setup=_write("nc.jsonl", '{"problem_id": "a", "completion": "x"}\n')),
        c("eval", "--samples: a folder", ["eval", "--samples", "{W}/sdir"], setup=lambda w: (w / "sdir").mkdir()),
        c("eval", "--ks 0", ["eval", "--samples", "{SAMPLES}", "--ks", "0"]),
        c("eval", "--ks 1000 (above the samples per problem)", ["eval", "--samples", "{SAMPLES}", "--ks", "1000"]),
        c("eval", "--ks one", ["eval", "--samples", "{SAMPLES}", "--ks", "one"]),
        c("eval", "--json: a folder", ["eval", "--samples", "{SAMPLES}", "--json", "{W}/jdir"],
          setup=lambda w: (w / "jdir").mkdir()),
        c("eval", "--json inside a file (FILE/e.json)",
          ["eval", "--samples", "{SAMPLES}", "--json", "{W}/afile/e.json"], setup=_write("afile", "x")),
        c("eval", "--plots: a file", ["eval", "--samples", "{SAMPLES}", "--plots", "{W}/afile"],
          setup=_write("afile", "x")),
        c("eval", "--base-samples missing", ["eval", "--samples", "{SAMPLES}", "--base-samples", "{W}/nope.jsonl"]),
        c("eval", "--format table without --columns", ["eval", "--samples", "{SAMPLES}", "--format", "table"]),
        c("eval", "--columns without =", ["eval", "--samples", "{SAMPLES}", "--columns", "prompt"]),
        c("eval", "CHECKPOINT --out: a file", ["eval", "{CK}", "--out", "{W}/afile"], setup=_write("afile", "x"),
          check=lambda w: None if (w / "afile").read_text() == "x" else "the file was changed"),
        c("eval", "CHECKPOINT --n 0", ["eval", "{CK}", "--out", "{W}/ev0", "--n", "0"]),
        c("eval", "CHECKPOINT --temperature -1", ["eval", "{CK}", "--out", "{W}/evt", "--n", "2", "--problems", "2",
                                                  "--temperature", "-1"], check=_no_file("evt/eval.json")),
        c("eval", "CHECKPOINT --top-p 0", ["eval", "{CK}", "--out", "{W}/evp", "--n", "2", "--problems", "2",
                                           "--top-p", "0"], check=_no_file("evp/eval.json")),
        c("eval", "CHECKPOINT --task nosuch", ["eval", "{CK}", "--out", "{W}/evn", "--task", "nosuch"]),
        c("eval", "CHECKPOINT --split nosuch", ["eval", "{CK}", "--out", "{W}/evs", "--n", "2", "--problems", "2",
                                                "--split", "nosuch"], check=_no_file("evs/eval.json")),
        c("eval", "CHECKPOINT: a folder with no model", ["eval", "{W}/empty", "--out", "{W}/eve", "--task",
                                                         "arithmetic"], setup=lambda w: (w / "empty").mkdir()),
        # ---------------------------------------------------------------- fit
        c("fit", "--json: a folder", ["fit", "{W}/curve.csv", "--json", "{W}/jdir"], setup=_both(
            _curve, lambda w: (w / "jdir").mkdir())),
        c("fit", "an empty CSV", ["fit", "{W}/e.csv"], setup=_write("e.csv", "")),
        c("fit", "a CSV with a header only", ["fit", "{W}/h.csv"], setup=_write("h.csv", "compute,pass_rate\n")),
        c("fit", "a CSV with pass_rate 7", ["fit", "{W}/p.csv"],
          setup=_write("p.csv", "compute,pass_rate\n1,0.1\n2,7\n3,0.3\n4,0.4\n")),
        c("fit", "a CSV with a NaN", ["fit", "{W}/n.csv"],
          setup=_write("n.csv", "compute,pass_rate\n1,0.1\n2,nan\n3,0.3\n4,0.4\n")),
        c("fit", "a binary file", ["fit", "{W}/bin.csv"], setup=_write("bin.csv", BINARY)),
        c("fit", "--n-boot -1", ["fit", "{W}/curve.csv", "--n-boot", "-1"], setup=_curve),
        c("fit", "--predict-at -5", ["fit", "{W}/curve.csv", "--predict-at", "-5"], setup=_curve),
        c("fit", "--y nosuch on a run", ["fit", "{RUN}", "--y", "nosuch"]),
        # ---------------------------------------------------------------- collapse
        c("collapse", "--window 0", ["collapse", "{RUN}", "--window", "0"]),
        c("collapse", "a binary file", ["collapse", "{W}/bin.jsonl"], setup=_write("bin.jsonl", BINARY)),
        c("collapse", "--json inside a file", ["collapse", "{RUN}", "--json", "{W}/afile/c.json"],
          setup=_write("afile", "x")),
        c("collapse", "--threshold nan", ["collapse", "{RUN}", "--threshold", "nan"]),
        # ---------------------------------------------------------------- weights
        c("weights", "--k 0", ["weights", "{CK}", "{CK}", "--k", "0"]),
        c("weights", "TUNED: a binary .safetensors", ["weights", "{CK}", "{W}/bin.safetensors"],
          setup=_write("bin.safetensors", BINARY)),
        c("weights", "TUNED missing", ["weights", "{CK}", "{W}/nope"]),
        c("weights", "--precision fp7", ["weights", "{CK}", "{CK}", "--precision", "fp7"]),
        c("weights", "--plots: a file", ["weights", "{CK}", "{CK}", "--plots", "{W}/afile"],
          setup=_write("afile", "x")),
        # ---------------------------------------------------------------- report
        c("report", "an empty folder", ["report", "{W}/empty"], setup=lambda w: (w / "empty").mkdir()),
        c("report", "--out: a folder", ["report", "{RUN}", "--out", "{W}/odir"], setup=lambda w: (w / "odir").mkdir()),
        c("report", "a run whose metrics.jsonl is binary", ["report", "{RUN}"],
          setup=_write("run/metrics.jsonl", BINARY)),
        # ---------------------------------------------------------------- reproduce
        c("reproduce", "an unknown experiment", ["reproduce", "nosuch"]),
        c("reproduce", "--seeds 0", ["reproduce", "scalerl", "--seeds", "0", "--quick"]),
        c("reproduce", "no name (lists the experiments)", ["reproduce"], expect="ok"),
        # ---------------------------------------------------------------- pretrain
        c("pretrain", "--out: a file", ["pretrain", "--out", "{W}/afile"], tiny=True, setup=_write("afile", "x")),
        c("pretrain", "--out: a folder holding other files", ["pretrain", "--out", "{W}/full"], tiny=True,
          setup=_write("full/notes.txt", "mine")),
        c("pretrain", "model.kind=hf", ["pretrain", "model.kind=hf"]),
        c("pretrain", "pretrain.tokens=-1", ["pretrain", "pretrain.tokens=-1"], tiny=True),
        # ---------------------------------------------------------------- excursions
        c("excursions", "excursions.out_dir: a folder holding other files",
          ["excursions", "excursions", "excursions.out_dir={W}/full", "--no-plots"], tiny=True,
          setup=_write("full/notes.txt", "mine"), check=lambda w: None if (w / "full/notes.txt").exists()
          else "notes.txt deleted"),
        c("excursions", "excursions.milestones=[0.3] (not a pretraining milestone)",
          ["excursions", "excursions", "excursions.milestones=[0.3]", "excursions.out_dir={W}/ex"], tiny=True),
        c("excursions", "excursions.pipelines=[nosuch]",
          ["excursions", "excursions", "excursions.pipelines=[nosuch]", "excursions.out_dir={W}/ex"], tiny=True),
        c("excursions", "--threads 0", ["excursions", "--threads", "0"]),
        # ---------------------------------------------------------------- distributed, config
        c("distributed", "--run-dir: a finished run (before any process group)", ["--run-dir", "{RUN}"], tiny=True,
          entry=DISTRIBUTED, check=_run_unchanged),
        c("distributed", "--resume RUN optim.lr=1", ["--resume", "{RUN}", "optim.lr=1"], entry=DISTRIBUTED,
          check=_run_unchanged),
        c("config", "a YAML repeating a section", ["config", "show", "{W}/dup.yaml"],
          setup=_write("dup.yaml", "train:\n  steps: 3\ntrain:\n  seed: 1\n")),
    ]


def issue_cases() -> list[Case]:
    """The inputs of issue 47 itself (each also has a test): kept here so the table shows them too."""
    c = Case
    return [
        c("train", "#47: a new run into a finished run's --run-dir", ["train", "--run-dir", "{RUN}"], tiny=True,
          check=_run_unchanged),
        c("train", "#47: --resume with an empty config.yaml", ["train", "--resume", "{RUN}"],
          setup=_write("run/config.yaml", "")),
        c("train", "#47: `train dapo --resume RUN optim.lr=1`", ["train", "dapo", "--resume", "{RUN}", "optim.lr=1"],
          check=_run_unchanged),
        c("train", "#47: a YAML with train: twice", ["train", "{W}/dup.yaml"],
          setup=_write("dup.yaml", "train:\n  steps: 3\ntrain:\n  seed: 1\n")),
        c("train", "#47: an empty YAML", ["train", "{W}/empty.yaml"], setup=_write("empty.yaml", "")),
        c("train", "#47: a YAML whose top level is a list", ["train", "{W}/list.yaml"],
          setup=_write("list.yaml", "- a\n")),
        c("train", "#47: --resume with another run's config.yaml", ["train", "--resume", "{RUN}", "--steps", "3"],
          setup=lambda w: _append(w / "run/config.yaml", "", replace=("d_model: 32", "d_model: 64"))),
        c("eval", "#47: --out pointing at a file", ["eval", "{CK}", "--out", "{W}/afile"],
          setup=_write("afile", "x")),
        c("eval", "#47: a binary samples file", ["eval", "--samples", "{W}/bin.jsonl"],
          setup=_write("bin.jsonl", BINARY)),
    ]


def _append(path: Path, text: str, replace: tuple[str, str] | None = None) -> None:
    body = path.read_text()
    if replace:
        body = body.replace(*replace)
    path.write_text(body + text)


def _curve(w: Path) -> None:
    rows = [f"{10 ** (i / 4):.6g},{0.1 + 0.6 / (1 + (1e3 / 10 ** (i / 4)) ** 0.8):.6f}" for i in range(24)]
    (w / "curve.csv").write_text("compute,pass_rate\n" + "\n".join(rows) + "\n")


def _sweep_cell(w: Path) -> None:
    cell = w / "sw" / "sweep-quickstart" / "grpo-s0"
    shutil.copytree(w / "fixture_run", cell)
    _append(cell / "config.yaml", "", replace=("seed: 0", "seed: 5"))


# ---------------------------------------------------------------------------------- running


def _env(cache: Path) -> dict:
    return dict(os.environ, RLVR_CACHE=str(cache), OMP_NUM_THREADS="1", RLVR_AUTO_DTYPE="float32",
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _code_digest() -> str:
    """SHA-256 of rlvr's source: the fixtures are made again when the code that wrote them changed (a
    run saved by older code may hold config keys the current loader refuses)."""
    h = hashlib.sha256()
    for path in sorted((ROOT / "rlvr").rglob("*.py")):
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def fixtures(work: Path, cache: Path) -> None:
    """A finished 2-step tiny run (pretrains the cached base once) and a samples file from it, made
    again when rlvr's source changed since they were made."""
    run, stamp, digest = work / "fixture_run", work / "fixtures.code", _code_digest()
    if not stamp.exists() or stamp.read_text() != digest:
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(work / "fixture_eval", ignore_errors=True)
    if not (run / "train_summary.json").exists():
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run([sys.executable, "-c", MAIN, "train", "quickstart", *TINY, f"train.out_dir={work}",
                        "--run-dir", str(run), "--quiet"], env=_env(cache), check=True, capture_output=True)
    samples = work / "fixture_eval" / "samples.jsonl"
    if not samples.exists():
        ck = sorted((run / "checkpoints").glob("step_*"))[-1]
        subprocess.run([sys.executable, "-c", MAIN, "eval", str(ck), "--out", str(samples.parent), "--n", "4",
                        "--problems", "4"], env=_env(cache), check=True, capture_output=True)
    stamp.write_text(digest)


def run_case(case: Case, work: Path, cache: Path, timeout: float) -> dict:
    w = work / "case"
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    shutil.copytree(work / "fixture_run", w / "run")
    shutil.copytree(work / "fixture_run", w / "fixture_run")
    ck = sorted((w / "run" / "checkpoints").glob("step_*"))[-1]
    if case.setup:
        case.setup(w)
    (w / "run.digest").write_text(_digest(w / "run"))
    subs = {"{W}": str(w), "{RUN}": str(w / "run"), "{CK}": str(ck),
            "{SAMPLES}": str(work / "fixture_eval" / "samples.jsonl")}
    argv = [_sub(a, subs) for a in case.argv]
    if case.tiny:  # after the command and its config name, before the case's own overrides (which win)
        at = 0 if case.entry == DISTRIBUTED else 1
        if at < len(argv) and "=" not in argv[at] and not argv[at].startswith("-"):
            at += 1
        argv[at:at] = [*TINY, f"train.out_dir={w}/runs"]
    t0 = time.time()
    try:
        proc = subprocess.run([sys.executable, "-c", case.entry, *argv], env=_env(cache), cwd=w,
                              capture_output=True, text=True, timeout=timeout)
        rc, err, out = proc.returncode, proc.stderr, proc.stdout
    except subprocess.TimeoutExpired:
        rc, err, out = None, "timed out", ""
    problem = case.check(w) if case.check else None
    return {"command": case.command, "what": case.what, "rc": rc, "stderr": err, "wall_s": time.time() - t0,
            "outcome": _outcome(rc, err), "expect": case.expect, "problem": problem,
            "shown": _shown(err, out, subs, w)}


def _sub(arg: str, subs: dict) -> str:
    for k, v in subs.items():
        arg = arg.replace(k, v)
    return arg


def _outcome(rc: int | None, err: str) -> str:
    if rc is None:
        return "TIMEOUT"
    if "Traceback (most recent call last)" in err:
        return "TRACEBACK"
    if rc == 0:
        return "ok"
    lines = [line for line in err.splitlines() if line.strip()]
    return "error" if lines and re.match(r"^(\S+: )?error: ", lines[-1]) else "UNCLEAR"


def _shown(err: str, out: str, subs: dict, w: Path) -> str:
    """The last error line (or, for a run that exits 0, its first warning, else the first line it
    printed), paths shortened."""
    lines = [line for line in err.splitlines() if line.strip()]
    pick = next((line for line in reversed(lines) if "error:" in line), None)
    if pick is None:
        first = next((line for line in out.splitlines() if line.strip()), lines[-1] if lines else "")
        pick = next((line for line in lines if line.startswith(("WARNING", "--"))), "exit 0: " + first)
    for key in ("{CK}", "{RUN}", "{W}"):
        pick = pick.replace(subs[key], key.strip("{}"))
    return pick.replace(str(w), "W")


def verdict(r: dict) -> str:
    if r["outcome"] in ("TRACEBACK", "TIMEOUT", "UNCLEAR"):
        return r["outcome"]
    if r["problem"]:
        return f"WRONG: {r['problem']}"
    if r["outcome"] != r["expect"]:
        return "SILENT (exit 0)" if r["outcome"] == "ok" else "UNEXPECTED error"
    return "as expected"


def table(results: list[dict]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    head = ["#", "command", "input", "what it gets", "exit", "verdict"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(results, start=1):
        shown = r["shown"].replace("`", "'")
        shown = shown if len(shown) <= 220 else shown[:217] + "..."
        rows.append(f"| {i} | {r['command']} | {cell(r['what'])} | `{cell(shown)}` | {r['rc']} | {verdict(r)} |")
    return "\n".join(rows)


def write_docs(text: str) -> None:
    doc = DOC.read_text()
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in doc:
        doc = doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    DOC.write_text(doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/rlvr_bad_inputs", help="scratch folder (kept: the base is cached there)")
    ap.add_argument("--no-docs", action="store_true", help="print only; do not rewrite docs/reliability.md")
    ap.add_argument("-k", default="", help="only cases whose command or input contains this")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    args = ap.parse_args()
    work = Path(args.work)
    cache = work / "cache"
    work.mkdir(parents=True, exist_ok=True)
    fixtures(work, cache)
    todo = [(group, c) for group, cs in (("new", cases()), ("issue", issue_cases())) for c in cs
            if args.k in c.command or args.k in c.what]
    results = []
    for group, case in todo:
        r = run_case(case, work, cache, args.timeout)
        r["group"] = group
        print(f"[{len(results) + 1}/{len(todo)}] {case.command}: {case.what}: {verdict(r)} ({r['wall_s']:.1f}s)",
              file=sys.stderr, flush=True)
        results.append(r)
    new = [r for r in results if r["group"] == "new"]
    issue = [r for r in results if r["group"] == "issue"]
    counts = {v: sum(verdict(r) == v for r in results) for v in sorted({verdict(r) for r in results})}
    date = time.strftime("%Y-%m-%d")
    text = (f"_Generated by `nice python benchmarks/checks/bad_inputs.py` on {date}: {len(new)} new bad inputs, "
            f"then the {len(issue)} of issue 47; `W` is the case's scratch folder, `RUN` a finished 2-step tiny "
            "run (a fresh copy per case), `CK` its checkpoint._\n\n" + table(results))
    print(text)
    if not args.no_docs and not args.k:
        write_docs(text)
    bad = sum(v != "as expected" for v in (verdict(r) for r in results))
    print(json.dumps({"cases": len(results), "new": len(new), "verdicts": counts, "ok": bad == 0}))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
