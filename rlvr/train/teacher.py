"""The frozen teacher of on-policy distillation (``loss.name: opd``): checked from its files to share
the student's tokenizer and vocabulary before a run creates anything, loaded once beside the policy
(checked again on the loaded models), and scored in the trainer's micro-batches
(docs/methods/on_policy_distillation.md)."""

from __future__ import annotations

import torch

from rlvr.config import DISTILL_LOSS, RunConfig
from rlvr.errors import UserError
from rlvr.model.io import load_policy_as, saved_vocabulary
from rlvr.model.tokenizer import CharTokenizer
from rlvr.train.tiny_hf import build_if_tiny


def check_teacher_files(cfg: RunConfig) -> None:
    """UserError when ``cfg.loss.teacher`` cannot score the student's tokens, read from both models'
    files (tokenizers and declared output widths, no weights): run before a run folder is created,
    so a mismatched teacher leaves nothing behind. The student is ``model.init_from``, else the HF
    ``model.path``, else the tiny base pretrained with the character tokenizer (possibly not built
    yet). Nothing to check unless ``loss.name`` is opd."""
    if cfg.loss.name != DISTILL_LOSS or not cfg.loss.teacher:
        return
    build_if_tiny(cfg.loss.teacher, cfg.model.init_from, cfg.model.path if cfg.model.kind == "hf" else "")
    student = cfg.model.init_from or (cfg.model.path if cfg.model.kind == "hf" else "")
    if student:
        student_tok, student_width = saved_vocabulary(student)
    else:  # the tiny base of rlvr.train.pretrain: a TinyGPT over the default character tokenizer
        student_tok = CharTokenizer()
        student_width = student_tok.vocab_size
    teacher_tok, teacher_width = saved_vocabulary(cfg.loss.teacher)
    compare_vocabularies((student_tok, student_width), (teacher_tok, teacher_width), cfg.loss.teacher)


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
    """UserError unless the loaded teacher's tokenizer maps every token as the student's does and its
    output layer has as many logits."""
    compare_vocabularies((student_tok, output_width(student)), (teacher_tok, output_width(teacher)), where)


def compare_vocabularies(student: tuple, teacher: tuple, where: str) -> None:
    """UserError unless ``teacher`` = (tokenizer, V) maps every token as ``student``'s does and has as
    many logits; ``where`` names the teacher in the message."""
    (student_tok, student_width), (teacher_tok, teacher_width) = student, teacher
    if tokenizer_identity(student_tok) != tokenizer_identity(teacher_tok):
        raise UserError(f"loss.teacher={where}: its tokenizer differs from the student's "
                        f"({type(teacher_tok).__name__}, {teacher_tok.vocab_size} tokens vs "
                        f"{type(student_tok).__name__}, {student_tok.vocab_size}); on-policy distillation "
                        "compares next-token distributions token by token, so the teacher must share the "
                        "student's tokenizer (e.g. a larger model of the same family, or a tiny model trained "
                        "from the same tokenizer)")
    if student_width != teacher_width:
        raise UserError(f"loss.teacher={where}: its output layer has {teacher_width} logits, the student's "
                        f"{student_width}; the divergence is taken over the whole vocabulary, so they must match")


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
