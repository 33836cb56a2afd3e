import pytest
import torch

from rlvr.model.tokenizer import CharTokenizer
from rlvr.tasks.registry import get_task


@pytest.mark.parametrize("name", ["arithmetic", "countdown", "strings"])
def test_round_trip_on_every_task_alphabet(name):
    tok = CharTokenizer()
    task = get_task(name)
    for p in task.problems("train", 200):
        for text in (p.prompt, *p.solutions):
            ids = tok.encode(text, bos=True, eos=True)
            assert tok.unk_id not in ids
            assert tok.decode(ids) == text


def test_specials_and_unknown():
    tok = CharTokenizer()
    ids = tok.encode("a\u00e9b", bos=True, eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id and tok.unk_id in ids
    assert tok.decode(ids) == "a\ufffdb"
    assert tok.decode(ids, skip_special=False).startswith("<bos>")


def test_save_load(tmp_path):
    tok = CharTokenizer()
    tok.save(tmp_path / "t.json")
    tok2 = CharTokenizer.load(tmp_path / "t.json")
    assert tok2.encode("Q:1+2\nA:3") == tok.encode("Q:1+2\nA:3") and tok2.vocab_size == tok.vocab_size


def test_left_padding_batch():
    tok = CharTokenizer()
    ids, mask = tok.batch_encode_left(["ab", "abcd"])
    assert ids.shape == (2, 5) and mask.tolist()[0] == [False, False, True, True, True]
    assert ids[0, 0].item() == tok.pad_id and ids[0, 2].item() == tok.bos_id
    assert torch.equal(ids[0, 2:], ids[1, :3].new_tensor(tok.encode("ab", bos=True)))
