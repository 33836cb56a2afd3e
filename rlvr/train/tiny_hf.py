"""Tiny random Hugging Face models with a locally trained byte-level tokenizer: the HF path's base
models, built with nothing downloaded (as :mod:`rlvr.train.pretrain` builds the tiny GPT's base).

``model.path: tiny-hf:llama`` (or ``tiny-hf:qwen2``) names one, built on first use into
``<cache>/hf-tiny/<arch>`` (:func:`build_if_tiny`, :func:`tiny_hf_path`) and loaded by
:mod:`rlvr.model.hf` like any HF directory. ``python -m rlvr.train.tiny_hf build-tiny OUT`` builds one
into any directory. A tokenizer with BPE merges (``vocab_size`` > 259) trains them on the
arithmetic/strings task corpus (:mod:`rlvr.tasks.corpus`), which is why this lives beside the
pretraining and not in :mod:`rlvr.model`.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch

from rlvr.errors import UserError
from rlvr.model.hf import TINY_PREFIX, tiny_hf_dir
from rlvr.paths import replace_dir, temp_dir_beside
from rlvr.tasks.corpus import build_corpus
from rlvr.tasks.registry import get_task

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>")


def train_tokenizer(texts: list[str], vocab_size: int = 0, chat_template: str | None = None):
    """A byte-level BPE ``PreTrainedTokenizerFast`` (pad/bos/eos = ids 0/1/2) with merges trained on
    ``texts`` up to ``vocab_size`` tokens; 0 = no merges (one token per byte, ``texts`` unused), so
    stop strings tokenise the same in any context."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    train = vocab_size > len(alphabet) + len(SPECIAL_TOKENS)
    vocab = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *alphabet])}
    tk = Tokenizer(models.BPE() if train else models.BPE(vocab=vocab, merges=[]))
    tk.add_special_tokens(list(SPECIAL_TOKENS))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    if train:
        tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                          special_tokens=list(SPECIAL_TOKENS),
                                                          initial_alphabet=alphabet))
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", clean_up_tokenization_spaces=False,
                                   chat_template=chat_template)


def _tiny_config(arch: str, vocab: int, hidden: int, layers: int, heads: int, context: int, tie: bool,
                 init_std: float):
    from transformers import LlamaConfig, Qwen2Config

    kinds = {"llama": LlamaConfig, "qwen2": Qwen2Config}
    if arch not in kinds:
        raise UserError(f"unknown tiny HF architecture {arch!r}; use llama or qwen2")
    return kinds[arch](vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden,
                       num_hidden_layers=layers, num_attention_heads=heads,
                       num_key_value_heads=max(1, heads // 2), max_position_embeddings=context,
                       tie_word_embeddings=tie, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                       initializer_range=init_std)


def _corpus_tasks():
    return [(get_task("arithmetic"), 1.0), (get_task("strings"), 0.5)]


def build_tiny_hf(out_dir: str | Path, arch: str = "llama", hidden: int = 64, layers: int = 2, heads: int = 4,
                  context: int = 512, vocab_size: int = 0, tie: bool = True, seed: int = 0,
                  chat_template: str | None = None, corpus_docs: int = 2000, init_std: float = 0.02) -> Path:
    """Write a random tiny ``arch`` (llama | qwen2) model + a byte-level tokenizer (``vocab_size`` > 259:
    BPE merges trained on the arithmetic/strings task corpus) into ``out_dir``, atomically; nothing
    is downloaded. Returns ``out_dir``."""
    from transformers import AutoModelForCausalLM

    texts = build_corpus(_corpus_tasks(), corpus_docs, 0.0, 0.0, seed) if vocab_size else []
    tok = train_tokenizer(texts, vocab_size, chat_template)
    vocab = -(-(len(tok) + 1) // 64) * 64  # padded, like real checkpoints (tokenizers may add a token)
    conf = _tiny_config(arch, vocab, hidden, layers, heads, context, tie, init_std)
    torch.manual_seed(seed)
    lm = AutoModelForCausalLM.from_config(conf)
    out = Path(out_dir)
    tmp = temp_dir_beside(out)
    try:
        lm.save_pretrained(tmp)
        tok.save_pretrained(str(tmp))
        replace_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def tiny_hf_path(arch: str) -> Path:
    """``<cache>/hf-tiny/<arch>`` (:func:`rlvr.model.hf.tiny_hf_dir`), built on first use (see
    :func:`build_tiny_hf`: the defaults, one token per byte)."""
    d = tiny_hf_dir(arch)
    if not (d / "config.json").exists():
        build_tiny_hf(d, arch=arch or "llama")
    return d


def build_if_tiny(*paths: str) -> None:
    """Build each ``tiny-hf:<arch>`` among ``paths`` that is not built yet (:func:`tiny_hf_path`), so
    that :mod:`rlvr.model.hf` can load it; other paths (directories, hub names, "") are left alone.
    Called wherever a model path from the user first meets the model layer: a run's precision and
    policy (:mod:`rlvr.train.state`), a distillation teacher (:mod:`rlvr.train.teacher`), ``rlvr eval``."""
    for path in paths:
        if path and path.startswith(TINY_PREFIX):
            tiny_hf_path(path[len(TINY_PREFIX):])


def main(argv: list[str] | None = None) -> int:
    """``python -m rlvr.train.tiny_hf build-tiny OUT [--arch qwen2] [--hidden 64] [--layers 2] ...``"""
    ap = argparse.ArgumentParser(prog="python -m rlvr.train.tiny_hf", description="Tiny random Hugging Face models.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build-tiny", help="build a tiny random HF model + local tokenizer (no download)")
    b.add_argument("out")
    b.add_argument("--arch", default="llama", choices=("llama", "qwen2"))
    for name, default in (("hidden", 64), ("layers", 2), ("heads", 4), ("context", 512), ("seed", 0)):
        b.add_argument(f"--{name}", type=int, default=default)
    b.add_argument("--vocab-size", type=int, default=0, help="BPE vocabulary (0 = one token per byte)")
    a = ap.parse_args(argv)
    print(build_tiny_hf(a.out, a.arch, a.hidden, a.layers, a.heads, a.context, a.vocab_size, seed=a.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
