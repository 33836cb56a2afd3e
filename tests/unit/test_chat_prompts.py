"""Prompts as chat messages (TRL's conversational format) rendered by the tokenizer's chat template
with ``model.chat_template_kwargs``: one place, :meth:`rlvr.model.hf.HFTokenizer.render`."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from rlvr.config import ConfigError, ModelConfig, load_config  # noqa: E402
from rlvr.errors import UserError  # noqa: E402
from rlvr.model.hf import HFTokenizer, load_hf_policy  # noqa: E402
from rlvr.model.tokenizer import CharTokenizer  # noqa: E402
from rlvr.train.tiny_hf import build_tiny_hf, train_tokenizer  # noqa: E402
from rlvr.types import check_messages, prompt_key  # noqa: E402

# a Qwen3-like template: enable_thinking=false closes an empty think block after the generation prompt
THINK = ("{% for m in messages %}<bos>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
         "{% if add_generation_prompt %}assistant: "
         "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}{% endif %}")
MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Q:1+1"}]


@pytest.fixture(scope="module")
def bpe():
    return train_tokenizer([], 0, chat_template=THINK)


def test_messages_and_strings_render_through_the_template(bpe):
    tok = HFTokenizer(bpe)
    assert tok.render(MSGS) == "<bos>system: be brief\n<bos>user: Q:1+1\nassistant: "
    assert tok.render("Q:1+1") == "<bos>user: Q:1+1\nassistant: "  # a plain prompt is one user message
    off = HFTokenizer(bpe, chat_template_kwargs={"enable_thinking": False})
    assert off.render(MSGS) == "<bos>system: be brief\n<bos>user: Q:1+1\nassistant: <think></think>"
    on = HFTokenizer(bpe, chat_template_kwargs={"enable_thinking": True})
    assert on.render(MSGS) == tok.render(MSGS)
    # the ids are the rendered text's, in a left-padded batch mixing both kinds
    ids, mask = off.batch_encode_left([MSGS, "Q:2"])
    assert off.decode(ids[0][mask[0]], skip_special=False) == off.render(MSGS)
    assert off.decode(ids[1][mask[1]], skip_special=False) == "<bos>user: Q:2\nassistant: <think></think>"
    assert ids[0][mask[0]].tolist() == bpe.encode(off.render(MSGS), add_special_tokens=False)


def test_without_a_template_plain_prompts_are_raw_and_messages_are_refused(bpe):
    raw = HFTokenizer(bpe, chat=False)
    assert raw.render("Q:1") is None and raw.prompt_ids("Q:1") == [1, *raw.encode("Q:1")]
    with pytest.raises(ConfigError, match=r"^model.chat_template: the task's prompts are chat messages"):
        raw.batch_encode_left([MSGS])
    none = HFTokenizer(train_tokenizer([], 0))
    with pytest.raises(ConfigError, match=r"^model.path: .*this tokenizer has no chat template"):
        none.prompt_ids(MSGS)
    with pytest.raises(ConfigError, match=r"^model.kind: .*tiny character model has no chat template"):
        CharTokenizer().batch_encode_left(["Q:1\n", MSGS])
    assert CharTokenizer().batch_encode_left(["Q:1\n"])[0].shape == (1, 5)  # text still works


def test_malformed_messages_and_template_failures_are_one_line_errors(bpe):
    tok = HFTokenizer(bpe)
    for bad, pattern in [([{"role": "user"}], "message 0 is not a"), ([], "non-empty list"),
                         ([{"role": " ", "content": "x"}], "message 0 has an empty role")]:
        with pytest.raises(UserError, match=pattern):
            tok.render(bad)
    strict = HFTokenizer(train_tokenizer([], 0, chat_template="{{ raise_exception('roles must alternate') }}"))
    with pytest.raises(UserError, match=r"chat template failed on a prompt \(.*roles must alternate"):
        strict.render("Q:1")
    clash = HFTokenizer(bpe, chat_template_kwargs={"tokenize": True})
    with pytest.raises(UserError, match="chat template failed"):
        clash.render("Q:1")
    assert check_messages([{"role": "user", "content": "x", "extra": 1}]) == [{"role": "user", "content": "x"}]
    assert prompt_key("a") == "a" and prompt_key(MSGS) == prompt_key([dict(m) for m in MSGS])


def test_config_key_is_checked_and_saved_with_the_checkpoint(tmp_path):
    over = ["model.kind=hf", "model.path=tiny-hf:llama", "model.chat_template_kwargs={enable_thinking: false}"]
    assert load_config("quickstart", over).model.chat_template_kwargs == {"enable_thinking": False}
    with pytest.raises(ConfigError, match=r"^model.chat_template_kwargs: needs model.kind=hf"):
        load_config("quickstart", ["model.chat_template_kwargs={enable_thinking: false}"])
    with pytest.raises(ConfigError, match=r"^model.chat_template_kwargs: needs .*model.chat_template=true"):
        load_config("quickstart", [*over, "model.chat_template=false"])
    with pytest.raises(ConfigError, match=r"^model.chat_template_kwargs: keys must be names"):
        load_config("quickstart", ["model.kind=hf", "model.path=x", "model.chat_template_kwargs={1: true}"])
    torch.manual_seed(0)
    d = build_tiny_hf(tmp_path / "m", hidden=32, layers=1, heads=4, chat_template=THINK)
    cfg = ModelConfig(kind="hf", path=str(d), chat_template_kwargs={"enable_thinking": False})
    model, tok = load_hf_policy(str(d), cfg)
    assert tok.render("x").endswith("<think></think>")
    model.save_pretrained(tmp_path / "ck")
    tok.save_pretrained(tmp_path / "ck")
    assert json.loads((tmp_path / "ck" / "rlvr_hf.json").read_text())["chat_template_kwargs"] == {
        "enable_thinking": False}
    _, again = load_hf_policy(str(tmp_path / "ck"))  # no run config: the sidecar's settings
    assert again.render(MSGS) == tok.render(MSGS)
