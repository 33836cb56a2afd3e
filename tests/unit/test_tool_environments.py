"""Tool environments (docs/tools.md): call formats, tool failures and limits as observations, TRL-style
classes loaded from a file, and the episode sampler's limits."""

from __future__ import annotations

import string
import textwrap
import time

import pytest
import torch

from rlvr.algo.losses import loss_config, objective, token_weights
from rlvr.config import load_config
from rlvr.errors import UserError
from rlvr.eval.summary import summarize
from rlvr.model.logprobs import completion_logits, score, sequences, token_logprobs
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.rollout.engine import sample, sample_params
from rlvr.tasks.calculator import calculate
from rlvr.tasks.corpus import build_corpus
from rlvr.tasks.environment import EpisodeLimits, Observation, ToolEnvironment, call_tool, environments_for
from rlvr.tasks.registry import get_task
from rlvr.tasks.tool_calls import JsonCalls, TagCalls
from rlvr.train.micro_batches import LOCAL, UpdateBatch
from rlvr.train.step_metrics import rollout_metrics
from rlvr.types import EpisodeStats, Problem, RolloutBatch, ScoredBatch, Verdict


def _hang(x: str) -> str:
    time.sleep(30)
    return x


def _huge(x: str) -> str:
    return "9" * 1_000_000


def _raises(x: str) -> str:
    return str(1 / 0)


LIMITS = EpisodeLimits(tool_timeout_s=0.2, max_observation_chars=100)
ENV = ToolEnvironment({"calc": calculate, "hang": _hang, "huge": _huge, "boom": _raises},
                      TagCalls(("calc", "hang", "huge", "boom")), LIMITS)


def test_a_tool_call_is_answered_in_the_call_format():
    assert ENV.respond("<calc>37*48+91</calc>") == Observation("<out>1867</out>")
    assert ENV.respond("A:12") is None  # no call: the episode is over


@pytest.mark.parametrize("turn, expected", [
    ("<boom>x</boom>", "<out>error: ZeroDivisionError: division by zero</out>"),
    ("<calc>2/3</calc>", "<out>error: ValueError: not an expression of integers and + - *: '2/3'</out>"),
    ("oops</calc>", "<out>error: </calc> without <calc></out>"),
])
def test_a_failing_tool_is_a_failed_observation_not_a_crash(turn, expected):
    assert ENV.respond(turn) == Observation(expected, failed=True)


def test_a_tool_that_hangs_is_cut_at_the_timeout():
    t0 = time.time()
    observation = ENV.respond("<hang>x</hang>")
    assert time.time() - t0 < 2.0
    assert observation == Observation("<out>error: timed out after 0.2s</out>", failed=True)


def test_a_1mb_output_is_truncated():
    observation = ENV.respond("<huge>x</huge>")
    assert observation.text == "<out>" + "9" * 100 + "...[999900 more chars]</out>"
    assert not observation.failed


def test_json_calls_unknown_tools_and_bad_json():
    env = ToolEnvironment({"calc": calculate}, JsonCalls(), LIMITS)
    ok = env.respond('<tool_call>{"name": "calc", "arguments": {"expression": "2*3"}}</tool_call>')
    assert ok == Observation("<tool_response>6</tool_response>")
    unknown = env.respond('<tool_call>{"name": "web", "arguments": {}}</tool_call>')
    assert unknown.failed and "unknown tool 'web'" in unknown.text
    bad = env.respond("<tool_call>{name: calc}</tool_call>")
    assert bad.failed and "not JSON" in bad.text
    missing = env.respond('<tool_call>{"name": "calc", "arguments": {"expr": "1"}}</tool_call>')
    assert missing.failed and "TypeError" in missing.text  # a wrong keyword is the tool's failure


def test_call_tool_returns_none_as_empty_text():
    assert call_tool(lambda: None, {}, 1.0, 10) == ("", False)


TRL_ENV = '''
class CounterEnv:
    """TRL's environment_factory convention: no-argument constructor, reset(**kwargs), tool methods."""

    def __init__(self):
        self.counter = 0
        self.seen = None

    def reset(self, answer, **kwargs):
        self.counter = 0
        self.seen = answer
        return " (start at 0)"

    def increment(self, a: int) -> int:
        """Increment the counter.

        Args:
            a: The value to add.
        """
        self.counter += a
        return self.counter

    def _private(self):
        return "not a tool"
'''


@pytest.fixture
def env_file(tmp_path):
    path = tmp_path / "counter_env.py"
    path.write_text(textwrap.dedent(TRL_ENV))
    return path


def test_a_trl_style_class_loads_unchanged_from_a_file(env_file):
    task = get_task(f"{env_file}:CounterEnv", source="calculator")
    problem = task.problems("train", 1)[0]
    env = task.environment(problem, LIMITS)
    assert env.reset(problem) == " (start at 0)"
    assert sorted(env.tools) == ["increment"]  # public methods other than reset
    call = '<tool_call>{"name": "increment", "arguments": {"a": 2}}</tool_call>'
    assert env.respond(call).text == "<tool_response>2</tool_response>"
    assert env.respond(call).text == "<tool_response>4</tool_response>"  # state kept within an episode
    assert task.environment(problem, LIMITS).respond(call).text == "<tool_response>2</tool_response>"  # fresh
    assert task.verify(f"A:{problem.answer}", problem).correct  # the source task's verifier


def test_a_trl_style_class_with_tag_calls(env_file):
    task = get_task(f"{env_file}:CounterEnv", source="calculator", calls="tag")
    env = task.environment(task.problems("train", 1)[0], LIMITS)
    assert env.respond("<increment>3</increment>").failed  # tag calls pass one string; 0 + "3" raises TypeError
    assert env.stop_strings == ("</increment>",)


class Echo:
    """A scripted environment: every lowercase letter closes a 'call'; the answer is <letter>."""

    stop_strings = tuple(string.ascii_lowercase)

    def reset(self, problem):
        return ""

    def respond(self, turn):
        return Observation("<" + turn[-1] + ">", failed=turn[-1] == "e")


def _episodes(overrides, n=8):
    tok = CharTokenizer()
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", *overrides])
    torch.manual_seed(0)
    model = TinyGPT(cfg.model, tok.vocab_size)
    params = sample_params(cfg.sampling, tok)
    rows = [Problem(str(i), f"Q:{i}\n", "1") for i in range(n)]
    rb = sample(model, tok, [p.prompt for p in rows], params, generator=torch.Generator().manual_seed(0),
                environments=[Echo() for _ in rows], problems=rows)
    return model, params, rb


def test_episodes_hold_policy_and_environment_tokens_with_the_right_masks_and_logps():
    model, params, rb = _episodes(["sampling.max_new_tokens=30", "sampling.max_turns=5"])
    assert rb.env_mask.any() and (rb.loss_mask == rb.completion_mask & ~rb.env_mask).all()
    assert (rb.behaviour_logp[rb.env_mask] == 0).all() and (rb.entropy[rb.env_mask] == 0).all()
    # the turns re-prefilled one by one give the log-probs the trainer's one forward gives
    assert torch.allclose(score(model, rb), rb.behaviour_logp, atol=1e-5)
    assert (score(model, rb)[rb.env_mask] == 0).all()
    for e, env_row, ids in zip(rb.episodes, rb.env_mask.tolist(), rb.completion_ids.tolist()):
        starts = [t for t, env in enumerate(env_row) if env and (t == 0 or not env_row[t - 1])]  # observations
        assert e.env_tokens == sum(env_row) and e.tool_calls == len(starts) and e.turns <= 5
        assert e.failed_calls == sum(ids[t - 1] == CharTokenizer().encode("e")[0] for t in starts)  # Echo: e fails


@pytest.mark.parametrize("overrides, check", [
    (["sampling.max_new_tokens=30", "sampling.max_turns=2"], lambda e, width: e.turns <= 2),
    (["sampling.max_new_tokens=12", "sampling.max_turns=8"], lambda e, width: width <= 12),
])
def test_turn_and_token_limits(overrides, check):
    _, _, rb = _episodes(overrides)
    assert all(check(e, rb.completion_ids.shape[1]) for e in rb.episodes)


def test_turn_token_limit_ends_a_long_turn():
    _, params, rb = _episodes(["sampling.max_new_tokens=40", "sampling.max_turn_tokens=3", "sampling.max_turns=20"])
    for row_env, row_mask in zip(rb.env_mask, rb.completion_mask):
        runs, n = [], 0
        for env, real in zip(row_env.tolist(), row_mask.tolist()):
            if real and not env:
                n += 1
            elif n:
                runs.append(n)
                n = 0
        runs.append(n)
        assert max(runs) <= 3


@pytest.mark.parametrize("seed", range(3))
def test_episodes_near_the_context_never_pass_it(seed):
    # Rows advance in lockstep and one turn's width is the largest budget left, so a long row used to
    # run past model.context (an IndexError in the rotary table): each row now stops at its own budget.
    tok = CharTokenizer()
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.context=64",
                                     "sampling.max_new_tokens=30", "sampling.max_turns=10",
                                     "sampling.max_turn_tokens=20"])
    torch.manual_seed(seed)
    model = TinyGPT(cfg.model, tok.vocab_size)
    rows = [Problem(str(i), f"Q:{i:02d}{'1' * 24}\n", "1") for i in range(8)]  # 30 tokens: + 30 new fit in 64
    rb = sample(model, tok, [p.prompt for p in rows], sample_params(cfg.sampling, tok),
                generator=torch.Generator().manual_seed(seed), environments=[Echo() for _ in rows], problems=rows)
    assert rb.completion_mask.sum(-1).max() <= 30 and rb.env_mask.any()
    # a prompt that cannot hold its new tokens is refused before sampling, in words
    with pytest.raises(UserError, match="passes model.context=64"):
        sample(model, tok, ["Q:" + "1" * 40 + "\n"], sample_params(cfg.sampling, tok))


def test_single_turn_tasks_get_no_environments():
    assert environments_for(get_task("arithmetic"), [], EpisodeLimits()) is None
    assert len(environments_for(get_task("calculator"), get_task("calculator").problems("train", 2),
                                EpisodeLimits())) == 2


def _hand_built_episode(tok: CharTokenizer):
    """Two groups of two episodes: policy text, an observation (environment tokens), policy text."""
    pieces = [("<calc>2*3</calc>", "<out>6</out>", "\nA:6"), ("<calc>2*4</calc>", "<out>8</out>", "\nA:9"),
              ("A:5", "", ""), ("<calc>9</calc>", "<out>9</out>", "\nA:9")]
    rows = [(tok.encode(a), tok.encode(o), tok.encode(b)) for a, o, b in pieces]
    width = max(len(a) + len(o) + len(b) for a, o, b in rows)
    B = len(rows)
    ids = torch.zeros(B, width, dtype=torch.long)
    mask, env = torch.zeros(B, width, dtype=torch.bool), torch.zeros(B, width, dtype=torch.bool)
    for i, (a, o, b) in enumerate(rows):
        seq = a + o + b
        ids[i, : len(seq)], mask[i, : len(seq)] = torch.tensor(seq), True
        env[i, len(a) : len(a) + len(o)] = True
    prompt_ids, prompt_mask = tok.batch_encode_left(["T:2*3\n"] * B)
    return RolloutBatch(prompt_ids, prompt_mask, ids, mask, mask & ~env, torch.full((B, width), -1.0) * ~env,
                        torch.ones(B, width) * ~env, torch.zeros(B, width, dtype=torch.long), ["eos"] * B,
                        env_mask=env)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "prompt_mean", "constant"])
def test_environment_tokens_get_exactly_zero_gradient_and_leave_every_normaliser(aggregation):
    """Policy term, entropy bonus and KL anchor: d loss / d logits is exactly 0 at every environment
    position, and the weights sum over the policy's tokens only."""

    tok = CharTokenizer()
    rb = _hand_built_episode(tok)
    cfg = load_config("quickstart", ["model.n_layer=1", "model.d_model=32", "model.n_head=2"])
    torch.manual_seed(0)
    model, ref = TinyGPT(cfg.model, tok.vocab_size), TinyGPT(cfg.model, tok.vocab_size)
    update = UpdateBatch(rollouts=rb, group_size=2, adv_B=torch.tensor([1.0, -1.0, -1.0, 1.0]), mask=rb.loss_mask,
                         old_logp=rb.behaviour_logp, is_weight=None, aggregation=aggregation, max_len=64,
                         with_kl=True, micro_size=4)
    (micro,) = update.micro_batches(torch.arange(4), LOCAL)
    assert (micro.weights[rb.env_mask] == 0).all() and (micro.kl_weights[rb.env_mask] == 0).all()
    if aggregation == "token_mean":  # the normaliser counts policy tokens: 1 / (number of policy tokens)
        assert micro.weights[rb.loss_mask].unique().tolist() == pytest.approx([1 / int(rb.loss_mask.sum())])
    ids, key_mask, tp = sequences(rb, micro.rows)
    logits = completion_logits(model, ids, key_mask, tp)
    logits.retain_grad()
    logp, entropy = token_logprobs(logits, micro.tokens)
    lc = loss_config("grpo", aggregation=aggregation, entropy_coef=0.1, kl_coef=0.1)
    loss, _ = objective(micro.loss_inputs(logp), lc, entropy, score(ref, rb), micro.kl_weights)
    loss.backward()
    grad = logits.grad.abs().sum(-1)  # (B, T)
    assert logits.grad[rb.env_mask].abs().max() == 0
    assert (grad[rb.env_mask] == 0).all()
    assert (grad[rb.loss_mask] > 0).all()
    assert torch.equal(token_weights(rb.loss_mask, 2, aggregation, max_len=64), micro.weights)


def test_rollout_metrics_count_the_policy_tokens_and_report_tool_calls():
    rb = _hand_built_episode(CharTokenizer())
    rb.episodes = [EpisodeStats(2, 1, 0, 12), EpisodeStats(2, 1, 1, 12), EpisodeStats(1, 0, 0, 0),
                   EpisodeStats(2, 1, 0, 12)]
    verdicts = [Verdict(1.0, "right", "6"), Verdict(0.0, "wrong", "9"), Verdict(0.0, "wrong", "5"),
                Verdict(1.0, "right", "9")]
    batch = ScoredBatch(rb, verdicts, torch.tensor([1.0, 0, 0, 1]), torch.tensor([1.0, 0, 0, 1]),
                        [Problem("a", "q", "6"), Problem("b", "q", "9")], 2)
    metrics = rollout_metrics(batch)
    assert metrics["entropy"] == 1.0  # 1 on every policy token; the environment's zeros are not averaged in
    assert metrics["response_len"] == rb.loss_mask.sum().item() / 4
    assert metrics["tool_calls"] == 0.75 and metrics["failed_call_share"] == pytest.approx(1 / 3)
    assert metrics["pass_rate_with_call"] == pytest.approx(2 / 3) and metrics["pass_rate_without_call"] == 0.0


def test_eval_summary_reports_tool_call_statistics():
    rows = [{"problem_id": "a", "correct": True, "tool_calls": 1, "failed_calls": 0, "env_tokens": 10, "turns": 2},
            {"problem_id": "a", "correct": False, "tool_calls": 2, "failed_calls": 1, "env_tokens": 20, "turns": 3},
            {"problem_id": "b", "correct": False, "tool_calls": 0, "failed_calls": 0, "env_tokens": 0, "turns": 1},
            {"problem_id": "b", "correct": True, "tool_calls": 0, "failed_calls": 0, "env_tokens": 0, "turns": 1}]
    stats = summarize(rows)["tool_calls"]
    assert stats == {"turns_per_episode": 1.75, "calls_per_episode": 0.75, "failed_call_share": pytest.approx(1 / 3),
                     "episodes_with_call": 0.5,
                     "accuracy_with_call": 0.5, "accuracy_without_call": 0.5, "env_tokens_per_episode": 7.5}
    assert "tool_calls" not in summarize([{"problem_id": "a", "correct": True}])


def test_the_corpus_gains_calculator_episodes_some_wrong():
    task = get_task("calculator")
    docs = build_corpus([(task, 1.0)], 400, wrong_frac=0.5, truncated_frac=0.0, seed=0, text_frac=0.0)
    by_prompt = {p.prompt: p for p in task.problems("train")}
    calls = right = 0
    for doc in docs:
        prompt, completion = doc[: doc.index("\n") + 1], doc[doc.index("\n") + 1 :]
        calls += completion.startswith("<calc>")
        right += task.verify(completion, by_prompt[prompt]).correct
        if completion.startswith("<calc>"):  # the tool output in a trace is the calculator's, even after a typo
            expression = completion[6 : completion.index("</calc>")]
            assert f"<out>{calculate(expression)}</out>" in completion
    assert 0.8 < calls / 400 < 1.0 and 0.4 < right / 400 < 0.6


def test_observations_carry_the_tool_output_for_a_chat_template():
    observation = ENV.respond("<calc>37*48+91</calc>")
    assert (observation.content, observation.tool) == ("1867", "calc")
    assert ENV.respond("oops</calc>").content == "error: </calc> without <calc>"
