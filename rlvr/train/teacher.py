"""The frozen teacher of on-policy distillation (``loss.name: opd``): loaded once beside the policy,
checked to share its tokenizer and vocabulary, and scored in the trainer's micro-batches
(docs/methods/on_policy_distillation.md)."""

from __future__ import annotations

import torch

from rlvr.config import DISTILL_LOSS, RunConfig
from rlvr.errors import UserError
from rlvr.model.io import load_policy_as
from rlvr.train.tiny_hf import build_if_tiny


def load_teacher(cfg: RunConfig, student, student_tok) -> torch.nn.Module | None:
    """The frozen teacher of ``cfg.loss.teacher`` (eval mode, no gradient) on the student's device,
    computing as the run's model config says; None unless ``loss.name`` is opd. A teacher whose
    tokenizer or output vocabulary differs from the student's -> UserError (its log-probs would
    score other tokens)."""
    if cfg.loss.name != DISTILL_LOSS:
        return None
    device = str(next(student.parameters()).device)
    build_if_tiny(cfg.loss.teacher)  # a tiny-hf:<arch> teacher is built on first use, as a policy is
    teacher, teacher_tok = load_policy_as(cfg.loss.teacher, cfg.model, device)
    check_same_vocabulary(student, student_tok, teacher, teacher_tok, cfg.loss.teacher)
    return teacher.eval().requires_grad_(False)


def check_same_vocabulary(student, student_tok, teacher, teacher_tok, where: str) -> None:
    """UserError unless the teacher's tokenizer maps every token as the student's does and its
    output layer has as many logits."""
    if tokenizer_identity(student_tok) != tokenizer_identity(teacher_tok):
        raise UserError(f"loss.teacher={where}: its tokenizer differs from the student's "
                        f"({type(teacher_tok).__name__}, {teacher_tok.vocab_size} tokens vs "
                        f"{type(student_tok).__name__}, {student_tok.vocab_size}); on-policy distillation "
                        "compares next-token distributions token by token, so the teacher must share the "
                        "student's tokenizer (e.g. a larger model of the same family, or a tiny model trained "
                        "from the same tokenizer)")
    widths = output_width(student), output_width(teacher)
    if widths[0] != widths[1]:
        raise UserError(f"loss.teacher={where}: its output layer has {widths[1]} logits, the student's "
                        f"{widths[0]}; the divergence is taken over the whole vocabulary, so they must match")


def tokenizer_identity(tok) -> tuple:
    """What makes two tokenizers the same: a character tokenizer's alphabet, or an HF tokenizer's
    whole token -> id map and special ids."""
    if hasattr(tok, "chars"):
        return ("chars", tok.chars)
    inner = getattr(tok, "tok", tok)
    return ("hf", tuple(sorted(inner.get_vocab().items())), tok.eos_id, tok.pad_id, tok.bos_id)


def output_width(model) -> int:
    """V: how many logits the model's output layer gives per position."""
    return model.lm_head.weight.shape[0]
