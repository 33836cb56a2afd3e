"""The repository stands alone: no tracked file points outside it.

Formulas are restated in docs/methods/ and data ships in rlvr/data/; a tracked file that cites the
project-internal methods notes or the sibling data folder would send a reader of a clone to files
they do not have. The forbidden strings are assembled here so this file does not match itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("METHODS" + ".md", ".." + "/shared")


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    return [ROOT / p for p in out.split("\0") if p]


def test_no_tracked_file_points_outside_the_repository() -> None:
    files = _tracked_files()
    assert len(files) > 100 and ROOT / "README.md" in files
    hits = []
    for path in files:
        try:
            text = path.read_bytes().decode("utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (PNG, .gz) or deleted in the work tree
        for needle in FORBIDDEN:
            hits += [f"{path.relative_to(ROOT)}:{i}" for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert hits == [], f"references outside the repository (cite docs/methods/ or the paper): {hits}"


def test_every_methods_page_is_in_the_methods_index() -> None:
    methods = ROOT / "docs" / "methods"
    index = (methods / "index.md").read_text(encoding="utf-8")
    missing = [p.name for p in methods.glob("*.md") if p.name != "index.md" and f"]({p.name})" not in index]
    assert missing == []


RESULTS_PAGES = ("results.md", "curves_results.md", "performance.md", "pipeline.md",
                 "reproductions/boundary/README.md", "reproductions/weights/README.md",
                 "reproductions/wapo/README.md", "reproductions/urlvr/README.md",
                 "reproductions/excursions/README.md",
                 "code_results.md")
PROVENANCE_HEADER = "| command | CPU (model, flags) | threads | precision | date |"


def test_every_results_page_has_a_provenance_block() -> None:
    """Command, CPU, threads, precision, date: each a filled cell ("not recorded" when unknown)."""
    for page in RESULTS_PAGES:
        lines = (ROOT / "docs" / page).read_text(encoding="utf-8").splitlines()
        assert "**Provenance**" in lines[2], page
        i = lines.index(PROVENANCE_HEADER)
        rows = [r for r in lines[i + 2:] if r.startswith("|")]
        assert rows, page
        for r in rows[: next((j for j, x in enumerate(lines[i + 2:]) if not x.startswith("|")), len(rows))]:
            cells = [c.strip() for c in r.strip("|").split(" | ")]
            assert len(cells) == 5 and all(cells), (page, r)
