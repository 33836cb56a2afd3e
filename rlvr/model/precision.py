"""``model.dtype: auto``: the compute precision a run uses, and why.

- An explicit ``float32`` / ``bfloat16`` is kept as it is.
- On a CUDA device ``auto`` is bfloat16 where ``torch.cuda.is_bf16_supported()``, else float32
  (no measurement).
- On the CPU ``auto`` asks the bf16 probe (:mod:`rlvr.model.bf16_probe`: one RL step's work timed in
  bf16 autocast against float32 at the model's own shapes, once per machine, cached) and picks
  bfloat16 only where it is at least :data:`MARGIN` times faster. On a busy machine the probe refuses
  to measure: float32, nothing cached. Real RL steps re-validate it
  (:mod:`rlvr.model.precision_cache`): once both precisions have real steps recorded on this machine
  at the run's step shape, they decide; a bfloat16 choice whose real steps ran far slower than the
  probe predicted falls back to float32 until they do.
- Any other device: float32.
- ``RLVR_AUTO_DTYPE=float32|bfloat16`` pins what ``auto`` resolves to, without measuring (the
  test suite pins float32 so that its results do not depend on the machine).

The choice comes as a :class:`Precision`: its :meth:`~Precision.line` is the one line a run prints
(what was chosen and why, in plain words); its ``reason`` keeps the numbers behind it (ratios, the
margin, when measured, the cache file), which a run records in its ``machine.json``.

bfloat16 means autocast: master weights and optimiser state stay float32, and so do the LM head and
the log-softmax with ``model.fp32_logits``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rlvr.config import DTYPES, ModelConfig
from rlvr.errors import UserError
from rlvr.model.bf16_probe import hf_spec, measured, tiny_spec
from rlvr.model.hf import SIDECAR, model_source
from rlvr.model.precision_cache import busy_note, real_steps

MARGIN = 1.1
"""bf16 autocast must be at least this many times faster than float32 to be chosen on the CPU."""
ENV_PIN = "RLVR_AUTO_DTYPE"
CHOOSE = "set model.dtype to choose"  # the end of every note about an ``auto`` choice


@dataclass(frozen=True)
class Precision:
    """A resolved ``model.dtype``: ``dtype`` ("float32" | "bfloat16") from ``requested``; ``note``
    says why in plain words, ``reason`` with the numbers behind it; ``measurement`` is the bf16
    probe's record when one decided."""

    dtype: str
    requested: str
    reason: str
    note: str
    measurement: dict | None = field(default=None, compare=False)
    workload: dict | None = field(default=None, compare=False)
    """The model's workload when the CPU decided (its real steps re-validate the choice), else None."""

    def line(self) -> str:
        """``precision: float32 (bfloat16 measured 0.80x as fast as float32 on this CPU; set
        model.dtype to choose)``: what a run prints."""
        return f"precision: {self.dtype} ({self.note})"


# ----------------------------------------------------------------------------- the model's workload
def _hf_config(src: str) -> dict:
    p = Path(src)
    if p.is_dir():
        return json.loads((p / "config.json").read_text())
    from transformers import AutoConfig  # a hub name: the config only (the model itself loads next)

    return AutoConfig.from_pretrained(src).to_dict()


def dir_spec(directory: str | Path) -> dict | None:
    """The workload of the checkpoint in ``directory`` (tiny: model_config.json; HF: config.json), or
    of an HF hub name / ``tiny-hf:<arch>``; None when it cannot be read."""
    d = Path(directory)
    try:
        if (d / "model_config.json").exists():
            meta = json.loads((d / "model_config.json").read_text())
            keep = {f.name for f in dataclasses.fields(ModelConfig)} - {"dtype", "init_from", "path"}
            return tiny_spec(ModelConfig(**{k: v for k, v in meta.items() if k in keep}))
        return hf_spec(_hf_config(str(d) if d.is_dir() else model_source(str(directory))))
    except (OSError, ValueError, TypeError, KeyError, UserError):
        return None


def config_spec(cfg: ModelConfig) -> dict | None:
    """The workload of the model a run with ``cfg`` trains: ``init_from``'s, else the tiny model's,
    else the HF ``path``'s."""
    if cfg.init_from:
        return dir_spec(cfg.init_from)
    if cfg.kind == "tiny":
        return tiny_spec(cfg)
    return dir_spec(cfg.path)


def model_spec(model) -> dict | None:
    """The workload of a built policy (TinyGPT: its config; HFPolicy: its HF config)."""
    cfg = getattr(model, "cfg", None)
    if getattr(cfg, "kind", None) == "tiny":
        return tiny_spec(cfg)
    conf = getattr(getattr(model, "lm", None), "config", None)
    return hf_spec(conf.to_dict()) if conf is not None else None


# ----------------------------------------------------------------------------- resolution
def resolve_dtype(dtype: str, device: str | torch.device = "cpu",
                  spec: dict | Callable[[], dict | None] | None = None, shape: dict | None = None) -> Precision:
    """``model.dtype`` -> :class:`Precision` on ``device``. ``spec`` is the model's workload
    (:func:`~rlvr.model.bf16_probe.tiny_spec`, :func:`~rlvr.model.bf16_probe.hf_spec`), or a function
    returning it, called only when a CPU measurement is needed; ``shape`` the run's RL step
    (:func:`step_shape`): its real steps recorded on this machine decide where both precisions have
    some."""
    if dtype not in DTYPES:
        raise UserError(f"model.dtype: unknown {dtype!r}; use auto, float32 or bfloat16")
    if dtype != "auto":
        why = f"model.dtype={dtype} in the config"
        return Precision(dtype, dtype, why, why)
    pin = os.environ.get(ENV_PIN, "")
    if pin:
        if pin not in ("float32", "bfloat16"):
            raise UserError(f"{ENV_PIN}={pin!r}: use float32 or bfloat16 (or unset it to measure)")
        return Precision(pin, "auto", f"auto pinned by {ENV_PIN}={pin}",
                         f"model.dtype=auto, pinned by {ENV_PIN}={pin} in the environment")
    dev = torch.device(device)
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev) if torch.cuda.is_available() else "CUDA device"
        if torch.cuda.is_bf16_supported():
            return Precision("bfloat16", "auto", f"auto on {name}: bf16 supported",
                             f"the {name} supports bfloat16; {CHOOSE}")
        return Precision("float32", "auto", f"auto on {name}: no bf16 support",
                         f"the {name} has no bfloat16 support; {CHOOSE}")
    if dev.type != "cpu":
        return Precision("float32", "auto", f"auto on {dev.type}: float32 (bf16 is measured on the CPU only)",
                         f"bfloat16 is measured on the CPU only, and this is {dev.type}; {CHOOSE}")
    work = spec() if callable(spec) else spec
    if not work:
        return Precision("float32", "auto", "auto: the model's shapes are unknown, so float32 (not measured)",
                         f"the model's shapes are unknown, so bfloat16 was not measured; {CHOOSE}")
    if shape:
        decided = _by_real_steps(real_steps(work, shape), work)
        if decided is not None:
            return decided
    data, name, busy = measured(work)
    if data is None:
        return Precision("float32", "auto", f"auto: bf16 not measured, this machine is busy ({busy}); float32, "
                                            "nothing cached", f"this machine is busy ({busy}), so bfloat16 was not "
                                                              f"measured and nothing cached; {CHOOSE}", None, work)
    r = float(data["ratio"])
    busy = busy_note(data)
    parts = (f"train {float(data.get('train_ratio', r)):.2f}x, decode {float(data.get('decode_ratio', r)):.2f}x; "
             f"needs >= {MARGIN}x; measured {str(data.get('measured', '?'))[:10]}{busy}, cached as {name}")
    speed = f"bfloat16 measured {r:.2f}x as fast as float32 on this CPU"
    when = ", which was busy then" if busy else ""
    if r >= MARGIN:
        return Precision("bfloat16", "auto", f"bf16 autocast {r:.2f}x faster than fp32 at this model's shapes "
                                             f"({parts})", f"{speed}{when}; {CHOOSE}", data, work)
    short = f", under the {MARGIN}x it needs" if r >= 1 else ""
    return Precision("float32", "auto", f"bf16 autocast {r:.2f}x the speed of fp32 at this model's shapes "
                                        f"({parts})", f"{speed}{short}{when}; {CHOOSE}", data, work)


def step_shape(prompts: int, group: int, new_tokens: int) -> dict:
    """The shape of an RL step that real-step records are kept for."""
    return {"prompts": int(prompts), "group": int(group), "new_tokens": int(new_tokens)}


def _by_real_steps(records: dict, work: dict) -> Precision | None:
    """The choice real RL steps make (:func:`rlvr.model.precision_cache.real_steps`): both precisions
    recorded -> the faster (bfloat16 needs :data:`MARGIN`); only a bfloat16 record that invalidated
    the probe -> float32; else None (the probe decides)."""
    if "float32" in records and "bfloat16" in records:
        fp32, bf16 = records["float32"]["step_s"], records["bfloat16"]["step_s"]
        r = fp32 / bf16
        dtype = "bfloat16" if r >= MARGIN else "float32"
        said = (f"real RL steps on this CPU: float32 {fp32:.3f} s, bfloat16 {bf16:.3f} s ({r:.2f}x; needs >= "
                f"{MARGIN}x)")
        return Precision(dtype, "auto", f"auto by {said}", f"{said}; {CHOOSE}", None, work)
    bf16 = records.get("bfloat16")
    if bf16 and bf16.get("invalidated_probe"):
        said = (f"real bfloat16 RL steps ran far slower than the probe predicted ({bf16['step_s']:.3f} s), so "
                "float32 until real steps of both precisions decide")
        return Precision("float32", "auto", f"auto: {said}", f"{said}; {CHOOSE}", None, work)
    return None


def saved_dtype(directory: str | Path) -> str:
    """The ``model.dtype`` a checkpoint directory was saved with ("auto" when it records none)."""
    d = Path(directory)
    for name in ("model_config.json", SIDECAR):
        try:
            return str(json.loads((d / name).read_text()).get("dtype", "auto"))
        except (OSError, ValueError, AttributeError):
            continue
    return "auto"


def checkpoint_precision(directory: str | Path, device: str | torch.device = "cpu") -> Precision:
    """What :func:`rlvr.model.io.load_policy` computes ``directory`` in on ``device`` (its saved dtype,
    ``auto`` resolved), without loading the weights."""
    return resolve_dtype(saved_dtype(directory), device, lambda: dir_spec(directory))


def apply_dtype(model, dtype: str) -> None:
    """Make ``model`` (TinyGPT or HFPolicy) compute in ``dtype``."""
    if hasattr(model, "set_dtype"):
        model.set_dtype(dtype)


def apply_compute(model, cfg: ModelConfig) -> None:
    """Make a loaded ``model`` compute as the run's ``cfg`` says: its dtype and ``fp32_logits``
    (the LM head and log-softmax in float32). Both are compute options, not architecture, so the
    run's config wins over what the checkpoint was saved with (an RL run from the base with
    ``model.fp32_logits=false`` otherwise kept the base's true)."""
    apply_dtype(model, cfg.dtype)
    if hasattr(model, "set_fp32_logits"):
        model.set_fp32_logits(cfg.fp32_logits)


def resolve_model(model, device: str | torch.device | None = None) -> Precision:
    """Resolve a built policy's own ``cfg.dtype`` on ``device`` (default: where its weights are) and
    apply it; an explicit dtype is left as it is."""
    requested = getattr(getattr(model, "cfg", None), "dtype", "float32")
    if device is None:
        p = next(iter(model.parameters()), None)
        device = p.device if p is not None else "cpu"
    prec = resolve_dtype(requested, device, lambda: model_spec(model))
    if prec.dtype != requested:
        apply_dtype(model, prec.dtype)
    return prec
