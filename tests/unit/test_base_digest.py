"""benchmarks/checks/base_digest.py: a base pretrained twice in fresh processes on one machine has one
digest (the premise of comparing digests across machines), printed with the CPU; bad modes exit 2."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "checks" / "base_digest.py"
TINY = ["pretrain.tokens=20000", "model.n_layer=1", "model.d_model=32", "model.n_head=2"]


def _load():
    spec = importlib.util.spec_from_file_location("base_digest", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_machine_pretrains_one_digest(capsys):
    mod = _load()
    assert mod.main(["--modes", "default,default", "--overrides", *TINY]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cpu: ")
    result = json.loads(out[-1])
    digests = [r["digest"] for r in result["rows"]]
    assert len(digests) == 2 and all(re.fullmatch(r"[0-9a-f]{12}", d) for d in digests)
    assert digests[0] == digests[1]


def test_unknown_mode_exits_2():
    with pytest.raises(SystemExit) as e:
        _load().main(["--modes", "avx9"])
    assert e.value.code == 2
