"""The HTML run report: sections, self-containedness, overlays, missing metrics, CLI."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from rlvr.analysis.smoothing import Smoothing, ema  # noqa: E402
from rlvr.cli import main  # noqa: E402
from rlvr.report import figures  # noqa: E402
from rlvr.report.curve_figures import curve_axes  # noqa: E402
from rlvr.report.curves_section import METRIC_GROUPS  # noqa: E402
from rlvr.report.html import write_report  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run_small"
SECTIONS = ("summary", "training", "evaluation", "samples", "scaling", "config")
_IMG = re.compile(r'<img id="([^"]+)" alt="([^"]+)" src="([^"]+)"')
_ATTR = re.compile(r'\b(src|href)\s*=\s*["\']([^"\']*)["\']', re.I)


def _rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def fixture_html(tmp_path_factory) -> str:
    out = write_report([FIXTURE], tmp_path_factory.mktemp("rep") / "report.html")
    return out.read_text()


@pytest.fixture()
def fast_png(monkeypatch):
    """Skip rasterising (the slow part) where a test checks structure, not pixels."""
    import matplotlib.pyplot as plt

    def fake(fig) -> str:
        plt.close(fig)
        return figures.png_data_uri(b"\x89PNG\r\n\x1a\n")

    monkeypatch.setattr(figures, "fig_uri", fake)
    monkeypatch.setattr(figures, "scaling_figure", lambda curves, x_label="": fake(plt.figure()) if curves else None)


def _copy_run(src: Path, dst: Path, reward_shift: float = 0.0, drop: tuple[str, ...] = (),
              keep_steps: int | None = None) -> Path:
    shutil.copytree(src, dst)
    rows = _rows(src)[:keep_steps]
    for r in rows:
        if "reward" in r:
            r["reward"] += reward_shift
        for k in drop:
            r.pop(k, None)
    (dst / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dst


def test_fixture_is_a_small_real_run():
    names = {p.name for p in FIXTURE.iterdir()}
    assert {"config.yaml", "metrics.jsonl", "eval.json"} <= names
    assert "checkpoints" not in names
    assert sum(p.stat().st_size for p in FIXTURE.rglob("*") if p.is_file()) < 200_000
    rows = _rows(FIXTURE)
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1))
    assert sum("heldout_pass_rate" in r for r in rows) >= 5


def test_report_has_every_section_and_figure(fixture_html):
    for s in SECTIONS:
        assert f'<section id="{s}">' in fixture_html
    imgs = _IMG.findall(fixture_html)
    ids = [i for i, _, _ in imgs]
    want = [f"fig-{g}-img" for g, _, _ in METRIC_GROUPS if g != "lag"]
    assert ids == want + ["fig-passk-img", "fig-support-img", "fig-scaling-img"]  # report order
    # the fixture logged every group (kl_ref aside); the lag is 0 throughout: no signal, hidden and named
    assert ("hidden, constant in every run (no signal): policy lag (versions) (lag_max = 0, lag_mean = 0)"
            in fixture_html)
    assert "clip_frac_low: constant 0 (not drawn)" in fixture_html
    assert len(set(ids)) == len(ids)
    for _, alt, src in imgs:
        assert alt.strip()
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "kl_ref: not logged" in fixture_html  # the fixture ran with kl_coef=0


def test_report_is_self_contained(fixture_html):
    low = fixture_html.lower()
    assert "<link" not in low and "<script" not in low and "@import" not in low and "url(" not in low
    for attr, value in _ATTR.findall(fixture_html):
        if attr.lower() == "src":
            assert value.startswith("data:"), value[:60]
        else:
            assert value.startswith("#"), value
    assert not re.search(r'(src|href)\s*=\s*["\']\s*(https?:)?//', fixture_html, re.I)


def test_summary_numbers_come_from_the_run(fixture_html):
    rows = _rows(FIXTURE)
    ev = json.loads((FIXTURE / "eval.json").read_text())
    table = fixture_html[fixture_html.index('id="summary-table"'):]
    table = table[: table.index("</table>")]
    cells = re.findall(r"<td>(.*?)</td>", table)
    held = [r["heldout_pass_rate"] for r in rows if "heldout_pass_rate" in r]
    ks = max(ev["trained"]["pass_at_k"], key=int)
    assert cells[0] == FIXTURE.name
    assert cells[1] == str(rows[-1]["step"])
    assert cells[2] == f"{rows[-1]['reward']:.3f}"
    assert cells[3:5] == [f"{held[0]:.3f}", f"{held[-1]:.3f}"]
    assert cells[5:9] == [f"{ev['base']['pass_at_k']['1']:.3f}", f"{ev['trained']['pass_at_k']['1']:.3f}",
                          f"{ev['base']['pass_at_k'][ks]:.3f}", f"{ev['trained']['pass_at_k'][ks]:.3f}"]
    assert cells[9] == ks
    assert cells[11] == f"{rows[-1]['samples']:,}"


def test_config_is_embedded_collapsed(fixture_html):
    cfg = (FIXTURE / "config.yaml").read_text()
    i = fixture_html.index("<details class='config'>")
    assert "open" not in fixture_html[i : i + 30]
    first_line = cfg.splitlines()[0]
    assert first_line in fixture_html[i:]


def test_scaling_fit_on_fixture_reports_parameters(fixture_html):
    part = fixture_html[fixture_html.index('<section id="scaling">'):]
    table = part[: part.index("</table>")]
    cells = re.findall(r"<td>(.*?)</td>", table)
    import numpy as np

    from rlvr.analysis.curves import fit_sigmoid

    held = [(r["flops"], r["heldout_pass_rate"]) for r in _rows(FIXTURE) if "heldout_pass_rate" in r]
    C, R = np.array(held).T
    fit = fit_sigmoid(C, R, R0=float(R[0]))  # the same fit as `rlvr fit --n-boot 0`
    assert cells[1] == str(len(held))
    assert cells[2:4] == [f"{fit.A:.3f}", f"{fit.B:.3f}"]
    assert cells[5] == f"{R[0]:.3f}"
    assert cells[7] == ("yes" if fit.bent else "no")
    assert "not enough points" not in part


def test_overlay_two_runs_same_axes(tmp_path, fast_png):
    a = _copy_run(FIXTURE, tmp_path / "cispo")
    b = _copy_run(FIXTURE, tmp_path / "dapo", reward_shift=0.5)
    colours = {"cispo": "#111111", "dapo": "#222222"}
    fig = curve_axes({"cispo": [_rows(a)], "dapo": [_rows(b)]}, ["reward"], "reward", colours, Smoothing("ema", 5))
    raw = [r["reward"] + 0.5 for r in _rows(FIXTURE)]
    for ax in fig.axes:
        labelled = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        assert [ln.get_label() for ln in labelled] == ["cispo", "dapo"]
        assert [ln.get_color() for ln in labelled] == ["#111111", "#222222"]  # the page's colour per run
        faint = ax.get_lines()[2]  # dapo's raw series, drawn behind its smoothed line
        assert faint.get_alpha() < 0.5 and list(faint.get_ydata()) == pytest.approx(raw)
        assert list(labelled[1].get_ydata()) == pytest.approx(list(ema(raw, 5)))
    html = write_report([a, b], tmp_path / "both.html").read_text()
    table = html[html.index('id="summary-table"'): html.index("</table>")]
    assert table.count("<tr>") == 3  # header + one row per run
    assert "<td>cispo</td>" in table and "<td>dapo</td>" in table
    assert len(_IMG.findall(html)) == len(METRIC_GROUPS) - 1 + 3  # overlaid, not one figure per run; lag hidden
    assert html.count("<details class='config'>") == 2


def test_runs_with_the_same_name_get_distinct_labels(tmp_path, fast_png):
    a = _copy_run(FIXTURE, tmp_path / "seed0" / "cispo")
    b = _copy_run(FIXTURE, tmp_path / "seed1" / "cispo")
    html = write_report([a, b], tmp_path / "r.html").read_text()
    assert "<td>seed0/cispo</td>" in html and "<td>seed1/cispo</td>" in html


def test_crossover_line_states_the_interval_rule(tmp_path, fast_png, fixture_html):
    assert "crossover k (base above trained" not in fixture_html  # legacy eval.json: not shown
    run = _copy_run(FIXTURE, tmp_path / "cross")
    ev = json.loads((run / "eval.json").read_text())
    k_max = max(ev["trained"]["pass_at_k"], key=int)
    ev["crossover"] = {"k": None, "k_max": int(k_max), "text": f"none up to k={k_max}"}
    (run / "eval.json").write_text(json.dumps(ev))
    html = write_report([run], tmp_path / "r.html").read_text()
    assert (f"cross: crossover k (base above trained beyond the 95% interval): none up to k={k_max}"
            in html)


def test_missing_metrics_and_eval_are_skipped(tmp_path, fast_png):
    drop = ("clip_frac_low", "clip_frac_high", "approx_kl", "kl_ref", "lag_max", "lag_mean")
    run = _copy_run(FIXTURE, tmp_path / "bare", drop=drop, keep_steps=6)
    (run / "eval.json").unlink()
    html = write_report([run], tmp_path / "r.html").read_text()
    for gid in ("clip", "kl", "lag"):
        assert f'id="fig-{gid}-missing"' in html and f'id="fig-{gid}-img"' not in html
    assert "clip fraction: not logged" in html
    assert "no eval.json in any run: evaluation not logged" in html
    held = sum("heldout_pass_rate" in r for r in _rows(run))
    assert held < 5
    assert f"not enough points ({held} held-out evaluations, need 5)" in html
    assert 'id="fig-scaling-img"' not in html and 'id="fig-reward-img"' in html


def test_cli_report_default_paths_and_errors(tmp_path, monkeypatch, capsys, fast_png):
    a = _copy_run(FIXTURE, tmp_path / "r1")
    assert main(["report", str(a)]) == 0
    assert capsys.readouterr().out.strip() == str(a / "report.html")
    assert (a / "report.html").read_text().startswith("<!DOCTYPE html>")
    monkeypatch.chdir(tmp_path)
    b = _copy_run(FIXTURE, tmp_path / "r2", keep_steps=3)
    assert main(["report", str(a), str(b)]) == 0
    assert Path(capsys.readouterr().out.strip()) == Path("report.html")
    assert (tmp_path / "report.html").is_file()
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "nope does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "x.html")]) == 2
    assert not (tmp_path / "x.html").exists()


def test_summary_shows_each_runs_machine(tmp_path, fast_png, fixture_html):
    assert "<b>run_small</b>: machine not recorded" in fixture_html  # an older run: no machine.json
    from rlvr.machine import machine_info, machine_line

    a = _copy_run(FIXTURE, tmp_path / "a")
    info = machine_info("bfloat16")
    (a / "machine.json").write_text(json.dumps(info))
    b = _copy_run(FIXTURE, tmp_path / "b")  # no machine.json: the one in eval.json
    ev = json.loads((b / "eval.json").read_text())
    ev["machine"] = {**info, "precision": "float32"}
    (b / "eval.json").write_text(json.dumps(ev))
    html = write_report([a, b], tmp_path / "r.html").read_text()
    summary = html[html.index('id="summary"'): html.index('id="training"')]
    assert "precision bfloat16" in summary and "precision float32" in summary
    assert machine_line(info).split(" (")[0] in summary
