"""Intrinsic rewards and proxy diagnostics on hand-made inputs with known values."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlvr.rewards.intrinsic import (
    INTRINSIC_REWARDS,
    REWARD_INPUTS,
    combine,
    failure_signals,
    majority_vote_reward,
    neg_entropy_reward,
    proxy_diagnostics,
    repeated_ngram_share,
    self_certainty_from_logits,
    self_certainty_reward,
    sequence_probability_reward,
    token_entropy_from_logits,
    top2_margin_from_logits,
    trajectory_likelihood_reward,
)
from rlvr.types import RolloutBatch

# ------------------------------------------------------------------ per position


def test_uniform_logits_self_certainty_zero_entropy_log_v():
    logits = torch.full((2, 3, 7), 1.7)  # any constant: uniform over V = 7
    assert torch.allclose(self_certainty_from_logits(logits), torch.zeros(2, 3), atol=1e-6)
    assert torch.allclose(token_entropy_from_logits(logits), torch.full((2, 3), math.log(7)), atol=1e-6)
    assert torch.allclose(top2_margin_from_logits(logits), torch.zeros(2, 3), atol=1e-6)


def test_hand_computed_distribution():
    # z = [log 3, 0, 0, 0] -> p = [1/2, 1/6, 1/6, 1/6]
    z = torch.tensor([math.log(3.0), 0.0, 0.0, 0.0])
    kl_u_p = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.25 / (1 / 6))
    entropy = 0.5 * math.log(2) + 0.5 * math.log(6)
    assert self_certainty_from_logits(z).item() == pytest.approx(kl_u_p, abs=1e-6)
    assert token_entropy_from_logits(z).item() == pytest.approx(entropy, abs=1e-6)
    assert top2_margin_from_logits(z).item() == pytest.approx(1 / 3, abs=1e-6)


def test_one_hot_ish_logits():
    V = 10
    z = torch.zeros(V)
    z[3] = 100.0
    # logsumexp ~ 100, mean = 100 / V: the -log V constant is kept
    assert self_certainty_from_logits(z).item() == pytest.approx(100 - 100 / V - math.log(V), abs=1e-4)
    assert token_entropy_from_logits(z).item() == pytest.approx(0.0, abs=1e-6)
    assert top2_margin_from_logits(z).item() == pytest.approx(1.0, abs=1e-6)


def test_self_certainty_matches_kl_definition_and_is_shift_invariant():
    torch.manual_seed(0)
    logits = torch.randn(4, 5, 11) * 3
    logp = torch.log_softmax(logits, -1)
    V = logits.shape[-1]
    kl = (1 / V * (math.log(1 / V) - logp)).sum(-1)
    sc = self_certainty_from_logits(logits)
    assert torch.allclose(sc, kl, atol=1e-5)
    assert torch.allclose(self_certainty_from_logits(logits + 5.0), sc, atol=1e-5)
    ent = -(logp.exp() * logp).sum(-1)
    assert torch.allclose(token_entropy_from_logits(logits), ent, atol=1e-5)


def test_masked_vocab_entropy_is_finite():
    z = torch.tensor([0.0, 0.0, -math.inf])
    assert token_entropy_from_logits(z).item() == pytest.approx(math.log(2), abs=1e-6)
    assert math.isinf(self_certainty_from_logits(z).item())  # KL(U || p) with p_v = 0 is infinite


# ------------------------------------------------------------------ sequence level


MASK = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)


def _per_token(values: list[list[float]]) -> torch.Tensor:
    x = torch.tensor(values)
    return torch.where(MASK, x, torch.tensor(float("nan")))  # padding holds garbage


def test_mean_rewards_ignore_padding_and_empty_completions():
    sc = _per_token([[1.0, 3.0, 0, 0], [0.5, 0.5, 1.0, 2.0], [9, 9, 9, 9]])
    assert torch.allclose(self_certainty_reward(sc, MASK), torch.tensor([2.0, 1.0, 0.0]))
    assert torch.allclose(neg_entropy_reward(sc, MASK), torch.tensor([-2.0, -1.0, 0.0]))
    logp = _per_token([[-1.0, -3.0, 0, 0], [-0.5, -0.5, -1.0, -2.0], [0, 0, 0, 0]])
    assert torch.allclose(trajectory_likelihood_reward(logp, MASK), torch.tensor([-2.0, -1.0, 0.0]))


def test_sequence_probability_favours_short_answers():
    ln2 = math.log(2)
    logp = torch.tensor([[-ln2, -ln2, -math.inf, -math.inf], [-ln2] * 4, [-math.inf] * 4])
    out = sequence_probability_reward(logp, MASK)
    assert torch.allclose(out, torch.tensor([0.25, 0.0625, 1.0]))
    # the same per-token likelihood: normalised reward is equal, probability is not
    norm = trajectory_likelihood_reward(logp, MASK)
    assert norm[0].item() == pytest.approx(norm[1].item())


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="mask"):
        self_certainty_reward(torch.zeros(3, 5), MASK)


# ------------------------------------------------------------------ majority vote


def test_majority_vote_drops_unparsable_and_breaks_ties_by_first_appearance():
    answers = [
        ["3", "3", "5", None],  # plain majority; None gets 0
        ["5", "3", "3", "5"],  # tie 2-2: "5" appears first
        [None, "7", "2", "2"],  # None is not a vote
        [None, None, None, None],  # nothing parses
        [None, "9", "8", None],  # tie 1-1 after dropping None: "9" first
    ]
    r, maj, share = majority_vote_reward(answers)
    assert r.shape == (5, 4) and r.dtype == torch.float32
    assert r.tolist() == [[1, 1, 0, 0], [1, 0, 0, 1], [0, 0, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0]]
    assert maj == ["3", "5", "2", None, "9"]
    assert share == pytest.approx([2 / 3, 0.5, 2 / 3, 0.0, 0.5])


def test_majority_vote_threshold():
    answers = [["1", "1", "2", "3"], ["4", "4", "4", "2"]]  # shares 0.5 and 0.75
    r, maj, share = majority_vote_reward(answers, min_share=0.6)
    assert r.tolist() == [[0, 0, 0, 0], [1, 1, 1, 0]]
    assert maj == ["1", "4"]  # the label is still reported for label accuracy
    r_eq, _, _ = majority_vote_reward(answers, min_share=0.5)  # share >= threshold passes
    assert r_eq.tolist() == [[1, 1, 0, 0], [1, 1, 1, 0]]
    with pytest.raises(ValueError, match="min_share"):
        majority_vote_reward(answers, min_share=1.5)


def test_majority_vote_default_strips_and_ragged_groups():
    r, maj, _ = majority_vote_reward([[" 4", "4 ", "5"]])  # default equality: stripped strings
    assert r.tolist() == [[1, 1, 0]] and maj == [" 4"]
    with pytest.raises(ValueError, match="must be equal"):
        majority_vote_reward([["1", "2"], ["1"]])


def _math_equal(a: str, b: str) -> bool:
    from rlvr.rewards.math import math_equivalent

    return math_equivalent(a, b)


def test_majority_vote_clusters_by_math_equivalence():
    # strings: three singletons, a 1-1-1 tie won by "1/2" alone; math: {"1/2", "0.5"} has 2 of 3
    r_str, maj_str, share_str = majority_vote_reward([["1/2", "0.5", "3"]])
    assert r_str.tolist() == [[1, 0, 0]] and share_str == [pytest.approx(1 / 3)]
    r, maj, share = majority_vote_reward([["1/2", "0.5", "3"]], equal=_math_equal)
    assert r.tolist() == [[1, 1, 0]] and maj == ["1/2"] and share == [pytest.approx(2 / 3)]
    # the cluster outvotes a string that is more frequent on its own; first seen is the representative
    answers = [["7", "\\frac{1}{2}", "7", "0.5", "1/2", None]]
    r, maj, share = majority_vote_reward(answers, equal=_math_equal)
    assert r.tolist() == [[0, 1, 0, 1, 1, 0]] and maj == ["\\frac{1}{2}"] and share == [pytest.approx(3 / 5)]
    assert majority_vote_reward(answers)[1] == ["7"]  # strings: "7" x2 wins
    r, _, _ = majority_vote_reward(answers, min_share=0.7, equal=_math_equal)
    assert r.tolist() == [[0] * 6]


def test_majority_vote_equal_is_called_deterministically_and_sparingly():
    calls: list[tuple[str, str]] = []

    def equal(a: str, b: str) -> bool:
        calls.append((a, b))
        return a.lower() == b.lower()

    answers = [["a", "B", "A", "b", "a", "c", "B"]]
    r, maj, share = majority_vote_reward(answers, equal=equal)
    # clusters in first-seen order: {a, A, a} (rep "a"), {B, b, B} (rep "B"), {c}; tie 3-3 -> "a"
    assert maj == ["a"] and r.tolist() == [[1, 0, 1, 0, 1, 0, 0]] and share == [pytest.approx(3 / 7)]
    again: list[tuple[str, str]] = []
    assert majority_vote_reward(answers, equal=lambda a, b: again.append((a, b)) or a.lower() == b.lower())[1] == maj
    assert calls == again  # the same calls in the same order
    assert len(calls) <= 6  # each distinct string is compared with the representatives once, not per sample


def test_label_accuracy_under_math_equivalence():
    proxy = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    truth = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    d = proxy_diagnostics(proxy, truth, ["1/2", "3"], ["0.5", "4"])
    assert d["label_accuracy"] == pytest.approx(0.0)  # stripped strings: "1/2" != "0.5"
    d = proxy_diagnostics(proxy, truth, ["1/2", "3"], ["0.5", "4"], equal=_math_equal)
    assert d["label_accuracy"] == pytest.approx(0.5)


def test_compute_rewards_passes_the_task_equivalence_through():
    from rlvr.config import RewardConfig
    from rlvr.rewards.scoring import compute_rewards, reward_metrics
    from rlvr.tasks.base import task_equivalence
    from rlvr.tasks.gsm8k import GSM8KTask
    from rlvr.types import Problem, RolloutBatch, ScoredBatch, Verdict

    answers = ["1/2", "0.5", "3", "3", "0.5", "7", "1/2", "2/4"]
    verdicts = [Verdict(float(a != "3" and a != "7"), "wrong", a) for a in answers]
    z = torch.zeros(8, 1)
    rb = RolloutBatch(z.long(), z.bool(), z.long(), z.bool(), z.bool(), z, z, z.long(), ["eos"] * 8)
    problems = [Problem("a", "", "0.5"), Problem("b", "", "0.5")]
    cfg = RewardConfig("majority_vote")

    def score(equal=None):
        reward, truth, labels = compute_rewards(cfg, rb, verdicts, 4, equal)
        return reward, reward_metrics(ScoredBatch(rb, verdicts, reward, truth, problems, 4, labels), cfg.kind, equal)

    reward, diag = score()  # default: stripped strings
    # group 0: "3" x2 wins (label "3": wrong); group 1: four singletons, "0.5" first (label right)
    assert reward.tolist() == [0, 0, 1, 1, 1, 0, 0, 0] and diag["label_accuracy"] == pytest.approx(0.5)
    reward, diag = score(task_equivalence(GSM8KTask()))
    # group 0: {1/2, 0.5} ties {3, 3}, first seen wins; group 1: {0.5, 1/2, 2/4} has 3 of 4
    assert reward.tolist() == [1, 1, 0, 0, 1, 0, 1, 1] and diag["label_accuracy"] == pytest.approx(1.0)


# ------------------------------------------------------------------ combine and registry


def test_combine_weighted_sum_with_verifier():
    verifier = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    sc = torch.tensor([[0.2, 0.4], [0.6, 0.8]])
    extra = torch.tensor([[100.0, 100.0], [100.0, 100.0]])
    out = combine({"verifier": verifier, "self_certainty": sc, "extra": extra},
                  {"verifier": 1.0, "self_certainty": 0.5})
    assert torch.allclose(out, torch.tensor([[1.1, 0.2], [0.3, 1.4]]))
    with pytest.raises(ValueError, match="not given"):
        combine({"verifier": verifier}, {"verfier": 1.0})
    with pytest.raises(ValueError, match="shape"):
        combine({"a": verifier, "b": torch.zeros(4)}, {"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="at least one"):
        combine({"a": verifier}, {})


def test_registry_names_and_inputs():
    names = {"self_certainty", "neg_entropy", "trajectory_likelihood", "sequence_probability",
             "majority_vote", "top2_margin", "answer_cluster"}
    assert set(INTRINSIC_REWARDS) == names and set(REWARD_INPUTS) == names
    fields = {f.name for f in dataclasses.fields(RolloutBatch)}
    for name, field in REWARD_INPUTS.items():
        assert field == "answers" or field in fields, name
    logp = torch.tensor([[-1.0, -2.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    assert INTRINSIC_REWARDS["trajectory_likelihood"](logp, mask).item() == pytest.approx(-1.5)


# ------------------------------------------------------------------ diagnostics


def test_proxy_diagnostics_binary_proxy():
    proxy = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    truth = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    d = proxy_diagnostics(proxy, truth, ["3", None], ["3", "4"])
    assert d["gt_accuracy"] == pytest.approx(1 / 6)
    assert d["reward_accuracy"] == pytest.approx(4 / 6)
    assert d["proxy_truth_corr"] == pytest.approx(1 / math.sqrt(5))  # hand computation
    assert d["label_accuracy"] == pytest.approx(1.0)  # the group without a majority is excluded


def test_proxy_diagnostics_continuous_proxy_and_ties():
    proxy = torch.tensor([[0.1, 0.9, 0.3], [0.5, 0.2, 0.4], [0.7, 0.7, 0.1]])
    truth = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    d = proxy_diagnostics(proxy, truth)
    assert d["reward_accuracy"] == pytest.approx(1 / 3)  # group 0 right; group 2 tie -> first (wrong)
    assert d["label_accuracy"] is None
    # forcing binary on a continuous proxy compares values: no proxy value equals 0 or 1
    assert proxy_diagnostics(proxy, truth, binary=True)["reward_accuracy"] == pytest.approx(0.0)


def test_within_group_auroc_by_hand():
    from rlvr.rewards.intrinsic import within_group_auroc

    # group 0: correct 0.9 against wrong 0.1, 0.3 -> 2 of 2 pairs; group 1: correct 0.4 against wrong
    # 0.5 (lost), 0.2 (won) -> 1 of 2; group 2: correct 0.7 against wrong 0.7 (tie, 1/2), 0.1 (won)
    # -> 1.5 of 2: (2 + 1 + 1.5) / 6 = 0.75
    proxy = torch.tensor([[0.1, 0.9, 0.3], [0.5, 0.2, 0.4], [0.7, 0.7, 0.1]])
    truth = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    assert within_group_auroc(proxy, truth) == pytest.approx(4.5 / 6)
    assert proxy_diagnostics(proxy, truth)["proxy_truth_auroc"] == pytest.approx(0.75)
    # across groups it does not compare: a group all wrong and a group all right give no pair
    assert within_group_auroc(proxy, torch.tensor([[0.0] * 3, [1.0] * 3, [0.0] * 3])) is None
    # the proxy reversed: 1 - AUROC
    assert within_group_auroc(-proxy, truth) == pytest.approx(1 - 0.75)


def test_proxy_diagnostics_constant_side_and_labels():
    proxy = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    truth = torch.zeros(2, 2)
    d = proxy_diagnostics(proxy, truth, [None, None], ["1", "2"])
    assert d["proxy_truth_corr"] is None and d["label_accuracy"] is None
    assert d["reward_accuracy"] == pytest.approx(0.5)
    half = {"0.5", "1/2"}
    d = proxy_diagnostics(proxy, truth, ["0.5", "2"], ["1/2", "3"], equal=lambda a, b: {a, b} <= half)
    assert d["label_accuracy"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        proxy_diagnostics(proxy, torch.zeros(4))


def test_failure_signals_repetition_and_length():
    assert repeated_ngram_share("a b a b a b", n=2) == pytest.approx(1 - 2 / 5)
    assert repeated_ngram_share("the cat sat on the mat", n=2) == 0.0
    assert repeated_ngram_share("too short", n=3) == 0.0
    assert repeated_ngram_share("aaaa", n=2, unit="char") == pytest.approx(2 / 3)
    s = failure_signals(torch.tensor([4, 10]), ["a b a b a b", "one two three four"], n=2)
    assert s["mean_length"] == pytest.approx(7.0) and s["min_length"] == pytest.approx(4.0)
    assert s["repetition"] == pytest.approx(0.3) and s["repetition_max"] == pytest.approx(0.6)
    with pytest.raises(ValueError):
        failure_signals([1, 2, 3], ["x"])
    with pytest.raises(ValueError, match="unit"):
        repeated_ngram_share("x", unit="token")


def test_top2_margin_reward_and_the_sampler_records_the_margin():
    from rlvr.config import ModelConfig
    from rlvr.model.tiny import TinyGPT
    from rlvr.model.tokenizer import CharTokenizer
    from rlvr.rewards.intrinsic import top2_margin_reward
    from rlvr.rollout.sample import SampleParams, generate

    m_B_T = torch.tensor([[0.5, 0.3, 9.0], [0.2, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert torch.allclose(top2_margin_reward(m_B_T, mask), torch.tensor([0.4, 0.2]))
    tok = CharTokenizer()
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(n_layer=1, d_model=32, n_head=2, context=48), tok.vocab_size).eval()
    ids, pm = tok.batch_encode_left(["Q:1+2\n", "Q:3\n"])
    rb = generate(model, ids, pm, SampleParams(max_new_tokens=6, temperature=0.7, self_certainty=True),
                  eos_id=tok.eos_id, pad_id=tok.pad_id, generator=torch.Generator().manual_seed(0))
    # the recorded margin is the full forward's top-1 minus top-2 probability at each sampled position
    from rlvr.model.logprobs import completion_logits, sequences

    s_ids, s_mask, tp = sequences(rb)
    logits = completion_logits(model, s_ids, s_mask, tp, 0.7)
    want = top2_margin_from_logits(logits)
    m = rb.completion_mask
    assert rb.top2_margin is not None and (rb.top2_margin - want)[m].abs().max() < 1e-5
    assert (rb.top2_margin[~m] == 0).all()


def test_answer_cluster_reward_hand_values():
    from rlvr.rewards.intrinsic import answer_cluster_reward

    r = answer_cluster_reward([["4", " 4", "5", None], ["7", None, None, None]])
    assert torch.allclose(r, torch.tensor([[2 / 3, 2 / 3, 1 / 3, 0.0], [1.0, 0.0, 0.0, 0.0]]))
    # the task's equivalence decides the clusters: "0.5" and "1/2" are one answer
    same = lambda a, b: eval(a) == eval(b)  # noqa: E731, S307 - test-only numeric equivalence
    r = answer_cluster_reward([["0.5", "1/2", "2"]], equal=same)
    assert torch.allclose(r, torch.tensor([[2 / 3, 2 / 3, 1 / 3]]))
    assert answer_cluster_reward([[None, None]]).tolist() == [[0.0, 0.0]]
