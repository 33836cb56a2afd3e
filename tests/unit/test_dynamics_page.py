"""The training-dynamics section: window means by hand, the held-out points and their plot."""

from types import SimpleNamespace

import pytest

from rlvr.experiments import dynamics_page as dp


def test_windows_by_hand_skip_none():
    assert dp.windows([1.0, 3.0, None, 5.0, 7.0], points=2) == [2.0, 6.0]  # [1, 3] | [None, 5, 7]


def test_heldout_points_skip_steps_without_a_point():
    steps, acc = dp.heldout_points({"step": [1, 2, 3, 4], "heldout_pass_rate": [0.2, None, 0.3, None]})
    assert steps == [1, 3] and acc == [0.2, 0.3]


def test_section_lists_each_model_and_plots_each_evaluation(tmp_path):
    series = {"step": [1, 2, 3, 4, 5], "entropy": [0.5, 0.4, 0.3, 0.2, 0.1], "pass_rate": [0.1] * 5,
              "heldout_pass_rate": [0.2, None, 0.3, None, 0.1]}
    ev = SimpleNamespace(name="rise", kind="dynamics", models=["a", "b"])
    exp = SimpleNamespace(evaluations={"rise": ev}, models={m: SimpleNamespace(kind="rl") for m in ("a", "b")})

    def load(e, m, s):
        if m == "b":
            raise FileNotFoundError
        return {"series": series}

    lines = dp.dynamics_lines(exp, lambda m: [0, 1], load, tmp_path)
    assert any(line.startswith("| a | entropy | 0.500 | 0.400 | 0.300 | 0.200 | 0.100 |") for line in lines)
    assert not any(line.startswith("| b |") for line in lines)  # no cell: no row
    assert "![held-out accuracy, rise](plots/heldout_rise.png)" in lines
    assert (tmp_path / "plots" / "heldout_rise.png").stat().st_size > 0
    assert dp.dynamics_lines(SimpleNamespace(evaluations={}), lambda m: [0], load, tmp_path) == []


@pytest.mark.parametrize("held", [[None, None], []])
def test_no_heldout_point_no_plot(tmp_path, held):
    runs = {"a": [{"step": [1, 2][: len(held)], "heldout_pass_rate": held}]}
    assert dp._plot_heldout("x", runs, tmp_path, {"a": "#000000"}) is None and not (tmp_path / "plots").exists()
