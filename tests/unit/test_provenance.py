"""Declaration provenance: when each claim was declared (git history of its YAML), when its cells were
computed, and post hoc claims leaving the counts."""

from __future__ import annotations

import gzip
import json
import os
import subprocess

import pytest

from rlvr.experiments import provenance as pv
from rlvr.experiments.archive import restore_archive, save_archive
from rlvr.experiments.cells import cell_state, cell_time, finish_cell, open_cell
from rlvr.experiments.claims import counts

CLAIM = ("  - {{id: {id}, claim: c, paper: p, measure: passk_diff, args: {{eval: {ev}, model: rl, against: base, "
         "k: {k}}}, expect: positive}}\n")


def declaration(*claims: tuple[str, int], ev: str = "e") -> str:
    return ("name: x\nevaluations:\n  " + ev + ": {temperature: 1.0, n: 4, problems: 2, models: [base, rl]}\n"
            "claims:\n" + "".join(CLAIM.format(id=i, ev=ev, k=k) for i, k in claims))


def git(repo, *args, when: str = "2026-12-04T10:00:00+00:00") -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def commit(repo, text: str, when: str) -> None:
    (repo / "x.yaml").write_text(text)
    git(repo, "add", "x.yaml")
    git(repo, "commit", "-qm", "m", when=when)


@pytest.fixture
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    commit(tmp_path, declaration(("a", 1)), "2026-12-04T10:00:00+00:00")
    # a renamed evaluation with the same protocol declares nothing again; a changed k does
    commit(tmp_path, declaration(("a", 1), ev="f"), "2026-12-04T11:00:00+00:00")
    commit(tmp_path, declaration(("a", 1), ("b", 1), ev="f"), "2026-12-04T12:30:00+00:00")
    return tmp_path


class Claim:
    def __init__(self, cid, post_hoc="", kind="finding"):
        self.id, self.post_hoc, self.kind = cid, post_hoc, kind
        self.args = {"eval": "f", "model": "rl", "against": "base"}


def test_a_claim_added_after_its_cells_is_post_hoc_and_leaves_the_count(repo):
    declared = pv.declarations(repo / "x.yaml")
    assert (declared["a"].how, declared["a"].time[:13]) == ("added", "2026-12-04T10")  # the rename is no change
    assert (declared["b"].how, declared["b"].time[:16]) == ("added", "2026-12-04T12:30")
    cells = {("f", "rl"): ["2026-12-04T12:00:00+00:00"] * 3, ("f", "base"): ["2026-12-04T11:59:00+00:00"]}
    book = pv.Ledger(declared, {}, lambda ev, m: cells.get((ev, m), []))
    row = {"id": "x", "kind": "finding", "verdict": "reproduced"}
    early, late = book.mark(row, Claim("a")), book.mark(row, Claim("b"))
    assert early["post_hoc"] == "" and early["cells_computed"].startswith("2026-12-04T11:59")
    assert "after its first cell was computed (2026-12-04 11:59 UTC)" in late["post_hoc"]
    tally = counts([early, late])
    assert tally["findings"]["reproduced"] == 1 and tally["post hoc"]["reproduced"] == 1
    # cells without a recorded time: the first publication of a cell it reads bounds them
    blind = pv.Ledger(declared, {("f", "rl"): "2026-12-04T12:10:00+00:00"}, lambda ev, m: [None])
    assert "after a cell it reads was published" in blind.mark(row, Claim("b"))["post_hoc"]
    assert blind.mark(row, Claim("a"))["post_hoc"] == ""
    assert blind.mark(row, Claim("a", "re-specified after a pilot"))["post_hoc"].endswith("after a pilot")


def test_a_changed_or_uncommitted_claim_is_declared_again(repo):
    commit(repo, declaration(("a", 2), ("b", 1), ev="f"), "2026-12-05T09:00:00+00:00")
    (repo / "x.yaml").write_text(declaration(("a", 2), ("b", 4), ev="f"))
    declared = pv.declarations(repo / "x.yaml")
    assert (declared["a"].how, declared["a"].time[:10]) == ("changed", "2026-12-05")
    assert declared["b"].how == "uncommitted" and declared["b"].commit == ""


def test_without_git_or_in_a_shallow_clone_provenance_is_unknown_never_an_error(repo, tmp_path_factory):
    alone = tmp_path_factory.mktemp("nogit")
    (alone / "x.yaml").write_text(declaration(("a", 1)))
    declared = pv.declarations(alone / "x.yaml")
    assert declared["a"].time == "" and declared["a"].text().startswith("provenance unknown")
    assert pv.Ledger(declared, {}, lambda ev, m: ["2026-12-01T00:00:00"]).mark({}, Claim("a"))["post_hoc"] == ""
    clone = tmp_path_factory.mktemp("clone") / "c"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)], check=True)
    shallow = pv.declarations(clone / "x.yaml")
    assert all(d.time == "" and "shallow" in d.how for d in shallow.values())


def test_a_cell_records_when_it_was_computed_and_its_record_keeps_it(tmp_path):
    cell = tmp_path / "run" / "evals" / "p" / "rl-s0"
    cell.mkdir(parents=True)
    (cell / "key").write_text("k")
    finish_cell(cell, {"n": 1})
    when = cell_time(cell)
    assert pv.utc(when).year >= 2026
    save_archive(tmp_path / "run", tmp_path / "cells")
    restore_archive(tmp_path / "cells", tmp_path / "again")
    assert cell_time(tmp_path / "again" / "evals" / "p" / "rl-s0") == when
    # an older record carries no time: the restored cell says so (never the time it was restored)
    record = tmp_path / "cells" / "evals" / "p" / "rl-s0.json.gz"
    rec = json.loads(gzip.decompress(record.read_bytes()))
    record.write_bytes(gzip.compress(json.dumps({k: v for k, v in rec.items() if k != "computed_at"}).encode()))
    restore_archive(tmp_path / "cells", tmp_path / "third")
    assert cell_time(tmp_path / "third" / "evals" / "p" / "rl-s0") is None


def test_a_cells_state_is_cached_stale_or_absent(tmp_path):
    cell = tmp_path / "evals" / "p" / "rl-s0"
    assert cell_state(cell, "k1") == "absent"
    assert open_cell(cell, "k1") is None and cell_state(cell, "k1") == "absent"  # begun, not finished
    finish_cell(cell, {"n": 1})
    assert cell_state(cell, "k1") == "cached"
    assert cell_state(cell, "k2") == "stale"  # finished under another declaration or code
    assert cell_state(cell, None) == "stale"  # no key can be current (its model is not on disk)
    (cell / "key").unlink()
    assert cell_state(cell, "k1") == "stale"  # finished, its key unknown: never read back as current


def test_the_cells_a_claim_reads():
    assert pv.cells_read({"eval": "e", "model": "a", "against": "b"}) == [("e", "a"), ("e", "b")]
    assert pv.cells_read({"eval": "h", "dynamics": "d", "pairs": [["i", "r", "s"]]}) == [("d", "i"), ("h", "r"),
                                                                                           ("h", "s")]


def test_a_page_published_without_cells_is_judged_again_from_its_table(tmp_path):
    """The published estimates are kept; the current rules decide: the seed-level interval, a premise,
    a re-declared claim (not measured: no cells); the changes say why."""
    from rlvr.experiments import spec
    from rlvr.experiments.rejudge import rejudge_published

    exp = spec.load("wapo")
    est = [{"seed": s, "value": v, "lo": v - 0.01, "hi": v + 0.01, "label": f"s{s}"}
           for s, v in enumerate((-0.02, -0.3, -0.1))]
    tight = [{**e, "value": v, "lo": v - 0.01, "hi": v + 0.01} for e, v in zip(est, (-0.22, -0.23, -0.22))]
    rows = [{"id": "grpo_unstable_hi", "claim": "c", "paper": "p", "expect": "negative", "measure": "passk_diff",
             "args": {"eval": "held_hi", "model": "grpo_hi", "against": "base", "k": 1}, "quantity": "q",
             "estimates": tight, "spread": {"seeds": 3}, "verdict": "reproduced", "details": {"crossover": {}}},
            {"id": "wapo_accuracy_mid", "claim": "c", "paper": "p", "expect": "positive", "measure": "passk_diff",
             "args": {"eval": "held_mid", "model": "wapo_mid", "against": "grpo_mid", "k": 1}, "quantity": "q",
             "estimates": [{**e, "value": -e["value"], "lo": -e["hi"], "hi": -e["lo"]} for e in est],
             "spread": {"seeds": 3}, "verdict": "reproduced", "details": {"crossover": {}}},
            {"id": "neg_valley_drives_fall_lo", "claim": "c", "verdict": "reproduced", "estimates": est,
             "spread": {"seeds": 3}}]
    page = tmp_path / "wapo"
    page.mkdir()
    (page / "table.json").write_text(json.dumps({"experiment": "wapo", "claims": rows,
                                                 "status": "partial: 3 of 3 claims measured; 13 declared cell(s) "
                                                           "not on disk"}))
    (page / "README.md").write_text("# t\n\nExperiment `wapo`; complete. Old.\n\n| claim |\n|---|\n| row |\n\n"
                                    "## Details\n\n- old\n\n## Protocol\n\n- kept\n")
    rejudge_published(exp, tmp_path)
    table = json.loads((page / "table.json").read_text())
    by = {r["id"]: r for r in table["claims"]}
    assert table["missing"] == 13  # the run's missing cells (read from an older table's status) are kept
    assert table["status"].startswith("partial")
    assert by["grpo_unstable_hi"]["kind"] == "premise" and by["grpo_unstable_hi"]["verdict"] == "reproduced"
    # every seed above 0 but spread: the seed-level interval covers 0
    assert by["wapo_accuracy_mid"]["verdict"] == "inconclusive"
    assert by["valley_not_peak_drives_fall_lo"]["verdict"] == "not measured"
    changes = {c["id"]: c for c in table["changes"]}
    assert "seed-level interval" in changes["wapo_accuracy_mid"]["why"]
    assert changes["neg_valley_drives_fall_lo"]["after"] == "(removed)"
    assert changes["grpo_unstable_hi"]["after"].startswith("premise: reproduced")
    readme = (page / "README.md").read_text()
    assert "Old." not in readme and "- kept" in readme and "## Declarations" in readme and "Premises:" in readme
    assert "Verdicts changed by the last republication" in (tmp_path / "README.md").read_text()


def test_a_claim_not_measured_yet_is_post_hoc_only_by_its_audited_reason(repo):
    declared = pv.declarations(repo / "x.yaml")
    book = pv.Ledger(declared, {("f", "rl"): "2026-12-04T12:10:00+00:00"}, lambda ev, m: [])
    waiting = {"id": "b", "verdict": "not measured"}
    assert book.mark(waiting, Claim("b"))["post_hoc"] == ""  # its verdict will come from cells computed later
    assert book.mark(waiting, Claim("b", "merged from seen claims"))["post_hoc"].endswith("merged from seen claims")


def test_an_exploratory_claim_is_post_hoc_by_declaration_and_never_counted(repo):
    """Declared before its cells (by the history) it would count; declared exploratory it never does."""
    declared = pv.declarations(repo / "x.yaml")
    cells = {("f", "rl"): ["2026-12-05T12:00:00+00:00"], ("f", "base"): ["2026-12-05T12:00:00+00:00"]}
    book = pv.Ledger(declared, {}, lambda ev, m: cells.get((ev, m), []))
    row = {"id": "a", "verdict": "reproduced"}
    assert book.mark({**row, "kind": "finding"}, Claim("a"))["post_hoc"] == ""
    seen = book.mark({**row, "kind": "exploratory"}, Claim("a", kind="exploratory"))
    assert seen["post_hoc"] == pv.EXPLORATORY
    waiting = book.mark({"id": "a", "kind": "exploratory", "verdict": "not measured"}, Claim("a", kind="exploratory"))
    assert waiting["post_hoc"] == pv.EXPLORATORY
    tally = counts([seen, {**seen, "post_hoc": ""}])  # even a row without the mark stays out of the findings
    assert tally["findings"]["reproduced"] == 0 and tally["post hoc"]["reproduced"] == 2


def test_a_commits_declaration_is_read_once_per_process(repo, monkeypatch):
    """Every page of a run (a resume, --page-only) reads the same history: each commit's file is read
    and parsed once, with the same result every time."""
    first = pv.declarations(repo / "x.yaml")
    shown = []
    git_command = pv._git
    monkeypatch.setattr(pv, "_git", lambda root, *args: shown.append(args) or git_command(root, *args))
    assert pv.declarations(repo / "x.yaml") == first
    assert not [args for args in shown if args[0] == "show"]
    commit(repo, declaration(("a", 2), ("b", 1), ev="f"), "2026-12-05T09:00:00+00:00")  # a new commit is read
    assert pv.declarations(repo / "x.yaml")["a"].how == "changed"
    assert len([args for args in shown if args[0] == "show"]) == 1


def test_the_page_status_says_why_a_fully_measured_page_is_partial():
    from rlvr.experiments.page import page_status
    from rlvr.experiments.rejudge import _missing_of

    done = [{"verdict": "reproduced"}, {"verdict": "inconclusive"}]
    assert page_status(done, True) == "complete"
    assert page_status(done, False) == "partial: 2 of 2 claims measured"  # stopped on its time budget
    assert page_status(done, True, 13) == "partial: 2 of 2 claims measured; 13 declared cell(s) not on disk"
    assert page_status([*done, {"verdict": "not measured"}], True, 4) == "partial: 2 of 3 claims measured"
    assert _missing_of(page_status(done, True, 13)) == 13 and _missing_of("complete") == 0
    stale = page_status(done, True, 24, 24)  # every missing cell on disk under another key
    assert stale == ("partial: 2 of 2 claims measured; 24 declared cell(s) not on disk "
                     "(24 of them stale: on disk under another key)") and _missing_of(stale) == 24
