"""A user's own task given by file path whose prompts are chat messages, trained and evaluated on a tiny
HF model whose tokenizer has a chat template, with ``model.chat_template_kwargs``."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("transformers")

from rlvr.cli import main  # noqa: E402

TASK = '''
from rlvr.types import Problem, Verdict

class ChatSum:
    name = "chat_sum"

    def __init__(self, system="Answer with a number."):
        self.system = system

    def problems(self, split, n=None):
        pairs = [(a, b) for a in range(6) for b in range(6)]
        pairs = pairs[:30] if split == "train" else pairs[30:]
        out = [Problem(id=f"{a}+{b}", answer=str(a + b),
                       prompt=[{"role": "system", "content": self.system},
                               {"role": "user", "content": f"{a}+{b}="}])
               for a, b in pairs]
        return out[:n] if n is not None else out

    def verify(self, completion, problem):
        got = completion.strip().split()[0] if completion.strip() else None
        ok = got == problem.answer
        return Verdict(float(ok), "right" if ok else ("no_answer" if got is None else "wrong"), got)
'''
THINK = ("{% for m in messages %}<bos>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
         "{% if add_generation_prompt %}assistant: "
         "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}{% endif %}")


@pytest.mark.slow
def test_train_and_eval_a_chat_task_from_a_file(tmp_path, monkeypatch, one_thread):
    from rlvr.train.tiny_hf import build_tiny_hf

    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat_task.py").write_text(TASK)
    model = build_tiny_hf(tmp_path / "model", hidden=32, layers=1, heads=4, chat_template=THINK)
    run = tmp_path / "run"
    assert main(["train", "gsm8k_tiny_hf", "task.name=chat_task.py:ChatSum", f"model.path={model}",
                 "model.chat_template=true", "model.chat_template_kwargs={enable_thinking: false}",
                 "reward.kind=self_certainty", "algo.prompts_per_step=2", "sampling.max_new_tokens=6",
                 "train.steps=1", "train.eval_every=0", "train.eval_problems=4", "train.checkpoint_every=1",
                 "log.progress=none", "--run-dir", str(run)]) == 0
    m = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in m] == [1] and math.isfinite(m[0]["loss"])
    ck = run / "checkpoints" / "step_000001"
    assert json.loads((ck / "rlvr_hf.json").read_text())["chat_template_kwargs"] == {"enable_thinking": False}

    out = tmp_path / "eval"
    assert main(["eval", str(ck), "--task", "chat_task.py:ChatSum", "--n", "2", "--problems", "3",
                 "--out", str(out)]) == 0
    rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["prompt"][1] == {"role": "user", "content": "5+0="}  # heldout
    assert main(["eval", "--samples", str(out / "samples.jsonl"), "--task", "chat_task.py:ChatSum",
                 "--out", str(tmp_path / "again")]) == 0
