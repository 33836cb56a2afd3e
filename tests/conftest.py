"""Shared fixtures: a tiny model config and a private cache so tests never touch ~/.cache."""

from __future__ import annotations

import os

import pytest
import torch

TINY = ["model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.context=96",
        "pretrain.tokens=30000", "pretrain.batch_size=16", "pretrain.seq_len=64"]


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    if "RLVR_CACHE" not in os.environ:
        os.environ["RLVR_CACHE"] = str(tmp_path_factory.mktemp("rlvr-cache"))
    # model.dtype=auto resolves to float32 without measuring: results must not depend on whether
    # this CPU runs bf16 fast (tests/unit/test_precision.py unsets it to test the measurement)
    os.environ.setdefault("RLVR_AUTO_DTYPE", "float32")
    torch.set_num_threads(1)  # tiny matrices: threads cost more than they give, and CI runs one process
    yield


def tiny_run_overrides(out_dir) -> list[str]:
    """TINY for a training run that writes under ``out_dir`` (what ``tiny_overrides`` gives a test; a
    module-scoped fixture names its own folder)."""
    return [*TINY, f"train.out_dir={out_dir}", "log.progress=none"]


@pytest.fixture
def tiny_overrides(tmp_path):
    return tiny_run_overrides(tmp_path)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module, restored after it (tiny matrices: threads cost more than they give)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
