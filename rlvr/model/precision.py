"""``model.dtype: auto``: pick the compute precision by measurement, once per machine.

- An explicit ``float32`` / ``bfloat16`` is kept as it is.
- On a CUDA device ``auto`` is bfloat16 where ``torch.cuda.is_bf16_supported()``, else float32
  (no measurement).
- On the CPU ``auto`` times bf16 autocast against float32 at the model's own shapes
  (:func:`measure`: a forward + backward, then decoding; alternating, repeated, medians) and picks
  bfloat16 only where it is at least :data:`MARGIN` times faster. The tiny model is measured for real
  (one block, with attention, norms and the LM head) at the default RL step's shapes: one of its two
  mini-batches (8 prompts x 8 samples), sampled by the sampler's shared-prefix decoding and trained
  on as 64 left-padded sequences of prompt + completion under their key mask; an HF model as its
  layer's projections (q, k, v, o, gate, up, down) at a training-sized token count and 64-row
  decode steps. The result is cached in ``<cache>/machine/bf16-<key>.json``, keyed by a hash of the
  CPU (model name, family, model, flags), the torch version, the torch thread count and the
  workload; a second run reuses it, a corrupt file is measured again. The 1-minute load average is
  recorded with it, and the printed choice says when the machine was busy (the ratio may then be
  off: delete the file to measure again).
- Any other device: float32.
- ``RLVR_AUTO_DTYPE=float32|bfloat16`` pins what ``auto`` resolves to, without measuring (the
  test suite pins float32 so that its results do not depend on the machine).

bfloat16 means autocast: master weights and optimiser state stay float32, and so do the LM head and
the log-softmax with ``model.fp32_logits``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from rlvr.config import DTYPES, ModelConfig
from rlvr.errors import UserError
from rlvr.log import warn
from rlvr.machine import cpu_info
from rlvr.model.hf import SIDECAR, model_source
from rlvr.model.tiny import TinyGPT
from rlvr.model.tokenizer import CharTokenizer
from rlvr.paths import atomic_write, cache_root

MARGIN = 1.1
"""bf16 autocast must be at least this many times faster than float32 to be chosen on the CPU."""
ENV_PIN = "RLVR_AUTO_DTYPE"
FORMAT = 2  # bump when the measurement changes: old cache files are then measured again
TRAIN_TOKENS = 2048  # the most tokens of the training-sized forward + backward (HF projections)
DECODE_ROWS = 64  # rows of a decode-sized batch (one new token each; HF projections)
RL_PROMPTS, RL_ROWS = 8, 64  # the tiny model's workload: a mini-batch of the default RL step (16 x 8 in 2),
RL_PROMPT_TOKENS, RL_NEW_TOKENS = 10, 32  # its prompts of about 10 tokens, completions of about 30
FLOP_CAP = 2e9  # float32 FLOPs of one repeat's forward + backward at most: a large model uses fewer tokens
TINY_FLOP_CAP = 4e9  # the same for the tiny model's RL-step workload (the default model: 64 rows fit)
BUDGET_S = 0.8  # stop repeating after this long (3 repeats at least): the measurement stays < 2 s


@dataclass(frozen=True)
class Precision:
    """A resolved ``model.dtype``: ``dtype`` ("float32" | "bfloat16") from ``requested``, and why."""

    dtype: str
    requested: str
    reason: str
    measurement: dict | None = field(default=None, compare=False)

    def line(self) -> str:
        """``precision: bfloat16 (bf16 autocast 2.90x faster than fp32 at this model's shapes, ...)``."""
        return f"precision: {self.dtype} ({self.reason})"


# ----------------------------------------------------------------------------- what is measured
def tiny_spec(cfg: ModelConfig) -> dict:
    """The workload of a tiny model: one block of it, built for real (attention, norms, LM head)."""
    return {"kind": "tiny", "d_model": cfg.d_model, "n_head": cfg.n_head, "mlp": cfg.mlp,
            "context": cfg.context, "fp32_logits": cfg.fp32_logits}


def hf_spec(conf: dict) -> dict | None:
    """The workload of an HF model: one decoder layer's projections (q, k, v, o, gate, up, down) from
    its ``config.json``; None when the config names no hidden size."""
    h = conf.get("hidden_size") or conf.get("n_embd") or conf.get("d_model")
    if not h:
        return None
    n = conf.get("num_attention_heads") or conf.get("n_head") or 1
    kv = conf.get("num_key_value_heads") or n
    hd = conf.get("head_dim") or h // n
    i = conf.get("intermediate_size") or conf.get("n_inner") or 4 * h
    shapes = [(h, n * hd), (h, kv * hd), (h, kv * hd), (n * hd, h), (h, i), (h, i), (i, h)]
    return {"kind": "linear", "shapes": [[int(a), int(b)] for a, b in shapes]}


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


# ----------------------------------------------------------------------------- measurement
Run = Callable[[bool], tuple[float, float]]  # bf16 -> (train seconds, decode seconds) of one repeat


def _tokens(flops_per_token: float, cap: float) -> int:
    """The training-sized token count: :data:`TRAIN_TOKENS`, fewer where the float32 forward +
    backward of one repeat would exceed ``cap`` FLOPs (a multiple of 16, at least 16)."""
    return max(16, min(TRAIN_TOKENS, int(cap / flops_per_token) // 16 * 16))


def _tiny_run(spec: dict, g: torch.Generator, scale: float) -> tuple[Run, dict]:
    """One real tiny block (+ embedding, final norm, LM head) at the RL step's shapes: forward +
    backward of :data:`RL_ROWS` left-padded sequences of prompt + completion under their key mask,
    then the sampler's decoding (:data:`RL_PROMPTS` prompts prefilled once, :data:`RL_ROWS` rows
    decoding :data:`RL_NEW_TOKENS` steps from the shared prefix). Fewer rows where the float32
    forward + backward would exceed ``scale`` x :data:`TINY_FLOP_CAP` FLOPs (a wide model)."""
    cfg = ModelConfig(n_layer=1, d_model=spec["d_model"], n_head=spec["n_head"], mlp=spec["mlp"],
                      context=spec["context"], fp32_logits=spec["fp32_logits"])
    vocab = CharTokenizer().vocab_size
    with torch.random.fork_rng(devices=[]):  # the init draws from the global RNG: leave it as it was
        torch.manual_seed(0)
        model = TinyGPT(cfg, vocab)
    tp = min(RL_PROMPT_TOKENS, max(1, cfg.context // 4))
    new = max(1, min(RL_NEW_TOKENS, cfg.context - tp))
    T = tp + new
    fit = max(1, min(RL_ROWS, int(scale * TINY_FLOP_CAP / (3 * model.flops_per_token() * T))))  # rows
    prompts = min(RL_PROMPTS, fit)
    per_prompt = fit // prompts
    rows = prompts * per_prompt
    ids = torch.randint(0, vocab, (rows, T), generator=g)
    key_mask = torch.ones(rows, T, dtype=torch.bool)
    pad = torch.randint(0, max(1, tp // 3) + 1, (prompts,), generator=g)  # left padding of each prompt
    prompt_mask = torch.arange(tp)[None, :] >= pad[:, None]
    key_mask[:, :tp] = prompt_mask.repeat_interleave(per_prompt, 0)
    prompt_ids = torch.randint(0, vocab, (prompts, tp), generator=g)
    repeats = torch.full((prompts,), per_prompt)
    tok = torch.randint(0, vocab, (rows,), generator=g)

    def run(bf16: bool) -> tuple[float, float]:
        model.set_dtype("bfloat16" if bf16 else "float32")
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        model(ids, key_mask).logsumexp(-1).mean().backward()
        t1 = time.perf_counter()
        with torch.no_grad():
            cache, _ = model.prefill_shared(prompt_ids, prompt_mask, repeats, new)
            for _ in range(new):
                model.decode_shared(tok, cache)
        return t1 - t0, time.perf_counter() - t1

    return run, {"train_tokens": int(key_mask.sum()), "decode_rows": rows, "decode_steps": new}


def _linear_run(spec: dict, g: torch.Generator, scale: float) -> tuple[Run, dict]:
    """Every projection of one layer: forward + backward at a training-sized token count (inputs
    float32, as from a norm), then decode-sized forwards of 64 rows (autocast entered per step)."""
    shapes = [tuple(s) for s in spec["shapes"]]
    n = _tokens(6 * sum(a * b for a, b in shapes), scale * FLOP_CAP)
    rows = min(DECODE_ROWS, n)
    steps = max(1, n // rows)  # as many tokens sampled as trained on

    def rand(*size, grad=False):
        return torch.randn(*size, generator=g).mul_(0.05).requires_grad_(grad)

    ws = [rand(o, i, grad=True) for i, o in shapes]
    xs = [rand(n, i, grad=True) for i, _ in shapes]
    decs = [rand(rows, i) for i, _ in shapes]

    def run(bf16: bool) -> tuple[float, float]:
        for t in (*ws, *xs):
            t.grad = None
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):  # one region: weights cast once
            loss = torch.stack([F.linear(x, w).sum().float() for x, w in zip(xs, ws)]).sum()
        loss.backward()
        t1 = time.perf_counter()
        with torch.no_grad():
            for _ in range(steps):  # the sampler enters autocast once per decode step
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    for x, w in zip(decs, ws):
                        F.linear(x, w)
        return t1 - t0, time.perf_counter() - t1

    return run, {"train_tokens": n, "decode_rows": rows, "decode_steps": steps}


def measure(spec: dict) -> dict:
    """Time bf16 autocast against float32 on the CPU for the workload ``spec`` (:func:`tiny_spec`:
    a real one-block tiny model at the RL step's shapes, :func:`_tiny_run`; :func:`hf_spec`: one
    layer's projections, :func:`_linear_run`): per repeat a forward + backward, then the decoding of
    about as many tokens. float32 and bf16 alternate after a small warm-up; 3 to 7 repeats (about
    :data:`BUDGET_S`), medians; one only when bf16 is more than 4x slower in it (decided, and slow).

    Returns {"ratio", "train_ratio", "decode_ratio"} (float32 seconds / bf16 seconds: > 1 means bf16
    is faster), "fp32_s", "bf16_s", "repeats", and the token counts. torch's global RNG and thread
    count are left as they were."""
    g = torch.Generator().manual_seed(0)
    build = _tiny_run if spec["kind"] == "tiny" else _linear_run
    warm, _ = build(spec, g, 1 / 8)
    for bf16 in (False, True):  # warm-up, small: thread pool, kernels compiled (first bf16 calls are slow)
        warm(bf16)
    run, sizes = build(spec, g, 1.0)
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    start = time.perf_counter()
    for r in range(7):
        for bf16 in (False, True):
            times[bf16].append(run(bf16))
        if r == 0 and sum(times[True][0]) > 4 * sum(times[False][0]):  # no bf16 units: decided, and slow
            break
        if r >= 2 and time.perf_counter() - start > BUDGET_S:
            break

    def med(bf16: bool, part: int | None) -> float:
        return statistics.median(t[0] + t[1] if part is None else t[part] for t in times[bf16])

    def ratio(part: int | None) -> float:
        return med(False, part) / max(med(True, part), 1e-9)

    return {"ratio": ratio(None), "train_ratio": ratio(0), "decode_ratio": ratio(1), **sizes,
            "repeats": len(times[False]), "fp32_s": med(False, None), "bf16_s": med(True, None)}


def cache_key(spec: dict) -> dict:
    """What a measurement depends on: the CPU, the torch version and threads, the workload."""
    cpu = cpu_info()
    return {"format": FORMAT, "cpu": cpu["model_name"], "family": cpu["family"], "model": cpu["model"],
            "flags": cpu["flags"], "torch": torch.__version__, "threads": torch.get_num_threads(),
            "workload": spec}


def cache_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "machine" / f"bf16-{digest}.json"


def _read_cached(path: Path, key: dict) -> dict | None:
    """The cached measurement at ``path`` if it is whole and for ``key``; None if absent; a corrupt
    file is reported and None returned (so it is measured again)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        ratio = float(data["ratio"])
        if data.get("key") != key or not math.isfinite(ratio) or ratio <= 0:
            raise ValueError("not a measurement for this machine")
        return data
    except (OSError, ValueError, TypeError, KeyError) as e:
        warn(f"{path}: unreadable precision measurement ({e}); measuring again")
        return None


def measured(spec: dict) -> tuple[dict, Path]:
    """(measurement, cache file) of the workload ``spec`` on this CPU: from the cache, else
    measured (:func:`measure`) and written there (atomically)."""
    key = cache_key(spec)
    path = cache_path(key)
    data = _read_cached(path, key)
    if data is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None  # before this process measures
        data = {**measure(spec), "measured": _dt.datetime.now().isoformat(timespec="seconds"), "key": key,
                "load": load, "cores": os.cpu_count()}
        try:
            atomic_write(path, json.dumps(data, indent=1))
        except OSError as e:  # a read-only cache costs a measurement per run, nothing else
            warn(f"could not cache the precision measurement in {path} ({e.strerror or e})")
    return data, path


# ----------------------------------------------------------------------------- resolution
def _busy(data: dict) -> str:
    """``" on a busy machine (load 2.3, 2 cores: the ratio may be off)"`` when other work shared the
    cores while measuring (the 1-minute load average plus the measuring threads above the core
    count), else ``""``; delete the cache file to measure again on a quiet machine."""
    load, cores = data.get("load"), data.get("cores")
    threads = data.get("key", {}).get("threads", 1)
    if not isinstance(load, (int, float)) or not isinstance(cores, int) or load + threads <= cores + 0.5:
        return ""
    return f" on a busy machine (load {load:.1f}, {cores} cores: the ratio may be off)"


def resolve_dtype(dtype: str, device: str | torch.device = "cpu",
                  spec: dict | Callable[[], dict | None] | None = None) -> Precision:
    """``model.dtype`` -> :class:`Precision` on ``device``. ``spec`` is the model's workload
    (:func:`tiny_spec`, :func:`hf_spec`), or a function returning it, called only when a CPU
    measurement is needed."""
    if dtype not in DTYPES:
        raise UserError(f"model.dtype: unknown {dtype!r}; use auto, float32 or bfloat16")
    if dtype != "auto":
        return Precision(dtype, dtype, f"model.dtype={dtype} in the config")
    pin = os.environ.get(ENV_PIN, "")
    if pin:
        if pin not in ("float32", "bfloat16"):
            raise UserError(f"{ENV_PIN}={pin!r}: use float32 or bfloat16 (or unset it to measure)")
        return Precision(pin, "auto", f"auto pinned by {ENV_PIN}={pin}")
    dev = torch.device(device)
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev) if torch.cuda.is_available() else "CUDA device"
        if torch.cuda.is_bf16_supported():
            return Precision("bfloat16", "auto", f"auto on {name}: bf16 supported")
        return Precision("float32", "auto", f"auto on {name}: no bf16 support")
    if dev.type != "cpu":
        return Precision("float32", "auto", f"auto on {dev.type}: float32 (bf16 is measured on the CPU only)")
    work = spec() if callable(spec) else spec
    if not work:
        return Precision("float32", "auto", "auto: the model's shapes are unknown, so float32 (not measured)")
    data, path = measured(work)
    r = float(data["ratio"])
    parts = (f"train {float(data.get('train_ratio', r)):.2f}x, decode {float(data.get('decode_ratio', r)):.2f}x; "
             f"needs >= {MARGIN}x; measured {str(data.get('measured', '?'))[:10]}{_busy(data)}, cached {path}")
    if r >= MARGIN:
        return Precision("bfloat16", "auto", f"bf16 autocast {r:.2f}x faster than fp32 at this model's shapes "
                                             f"({parts})", data)
    return Precision("float32", "auto", f"bf16 autocast {r:.2f}x the speed of fp32 at this model's shapes "
                                        f"({parts})", data)


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
