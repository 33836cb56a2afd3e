"""rlvr.experiments: verdicts, declarations and measures against hand computations."""

from __future__ import annotations

import dataclasses
import math
import re
import typing

import numpy as np
import pytest

from rlvr.errors import UserError
from rlvr.eval.passk import bootstrap_ci
from rlvr.experiments import measures, spec
from rlvr.experiments.verdict import Estimate, spread, verdict

RUN = {name: m.run for name, m in measures.MEASURES.items()}


def E(v, lo, hi, seed=0):
    return Estimate(seed, v, lo, hi)


def test_verdict_needs_every_seed_and_the_seed_level_interval_beyond_zero():
    agree = [E(0.10, 0.05, 0.15), E(0.12, 0.07, 0.17, 1), E(0.11, 0.06, 0.16, 2)]
    assert verdict(agree, "positive") == "reproduced"
    assert verdict([E(0.1, 0.05, 0.15), E(0.02, -0.01, 0.05, 1)], "positive") == "inconclusive"  # one covers 0
    below = [E(-0.1, -0.2, -0.05), E(-0.1, -0.3, -0.01, 1), E(-0.12, -0.2, -0.05, 2)]
    assert verdict(below, "positive") == "not reproduced" and verdict(below, "negative") == "reproduced"
    # every seed above 0, but they disagree on the size: 2 seeds (t = 12.7) put the mean's interval over 0
    assert verdict([E(0.1, 0.05, 0.15), E(0.3, 0.25, 0.35, 1)], "positive") == "inconclusive"
    assert verdict([E(0.1, 0.05, 0.15), E(-0.1, -0.2, -0.05, 1)], "positive") == "inconclusive"  # seeds disagree
    assert verdict([E(0.0, 0.0, 0.0)], "positive") == "inconclusive"  # a zero-width interval at 0 is not beyond it
    assert verdict([E(math.nan, math.nan, math.nan)], "negative") == "inconclusive"
    assert verdict([], "positive") == "inconclusive"
    with pytest.raises(ValueError):
        verdict([E(1, 1, 1)], "up")
    assert spread([E(0.1, 0, 0), E(0.3, 0, 0, 1)]) == {"seeds": 2, "mean": pytest.approx(0.2), "min": 0.1, "max": 0.3}
    assert Estimate(None, 0, 0, 0).label == "shared" and Estimate(2, 0, 0, 0).label == "s2"
    assert Estimate(1, 0, 0, 0, pretrain=2).label == "p2-s1" and Estimate(None, 0, 0, 0, pretrain=1).label == "p1"


def test_non_inferiority_reads_the_intervals_against_the_margin_by_hand():
    """expect positive with bound -0.05 (a margin of 0.05): reproduced when every lower end (and the
    seed level's) is above -0.05, not reproduced when every upper end is below it, else inconclusive."""
    # three seeds -0.01 [-0.03, +0.01], 0.00 [-0.02, +0.02], +0.01 [-0.01, +0.03]: mean 0, s = 0.01,
    # between 4.303 x 0.01 / sqrt 3 = 0.0248, h = 0.02 -> seed level 0 +- 0.0319: lower end -0.032 > -0.05
    level = [E(-0.01, -0.03, 0.01), E(0.0, -0.02, 0.02, 1), E(0.01, -0.01, 0.03, 2)]
    assert verdict(level, "positive", bound=-0.05) == "reproduced"
    assert verdict(level, "positive") == "inconclusive"  # as superiority (bound 0): every interval covers 0
    # all upper ends below -0.05 (seed level -0.10 +- 0.0319): worse than the margin
    worse = [E(v - 0.10, lo - 0.10, hi - 0.10, e.seed) for e in level for v, lo, hi in [(e.value, e.lo, e.hi)]]
    assert verdict(worse, "positive", bound=-0.05) == "not reproduced"
    # one seed's interval [-0.07, -0.03] straddles -0.05: inconclusive
    mixed = [E(-0.05, -0.07, -0.03), E(0.0, -0.02, 0.02, 1), E(0.01, -0.01, 0.03, 2)]
    assert verdict(mixed, "positive", bound=-0.05) == "inconclusive"
    # the other direction: a relative fall claimed beyond -0.5
    fall = [E(-0.7, -0.8, -0.6), E(-0.65, -0.75, -0.55, 1), E(-0.7, -0.78, -0.62, 2)]
    assert verdict(fall, "negative", bound=-0.5) == "reproduced"
    assert verdict(fall, "negative", bound=-0.9) == "not reproduced"


def test_a_bound_is_shown_and_decides_the_declaration():
    from rlvr.experiments.claims import claim_head
    from rlvr.experiments.page import expected
    from rlvr.experiments.provenance import fingerprint

    cl = {"id": "c", "claim": "c", "paper": "p", "measure": "passk_diff",
          "args": {"eval": "e", "model": "rl", "against": "base", "k": 1}, "expect": "positive"}
    assert fingerprint(cl) == fingerprint({**cl, "bound": 0.0})  # no bound: the fingerprint it always had
    assert fingerprint(cl) != fingerprint({**cl, "bound": -0.05})  # a new margin declares the claim again
    head = claim_head(spec.ClaimSpec(**{**cl, "args": cl["args"], "bound": -0.05}))
    assert head["bound"] == -0.05 and "bound" not in claim_head(spec.ClaimSpec(**cl))
    assert expected(head) == "above -0.05 (non-inferiority, margin 0.05)"
    assert expected({"expect": "negative", "bound": -0.5}) == "below -0.5" and expected(cl) == "positive"


def test_the_seed_level_interval_by_hand():
    """The worked example of docs/commands/reproduce.md: boundary's rl_wins_small_k."""
    from rlvr.experiments.verdict import seed_interval

    est = [E(0.126, 0.088, 0.168, 0), E(0.132, 0.096, 0.172, 1), E(0.106, 0.072, 0.146, 2)]
    level = seed_interval(est)
    mean, sd = np.mean([0.126, 0.132, 0.106]), np.std([0.126, 0.132, 0.106], ddof=1)
    between, within = 4.302653 * sd / np.sqrt(3), np.mean([0.040, 0.038, 0.037])
    assert level.value == pytest.approx(mean)
    assert (level.lo, level.hi) == pytest.approx((mean - np.hypot(between, within), mean + np.hypot(between, within)))
    assert level.lo == pytest.approx(0.0702, abs=5e-4) and level.hi == pytest.approx(0.1725, abs=5e-4)
    # pretraining seeds are the top level: two pretraining seeds of three RL seeds each -> 2 units (t 12.7)
    pre = [Estimate(s, v, v - 0.01, v + 0.01, pretrain=p) for p, v in ((0, 0.10), (1, 0.30)) for s in range(3)]
    wide = seed_interval(pre)
    assert wide.value == pytest.approx(0.2) and wide.lo < 0 < wide.hi and verdict(pre, "positive") == "inconclusive"
    # a shared estimate is its own seed level; one seeded replicate shows no between-seed variation
    assert seed_interval([E(0.3, 0.2, 0.4, None)]) == E(0.3, 0.2, 0.4, None)
    assert math.isnan(seed_interval([E(0.3, 0.2, 0.4, 0)]).lo)


def _stats(correct, n, tok=None, ans=None, ppl=None, ppl_ok=None):
    p = len(correct)
    return {"ids": [f"p{i}" for i in range(p)], "n": n, "correct": list(correct),
            "token_entropy": tok or [0.5] * p, "answer_entropy": ans or [1.0] * p,
            "logppl_base": ppl or [1.0] * p, "logppl_base_correct": ppl_ok or [1.0] * p}


def test_passk_diff_support_and_entropy_by_hand():
    base = _stats([4, 0, 1, 0], 4, ans=[1.0, 0.5, 0.2, 0.0])
    rl = _stats([4, 2, 0, 0], 4, ans=[0.0, 0.5, 0.0, 0.0])
    get = {("e", "base", None): base, ("e", "rl", 0): rl}.__getitem__
    look = lambda e, m, s: get((e, m, s))  # noqa: E731
    est, det = RUN["passk_diff"](look, {"eval": "e", "model": "rl", "against": "base", "k": 1},
                                                  [0], [None])
    # pass@1 = c/n: rl (1, .5, 0, 0), base (1, 0, .25, 0) -> per-problem diff (0, .5, -.25, 0), mean 0.0625
    assert est[0].value == pytest.approx(0.0625)
    lo, hi = bootstrap_ci(np.array([0, 0.5, -0.25, 0]))
    assert (est[0].lo, est[0].hi) == pytest.approx((lo, hi))
    assert det["model"]["s0"]["4"] == pytest.approx(0.5) and det["against"]["s0"]["4"] == pytest.approx(0.5)
    est, det = RUN["support_balance"](look, {"eval": "e", "model": "rl", "against": "base"}, [0], [None])
    # base supports p0, p2; rl supports p0, p1: shrunk p2, expanded p1 -> (0, -1, +1, 0), mean 0
    assert est[0].value == 0 and det["s0"]["counts"] == {"preserved": 1, "shrunk": 1, "expanded": 1,
                                                          "out_of_support": 1}
    assert det["s0"]["rates"]["SRR"] == pytest.approx(0.5) and det["s0"]["rates"]["NSCR"] == 0
    est, _ = RUN["entropy_diff"](look, {"eval": "e", "model": "rl", "against": "base", "level": "answer"},
                                   [0], [None])
    assert est[0].value == pytest.approx((-1.0 + 0 - 0.2 + 0) / 4)


def test_ppl_diff_pairs_problems_with_both_values():
    base = _stats([1, 1, 1], 2, ppl=[2.0, 1.0, 3.0])
    rl = _stats([1, 0, 1], 2, ppl_ok=[1.5, None, 1.0])
    look = {("e", "base", None): base, ("e", "rl", 1): rl}.__getitem__
    est, det = RUN["ppl_diff"](lambda e, m, s: look((e, m, s)), {"eval": "e", "model": "rl", "against": "base"},
                                 [1], [None])
    assert est[0].value == pytest.approx(((1.5 - 2.0) + (1.0 - 3.0)) / 2) and det["s1"]["problems"] == 2


def test_ppl_like_for_like_compares_the_same_kind_of_sample():
    """Base and RL both scored under the base: all vs all and correct vs correct, where the old
    ppl_diff (kept) set RL's correct samples against all of the base's. Problem p1 has no correct RL
    sample and p2 no correct base sample: correct vs correct uses p0 only."""
    base = _stats([1, 1, 0], 2, ppl=[2.0, 1.0, 3.0], ppl_ok=[1.0, 0.5, None])
    rl = _stats([1, 0, 1], 2, ppl=[1.5, 2.5, 1.0], ppl_ok=[1.25, None, 1.0])
    look = {("e", "base", None): base, ("e", "rl", 0): rl, ("e", "rl", 1): rl}.__getitem__
    get = lambda e, m, s: look((e, m, s))  # noqa: E731
    args = {"eval": "e", "model": "rl", "against": "base"}
    est, det = RUN["ppl_like_for_like"](get, {**args, "samples": "all"}, [0, 1], [None])
    assert [e.seed for e in est] == [0, 1]
    assert est[0].value == pytest.approx(((1.5 - 2.0) + (2.5 - 1.0) + (1.0 - 3.0)) / 3)  # -1/3
    assert (est[0].lo, est[0].hi) == pytest.approx(bootstrap_ci(np.array([-0.5, 1.5, -2.0])))
    assert det["s0"] == {"problems": 3, "ppl_model": pytest.approx(math.exp(5.0 / 3)),
                         "ppl_against": pytest.approx(math.exp(2.0))}
    est, det = RUN["ppl_like_for_like"](get, {**args, "samples": "correct"}, [0], [None])
    assert est[0].value == pytest.approx(1.25 - 1.0) and det["s0"]["problems"] == 1
    old, _ = RUN["ppl_diff"](get, args, [0], [None])  # the published measure: correct against all
    assert old[0].value == pytest.approx(((1.25 - 2.0) + (1.0 - 3.0)) / 2)
    with pytest.raises(UserError, match="samples: 'some'; use one of all, correct"):
        measures.MEASURES["ppl_like_for_like"].typed({**args, "samples": "some"})
    with pytest.raises(UserError, match="ppl_like_for_like needs evaluation e with perplexity > 0"):
        RUN["ppl_like_for_like"](lambda e, m, s: {"ids": ["p0"], "n": 2}, {**args, "samples": "all"}, [0], [None])


def test_declared_experiments_load_and_bad_declarations_fail_with_the_key():
    for name in spec.names():
        exp = spec.load(name)
        q = exp.quick_form()
        assert all(e.n <= 8 for e in q.evaluations.values()) and q.last_overrides
    with pytest.raises(UserError, match="did you mean 'boundary'"):
        spec.load("boundry")
    good = {"name": "x", "title": "t", "models": {"base": {"kind": "base"}, "rl": {"kind": "rl", "seeded": True}},
            "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["base", "rl"]}},
            "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "passk_diff",
                        "args": {"eval": "e", "model": "rl", "against": "base", "k": 1}, "expect": "positive"}]}
    assert spec.parse(good, "x").models["rl"].seeded
    ev, claim = good["evaluations"]["e"], good["claims"][0]
    # every error names the file and the full key
    bad = [({"models": {"base": {"kind": "base"}, "rl": {"kind": "rlx"}}}, "models.rl.kind: unknown 'rlx'"),
           ({"claims": [{**claim, "measure": "nope"}]}, "claims[0].measure: unknown 'nope'"),
           ({"claims": [{**claim, "args": {"eval": "e", "model": "sft", "against": "base"}}]},
            "claims[0].args.model: 'sft' is not evaluated by e"),
           ({"evaluations": {"e": {**ev, "colour": 1}}}, "evaluations.e.colour: unknown key"),
           ({"evaluations": {"e": {**ev, "temprature": 1}}}, "evaluations.e.temprature: unknown key; did you mean "
                                                             "'temperature'?"),
           ({"evaluations": {"e": {**ev, "n": "four"}}}, "evaluations.e.n: expected an integer, got 'four'"),
           ({"evaluations": {"e": {**ev, "n": 0}}}, "evaluations.e.n: must be >= 1 (got 0)"),
           ({"evaluations": {"e": {**ev, "top_p": 1.5}}}, "evaluations.e.top_p: must be in (0, 1] (got 1.5)"),
           ({"evaluations": {"e": {k: v for k, v in ev.items() if k != "problems"}}},
            "evaluations.e.problems: missing (a required key)"),
           ({"evaluations": {"e": {**ev, "name": "f"}}}, "evaluations.e.name: unknown key"),
           ({"claims": [{**claim, "measure": "crossing_scan",
                         "args": {"eval": "e", "model": "rl", "arms": ["base", "sft"], "fraction": 0.25}}]},
            "claims[0].args.arms: 'sft' is not evaluated by e"),
           ({"claims": [{**claim, "measure": "crossing_scan",
                         "args": {"eval": "e", "model": "rl", "arms": [], "fraction": 0.25}}]},
            "claims[0].args.arms: a non-empty list"),
           ({"claims": [claim, {**claim, "expect": "up"}]}, "claims[1].expect: use one of positive, negative"),
           ({"claims": [{**claim, "args": {**claim["args"], "kk": 2}}]},  # a misspelt argument, not a default
            "claims[0].args.kk: unknown key; did you mean 'k'?"),
           ({"claims": [{**claim, "args": {**claim["args"], "k": "all"}}]}, "claims[0].args.k: 'all'; use one of max"),
           ({"claims": [{**claim, "measure": "entropy_diff",
                         "args": {"eval": "e", "model": "rl", "against": "base", "level": "tokens"}}]},
            "claims[0].args.level: 'tokens'; use one of token, answer"),
           ({"models": {"rl": {"kind": "rl"}}}, "models: needs a model called base"),
           ({"models": {"base": {"kind": "base"}, "d": {"kind": "distill", "teacher": "t"}}},
            "models.d.teacher: 't' is not a model declared"),
           ({"models": {**good["models"], "b2": {"kind": "base", "start": 1.5}}},
            "models.b2.start: must be in (0, 1] (got 1.5)"),
           ({"models": {**good["models"], "b2": {"kind": "base", "seeded": True}}}, "models.b2: a base model is "
                                                                                   "pretrained once"),
           ({"models": {**good["models"], "b2": {"kind": "base", "milestones": -1}}},
            "models.b2.milestones: must be >= 0 (got -1)"),
           ({"evaluations": {"e": {**ev, "task": "strngs"}}}, "evaluations.e.task: unknown task 'strngs'"),
           ({"seeds": 2, "parts": [{"evaluations": ["e"], "seeds": [0]}]}, "parts: every evaluation must be in exactly "
                                                                           "one part (or, for parts that name seeds, "
                                                                           "once per seed 0..1)"),
           ({"seeds": 2, "parts": [{"evaluations": ["e"], "seeds": [0, 1]}, {"evaluations": ["e"], "seeds": [1]}]},
            "parts: every evaluation must be in exactly one part"),
           ({"seeds": 2, "parts": [{"evaluations": ["e"], "seeds": [2]}]}, "parts[0].seeds: [2]; use seeds among 0..1"),
           ({"parts": [{"evaluations": ["e"], "minutes": -5}]}, "parts[0].minutes: must be >= 0 (got -5.0)"),
           ({"quick": {"n": 8, "seed": 1}}, "quick.seed: unknown key; did you mean 'seeds'?"),
           ({"seeds": 0}, "seeds: must be >= 1 (got 0)"),
           ({"is_quick": True}, "is_quick: unknown key"),
           ({"papers": ["yue"]}, "papers: expected a mapping"),
           ({"models": {**good["models"], "r2": {"kind": "rl", "base": "rl"}}},
            "models.r2.base: 'rl' is not a model of kind base"),
           ({"models": {**good["models"], "b2": {"kind": "base", "base": "rl"}}}, "models.b2.base: a base model takes "
                                                                                 "no base")]
    for change, msg in bad:
        with pytest.raises(UserError, match="^" + re.escape(f"experiments/x.yaml: {msg}")):
            spec.parse({**good, **change}, "x")
    with pytest.raises(UserError, match=re.escape("experiments/y.yaml: name: 'x' differs from the file name")):
        spec.parse(good, "y")


def test_every_numeric_declaration_field_has_a_range():
    for cls in (spec.Experiment, spec.ModelSpec, spec.EvalSpec, spec.ClaimSpec, spec.PartSpec, spec.QuickSpec,
                spec.ArchiveSpec):
        hints = typing.get_type_hints(cls)
        numeric = {f.name for f in dataclasses.fields(cls) if f.metadata.get("declared", True)
                   and (hints[f.name] in (int, float) or hints[f.name] in (tuple[int, ...], tuple[float, ...]))}
        assert numeric == set(getattr(cls, "RANGES", {})), cls.__name__


def test_parts_may_split_seeds_and_models_start_from_pretraining_milestones(tmp_path):
    good = {"name": "x", "title": "t", "seeds": 2,
            "models": {"base": {"kind": "base"}, "early": {"kind": "base", "start": 0.25},
                       "big": {"kind": "base", "overrides": ["model.d_model=64"]},
                       "rl_big": {"kind": "rl", "seeded": True, "base": "big"},
                       "rl": {"kind": "rl", "seeded": True, "start": 0.25},
                       "par": {"kind": "parallel", "seeded": True}},
            "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2,
                                  "models": ["early", "rl", "par", "rl_big"]},
                            "keep": {"temperature": 0.0, "n": 1, "problems": 2, "models": ["base", "par"],
                                     "task": "strings"}},
            "parts": [{"evaluations": ["e"], "seeds": [0]}, {"evaluations": ["e"], "seeds": [1]},
                      {"evaluations": ["keep"]}],
            "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "passk_diff",
                        "args": {"eval": "e", "model": "rl", "against": "early", "k": 1}, "expect": "positive"}]}
    exp = spec.parse(good, "x")
    assert [exp.part_seeds(i) for i in (1, 2, 3, None)] == [(0,), (1,), (), ()]
    assert exp.models["rl"].start == 0.25 and exp.models["base"].start == 1.0 and exp.evaluations["keep"].task
    from rlvr.experiments.models import _inputs
    from rlvr.train.pretrain import milestone_path

    final = tmp_path / "final"
    (tmp_path / "milestone_0.25").mkdir()
    (tmp_path / "milestone_0.25" / "model.safetensors").write_text("w")
    assert milestone_path(final, 1.0) == final and milestone_path(final, 0.25) == tmp_path / "milestone_0.25"
    with pytest.raises(UserError, match="no pretraining milestone 0.50 .it has 0.25"):
        milestone_path(final, 0.5)
    assert _inputs(exp, exp.models["rl"], 0, {"base": {"path": str(final), "key": "kb"}}) == (
        str(tmp_path / "milestone_0.25"), "", "kb@0.25", "")  # the key names the base by its key, not its path
    assert _inputs(exp, exp.models["rl_big"], 0, {"base": {"path": "b", "key": "kb"}, "big": {"path": "g", "key": "kg"}}
                   ) == ("g", "", "kg", "")
    from rlvr.experiments.runner import needed_models

    assert needed_models(exp, ("e",)) == {"base", "early", "rl", "par", "rl_big", "big"}
    from rlvr.experiments.runner import part_cells

    def ids(parts):
        cells, evals = part_cells(exp, 2, parts)
        return [c.id for c in cells], evals

    seed0 = ["model base", "model early", "model big", "model rl_big-s0", "model rl-s0", "model par-s0"]
    assert ids((1,)) == (seed0, ("e",))
    # two parts: each model once, each part's own seeds (not every seed of every part's evaluations)
    assert ids((1, 3)) == ([*seed0, "model par-s1"], ("e", "keep"))
    assert ids((2, 1))[0][:2] == ["model base", "model early"] and "model rl-s1" in ids((2, 1))[0]
    assert sorted(ids((1, 2))[0]) == sorted(ids(None)[0]) and len(ids(None)[0]) == 9
    with pytest.raises(UserError, match="--part must be 1..3"):
        part_cells(exp, 2, (1, 4))


def test_part_lists_and_ranges_parse():
    import argparse

    from rlvr.commands.reproduce import parse_parts

    assert parse_parts("3") == (3,) and parse_parts("9,18,27") == (9, 18, 27)
    assert parse_parts("4-6") == (4, 5, 6) and parse_parts("1, 4-5,4") == (1, 4, 5)
    for bad in ("0", "x", "6-4", "4-", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_parts(bad)


def test_the_listing_marks_estimated_minutes_apart_from_measured_ones(capsys):
    from rlvr.commands.reproduce import list_experiments

    list_experiments(plain=True)
    lines = capsys.readouterr().out.splitlines()
    row = {line.split()[0]: i for i, line in enumerate(lines) if line and not line[0].isspace()}
    assert spec.load("boundary_powered").minutes_estimated and not spec.load("weights").minutes_estimated
    assert re.match(r"boundary_powered\s+~\d+\s", lines[row["boundary_powered"]])
    assert re.match(r"weights\s+\d+\s", lines[row["weights"]])
    assert re.search(r"--part 1\s+~\d+ min \(estimated[;)]", lines[row["boundary_powered"] + 1])
    assert re.search(r"--part 1\s+\d+ min, ", lines[row["weights"] + 1])


def test_an_evaluation_cell_is_reused_only_under_its_own_key(tmp_path):
    from rlvr.experiments.evaluate import evaluate_model

    out = tmp_path / "cell"
    out.mkdir()
    (out / "key").write_text("a")
    (out / "stats.json").write_text('{"n": 4}')
    assert evaluate_model("no-model", "no-base", None, None, 2, 4, 1.0, 1.0, 0, 0, out, key="a") == {"n": 4}
    with pytest.raises(AttributeError):  # another key: the old statistics go; sampling then needs a config
        evaluate_model(str(tmp_path / "no-model"), "no-base", None, _Task(), 2, 4, 1.0, 1.0, 0, 0, out, key="b")
    assert not (out / "stats.json").exists() and (out / "key").read_text() == "b"


class _Task:
    def problems(self, split, n):
        return [object()] * n


def test_a_shared_model_meets_every_seed_of_a_seeded_one():
    base = _stats([4, 0], 4)
    rls = {s: _stats([c, 4], 4) for s, c in ((0, 0), (1, 2), (2, 4))}
    look = {("e", "base", None): base, **{("e", "rl", s): v for s, v in rls.items()}}.__getitem__
    est, det = RUN["passk_diff"](lambda e, m, s: look((e, m, s)),
                                   {"eval": "e", "model": "base", "against": "rl", "k": 1}, [None], [0, 1, 2])
    # base pass@1 (1, 0); rl s0 (0, 1), s1 (.5, 1), s2 (1, 1) -> base - rl: -0.0, -0.25, -0.5 mean per seed
    assert [e.seed for e in est] == [0, 1, 2] and set(det["crossover"]) == {"s0", "s1", "s2"}
    assert [e.value for e in est] == pytest.approx([0.0, -0.25, -0.5])


def test_a_model_whose_teacher_failed_says_so():
    from rlvr.experiments.models import _inputs

    exp = spec.load("boundary")
    with pytest.raises(UserError, match="distill needs teacher, which could not be built"):
        _inputs(exp, exp.models["distill"], None, {"base": {"path": "b", "key": "kb"}})
    assert _inputs(exp, exp.models["distill"], None, {"base": {"path": "b", "key": "kb"},
                                                      "teacher": {"path": "t", "key": "kt"}}) == ("b", "t", "kb", "kt")


def _keys(exp) -> dict[str, str]:
    """Every model's key, computed as build_model names it (base, then what each is built from)."""
    from rlvr.experiments.models import _key, model_config, model_id

    keys: dict[str, str] = {}
    for name, model in exp.models.items():
        for seed in range(exp.seeds) if model.seeded else [None]:
            cfg = model_config(exp, model, seed)
            if model.kind == "base":
                keys[model_id(name, seed)] = _key(cfg, model, "" if model.start == 1.0 else
                                                  f"milestone_{model.start:.2f}", "")
                continue
            start = keys[model.base] + ("" if model.start == 1.0 else f"@{model.start:.2f}")
            teacher = ""
            if model.teacher:
                t = exp.models[model.teacher]
                teacher = keys[model_id(t.name, seed if t.seeded else None)]
            keys[model_id(name, seed)] = _key(cfg, model, start, teacher)
    return keys


def test_model_keys_survive_the_grid_leaving_the_run_config():
    """The grid fields of `rlvr excursions` left RunConfig; models' keys still hash them at their historical
    values, so published records keep matching: scalerl's committed records, and keys computed before the
    split (the excursions experiment's config set eval_problems 48)."""
    import json
    from pathlib import Path

    records = Path(__file__).resolve().parents[2] / "docs" / "reproductions" / "scalerl" / "cells" / "models"
    keys = _keys(spec.load("scalerl"))
    published = {p.stem: json.loads(p.read_text())["done"]["key"] for p in sorted(records.glob("*.json"))}
    assert len(published) >= 60 and {m: keys[m] for m in published} == published
    before = {"base": "9fc6b49c5ec76c7a", "rl_f-s0": "e9390ecd9ac080b4", "sft_q-s1": "d17dca8257043a4e"}
    keys = _keys(spec.load("excursions"))
    assert {m: keys[m] for m in before} == before
    quick = spec.load("excursions").quick_form()  # as it was when this key was recorded (no task.train_size)
    quick = dataclasses.replace(quick, last_overrides=tuple(o for o in quick.last_overrides
                                                            if o != "task.train_size=64"))
    assert _keys(quick)["par_h-s1"] == "99c83ae66c8d624f"
    assert _keys(spec.load("boundary"))["base"] == "092d0cab5a5b7456"


def test_an_unseeded_model_keeps_the_configs_seed_and_a_distill_model_may_take_the_configs_teacher():
    """What `rlvr excursions` needs of the framework: its grid runs at the config's train.seed, and
    excursions.teacher (a checkpoint) teaches distill where no teacher model is declared."""
    from rlvr.config import ConfigError
    from rlvr.experiments.models import model_config

    exp = dataclasses.replace(spec.load("boundary"), overrides=("train.seed=5",))
    assert model_config(exp, exp.models["base"], None).train.seed == 5
    assert model_config(exp, exp.models["rl"], 1).train.seed == 1  # a seeded model: its seed
    assert spec.ModelSpec(name="d", kind="distill").teacher == ""
    with pytest.raises(ConfigError, match="only a distill model or an rl model with loss.name=opd"):
        spec.ModelSpec(name="r", kind="sft", teacher="t")


def test_fields_added_since_keys_were_published_leave_keys_unchanged_at_their_value():
    """Issue 54 added four sampling fields: at the values they were added at, a model's and an
    evaluation's keys hash what they hashed before; set otherwise, the keys change."""
    import dataclasses

    from rlvr.config import config_hash, load_config, to_dict
    from rlvr.experiments.models import ADDED_AT_DEFAULT, keyed_config, keyed_section

    cfg = load_config("quickstart")
    before = {k: v for k, v in to_dict(cfg.sampling).items() if k not in ADDED_AT_DEFAULT["sampling"]}
    assert config_hash(keyed_section(cfg, "sampling")) == config_hash(before)
    assert keyed_config(cfg)["sampling"] == before
    turned = dataclasses.replace(cfg, sampling=dataclasses.replace(cfg.sampling, max_turns=2))
    assert keyed_section(turned, "sampling")["max_turns"] == 2
    assert config_hash(keyed_config(turned)) != config_hash(keyed_config(cfg))


def test_distillation_fields_leave_keys_unchanged_at_their_defaults():
    """Issue 50 added three loss fields (on-policy distillation): at their defaults a model's key hashes
    the loss section it hashed before; an opd config hashes them."""
    from rlvr.config import config_hash, load_config, to_dict
    from rlvr.experiments.models import ADDED_AT_DEFAULT, keyed_config

    cfg = load_config("quickstart")
    before = {k: v for k, v in to_dict(cfg.loss).items() if k not in ADDED_AT_DEFAULT["loss"]}
    assert set(ADDED_AT_DEFAULT["loss"]) == {"teacher", "distill_beta", "reward_coef"}
    assert keyed_config(cfg)["loss"] == before
    distilled = load_config("opd", ["loss.teacher=t", "loss.reward_coef=0.5"])
    assert keyed_config(distilled)["loss"]["teacher"] == "t"
    assert config_hash(keyed_config(distilled)) != config_hash(keyed_config(cfg))


def test_a_premise_is_judged_but_never_counted_and_statuses_are_counted_apart():
    from rlvr.experiments.claims import counts, judge

    exp = spec.parse({"name": "x", "title": "t",
                      "models": {"base": {"kind": "base"}, "rl": {"kind": "rl", "seeded": True}},
                      "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["base", "rl"]}},
                      "claims": [{"id": c, "claim": c, "paper": "p", "measure": "passk_diff", "kind": kind,
                                  "args": {"eval": "e", "model": "rl", "against": "base", "k": 1},
                                  "expect": "positive"} for c, kind in (("f", "finding"), ("p", "premise"))]},
                     "x")
    cells = {("e", "base", None): _stats([0, 0, 1, 0], 4), **{("e", "rl", s): _stats([4, 4, 4, 3], 4) for s in (0, 1)}}
    rows = [judge(cl, lambda e, m, s: cells[(e, m, s)], [0, 1], [None]) for cl in exp.claims]
    assert [r["verdict"] for r in rows] == ["reproduced", "reproduced"] and rows[1]["kind"] == "premise"
    missing = judge(exp.claims[0], lambda e, m, s: (_ for _ in ()).throw(FileNotFoundError("cell")), [0], [None])
    assert (missing["verdict"], missing["why"]) == ("not measured", "not run yet")
    tally = counts([*rows, missing, {**rows[0], "post_hoc": "declared after"}])
    assert tally["findings"]["reproduced"] == 1 and tally["findings"]["not measured"] == 1
    assert tally["premises"]["reproduced"] == 1 and tally["post hoc"]["reproduced"] == 1
    with pytest.raises(UserError, match="claims.0..kind: unknown 'control'"):
        spec.parse({"name": "x", "title": "t", "models": {"base": {"kind": "base"}}, "evaluations": {},
                    "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "passk_diff", "kind": "control",
                                "args": {}, "expect": "positive"}]}, "x")


def test_three_checkpoints_are_too_few_for_a_95_percent_cluster_interval():
    from rlvr.experiments.association_measures import distinct_resamples, too_few_clusters

    assert [distinct_resamples(g) for g in (1, 2, 3, 4, 5)] == [1, 3, 10, 35, 126]
    rule = measures.MEASURES["gain_association"].why
    three = {"eval": "e", "pairs": [["a", "x"], ["b", "y"], ["c", "z"]]}
    assert "at most 10 distinct resamples" in rule(three, [], {"units": 9})
    assert rule({"eval": "e", "pairs": [["a", "x"]] * 5}, [], {"units": 15}) == ""
    assert rule({**three, "cluster": False}, [], {"units": 9}) == ""  # 9 units: 24310 resamples
    assert too_few_clusters({"pairs": [1, 2, 3], "cluster": True}, [], {}) != ""


def test_a_run_that_starts_at_its_collapse_threshold_makes_the_order_not_identifiable():
    starts_at_threshold = measures.MEASURES["collapse_order"].why
    args = {"eval": "d", "model": "f", "against": "q"}
    fine = {"s0": {"model_step": 61.0, "model_collapsed": False, "against_step": 22.0, "against_collapsed": True}}
    assert starts_at_threshold(args, [], fine) == ""
    early = {**fine, "s1": {"model_step": 40.0, "model_collapsed": True, "against_step": 3.0,
                            "against_collapsed": True}}
    assert starts_at_threshold(args, [], early).startswith("q-s1 (step 3) collapsed within its first 3 steps")


def test_a_precision_gap_of_a_float32_model_cannot_fail_so_it_is_not_identifiable():
    from rlvr.experiments.weight_measures import fp32_moves_everything

    assert "every entry changed at fp32" in fp32_moves_everything({}, [], {"s0": {"sparsity_fp32": 0.0}})
    assert fp32_moves_everything({}, [], {"s0": {"sparsity_fp32": 0.0}, "s1": {"sparsity_fp32": 0.3}}) == ""


def test_pretraining_seeds_are_a_declared_factor_and_the_top_level_of_the_interval():
    from rlvr.experiments.claims import judge_all

    exp = spec.parse({"name": "x", "title": "t", "seeds": 2, "pretrain_seeds": 2,
                      "models": {"base": {"kind": "base", "pretrain_seeded": True},
                                 "other": {"kind": "base", "overrides": ["model.d_model=64"]},
                                 "rl": {"kind": "rl", "seeded": True},
                                 "rl_other": {"kind": "rl", "seeded": True, "base": "other"}},
                      "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2,
                                            "models": ["base", "rl", "rl_other"]}},
                      "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "passk_diff",
                                  "args": {"eval": "e", "model": "rl", "against": "base", "k": 1},
                                  "expect": "positive"}]}, "x")
    assert list(exp.models) == ["base", "other", "rl", "rl_other", "base@p1", "rl@p1"]
    assert exp.models["rl@p1"].base == "base@p1" and exp.models["rl@p1"].overrides[-1] == "pretrain.seed=1"
    assert exp.models["base@p1"].overrides == ("pretrain.seed=1",) and exp.models["rl_other"].base == "other"
    assert exp.evaluations["e"].models == ("base", "base@p1", "rl", "rl@p1", "rl_other")
    from rlvr.experiments.models import model_config

    assert model_config(exp, exp.models["rl@p1"], 1).pretrain.seed == 1
    assert model_config(exp, exp.models["rl"], 1).pretrain.seed == 0
    # RL seeds agree within each pretraining seed, the pretraining seeds differ: the 2 pretraining seeds are
    # the units of the seed-level interval (t with 1 degree of freedom), so the verdict is inconclusive
    cells = {("e", "base", None): _stats([0, 0], 4), ("e", "base@p1", None): _stats([0, 0], 4),
             **{("e", "rl", s): _stats([1, 1], 4) for s in (0, 1)},
             **{("e", "rl@p1", s): _stats([4, 4], 4) for s in (0, 1)}}
    with pytest.raises(UserError, match="models.rl.pretrain_seeded: only a base model"):
        spec.parse({"name": "x", "title": "t", "models": {"base": {"kind": "base"},
                                                           "rl": {"kind": "rl", "pretrain_seeded": True}},
                    "evaluations": {}, "claims": []}, "x")
    [row] = judge_all(exp, lambda e, m, s: cells[(e, m, s)], lambda m: [0, 1] if exp.models[m].seeded else [None])
    assert [e["label"] for e in row["estimates"]] == ["p0-s0", "p0-s1", "p1-s0", "p1-s1"]
    assert set(row["details"]) == {"p0", "p1"} and row["seed_level"]["value"] == pytest.approx((0.25 + 1.0) / 2)
    assert row["verdict"] == "inconclusive"
    # a quick form may cap the pretraining seeds: the other seeds' copies leave its models and evaluations
    quick = dataclasses.replace(exp, quick=spec.QuickSpec(pretrain_seeds=1)).quick_form()
    assert quick.pretrain_seeds == 1 and list(quick.models) == ["base", "other", "rl", "rl_other"]
    assert quick.evaluations["e"].models == ("base", "rl", "rl_other")
    assert list(exp.quick_form().models) == list(exp.models)  # 0: the experiment's
    # ... and keep only the models it names: the others, and the claims that name them, leave it
    small = dataclasses.replace(exp, quick=spec.QuickSpec(pretrain_seeds=1, models=("base", "other", "rl_other")))
    quick = small.quick_form()
    assert list(quick.models) == ["base", "other", "rl_other"] and quick.claims == ()  # c names rl
    assert quick.evaluations["e"].models == ("base", "rl_other")
    with pytest.raises(UserError, match=r"quick.models: 'rl_other' needs 'other'; keep it too"):
        spec.parse({"name": "x", "title": "t", "models": {"base": {"kind": "base"}, "other": {"kind": "base"},
                                                           "rl_other": {"kind": "rl", "base": "other"}},
                    "evaluations": {}, "claims": [], "quick": {"models": ["base", "rl_other"]}}, "x")


def test_a_block_bootstrap_widens_the_interval_of_an_autocorrelated_series():
    from rlvr.experiments.weight_measures import block_length, bootstrap_stat, resample

    assert [block_length(n) for n in (1, 8, 100, 2400)] == [1, 2, 5, 13]
    idx = resample(np.random.default_rng(0), 10, 5)
    assert idx.size == 10 and all(b - a == 1 for a, b in zip(idx[:4], idx[1:5]))
    rng = np.random.default_rng(1)
    x = np.zeros(400)
    for i in range(1, 400):  # AR(1), phi 0.9: neighbouring steps are nearly the same
        x[i] = 0.9 * x[i - 1] + rng.normal()
    plain = bootstrap_stat(lambda i: x[i].mean(), x.size)
    block = bootstrap_stat(lambda i: x[i].mean(), x.size, block=block_length(x.size))
    assert block[1] - block[0] > 1.5 * (plain[1] - plain[0])


def test_a_measure_is_registered_once_with_everything_the_page_needs():
    from rlvr.experiments.registry import Measure, register

    for name, m in measures.MEASURES.items():
        assert m.name == name and m.interval and callable(m.detail) and dataclasses.is_dataclass(m.args)
    with pytest.raises(ValueError, match="registered twice"):
        register(Measure("passk_diff", measures.passk_diff, measures.PasskArgs, str, "x"))
    curves = {n for n, m in measures.MEASURES.items() if m.section == "Curves"}
    assert curves == {"curve_prediction", "curve_param_diff", "curve_shift_balance", "early_ranking", "crossing_scan",
                      "final_diff", "form_extrapolation", "early_rank_gain"}
    # the typed arguments fill the defaults (only there): pass@max, entropy against the base
    assert measures.MEASURES["passk_diff"].typed({"eval": "e", "model": "a", "against": "b"})["k"] == "max"
    assert measures.MEASURES["entropy_stability"].typed(
        {"eval": "e", "model": "a", "against": "b", "level": "token"})["reference"] == "base"


def test_a_fresh_replication_declares_seeds_no_earlier_run_used():
    from rlvr.experiments.runner import seeds_of

    exp = spec.parse({"name": "x", "title": "t", "models": {"base": {"kind": "base"},
                                                            "rl": {"kind": "rl", "seeded": True, "first_seed": 3}},
                      "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["base", "rl"]}},
                      "claims": []}, "x")
    assert seeds_of(exp, "rl", 3) == [3, 4, 5] and seeds_of(exp, "base", 3) == [None]
    from rlvr.experiments.runner import in_parts, part_cells

    # a part's seeds are positions from first_seed (what the declaration checks), not absolute seeds:
    # seeds: [0] of a model declared first_seed: 3 is its seed 3 (it once selected nothing, silently)
    split = spec.parse({"name": "x", "title": "t", "seeds": 2, "models": {
        "base": {"kind": "base"}, "rl": {"kind": "rl", "seeded": True, "first_seed": 3},
        "old": {"kind": "rl", "seeded": True}},
        "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["rl", "old"]}},
        "parts": [{"evaluations": ["e"], "seeds": [0]}, {"evaluations": ["e"], "seeds": [1]}], "claims": []}, "x")
    assert [c.id for c in part_cells(split, 2, (1,))[0]] == ["model base", "model rl-s3", "model old-s0"]
    assert [c.id for c in part_cells(split, 2, (2,))[0]] == ["model base", "model rl-s4", "model old-s1"]
    assert in_parts(split, (2,), "e", "rl", 4) and not in_parts(split, (2,), "e", "rl", 1)
    with pytest.raises(UserError, match="models.b.first_seed: only a seeded model"):
        spec.parse({"name": "x", "title": "t", "models": {"base": {"kind": "base"}, "b": {"kind": "rl",
                                                                                          "first_seed": 3}},
                    "evaluations": {}, "claims": []}, "x")


def test_an_rl_model_with_a_teacher_is_on_policy_distillation_from_that_model():
    """loss.teacher names the declared teacher in the resolved config (so the key is the same on every
    machine) and becomes its checkpoint when the model trains; an rl model whose loss is not opd cannot
    take a teacher (the config says which loss reads it); an sft model takes none at all."""
    from rlvr.config import ConfigError
    from rlvr.experiments.models import TEACHER_REF, model_config

    models = {"base": {"kind": "base"}, "teacher": {"kind": "base", "overrides": ["pretrain.tokens=3000"]},
              "opd": {"kind": "rl", "seeded": True, "teacher": "teacher",
                      "overrides": ["loss.name=opd", "algo.zero_var_filter=false"]}}
    decl = {"name": "x", "title": "t", "models": models,
            "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["base", "opd"]}},
            "claims": [{"id": "c", "claim": "c", "paper": "p", "measure": "passk_diff",
                        "args": {"eval": "e", "model": "opd", "against": "base", "k": 1}, "expect": "positive"}]}
    exp = spec.parse(decl, "x")
    assert model_config(exp, exp.models["opd"], 0).loss.teacher == f"{TEACHER_REF}teacher"
    grpo = spec.parse({**decl, "models": {**models, "opd": {**models["opd"], "overrides": ["loss.name=grpo"]}}}, "x")
    with pytest.raises(ConfigError, match="loss.teacher: is read only by loss.name=opd"):
        model_config(grpo, grpo.models["opd"], 0)
    with pytest.raises(UserError, match="only a distill model or an rl model"):
        spec.parse({**decl, "models": {**models, "opd": {"kind": "sft", "teacher": "teacher"}}}, "x")


def test_each_pretraining_seeds_samples_are_scored_under_its_own_base():
    from rlvr.experiments.replicates import pretrain_index, reference_base
    from rlvr.experiments.runner import needed_models

    exp = spec.parse({"name": "x", "title": "t", "seeds": 2, "pretrain_seeds": 3,
                      "models": {"base": {"kind": "base", "pretrain_seeded": True},
                                 "teacher": {"kind": "base", "overrides": ["model.d_model=64"]},
                                 "rl": {"kind": "rl", "seeded": True}},
                      "evaluations": {"e": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["rl", "teacher"]}},
                      "claims": []}, "x")
    assert [pretrain_index(m) for m in ("rl", "rl@p2", "base@p1", "a@pb")] == [0, 2, 1, 0]
    assert [reference_base(exp.models, m) for m in ("rl", "rl@p1", "rl@p2", "teacher", "base@p2")] == \
        ["base", "base@p1", "base@p2", "base", "base@p2"]
    assert {"base", "base@p1", "base@p2", "teacher"} <= needed_models(exp, ("e",))


def test_a_part_may_select_pretraining_seeds_and_builds_and_evaluates_only_those():
    from rlvr.config import ConfigError
    from rlvr.experiments.runner import _eval_cells, part_cells

    decl = {"name": "x", "title": "t", "seeds": 2, "pretrain_seeds": 3,
            "models": {"base": {"kind": "base", "pretrain_seeded": True},
                       "teacher": {"kind": "base", "overrides": ["model.d_model=64"]},
                       "rl": {"kind": "rl", "seeded": True}},
            "evaluations": {"b": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["base"]},
                            "t": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["teacher"]},
                            "e": {"temperature": 1.0, "n": 4, "problems": 2, "models": ["rl"]}},
            "parts": [{"evaluations": ["b"], "pretrain_seeds": [0, 1]},
                      {"evaluations": ["b", "t"], "pretrain_seeds": [2]},  # t: no pretrain-seeded model
                      {"evaluations": ["e"], "seeds": [0], "pretrain_seeds": [0, 1]},
                      {"evaluations": ["e"], "seeds": [1], "pretrain_seeds": [0, 1]},
                      {"evaluations": ["e"], "seeds": [0, 1], "pretrain_seeds": [2]}],
            "claims": []}
    exp = spec.parse(decl, "x")
    assert [exp.part_pretrain_seeds(i) for i in (1, 2, 5, None)] == [(0, 1), (2,), (2,), ()]

    def cells(part):
        models, evals = part_cells(exp, 2, (part,))
        built = {f"{c.model}-s{c.seed}" if c.seed is not None else c.model: {} for c in models}
        return [c.id for c in models], [c.id for c in _eval_cells(exp, 2, built, evals, (part,))]

    assert cells(1) == (["model base", "model base@p1"], ["eval b base", "eval b base@p1"])
    # the teacher's samples are scored under pretraining seed 0's base: built, but not evaluated here
    assert cells(2) == (["model base", "model teacher", "model base@p2"], ["eval b base@p2", "eval t teacher"])
    assert cells(3) == (["model base", "model rl-s0", "model base@p1", "model rl@p1-s0"],
                        ["eval e rl-s0", "eval e rl@p1-s0"])
    assert cells(5) == (["model base@p2", "model rl@p2-s0", "model rl@p2-s1"],
                        ["eval e rl@p2-s0", "eval e rl@p2-s1"])
    with pytest.raises(ConfigError, match="once per seed 0..1 and pretraining seed 0..2"):
        spec.parse({**decl, "parts": decl["parts"][:-1]}, "x")  # rl at pretraining seed 2 in no part
    with pytest.raises(ConfigError, match=r"parts\[0\].pretrain_seeds: .*among 0..2"):
        spec.parse({**decl, "parts": [{"evaluations": ["b"], "pretrain_seeds": [3]}, *decl["parts"][1:]]}, "x")


def test_the_index_lists_declared_experiments_without_a_page_as_declared_not_run(tmp_path):
    import json

    from rlvr.experiments.page import write_index

    (tmp_path / "boundary").mkdir()
    (tmp_path / "boundary" / "table.json").write_text(json.dumps({"experiment": "boundary", "status": "complete",
                                                                  "claims": []}))
    text = write_index(tmp_path).read_text()
    waiting = text[text.index("## Declared, not run"):]
    assert "| boundary |" not in waiting and all(f"| {n} |" in waiting for n in spec.names() if n != "boundary")
    assert "declared, not run" in waiting and "| scalerl_bend |" in waiting


def test_the_page_and_the_index_print_the_same_digits(tmp_path):
    import json
    from pathlib import Path

    from rlvr.experiments.page import ours, write_index, write_page

    published = json.loads((Path(__file__).parents[2] / "docs/reproductions/tools/table.json").read_text())
    rows = published["claims"][:1]
    rows[0]["estimates"][0]["value"] = 0.64051  # table.json keeps 0.6405, which prints 0.640
    rows[0]["seed_level"]["value"] = 0.64051
    out = tmp_path / "tools"
    out.mkdir()
    run = {"complete": True, "timings": {}, "built": {}, "wall_s": 0.0}
    page = write_page(spec.load("tools"), out, rows, {}, {}, run, "a machine", "rlvr reproduce tools", False)
    index = write_index(tmp_path).read_text()
    kept = json.loads((out / "table.json").read_text())["claims"][0]
    assert ours(kept) in page.read_text() and ours(kept) in index and "+0.640" in ours(kept)


def test_a_seed_whose_estimate_lies_outside_its_own_interval_is_flagged_on_the_page():
    """urlvr_v2's prior_explains_collapse, s1: +0.972 outside its bootstrap interval [-0.248, +0.499]."""
    from rlvr.experiments.page import ours

    row = {"estimates": [{"label": "s0", "seed": 0, "value": 0.10, "lo": 0.05, "hi": 0.15},
                         {"label": "s1", "seed": 1, "value": 0.972, "lo": -0.248, "hi": 0.499},
                         {"label": "s2", "seed": 2, "value": 0.20, "lo": float("nan"), "hi": float("nan")}],
           "spread": {"seeds": 3, "mean": 0.424, "min": 0.10, "max": 0.972}}
    text = ours(row)
    assert "s1 +0.972 [-0.248, +0.499] (estimate outside its own interval)" in text
    assert "s0 +0.100 [+0.050, +0.150], " in text and "s2 +0.200 [no interval]" in text
    assert text.count("outside") == 1
