"""Scoring tool episodes (docs/tools.md, token accounting): environment tokens are context for the
scoring model and enter no scored quantity (log-prob, perplexity, KL), as they enter no loss."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.eval.generate import encode_pairs, mean_kl_under, perplexity_of_rows, rows_from
from rlvr.eval.samples import validate_row
from rlvr.model.logprobs import completion_logits, token_logprobs
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.rollout.engine import sample, sample_params
from rlvr.tasks.environment import Observation, written_env_spans
from rlvr.tasks.registry import get_task
from rlvr.types import Problem, Verdict

TOK = CharTokenizer()
PROMPT = "T:2*3\n"
EPISODE = "<calc>2*3</calc><out>6</out>\nA:6"  # hand-built: the environment wrote "<out>6</out>"
SPAN = [EPISODE.index("<out>"), EPISODE.index("\nA")]


def _model(seed: int) -> TinyGPT:
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2"])
    torch.manual_seed(seed)
    return TinyGPT(cfg.model, TOK.vocab_size).eval()


def _token_logps(model) -> torch.Tensor:
    """(T,) log-probs of the episode's tokens given the prompt and the episode before them (one forward)."""
    ids_p, mask_p = TOK.batch_encode_left([PROMPT])
    ids_c = torch.tensor([TOK.encode(EPISODE)])
    ids, mask = torch.cat([ids_p, ids_c], 1), torch.cat([mask_p, torch.ones_like(ids_c, dtype=torch.bool)], 1)
    with torch.no_grad():
        return token_logprobs(completion_logits(model, ids, mask, ids_p.shape[1]), ids_c)[0][0]


def _policy_positions() -> torch.Tensor:
    env = torch.zeros(len(EPISODE), dtype=torch.bool)  # the char tokenizer: one token per character
    env[SPAN[0] : SPAN[1]] = True
    return ~env


def test_encode_pairs_keeps_environment_tokens_in_the_context_and_out_of_the_scored_mask():
    _, _, ids_c, mask_c, scored = encode_pairs(TOK, [PROMPT, PROMPT], [EPISODE, "A:6"], [[SPAN], None])
    assert ids_c[0].tolist() == TOK.encode(EPISODE)  # pieces encoded apart give the episode's ids
    assert mask_c[0].all() and mask_c[1].sum() == 3
    assert scored[0].tolist() == _policy_positions().tolist() and scored[1].tolist() == mask_c[1].tolist()


def test_perplexity_leaves_out_environment_tokens():
    model = _model(0)
    logp, policy = _token_logps(model), _policy_positions()
    expected = math.exp(-float(logp[policy].mean()))
    whole = math.exp(-float(logp.mean()))  # what scoring every token (the old behaviour) gives
    assert abs(expected - whole) > 1e-3  # the test can tell the two apart
    row = {"prompt": PROMPT, "completion": EPISODE, "env_spans": [SPAN]}
    assert perplexity_of_rows(model, TOK, [row])["mean"] == pytest.approx(expected, rel=1e-5)
    assert perplexity_of_rows(model, TOK, [{**row, "env_spans": []}])["mean"] == pytest.approx(whole, rel=1e-5)


def test_kl_leaves_out_environment_tokens():
    model, ref = _model(0), _model(1)
    ids_p, mask_p = TOK.batch_encode_left([PROMPT])
    ids_c = torch.tensor([TOK.encode(EPISODE)])
    ids, mask = torch.cat([ids_p, ids_c], 1), torch.ones(1, ids_p.shape[1] + ids_c.shape[1], dtype=torch.bool)
    mask[:, : ids_p.shape[1]] = mask_p
    with torch.no_grad():
        lp = torch.log_softmax(completion_logits(model, ids, mask, ids_p.shape[1]).float(), -1)[0]
        lq = torch.log_softmax(completion_logits(ref, ids, mask, ids_p.shape[1]).float(), -1)[0]
    kl_t = (lp.exp() * (lp - lq)).sum(-1)  # (T,)
    [kl] = mean_kl_under(model, ref, TOK, [PROMPT], [EPISODE], env_spans=[[SPAN]])
    assert kl == pytest.approx(float(kl_t[_policy_positions()].mean()), rel=1e-5)
    assert abs(kl - float(kl_t.mean())) > 1e-4


class Echo:
    """Every 'x' closes a call; the environment answers '[ok]'."""

    stop_strings = ("x",)

    def reset(self, problem):
        return ""

    def respond(self, turn):
        return Observation("[ok]")


def test_sampled_rows_record_where_the_environment_wrote():
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2",
                                     "sampling.max_new_tokens=40", "sampling.max_turns=6", "sampling.temperature=3"])
    model = _model(0)
    problems = [Problem(str(i), f"Q:{i}\n", "1") for i in range(12)]
    rb = sample(model, TOK, [p.prompt for p in problems], sample_params(cfg.sampling, TOK),
                generator=torch.Generator().manual_seed(0), environments=[Echo() for _ in problems],
                problems=problems)
    rows = rows_from(rb, [Verdict(0.0, False, "wrong")] * len(problems), problems, "echo")
    assert any(row["env_spans"] for row in rows)
    for row, e in zip(rows, rb.episodes):
        validate_row(row, "row")
        pieces = [row["completion"][start:end] for start, end in row["env_spans"]]
        assert all(piece.startswith("[ok]") or "[ok]".startswith(piece) for piece in pieces)  # the last may be cut
        assert sum(len(piece) for piece in pieces) == e.env_tokens
    with pytest.raises(UserError, match="env_spans"):
        validate_row({"problem_id": "1", "correct": True, "env_spans": [[3, 1]]}, "row")


def test_a_gold_episode_s_tool_outputs_are_found_for_scoring():
    task = get_task("calculator")
    problem = task.problems("heldout", 1)[0]
    gold = problem.solutions[0]
    [[start, end]] = written_env_spans(task, problem, gold)
    assert gold[start:end].startswith("<out>") and gold[start:end].endswith("</out>")
    assert written_env_spans(get_task("arithmetic"), get_task("arithmetic").problems("heldout", 1)[0], "A:1") == []
