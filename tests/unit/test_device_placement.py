"""Device placement of the RL step, checked without a GPU (issue 29, item 6).

Why a static check and not a run: on a CPU-only machine every tensor lives on the CPU, so a real
``rl_step`` cannot mix devices whatever the code does, and a mismatch test would pass vacuously.
The "meta" device does not help either: sampling is data dependent (the next token, the finished
rows, the rewards), so a step cannot run with the policy on meta. What can be checked on the CPU
is where tensors are *made*: in the step, the reward phase, the loss maths and the log-probs,
every ``torch`` tensor constructor either places its tensor (``device=``, usually the device of an
input tensor) or says on its line, with a ``# cpu:`` comment, why the CPU is intended (the
verifier's rewards, CPU-generator permutations and row indices; the step moves what the loss needs
onto the policy's device). ``*_like`` constructors follow their input and need nothing. A new
constructor without either fails here; hard-coded device strings fail too. Behaviour on a real GPU
is measured by ``benchmarks/checks/gpu_check.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted([ROOT / "rlvr/train/step.py", ROOT / "rlvr/rewards/scoring.py", ROOT / "rlvr/model/logprobs.py",
                *(ROOT / "rlvr/algo").glob("*.py")])
CONSTRUCTORS = {"tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "rand",
                "randn", "randint", "randperm"}


def unplaced(source: str) -> list[tuple[int, str]]:
    """(line, code) of every ``torch.<constructor>(...)`` without ``device=`` and without a
    ``# cpu:`` comment on one of its lines."""
    lines = source.splitlines()
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in CONSTRUCTORS and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "torch"):
            continue
        if any(k.arg == "device" for k in node.keywords):
            continue
        span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
        if not any("# cpu:" in line for line in span):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_the_checker_flags_unplaced_constructors():
    src = ("import torch\n"
           "a = torch.zeros(3)\n"
           "b = torch.zeros(3, device=x.device)\n"
           "c = torch.arange(4)  # cpu: row index\n"
           "d = torch.zeros_like(a)\n"
           "e = torch.tensor([1.0], dtype=torch.float32)\n")
    assert [n for n, _ in unplaced(src)] == [2, 6]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_tensor_constructor_is_placed_or_marked_cpu(path):
    bad = unplaced(path.read_text())
    assert not bad, (f"{path.relative_to(ROOT)}: tensors made without device= (pass the device of an input "
                     f"tensor, or mark the line '# cpu: why'): {bad}")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_hard_coded_device(path):
    text = path.read_text()
    for bad in ('.cuda(', 'device="cuda', "device='cuda", 'device="cpu"', "device='cpu'"):
        assert bad not in text, f"{path.relative_to(ROOT)}: hard-coded device {bad!r}"
