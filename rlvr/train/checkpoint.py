"""Crash-safe checkpoints: written to a temporary directory, fsynced, then renamed;
a manifest with SHA-256 checksums lets a reader detect a partial or corrupt one
and fall back to the previous good checkpoint.

Layout: ``RUN/checkpoints/step_000020/`` with the policy (model.safetensors,
model_config.json, tokenizer.json), ``optimizer.pt``, ``state.json`` (step,
version, counters, data order, retired prompts, RNG states) and ``manifest.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.model.io import save_policy


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rng_state(gen: torch.Generator) -> dict:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state()[1].tolist(),
        "numpy_pos": int(np.random.get_state()[2]),
        "torch": torch.get_rng_state().tolist(),
        "sampler": gen.get_state().tolist(),
    }


def set_rng_state(d: dict, gen: torch.Generator) -> None:
    py = d["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    np.random.set_state(("MT19937", np.array(d["numpy"], dtype=np.uint32), d["numpy_pos"], 0, 0.0))
    torch.set_rng_state(torch.tensor(d["torch"], dtype=torch.uint8))
    gen.set_state(torch.tensor(d["sampler"], dtype=torch.uint8))


def save_checkpoint(run_dir: str | Path, st, keep_last: int = 2, milestone: bool = False) -> Path:
    """Write ``checkpoints/step_<n>`` atomically and prune old rolling checkpoints."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{st.step:06d}"
    tmp = root / f".tmp_step_{st.step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        save_policy(st.model, st.tok, tmp)
        torch.save(st.opt.state_dict(), tmp / "optimizer.pt")
        state = {
            "step": st.step, "version": st.version, "samples": st.samples, "tokens": st.tokens,
            "flops": st.flops, "wall_s": st.wall_s, "nan_steps": st.nan_steps, "counters": st.counters,
            "last_entropy": st.last_entropy,
            "data": st.data.state_dict(), "tracker": st.tracker.state_dict() if st.tracker else None,
            "rng": rng_state(st.gen), "milestone": milestone,
        }
        (tmp / "state.json").write_text(json.dumps(state))
        files = sorted(p.name for p in tmp.iterdir())
        manifest = {"step": st.step, "files": {f: _sha256(tmp / f) for f in files}}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if not _is_write_error(e):
            raise
        raise UserError(f"could not write checkpoint {final} ({type(e).__name__}: {e}; {_free_mb(root)} MB "
                        "free); the previous checkpoint is intact; free disk space and resume with --resume"
                        ) from None
    _prune(root, keep_last)
    return final


def _is_write_error(e: BaseException) -> bool:
    """A failed write: OSError (ENOSPC, EFBIG, EIO), and the forms a full disk takes in the
    serialisers (torch.save: RuntimeError from its zip writer; safetensors: SafetensorError)."""
    return isinstance(e, OSError | RuntimeError) or type(e).__name__ == "SafetensorError"


def _free_mb(d: Path) -> int:
    try:
        return shutil.disk_usage(d).free >> 20
    except OSError:
        return -1


def remove_partial(run_dir: str | Path) -> list[Path]:
    """Delete ``checkpoints/.tmp_step_*`` left by a crash during a write; returns what was removed."""
    root = Path(run_dir) / "checkpoints"
    gone = sorted(root.glob(".tmp_step_*")) if root.exists() else []
    for d in gone:
        shutil.rmtree(d, ignore_errors=True)
    return gone


def _prune(root: Path, keep_last: int) -> None:
    ckpts = list_checkpoints(root)
    rolling = [c for c in ckpts if not _is_milestone(c)]
    for old in rolling[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def _is_milestone(c: Path) -> bool:
    try:
        return bool(json.loads((c / "state.json").read_text()).get("milestone"))
    except (OSError, json.JSONDecodeError):
        return False


def list_checkpoints(root: Path) -> list[Path]:
    """step_* directories, oldest first (temporary ones excluded)."""
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step_"))


def milestone_checkpoints(run_dir: str | Path) -> list[Path]:
    """The kept milestone checkpoints of a run (``train.milestone_every``), oldest first."""
    return [c for c in list_checkpoints(Path(run_dir) / "checkpoints") if _is_milestone(c)]


def checkpoint_step(c: Path) -> int:
    """The step a checkpoint was saved at."""
    return int(json.loads((c / "manifest.json").read_text())["step"])


def verify_checkpoint(c: Path) -> str | None:
    """None if every file in the manifest is present with its checksum, else what is wrong."""
    try:
        manifest = json.loads((c / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        return f"no readable manifest ({e})"
    for name, digest in manifest["files"].items():
        p = c / name
        if not p.exists():
            return f"missing {name}"
        if _sha256(p) != digest:
            return f"checksum mismatch in {name}"
    return None


def latest_good_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest checkpoint that verifies; warns about each broken one skipped."""
    for c in reversed(list_checkpoints(Path(run_dir) / "checkpoints")):
        problem = verify_checkpoint(c)
        if problem is None:
            return c
        warn(f"checkpoint {c} is corrupt or partial ({problem}); using the previous one")
    return None


def load_checkpoint_into(c: Path, st) -> None:
    """Restore model weights, optimiser, counters, data order, retired set and RNG into ``st``."""
    from safetensors.torch import load_file

    if hasattr(st.model, "load_checkpoint"):  # HF policy: HF weight names, LoRA adapter
        st.model.load_checkpoint(c)
    else:
        state = load_file(str(c / "model.safetensors"))
        if getattr(st.model.cfg, "tie_weights", False) and "lm_head.weight" not in state:
            state["lm_head.weight"] = state["embed.weight"]
        st.model.load_state_dict(state)
    st.opt.load_state_dict(torch.load(c / "optimizer.pt", map_location="cpu", weights_only=True))
    s = json.loads((c / "state.json").read_text())
    st.step, st.version, st.samples, st.tokens = s["step"], s["version"], s["samples"], s["tokens"]
    st.flops, st.wall_s, st.nan_steps, st.counters = s["flops"], s["wall_s"], s["nan_steps"], s["counters"]
    st.last_entropy = s.get("last_entropy")
    st.data.load_state_dict(s["data"])
    if st.tracker is not None and s["tracker"]:
        st.tracker.load_state_dict(s["tracker"])
    set_rng_state(s["rng"], st.gen)
