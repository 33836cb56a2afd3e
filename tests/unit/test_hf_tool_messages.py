"""Tool outputs in an HF policy's episodes are written by the model's own chat template (a ``tool``
message after an assistant turn with ``tool_calls``, as transformers documents), and stay
environment tokens: loss mask 0, behaviour and recomputed log-prob 0. Offline: a byte-level
tokenizer with a Qwen-like template string and a random tiny model, built here."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from rlvr.config import ModelConfig, load_config  # noqa: E402
from rlvr.model.hf import HFTokenizer, load_hf_policy  # noqa: E402
from rlvr.model.logprobs import score  # noqa: E402
from rlvr.rollout.engine import sample, sample_params  # noqa: E402
from rlvr.tasks.environment import Observation  # noqa: E402
from rlvr.train.tiny_hf import build_tiny_hf, train_tokenizer  # noqa: E402
from rlvr.types import Problem  # noqa: E402

# Qwen 2.5's tool handling, shortened: consecutive tool messages share one user turn, each wrapped
# in <tool_response>; an assistant's tool_calls are written as Hermes <tool_call> JSON
TOOL_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'tool' -%}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' -%}<bos>user|{%- endif -%}"
    "<tool_response>{{ m.content }}</tool_response>"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}<eos>|{%- endif -%}"
    "{%- elif m.role == 'assistant' -%}"
    "<bos>assistant|{{ m.content }}"
    "{%- for c in m.tool_calls or [] -%}<tool_call>{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments | tojson }}}</tool_call>{%- endfor -%}<eos>|"
    "{%- else -%}<bos>{{ m.role }}|{{ m.content }}<eos>|{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<bos>assistant|{%- endif -%}")
CALL = '<tool_call>{"name": "calc", "arguments": {"expression": "2*3"}}</tool_call>'


def test_the_template_writes_the_tool_message_after_the_policy_s_call():
    tok = HFTokenizer(train_tokenizer([], 0, chat_template=TOOL_TEMPLATE))
    observation = tok.tool_message_ids("6", "calc", ("</tool_call>",))
    text = tok.tok.decode(observation)
    assert text == "<eos>|<bos>user|<tool_response>6</tool_response><eos>|<bos>assistant|"
    # prompt + the policy's turn + the observation = the template's own rendering of the conversation
    conversation = [{"role": "user", "content": "T:2*3"},
                    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                        "name": "calc", "arguments": {"expression": "2*3"}}}]},
                    {"role": "tool", "name": "calc", "content": "6"}]
    whole = tok.tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert tok.render("T:2*3") + CALL + text == whole
    # without the closing string the observation starts where the conversation without it stops
    assert tok.tok.decode(tok.tool_message_ids("6", "calc")) == text.removeprefix("<eos>|")


def test_no_template_or_no_tool_messages_means_the_call_format_s_text():
    assert HFTokenizer(train_tokenizer([], 0)).tool_message_ids("6", "calc") is None
    plain = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    strict = "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}{% endif %}{% endfor %}"
    assert HFTokenizer(train_tokenizer([], 0, chat_template=strict)).tool_message_ids("6", "calc") is None
    assert HFTokenizer(train_tokenizer([], 0, chat_template=plain), chat=False).tool_message_ids("6") is None


class LetterTool:
    """Every lowercase letter closes a call; the tool answers the letter in upper case."""

    stop_strings = tuple("abcdefghijklmnopqrstuvwxyz")

    def reset(self, problem):
        return ""

    def respond(self, turn):
        return Observation(f"<out>{turn[-1].upper()}</out>", content=turn[-1].upper(), tool="upper")


def test_hf_episodes_keep_template_rendered_observations_out_of_the_loss(tmp_path):
    d = build_tiny_hf(tmp_path / "m", hidden=32, layers=1, heads=4, chat_template=TOOL_TEMPLATE)
    model, tok = load_hf_policy(str(d), ModelConfig(kind="hf", path=str(d)))
    cfg = load_config("quickstart", ["model.context=256", "sampling.max_new_tokens=120", "sampling.max_turns=4",
                                     "sampling.max_turn_tokens=20", "sampling.temperature=1"])
    problems = [Problem(str(i), f"T:{i}", "1") for i in range(12)]
    rb = sample(model, tok, [p.prompt for p in problems], sample_params(cfg.sampling, tok),
                generator=torch.Generator().manual_seed(0), environments=[LetterTool() for _ in problems],
                problems=problems)
    assert rb.env_mask.any()
    assert (rb.loss_mask == rb.completion_mask & ~rb.env_mask).all()
    assert (rb.behaviour_logp[rb.env_mask] == 0).all() and (rb.entropy[rb.env_mask] == 0).all()
    recomputed = score(model, rb)
    assert (recomputed[rb.env_mask] == 0).all()
    assert torch.allclose(recomputed, rb.behaviour_logp, atol=1e-4)
    for ids, env in zip(rb.completion_ids.tolist(), rb.env_mask.tolist()):
        t = 0
        while t < len(env):  # each run of environment tokens is the template's tool message for its call
            if not env[t]:
                t += 1
                continue
            end = next((u for u in range(t, len(env)) if not env[u]), len(env))
            letter = tok.decode(ids[t - 1 : t])
            rendered = tok.tool_message_ids(letter.upper(), "upper", LetterTool.stop_strings)
            assert ids[t:end] == rendered[: end - t]  # the last one may be cut by the token budget
            t = end
