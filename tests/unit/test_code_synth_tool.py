"""code_synth with an execution tool (docs/tools.md): the run tool in the sandbox, its failures as
observations, the episode's answer, the pretraining traces."""

from __future__ import annotations

import random
import sys
import time

import pytest

from rlvr.tasks.code_synth_tool import episode_answer, parse_run
from rlvr.tasks.corpus import build_corpus
from rlvr.tasks.environment import EpisodeLimits, Observation
from rlvr.tasks.registry import get_task

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

TASK = get_task("code_synth_tool")
LIMITS = EpisodeLimits(tool_timeout_s=1.5, max_observation_chars=100)


def _env():
    return TASK.environment(TASK.problems("train", 1)[0], LIMITS)


def test_a_run_answers_the_candidate_s_values_in_the_sandbox():
    assert _env().respond("#f(0)=1\n<run>2*x+1@0,3,-5</run>") == Observation("<out>1,7,-9</out>")
    assert _env().respond("def f(x):return 2*x+1") is None  # no call: the episode is over


@pytest.mark.parametrize("turn, expected", [
    ("<run>x//0@1</run>", "<out>error: RunFailed: ZeroDivisionError: integer division or modulo by zero</out>"),
    ("<run>x+@1</run>", "<out>error: RunFailed: SyntaxError: invalid syntax</out>"),
    ("<run>x@a,b</run>", "<out>error: ValueError: inputs must be integers joined by ',', got 'a,b'</out>"),
    ("<run>x@1,2,3,4,5,6</run>", "<out>error: ValueError: give 1 to 5 inputs in -99..99</out>"),
    ("<run>x+1</run>", "<out>error: ValueError: a run is EXPR@X,Y,..., e.g. 2*x+1@0,3</out>"),
    ("<run>print('9'*10**6)@1</run>", "<out>error: RunFailed: more than 4096 bytes of output</out>"),
])
def test_a_candidate_that_raises_or_floods_is_a_failed_observation(turn, expected):
    assert _env().respond(turn) == Observation(expected, failed=True)


def test_a_candidate_that_hangs_is_stopped_by_the_sandbox_before_the_tool_timeout():
    t0 = time.monotonic()
    observation = _env().respond("<run>sum(range(10**12))@1</run>")
    assert observation == Observation("<out>error: RunFailed: timed out after 1.2s</out>", failed=True)
    assert time.monotonic() - t0 < 1.5 + 1.0


def test_a_long_result_is_cut_to_the_observation_limit():
    observation = _env().respond("<run>'7'*3000@1</run>")
    assert observation.text == "<out>" + "7" * 100 + "...[2900 more chars]</out>" and not observation.failed


def test_parse_run_reads_the_last_at_sign():
    assert parse_run(" x*2 @ 0,3") == ("x*2", [0, 3])
    with pytest.raises(ValueError):
        parse_run("x@100")


def test_the_answer_is_the_policy_s_last_function_never_a_tool_output():
    assert episode_answer("<run>x@1</run><out>1</out>\ndef f(x):return x\ndef f(x):return 2*x") == "def f(x):return 2*x"
    assert episode_answer("<run>x@1</run><out>def f(x):return 9</out>\n") is None


def test_gold_and_revised_episodes_are_right_and_wrong_ones_wrong():
    rng = random.Random(0)
    for problem in TASK.problems("heldout", 3):
        direct, revised = problem.solutions[0], problem.solutions[-1]
        assert direct.startswith("<run>") and revised.count("<run>") == 2
        assert TASK.verify(direct, problem).correct and TASK.verify(revised, problem).correct
        assert not TASK.verify(TASK.wrong_solution(problem, rng), problem).correct
    assert TASK.verify("<run>x@1</run><out>1</out>\n", problem).status == "no_answer"


def test_the_corpus_gains_run_traces_some_of_them_wrong():
    docs = build_corpus([(get_task("code_synth_tool", pool_size=300), 1.0)], 200, 0.5, 0.0, seed=0, text_frac=0.0)
    traces = [d for d in docs if "<run>" in d]
    assert len(traces) > 120 and all(d.startswith("#f(0)=") for d in docs)
    ran_other = [d for d in traces if d.split("<run>")[-1].split("@")[0] != d.rsplit("return ", 1)[-1]]
    assert ran_other  # answered with another function than the last one it ran: a mistake RL has to fix
    assert any("<run>" not in d for d in docs)  # no run and a guess


def test_the_v2_config_s_context_holds_the_widest_turn_the_episode_sampler_can_ask_for():
    """A turn is sampled for the left-padded batch of live episodes: as wide as the longest (its prompt
    and up to max_new_tokens - 1 episode tokens) plus up to max_turn_tokens more; past the model's
    context the RoPE table runs out (the v2 pilot crashed so at context 160, docs/results_code_synth_tool.md)."""
    from rlvr.config import load_config
    from rlvr.model.tokenizer import CharTokenizer

    cfg = load_config("code_synth_tool_v2")
    task = get_task(cfg.task.name, **cfg.task.knobs)
    prompts = [p.prompt for split in ("train", "heldout") for p in task.problems(split)]
    longest_prompt = max(len(CharTokenizer().encode(p)) for p in prompts) + 1  # BOS
    sampling = cfg.sampling
    assert longest_prompt + sampling.max_new_tokens - 1 + sampling.max_turn_tokens <= cfg.model.context
    episodes = [p.prompt + s for p in task.problems("train") for s in p.solutions]
    assert max(map(len, episodes)) + 2 <= cfg.pretrain.seq_len + 1  # BOS + episode + EOS fits a window
