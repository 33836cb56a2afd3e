"""Character-level tokenizer for the synthetic tasks.

Vocabulary: 4 specials (PAD, BOS, EOS, UNK), then newline, then printable ASCII
32..126, so every synthetic task's text round-trips exactly. Any other
character maps to UNK (and decodes to U+FFFD).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from rlvr.config import ConfigError
from rlvr.types import is_messages

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
CHARS = "\n" + "".join(chr(c) for c in range(32, 127))
NO_CHAT = ("model.kind: the task's prompts are chat messages but the tiny character model has no chat template; use "
           "model.kind=hf with a tokenizer that has one (docs/models.md), or plain-text prompts")


def left_pad(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token lists -> left-padded ids (B, Tp) long and mask (B, Tp) bool (True on real tokens)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s) :] = True
    return ids, mask


class CharTokenizer:
    """Maps text to ids one character at a time."""

    def __init__(self, chars: str = CHARS):
        self.chars = chars
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3
        self._stoi = {ch: i + len(SPECIALS) for i, ch in enumerate(chars)}
        self._itos = dict(enumerate(SPECIALS)) | {i: ch for ch, i in self._stoi.items()}

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + len(self.chars)

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self._stoi.get(ch, self.unk_id) for ch in text]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids, skip_special: bool = True) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.unk_id:
                out.append("\ufffd")
            elif i < len(SPECIALS):
                if not skip_special:
                    out.append(SPECIALS[i])
            else:
                out.append(self._itos[i])
        return "".join(out)

    def batch_encode_left(self, texts: list[str], bos: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded batch for generation: ids (B, Tp) long, mask (B, Tp) bool. Plain text only: chat
        messages raise ``ConfigError`` (the character model has no chat template)."""
        if any(is_messages(t) for t in texts):
            raise ConfigError(NO_CHAT)
        seqs = [self.encode(t, bos=bos) for t in texts]
        return left_pad(seqs, self.pad_id)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"type": "char", "chars": self.chars}))

    @classmethod
    def load(cls, path: str | Path) -> CharTokenizer:
        data = json.loads(Path(path).read_text())
        if data.get("type") != "char":
            raise ValueError(f"{path}: not a character tokenizer file")
        return cls(data["chars"])
