"""How many rows one sampling batch may hold: from the model's shapes and a memory budget.

Per row the sampler holds the KV cache of ``t_max`` positions, the logits and the sampling
temporaries over the vocabulary, the per-step activations and its output buffers. The budget
defaults to a share of the memory the device has free now; ``RLVR_SAMPLE_MEMORY_GB`` sets it.
More rows than ``MAX_ROWS`` gain no speed on a CPU (the step is bound by the weight matmuls and the
cache reads per row) and only delay the first results, so the batch stops there.
"""

from __future__ import annotations

import os

import torch

MAX_ROWS = 4096
CPU_SHARE = 0.25  # of MemAvailable: the trainer, the verifier and the rest of the machine keep the rest
GPU_SHARE = 0.5  # of the free device memory


def shapes(model) -> dict[str, int]:
    """layers, kv_heads, head_dim, d_model, vocab, mlp hidden of a TinyGPT or an HFPolicy."""
    lm = getattr(model, "lm", None)
    if lm is not None:  # HFPolicy
        c = lm.config
        heads = c.num_attention_heads
        return {"layers": c.num_hidden_layers, "kv_heads": getattr(c, "num_key_value_heads", None) or heads,
                "head_dim": getattr(c, "head_dim", None) or c.hidden_size // heads, "d_model": c.hidden_size,
                "vocab": c.vocab_size, "mlp": getattr(c, "intermediate_size", 4 * c.hidden_size)}
    c = model.cfg
    return {"layers": c.n_layer, "kv_heads": c.n_head, "head_dim": c.d_model // c.n_head, "d_model": c.d_model,
            "vocab": model.vocab_size, "mlp": model.blocks[0].mlp.up.out_features}  # its own MLP, SwiGLU or GELU


def bytes_per_row(model, t_max: int) -> int:
    """Bytes one sampled row needs at ``t_max`` positions (prompt + completion)."""
    s = shapes(model)
    kv_elt = 2 if getattr(model.cfg, "dtype", "float32") == "bfloat16" else 4
    kv = 2 * s["layers"] * s["kv_heads"] * s["head_dim"] * t_max * kv_elt
    vocab = 6 * s["vocab"] * 4  # logits, log-probs, probabilities, weights, CDF, comparison
    acts = (4 * s["d_model"] + 2 * s["mlp"]) * 4 * 3  # one layer's activations, with headroom
    outputs = t_max * (8 + 12 + 1) * 2  # ids, (logp, entropy, self-certainty), loss mask: live + output
    return kv + vocab + acts + outputs


def memory_budget(device: torch.device) -> int:
    """Bytes the sampler may use: ``RLVR_SAMPLE_MEMORY_GB`` if set, else a share of the free memory."""
    env = os.environ.get("RLVR_SAMPLE_MEMORY_GB")
    if env:
        return int(float(env) * 2**30)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free * GPU_SHARE)
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        avail = int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        avail = 4 * 2**30  # not Linux: assume 4 GiB free
    return int(avail * CPU_SHARE)


def rows_for(model, t_max: int, budget: int | None = None) -> int:
    """Rows per sampling batch for ``model`` at ``t_max`` positions within ``budget`` bytes
    (default :func:`memory_budget` of the model's device), between 1 and :data:`MAX_ROWS`."""
    if budget is None:
        budget = memory_budget(next(model.parameters()).device)
    return max(1, min(MAX_ROWS, budget // bytes_per_row(model, t_max)))
