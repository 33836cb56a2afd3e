"""The weights experiment's maths against hand computations: matching, chance-corrected Jaccard,
the precision gap, matched differences, mask overlap, train shards, the KL to a reference, and one
weights evaluation cell on saved tiny models."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
import torch

from rlvr.analysis.update_records import tensor_part, tensor_record, update_rel_norm
from rlvr.errors import UserError
from rlvr.experiments import weight_measures as wm
from rlvr.experiments.measures import MEASURES

RUN = {name: m.run for name, m in MEASURES.items()}


def test_match_index_is_nearest_on_a_log_scale_and_refuses_a_model_that_did_not_move():
    assert wm.match_index(1.0, [0.25, 3.0, 0.6]) == 2  # |log 0.6| = 0.51 < |log 3| = 1.10 < |log .25|
    assert wm.match_index(2.0, [1.0, 4.0]) == 0  # a tie: the earlier one
    assert wm.match_index(1.0, [0.0, float("nan"), 10.0]) == 2  # zero and nan are never chosen
    with pytest.raises(UserError, match="did not move"):
        wm.match_index(0.0, [1.0])


def test_kappa_by_hand():
    # J = 6/10, J0 = 4/10 -> (0.6 - 0.4) / 0.6 = 1/3
    one = np.array([1.0])
    assert wm.kappa(6 * one, 10 * one, 4 * one, 10 * one) == pytest.approx(1 / 3)
    assert math.isnan(wm.kappa(0 * one, 0 * one, 0 * one, 0 * one))


def test_bootstrap_of_a_constant_statistic_has_no_width_and_of_a_ratio_brackets_it():
    assert wm.bootstrap_stat(lambda idx: 2.0, 5) == (2.0, 2.0)
    assert all(math.isnan(v) for v in wm.bootstrap_stat(lambda idx: 2.0, 1))  # one tensor: no interval
    num, den = np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4)
    lo, hi = wm.bootstrap_stat(lambda idx: num[idx].sum() / den[idx].sum(), 4)
    assert 1.0 <= lo < 2.5 < hi <= 4.0


def _rec(name, numel, bf16, fp32, **kw):
    return {"name": name, "part": name.split(".")[0], "numel": numel, "changed_bf16": bf16, "changed_fp32": fp32, **kw}


def _ck(name, kl, norm, recs, masks=None):
    out = {"name": name, "kl": kl, "update_rel_norm": norm, "records": recs}
    if masks is not None:
        out["masks"] = {k: base64.b64encode(np.packbits(v).tobytes()).decode() for k, v in masks.items()}
    return out


def test_precision_gap_by_hand():
    recs = [_rec("mlp.w1", 100, 80, 100), _rec("attention.wq", 300, 150, 300)]
    st = {"kind": "weights", "checkpoints": [_ck("final", 1e-3, 1e-3, recs)]}
    est, det = RUN["precision_gap"](lambda e, m, s: st, {"eval": "w", "model": "rl"}, [0], [None])
    assert est[0].value == pytest.approx((20 + 150) / 400)
    assert det["s0"]["sparsity_bf16"] == pytest.approx(170 / 400) and det["s0"]["sparsity_fp32"] == 0
    assert det["s0"]["by_part"]["mlp"] == {"bf16": pytest.approx(0.2), "fp32": 0.0}
    still = {"kind": "weights", "checkpoints": [_ck("final", 0, 0, [_rec("mlp.w1", 100, 0, 0)])]}
    with pytest.raises(UserError, match="did not change"):
        RUN["precision_gap"](lambda e, m, s: still, {"eval": "w", "model": "rl"}, [0], [None])


def _mat(name, numel, drift, share, random=0.01):
    return _rec(name, numel, 0, numel, k=2, spectral_drift=drift, principal_angle_mean_deg=drift * 10,
                principal_energy_share=share, random_energy_share=random)


def test_matched_weight_diff_picks_the_checkpoint_and_weights_by_parameters():
    rl = {"kind": "weights", "checkpoints": [_ck("final", 2e-3, 5e-3, [_mat("mlp.a", 100, 0.1, 0.02),
                                                                      _mat("attention.b", 300, 0.3, 0.04)])]}
    sft = {"kind": "weights", "checkpoints": [
        _ck("step_000010", 1e-3, 5e-3, [_mat("mlp.a", 100, 0.5, 0.05), _mat("attention.b", 300, 0.5, 0.05)]),
        _ck("final", 2.1e-3, 2e-2, [_mat("mlp.a", 100, 0.9, 0.09), _mat("attention.b", 300, 0.9, 0.09)])]}
    look = {"rl": rl, "sft": sft}
    args = {"eval": "w", "model": "rl", "against": "sft", "quantity": "spectral_drift", "match": "kl"}
    est, det = RUN["matched_weight_diff"](lambda e, m, s: look[m], args, [0], [0])
    assert det["s0"]["matched"] == "final"  # KL 2.1e-3 is nearest 2e-3
    assert est[0].value == pytest.approx((100 * (0.1 - 0.9) + 300 * (0.3 - 0.9)) / 400)
    by_norm = {**args, "match": "norm", "quantity": "energy_ratio"}
    est, det = RUN["matched_weight_diff"](lambda e, m, s: look[m], by_norm, [0], [0])
    assert det["s0"]["matched"] == "step_000010"  # norm 5e-3 equals
    assert est[0].value == pytest.approx((100 * (2 - 5) + 300 * (4 - 5)) / 400)
    with pytest.raises(UserError, match="args.quantity: .nope.; use one of"):
        RUN["matched_weight_diff"](lambda e, m, s: look[m], {**args, "quantity": "nope"}, [0], [0])


def test_mask_overlap_by_hand_across_runs_and_seeds():
    a = np.array([1, 1, 1, 0, 0, 0, 0, 0], bool)
    b = np.array([1, 1, 0, 1, 0, 0, 0, 0], bool)
    recs = [_rec("mlp.w", 8, 3, 8)]
    runs = {("x", 0): {"kind": "weights", "checkpoints": [_ck("final", 1, 1, recs, {"mlp.w": a})]},
            ("x", 1): {"kind": "weights", "checkpoints": [_ck("final", 1, 1, recs, {"mlp.w": b})]},
            ("y", 0): {"kind": "weights", "checkpoints": [_ck("final", 1, 1, recs, {"mlp.w": a})]}}
    get = lambda e, m, s: runs[(m, s)]  # noqa: E731
    # x-s0 vs x-s1: J = 2/4; chance: inter 3*3/8 = 1.125, union 6 - 1.125 = 4.875
    j0 = 1.125 / 4.875
    est, det = RUN["mask_overlap"](get, {"eval": "w", "model": "x", "pairing": "seeds"}, [0, 1], [None])
    assert len(est) == 1 and est[0].value == pytest.approx((0.5 - j0) / (1 - j0))
    assert det["x-s0 vs x-s1"]["jaccard"] == pytest.approx(0.5)
    est, _ = RUN["mask_overlap"](get, {"eval": "w", "model": "x", "against": "y", "pairing": "same_seed"}, [0], [0])
    assert est[0].value == pytest.approx(1.0)  # identical masks
    assert wm.unpack_mask(base64.b64encode(np.packbits(a).tobytes()).decode(), 8).tolist() == a.tolist()


def test_tensor_record_counts_both_precisions_and_norms():
    w0 = torch.ones(4, 3)
    w1 = w0.clone()
    w1[0, 0] += 1e-6  # below bf16 resolution at 1.0: changed at fp32 only
    w1[1, 1] += 0.5
    rec, mask = tensor_record("blocks.0.attn.wq.weight", w0, w1, 1)
    assert rec["changed_fp32"] == 2 and rec["changed_bf16"] == 1 and int(mask.sum()) == 1
    assert rec["part"] == "attention_q" and rec["k"] == 1
    assert update_rel_norm([rec]) == pytest.approx(math.sqrt((1e-6**2 + 0.25) / 12), rel=1e-3)
    assert tensor_part("blocks.0.mlp.w1.weight") == "mlp" and tensor_part("h.0.attn.c_attn.weight") == "attention"
    assert tensor_part("model.layers.0.self_attn.o_proj.weight") == "attention_o"


def test_train_shards_are_disjoint_cover_the_split_and_keep_the_heldout():
    from rlvr.tasks.arithmetic import ArithmeticTask

    whole, a, b = ArithmeticTask(), ArithmeticTask(train_shards=2), ArithmeticTask(train_shards=2, train_shard=1)
    pa, pb = {p.prompt for p in a.problems("train")}, {p.prompt for p in b.problems("train")}
    assert not pa & pb and pa | pb == {p.prompt for p in whole.problems("train")}
    assert [p.id for p in a.problems("heldout", 20)] == [p.id for p in whole.problems("heldout", 20)]
    assert len(a.problems("train", 5)) == 5
    with pytest.raises(UserError, match="train_shard"):
        ArithmeticTask(train_shards=2, train_shard=2)


def test_kl_of_a_model_to_itself_is_zero_and_to_another_positive():
    from rlvr.config import ModelConfig
    from rlvr.eval.generate import mean_kl_under
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer

    tok = CharTokenizer()
    torch.manual_seed(0)
    m1 = TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=64), tok.vocab_size)
    m2 = TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=64), tok.vocab_size)
    prompts, comps = ["Q:1+2\n", "Q:3*4\n"], ["1+2=3\nA:3", "12"]
    assert mean_kl_under(m1, m1, tok, prompts, comps) == pytest.approx([0.0, 0.0], abs=1e-6)
    kl = mean_kl_under(m1, m2, tok, prompts, comps)
    assert all(x > 0 for x in kl)
    # by hand for the second text: mean over its 2 positions of sum_v p (log p - log q)
    from rlvr.model.logprobs import completion_logits

    ids_p, mask_p = tok.batch_encode_left(prompts[1:])
    ids = torch.cat([ids_p, torch.tensor([tok.encode("12")])], 1)
    mask = torch.cat([mask_p, torch.ones(1, 2, dtype=torch.bool)], 1)
    with torch.no_grad():
        lp = torch.log_softmax(completion_logits(m1, ids, mask, ids_p.shape[1]), -1)[0]
        lq = torch.log_softmax(completion_logits(m2, ids, mask, ids_p.shape[1]), -1)[0]
    assert kl[1] == pytest.approx(float((lp.exp() * (lp - lq)).sum(-1).mean()), rel=1e-4)


def test_a_weights_cell_measures_every_checkpoint_and_resumes(tmp_path):
    from rlvr.config import ModelConfig, load_config
    from rlvr.experiments.spec import EvalSpec
    from rlvr.experiments.weights_eval import evaluate_weights
    from rlvr.model.io import save_policy
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer
    from rlvr.tasks.arithmetic import ArithmeticTask

    tok = CharTokenizer()
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=96), tok.vocab_size)
    save_policy(model, tok, tmp_path / "base")
    paths = []
    for i in (1, 2):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01 * torch.randn_like(p))
        save_policy(model, tok, tmp_path / f"step_00000{i}")
        paths.append(str(tmp_path / f"step_00000{i}"))
    cfg = load_config("quickstart", ["sampling.max_new_tokens=8", "sampling.interruption_budget=0"])
    ev = EvalSpec(name="w", temperature=1.0, n=2, problems=3, models=("x",), kind="weights", k=0.25)
    out = tmp_path / "cell"
    st = evaluate_weights(paths[1], paths[:1], str(tmp_path / "base"), cfg, ArithmeticTask(), ev, 0, out, "key1")
    assert [c["name"] for c in st["checkpoints"]] == ["step_000001", "final"]
    first, final = st["checkpoints"]
    assert 0 < first["update_rel_norm"] < final["update_rel_norm"]
    assert final["kl"] > 0 and len(final["kl_per_problem"]) == 3
    assert "masks" in final and "masks" in first and set(first["strata"]) == set(first["masks"])
    assert all(r["changed_fp32"] == r["numel"] for r in final["records"])
    (out / "stats.json").unlink()
    (out / "ckpt_final.json").unlink()
    before = (out / "ckpt_step_000001.json").stat().st_mtime_ns
    again = evaluate_weights(paths[1], paths[:1], str(tmp_path / "base"), cfg, ArithmeticTask(), ev, 0, out, "key1")
    assert (out / "ckpt_step_000001.json").stat().st_mtime_ns == before and again["checkpoints"][1]["kl"] == final["kl"]
    evaluate_weights(paths[1], [], str(tmp_path / "base"), cfg, ArithmeticTask(), ev, 0, out, "key2")  # new key
    assert not (out / "ckpt_step_000001.json").exists()


def _series(pred, obs, cells=None):
    n = len(pred)
    cells = cells or [[0.0, 0.0, 0.0, 0.0]] * n
    out = {"step": list(range(1, n + 1)), "dH_total": pred, "entropy_obs_change": obs,
           "entropy": [1.0 - 0.01 * i for i in range(n)]}
    for j, c in enumerate(("pos_peak", "pos_valley", "neg_peak", "neg_valley")):
        out[f"dH_{c}"] = [row[j] for row in cells]
    return {"kind": "dynamics", "series": out}


def test_entropy_prediction_lags_the_prediction_by_one_step():
    from rlvr.experiments import dynamics_measures as dm

    pred = [1.0, -2.0, 3.0, -1.0, 2.0, 0.5]
    obs = [None] + pred[:-1]  # the change observed at t is the one predicted at t-1, exactly
    est, det = RUN["entropy_prediction"](lambda e, m, s: _series(pred, obs), {"eval": "d", "model": "g"}, [0], [None])
    assert est[0].value == pytest.approx(1.0) and det["s0"]["steps"] == 5 and det["s0"]["sign_agreement"] == 1.0
    x, y = dm.lagged_pairs({"step": [1, 2, 4, 5], "dH_total": [1, 2, 3, 4], "entropy_obs_change": [0, 5, 6, 7]})
    assert x.tolist() == [1, 3] and y.tolist() == [5, 7]  # the gap 2 -> 4 breaks a pair


def test_driving_cell_by_hand():

    cells = [[-1.0, 0.1, 0.5, -2.0], [-1.0, 0.1, 0.5, -3.0]]  # sums: -2, 0.2, 1, -5
    st = _series([0.0, 0.0], [None, 0.0], cells)
    est, det = RUN["driving_cell"](lambda e, m, s: st, {"eval": "d", "model": "g", "cell": "neg_valley"}, [0], [None])
    assert est[0].value == pytest.approx(-5 - (-2)) and det["s0"]["largest_decrease"] == "neg_valley"
    with pytest.raises(UserError, match="args.cell: .x.; use one of"):
        RUN["driving_cell"](lambda e, m, s: st, {"eval": "d", "model": "g", "cell": "x"}, [0], [None])


def test_dynamics_series_merges_the_rows_of_each_step_the_last_value_winning(tmp_path):
    import json

    from rlvr.experiments.dynamics_eval import evaluate_dynamics

    rows = [{"step": 1, "dH_total": 1.0, "entropy": 0.5}, {"step": 2, "dH_total": 2.0, "entropy": 0.4},
            {"step": 2, "dH_total": 3.0, "entropy": 0.3}, {"step": 2, "heldout_pass_rate": 0.1},
            {"step": 3, "entropy": 0.2, "heldout_pass_rate": 0.2}, {"note": "no step"}]  # step 3: no gradient
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    st = evaluate_dynamics(tmp_path, tmp_path / "cell", "k")["series"]
    assert st["step"] == [1, 2, 3] and st["dH_total"] == [1.0, 3.0, None] and st["entropy"] == [0.5, 0.3, 0.2]
    assert st["heldout_pass_rate"] == [None, 0.1, 0.2] and st["entropy_obs_change"] == [None, None, None]


def test_driving_cell_for_an_increase_and_entropy_stability_by_hand():

    cells = [[-1.0, 0.1, 0.5, -2.0], [-1.0, 0.1, 0.5, -3.0]]  # sums: -2, 0.2, 1, -5
    st = _series([0.0, 0.0], [None, 0.0], cells)
    args = {"eval": "d", "model": "g", "cell": "neg_peak", "direction": "increase"}
    est, det = RUN["driving_cell"](lambda e, m, s: st, args, [0], [None])
    assert est[0].value == pytest.approx(1 - 0.2) and det["s0"]["largest_increase"] == "neg_peak"
    base = {"ids": ["a", "b"], "token_entropy": [0.3, 0.3]}
    wapo = {"ids": ["a", "b"], "token_entropy": [0.2, 0.4]}   # shifts 0.1, 0.1
    grpo = {"ids": ["a", "b"], "token_entropy": [0.8, 0.0]}   # shifts 0.5 (up), 0.3 (down)
    look = {"base": base, "w": wapo, "g": grpo}
    est, det = RUN["entropy_stability"](lambda e, m, s: look[m], {"eval": "h", "model": "w", "against": "g",
                                                                    "level": "token"}, [None], [None])
    assert est[0].value == pytest.approx(((0.1 - 0.5) + (0.1 - 0.3)) / 2) and det["shared"]["reference"] == 0.3


def test_matched_weight_diff_of_one_part_and_of_bf16_sparsity():
    def mats(b1, b2):
        return [_mat("mlp.a", 100, 0.1, 0.02) | {"changed_bf16": b1, "kind": "mlp"},
                _mat("embedding.e", 300, 0.3, 0.04) | {"changed_bf16": b2, "kind": "embedding"}]

    rl = {"kind": "weights", "checkpoints": [_ck("final", 1e-3, 1e-3, mats(90, 150))]}
    sft = {"kind": "weights", "checkpoints": [_ck("final", 1e-3, 1e-3, mats(100, 300))]}
    look = {"rl": rl, "sft": sft}
    args = {"eval": "w", "model": "rl", "against": "sft", "quantity": "sparsity_bf16", "match": "norm"}
    est, _ = RUN["matched_weight_diff"](lambda e, m, s: look[m], args, [0], [0])
    assert est[0].value == pytest.approx((100 * (0.1 - 0.0) + 300 * (0.5 - 0.0)) / 400)
    est, det = RUN["matched_weight_diff"](lambda e, m, s: look[m], {**args, "part": "embedding"}, [0], [0])
    assert est[0].value == pytest.approx(0.5) and list(det["s0"]["by_part"]) == ["embedding"]
    assert math.isnan(est[0].lo)  # a single matrix: no interval, so the verdict cannot be reproduced


def _planted(seed: int, w0s: list[torch.Tensor], p_small: float, p_large: float, like=None) -> dict:
    """A weights cell whose bf16 masks change each entry with a probability set by its |W0| stratum
    alone (p_small below |W0| 0.01, p_large above), independently across runs: no agreement beyond
    what |W0| explains. ``like``: reuse another cell's masks (a control that moves exactly alike)."""
    from rlvr.analysis.update_records import exponent_strata

    rng = np.random.default_rng(seed)
    records, masks, strata = [], {}, {}
    for i, w0 in enumerate(w0s):
        name = f"t{i}"
        if like is not None:
            mask = wm.unpack_mask(like["checkpoints"][0]["masks"][name], w0.numel())
        else:
            mask = rng.random(w0.numel()) < np.where(w0.abs().numpy() < 0.01, p_small, p_large)
        records.append({"name": name, "numel": w0.numel()})
        masks[name] = base64.b64encode(np.packbits(mask).tobytes()).decode()
        strata[name] = exponent_strata(w0, mask)
    ck = {"name": "final", "records": records, "masks": masks, "strata": strata, "update_rel_norm": 0.01, "kl": 0.05}
    return {"kind": "weights", "checkpoints": [ck]}


def test_rl_masks_that_only_share_w0_read_not_reproduced_or_inconclusive_against_the_stratified_null():
    """The done-when control: RL-RL overlap equal to the |W0|-stratified chance model. Against the
    independent-mask null the planted masks look like agreement (the claim as first declared reads
    reproduced); against the stratified null they do not."""
    from rlvr.experiments.verdict import verdict

    g = torch.Generator().manual_seed(0)
    w0s = [torch.where(torch.rand(4000, generator=g) < 0.5, torch.full((4000,), 0.001), torch.ones(4000))
           * (1 + 0.1 * torch.rand(4000, generator=g)) for _ in range(6)]
    cells = {s: _planted(s, w0s, 0.95, 0.3) for s in range(3)}
    args = {"eval": "w", "model": "rl", "pairing": "seeds"}
    plain, _ = RUN["mask_overlap"](lambda e, m, s: cells[s], args, [0, 1, 2], [None])
    assert verdict(plain, "positive") == "reproduced"  # the old chance model: can it fail? not here
    strat, det = RUN["mask_overlap"](lambda e, m, s: cells[s], {**args, "chance": "stratified"}, [0, 1, 2], [None])
    assert all(abs(e.value) < 0.02 for e in strat)
    assert verdict(strat, "positive") in ("not reproduced", "inconclusive")
    # cells from before the strata: not measured, saying why
    bare = {s: {**c, "checkpoints": [{k: v for k, v in c["checkpoints"][0].items() if k != "strata"}]}
            for s, c in cells.items()}
    with pytest.raises(UserError, match="stratified chance model needs"):
        RUN["mask_overlap"](lambda e, m, s: bare[s], {**args, "chance": "stratified"}, [0, 1, 2], [None])


def test_rl_rl_overlap_must_exceed_a_matched_sft_control():
    from rlvr.experiments.verdict import verdict

    g = torch.Generator().manual_seed(1)
    w0s = [torch.where(torch.rand(3000, generator=g) < 0.5, torch.full((3000,), 0.001), torch.ones(3000))
           for _ in range(5)]
    rl = {s: _planted(10 + s, w0s, 0.9, 0.5) for s in range(3)}
    sft = {s: _planted(20 + s, w0s, 0.9, 0.5) for s in range(3)}  # moves like RL: the control absorbs it all
    look = {**{("rl", s): c for s, c in rl.items()}, **{("sft", s): c for s, c in sft.items()}}
    args = {"eval": "w", "model": "rl", "pairing": "seeds", "control": "sft"}
    est, det = RUN["mask_overlap"](lambda e, m, s: look[(m, s)], args, [0, 1, 2], [None])
    assert verdict(est, "positive") in ("not reproduced", "inconclusive")
    assert all("control_kappa" in x and x["control"] == "final" for x in det.values())
    twin = {s: _planted(0, w0s, 0.9, 0.5, like=rl[s]) for s in range(3)}  # SFT's mask = RL's own: far below
    look.update({("sft", s): c for s, c in twin.items()})
    est, _ = RUN["mask_overlap"](lambda e, m, s: look[(m, s)], args, [0, 1, 2], [None])
    assert verdict(est, "positive") == "not reproduced"


def test_the_mirrored_cell_pair_is_one_contrast():
    d = {"kind": "dynamics", "series": {"step": [1, 2, 3], "entropy": [0.3, 0.2, 0.1],
                                        **{f"dH_{c}": v for c, v in zip(("pos_peak", "pos_valley", "neg_peak",
                                                                          "neg_valley"),
                                                                         ([-1, -1, -1], [0, 0, 0], [1, 1, 1],
                                                                          [-2, -2, -2]))}}}
    args = {"eval": "d", "model": "g", "cell": "neg_valley", "versus": "pos_peak"}
    est, _ = RUN["driving_cell"](lambda e, m, s: d, args, [0], [None])
    assert est[0].value == pytest.approx(-6 - -3)
    with pytest.raises(UserError, match="args.versus: a cell against itself"):
        RUN["driving_cell"](lambda e, m, s: d, {**args, "versus": "neg_valley"}, [0], [None])
