"""On-policy distillation learns: a student sampling its own completions and scored token by token by
a frozen teacher moves towards it. The teacher is the student's own tiny base after a few SFT steps on
gold solutions (so it is stronger and differs from the student quickly); the student starts at the
base. A broken sign, a divergence taken the wrong way round, a teacher scored on other positions or a
mask that drops the completion makes this test fail."""

import copy

import torch

from rlvr.config import load_config
from rlvr.log import read_metrics
from rlvr.model.io import load_policy, save_policy
from rlvr.model.logprobs import completion_logits
from rlvr.train.loop import train
from rlvr.train.sft import encode_pairs, sft_pairs, sft_train
from rlvr.train.state import build_policy, get_task

SETTINGS = ["optim.warmup_steps=0", "algo.prompts_per_step=8", "algo.group_size=4", "train.eval_every=0",
            "train.eval_problems=8", "sampling.max_new_tokens=16", "sampling.interruption_budget=0",
            "train.seed=3"]


def agreement(student, teacher, tok, pairs) -> float:
    """Share of the gold completions' positions where the student's most likely next token is the
    teacher's (both teacher-forced on the same sequences)."""
    ids, key_mask, targets, target_mask, tp = encode_pairs(tok, pairs)
    with torch.no_grad():
        same = completion_logits(student, ids, key_mask, tp).argmax(-1) == \
            completion_logits(teacher, ids, key_mask, tp).argmax(-1)
    return float(same[target_mask].float().mean())


def test_student_moves_towards_the_teacher(tiny_overrides, tmp_path):
    base_cfg = load_config("quickstart", [*tiny_overrides, *SETTINGS])
    student, tok = build_policy(base_cfg, progress="none")
    task = get_task(base_cfg)
    teacher = copy.deepcopy(student)
    sft_train(teacher, tok, sft_pairs(task.problems("train", 256), "sft"), steps=40, batch_size=16, lr=3e-3, seed=0)
    save_policy(teacher.eval(), tok, tmp_path / "teacher")
    heldout = sft_pairs(task.problems("heldout", 32), "sft")
    before = agreement(student, teacher, tok, heldout)

    cfg = load_config("opd", [*tiny_overrides, *SETTINGS, f"loss.teacher={tmp_path / 'teacher'}", "optim.lr=2e-3",
                              "train.steps=12"])
    run = train(cfg, run_dir=tmp_path / "r", progress="none")
    rows = read_metrics(run)
    first = sum(r["distill_kl"] for r in rows[:3]) / 3
    last = sum(r["distill_kl"] for r in rows[-3:]) / 3
    assert last < 0.6 * first, (first, last)  # the reverse KL to the teacher, on the student's own samples
    trained, _ = load_policy(run / "checkpoints" / "step_000012")
    after = agreement(trained.eval(), teacher, tok, heldout)
    assert after > before + 0.05, (before, after)
