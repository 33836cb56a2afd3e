"""The grid section: one line per pipeline against the checkpoint; a 2x2's other bases stay out."""

from types import SimpleNamespace as NS

from rlvr.experiments.grid_page import grid_lines


def test_grid_rows_by_hand_and_other_bases_left_out(tmp_path):
    M = lambda kind, start=1.0, base="base", overrides=(): NS(kind=kind, start=start, base=base,  # noqa: E731
                                                             overrides=list(overrides))
    models = {"base": M("base"), "base_h": M("base", 0.5), "rl_f": M("rl_steps"), "rl_h": M("rl_steps", 0.5),
              "base_mix": M("base", overrides=["pretrain.mix={arithmetic: 0.8}"]),
              "rl_mix": M("rl_steps", base="base_mix")}
    ev = lambda name, ms: NS(name=name, kind="samples", offset=0, task="", models=ms)  # noqa: E731
    exp = NS(models=models, evaluations={"f": ev("f", ["base", "rl_f"]), "h": ev("h", ["base_h", "rl_h"]),
                                         "x": ev("x", ["base", "base_mix", "rl_mix"])})
    correct = {"base": [0, 2], "base_h": [0, 0], "rl_f": [2, 2], "rl_h": [1, 1], "base_mix": [2, 2], "rl_mix": [2, 2]}
    lines = grid_lines(exp, lambda m: [None], lambda e, m, s: {"n": 2, "correct": correct[m]}, tmp_path)
    # pass@1 per problem = correct / n: base (0 + 1) / 2 = 0.5 at 100% (not base_mix's 1.0), base_h 0 at 50%
    assert any(line.startswith("| base | 0.000 [") and "| 0.500 [" in line for line in lines)
    assert any(line.startswith("| rl | 0.500 [") and "| 1.000 [" in line for line in lines)
    assert (tmp_path / "plots" / "grid_pass_at_1.png").exists()
