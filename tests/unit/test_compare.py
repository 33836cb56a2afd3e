"""``rlvr compare`` and the report's new parts: paired differences against hand computations, seed
pairing, groups, smoothing, one colour per name across panels, constant panels hidden, sample picks."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest

matplotlib.use("Agg")

from rlvr.analysis.smoothing import Smoothing, ema, rolling_mean  # noqa: E402
from rlvr.cli import main  # noqa: E402
from rlvr.errors import UserError  # noqa: E402
from rlvr.report import figures  # noqa: E402
from rlvr.report.colours import PALETTE, colour_map  # noqa: E402
from rlvr.report.curve_figures import curve_axes, seed_curve  # noqa: E402
from rlvr.report.curves_section import curves_section  # noqa: E402
from rlvr.report.differences import pair_runs, paired_differences  # noqa: E402
from rlvr.report.html import write_report  # noqa: E402
from rlvr.report.run_data import group_label, load_runs, run_seed, runs_by_group  # noqa: E402
from rlvr.report.sample_picks import pick_samples  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run_small"


@pytest.fixture()
def no_png(monkeypatch):
    """Skip rasterising where a test checks structure, not pixels (the figure is still closed)."""
    import matplotlib.pyplot as plt

    def fake(fig) -> str:
        plt.close(fig)
        return "data:image/png;base64,"

    monkeypatch.setattr(figures, "fig_uri", fake)


def _sample(pid: str, ok: bool, answer: str | None = None, **extra) -> dict:
    return {"problem_id": pid, "correct": ok, "reward": float(ok), "completion": f"{pid} {answer}",
            "answer": answer, "num_tokens": 4, **extra}


def _run(root: Path, name: str, samples: list[dict] | None, seed: int | None = None,
         retention: list[int] | None = None) -> Path:
    """A run folder: the fixture's metrics, a config with ``seed``, samples.jsonl, eval.json (with a
    per-problem retention result when given)."""
    run = root / name
    run.mkdir(parents=True)
    shutil.copy(FIXTURE / "metrics.jsonl", run / "metrics.jsonl")
    (run / "config.yaml").write_text("name: x\n" + (f"train:\n  seed: {seed}\n" if seed is not None else ""))
    ev = json.loads((FIXTURE / "eval.json").read_text())
    if retention is not None:
        ev["retention"] = {"trained": {"strings": {"accuracy": sum(retention) / len(retention),
                                                   "correct": retention}}}
    (run / "eval.json").write_text(json.dumps(ev))
    if samples is not None:
        (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return run


# A: p1 [right, wrong], p2 [wrong, wrong], p3 [right, right]
# B: p1 [right, right], p2 [right, wrong], p3 [right, wrong]
A_ROWS = [_sample("p1", True, "1"), _sample("p1", False, "2"), _sample("p2", False, "5"), _sample("p2", False, "5"),
          _sample("p3", True, "7"), _sample("p3", True, "7")]
B_ROWS = [_sample("p1", True, "1"), _sample("p1", True, "1"), _sample("p2", True, "4"), _sample("p2", False, None),
          _sample("p3", True, "7"), _sample("p3", False, "6")]


def _row(diff: dict, metric: str) -> dict:
    return next(r for r in diff["rows"] if r["metric"] == metric)


def test_paired_differences_match_a_hand_computation(tmp_path):
    a = load_runs([_run(tmp_path, "a", A_ROWS, retention=[1, 0, 0, 1])])
    b = load_runs([_run(tmp_path, "b", B_ROWS, retention=[1, 1, 0, 1])])
    diff = paired_differences(a, b)
    assert diff["pairing"] == "run with run (one run each)"
    # pass@1 per problem: A (1/2, 0, 1), B (1, 1/2, 1/2); pass@2: A (1, 0, 1), B (1, 1, 1)
    p1, p2 = _row(diff, "pass@1"), _row(diff, "pass@2")
    assert (p1["reference"], p1["other"], p1["difference"]) == pytest.approx((0.5, 2 / 3, 1 / 6))
    assert (p2["reference"], p2["other"], p2["difference"]) == pytest.approx((2 / 3, 1.0, 1 / 3))
    assert p1["problems"] == 3
    # per-problem differences (1/2, 1/2, -1/2): a bootstrap mean lies in [-1/2, 1/2]
    assert -0.5 <= p1["ci"][0] <= p1["difference"] <= p1["ci"][1] <= 0.5
    # answer entropy per problem: A (ln 2, 0, 0); B (0, ln 2 [4 and no answer], ln 2)
    ent = _row(diff, "answer entropy")
    assert (ent["reference"], ent["other"]) == pytest.approx((math.log(2) / 3, 2 * math.log(2) / 3))
    # retention: paired per problem, (0, 1, 0, 0) -> +0.25
    ret = _row(diff, "retention strings")
    assert ret["difference"] == pytest.approx(0.25) and ret["problems"] == 4
    # support of B against A: p1, p3 solved by both, p2 by B only
    assert diff["support"]["counts"] == {"preserved": 2, "shrunk": 0, "expanded": 1, "out_of_support": 0}
    net = diff["support"]["net"]
    assert net["difference"] == pytest.approx(1 / 3)  # solved at least once: A (1, 0, 1), B (1, 1, 1)
    assert _row(diff, "solved at least once (support)") == net
    # the pair's own compare() block: the same pass@k difference
    assert diff["per_pair"][0]["pass_at_k_difference"]["1"] == pytest.approx(1 / 6)


def test_an_interval_collapses_when_every_problem_moves_the_same(tmp_path):
    same = [_sample(p, ok) for p in ("p1", "p2", "p3") for ok in (True, False)]
    better = [_sample(p, True) for p in ("p1", "p2", "p3") for _ in range(2)]
    diff = paired_differences(load_runs([_run(tmp_path, "a", same)]), load_runs([_run(tmp_path, "b", better)]))
    assert _row(diff, "pass@1")["ci"] == pytest.approx([0.5, 0.5])  # every problem: +1/2


def test_runs_sharing_seeds_are_paired_seed_by_seed(tmp_path):
    flip = [dict(r, correct=not r["correct"], reward=1.0 - r["reward"]) for r in A_ROWS]
    runs = load_runs([_run(tmp_path, "cispo-s0-20250101-120000", A_ROWS, seed=0),
                      _run(tmp_path, "cispo-s1-20250101-120500", flip, seed=1),
                      _run(tmp_path, "grpo-s1-20250101-121000", A_ROWS, seed=1),
                      _run(tmp_path, "grpo-s0-20250101-121500", flip, seed=0)])
    groups = runs_by_group(runs)
    assert list(groups) == ["cispo", "grpo"]
    pairs, how = pair_runs(groups["cispo"], groups["grpo"])
    assert how == "by seed (0, 1)"
    assert [(a.seed, b.seed) for a, b in pairs] == [(0, 0), (1, 1)]
    diff = paired_differences(groups["cispo"], groups["grpo"])
    # seed 0: A_ROWS vs flip, seed 1: flip vs A_ROWS: per problem the two differences cancel
    assert _row(diff, "pass@1")["difference"] == pytest.approx(0.0)
    assert _row(diff, "pass@1")["ci"] == pytest.approx([0.0, 0.0])
    assert [p["pair"] for p in diff["per_pair"]] == [["cispo-s0-20250101-120000", "grpo-s0-20250101-121500"],
                                                     ["cispo-s1-20250101-120500", "grpo-s1-20250101-121000"]]
    # pass@1 of flip per problem (1/2, 1, 0) minus A's (1/2, 0, 1): the seed-0 pair alone
    assert diff["per_pair"][0]["pass_at_k_difference"]["1"] == pytest.approx(0.0)
    one = [r for r in runs if r.seed == 1]
    pairs, how = pair_runs([runs[0], runs[1]], [one[1]])
    assert how == "by seed (1); seeds 0 in one group only, left out"


def test_groups_and_seeds_from_names_and_config():
    assert group_label("cispo-s1-20250101-120000") == "cispo"
    assert group_label("cispo-20250101-120000-2") == "cispo"
    assert group_label("dapo_seed3") == "dapo"
    assert group_label("plain") == "plain"
    assert run_seed("train:\n  seed: 7\n", "x-s3") == 7  # the config wins over the name
    assert run_seed(None, "x-s3-20250101-120000") == 3
    assert run_seed("name: x\n", "x") is None


def test_group_labels_given_on_the_command_line(tmp_path):
    dirs = [_run(tmp_path, n, A_ROWS) for n in ("r1", "r2", "r3")]
    groups = runs_by_group(load_runs(dirs, ["old", "new", "old"]))
    assert {g: [r.name for r in rs] for g, rs in groups.items()} == {"old": ["r1", "r3"], "new": ["r2"]}
    with pytest.raises(UserError, match="one label per run directory"):
        load_runs(dirs, ["old", "new"])


def test_smoothing_against_hand_computation():
    # span 3: alpha 1/2; debiased EMA = weighted mean with weights 1/2^(t-i)
    assert list(ema([1.0, 3.0, 5.0], 3)) == pytest.approx([1.0, (0.5 * 1 + 3) / 1.5, (0.25 + 1.5 + 5) / 1.75])
    assert list(rolling_mean([1.0, 3.0, 5.0, 7.0], 2)) == pytest.approx([1.0, 2.0, 4.0, 6.0])
    assert list(Smoothing("none").apply([1, 2])) == [1.0, 2.0]
    assert "alpha 0.33" in Smoothing("ema", 5).describe()
    with pytest.raises(UserError):
        Smoothing("median")


def test_seed_band_is_the_runs_min_and_max_at_shared_steps():
    r1 = [{"step": 1, "flops": 10.0, "reward": 0.1}, {"step": 2, "flops": 20.0, "reward": 0.3},
          {"step": 3, "flops": 30.0, "reward": 0.5}]
    r2 = [{"step": 1, "flops": 12.0, "reward": 0.3}, {"step": 2, "flops": 22.0, "reward": 0.1}]
    xs, mean, low, high = seed_curve([r1, r2], "step", "reward")
    assert list(xs) == [1, 2] and list(mean) == pytest.approx([0.2, 0.2])
    assert list(low) == pytest.approx([0.1, 0.1]) and list(high) == pytest.approx([0.3, 0.3])
    assert list(seed_curve([r1, r2], "flops", "reward")[0]) == pytest.approx([11.0, 21.0])


def test_one_colour_per_run_across_every_panel():
    assert colour_map(["b", "a", "b", "c"]) == {"b": PALETTE[0], "a": PALETTE[1], "c": PALETTE[2]}
    rows = {"a": [json.loads(x) for x in (FIXTURE / "metrics.jsonl").read_text().splitlines()]}
    rows["b"] = [dict(r, reward=r["reward"] + 0.1, entropy=r["entropy"] * 2) for r in rows["a"]]
    colours = colour_map(["b", "a"])  # order of the map, not of the figure's runs
    seen: dict[str, set] = {"a": set(), "b": set()}
    for keys in (["reward"], ["entropy"], ["clip_frac_low", "clip_frac_high"]):
        fig = curve_axes({n: [r] for n, r in rows.items()}, keys, "x", colours, Smoothing())
        for ax in fig.axes:
            for line in ax.get_lines():
                name = line.get_label().split(":")[0]
                if name in seen:
                    seen[name].add(line.get_color())
        matplotlib.pyplot.close(fig)
    assert seen == {"a": {colours["a"]}, "b": {colours["b"]}}


def test_panels_with_no_signal_are_hidden_and_named(no_png):
    run = [{"step": s, "flops": 10.0 * s, "reward": 0.1 * s, "lag_max": 0, "lag_mean": 0.0, "approx_kl": 0.0,
            "kl_ref": 0.01 * s, "zero_var_frac": 0.5} for s in range(1, 6)]
    other = [dict(r, zero_var_frac=0.25) for r in run]  # constant in each run, different between runs
    html = curves_section({"a": [run], "b": [other]}, colour_map("ab"), Smoothing())
    assert 'id="fig-reward-img"' in html and 'id="fig-kl-img"' in html
    for gid in ("lag", "zero_var"):
        assert f'id="metric-{gid}"' not in html
    assert "policy lag (versions) (lag_max = 0, lag_mean = 0)" in html
    assert "zero-variance group fraction (zero_var_frac = 0.25 / 0.5)" in html
    assert "approx_kl: constant 0 (not drawn)" in html  # the KL panel stays for kl_ref


def test_sample_picks_best_worst_and_seeded_random():
    rows = [_sample(f"p{i}", i % 3 == 0, str(i), mean_logp=-float(i)) for i in range(10)]
    picks = pick_samples(rows, n_random=3, seed=0)
    labels = [label for label, _ in picks]
    assert labels == ["best", "worst", "random", "random", "random"]
    assert picks[0][1]["problem_id"] == "p0"  # correct and the surest (mean logp 0)
    assert picks[1][1]["problem_id"] == "p1"  # wrong and the surest of the wrong ones
    assert picks == pick_samples(rows, n_random=3, seed=0)
    assert len({r["problem_id"] for _, r in picks}) == 5
    assert pick_samples([], 3) == [] and [lb for lb, _ in pick_samples(rows[:1], 3)] == ["best"]


def test_report_shows_completions_of_runs_with_samples(tmp_path, no_png):
    with_samples = _run(tmp_path, "a", A_ROWS)
    without = _run(tmp_path, "b", None)
    html = write_report([with_samples, without], tmp_path / "r.html").read_text()
    part = html[html.index('<section id="samples">'):]
    part = part[: part.index("</section>")]
    assert part.count("<div class='sample ") == 5  # 6 completions: best, worst, 3 at random
    assert "<b>best</b>" in part and "<b>worst</b>" in part
    assert "b: no samples.jsonl" in part


def test_cli_compare_writes_page_and_json(tmp_path, no_png, capsys):
    a = _run(tmp_path, "base-s0", A_ROWS, seed=0)
    b = _run(tmp_path, "new-s0", B_ROWS, seed=0)
    out, js = tmp_path / "c.html", tmp_path / "c.json"
    assert main(["compare", str(a), str(b), "--out", str(out), "--json", str(js), "--plain"]) == 0
    printed = capsys.readouterr().out
    assert "new vs base (paired by seed (0))" in printed and "+0.167" in printed
    html = out.read_text()
    for section in ("runs", "differences", "training", "passk", "samples"):
        assert f'<section id="{section}">' in html
    assert 'id="differences-table-0"' in html and "<script" not in html.lower()
    data = json.loads(js.read_text())
    assert data["reference"] == "base"
    assert _row(data["differences"]["new"], "pass@1")["difference"] == pytest.approx(1 / 6)
    assert main(["compare", str(a), str(b), "--group", "x"]) == 2
    assert "one label per run directory" in capsys.readouterr().err
    from rlvr.cli import build_parser

    assert "compare" in build_parser().format_help()  # the help line formats (argparse reads % in it)
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "--smooth" in capsys.readouterr().out


def test_page_plots_draw_a_model_in_one_colour(tmp_path, monkeypatch):
    from rlvr.experiments import dynamics_page, page
    from rlvr.experiments.page_plots import page_colours

    drawn: dict[str, set] = {}

    def record(fig, ax, xlabel, ylabel, path, legend_size=8):
        for line in ax.get_lines():
            drawn.setdefault(line.get_label(), set()).add(line.get_color())
        return path

    monkeypatch.setattr(page, "save_axes", record)
    monkeypatch.setattr(dynamics_page, "save_axes", record)
    exp = SimpleNamespace(name="e", models={"base": SimpleNamespace(kind="base"), "rl": SimpleNamespace(kind="rl")},
                          evaluations={"held": SimpleNamespace(temperature=1.0, top_p=1.0, n=4)})
    colours = page_colours(exp)
    # the pass@k plot lists rl first, the held-out plot base first: the colours follow the names
    page.plot_passk(exp, {"held": {"rl": {"1": 0.2, "2": 0.3}, "base": {"1": 0.1, "2": 0.2}}}, tmp_path)
    series = {"step": [1, 2], "heldout_pass_rate": [0.1, 0.2]}
    dynamics_page._plot_heldout("held", {"base": [series], "rl": [series]}, tmp_path, colours)
    matplotlib.pyplot.close("all")
    assert drawn == {"base": {colours["base"]}, "rl": {colours["rl"]}}
    assert colours["base"] != colours["rl"]
