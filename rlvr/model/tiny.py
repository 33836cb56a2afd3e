"""The embedded tiny GPT: decoder-only transformer with RoPE, RMSNorm and a
SwiGLU (or GELU) MLP, optional weight tying, optional float32 LM head.

Shapes: B batch, T positions, D width, H heads, Dh = D/H, V vocab, L layers.
The same forward serves pretraining (packed, causal), the trainer (left-padded
prompts + right-padded completions, explicit mask) and the sampler (prefill,
then one token at a time against a preallocated KV cache).
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from rlvr.config import ModelConfig


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(context: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin tables (context, Dh/2)."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    ang = torch.outer(torch.arange(context, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, Dh); cos/sin (B, 1, T, Dh/2) -> rotated x (rotate-half convention)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class BufferPool:
    """Storage of the sampler's KV caches kept from one sampling call to the next.

    At 64 x 8 the tiny model's completion cache is 48 MiB of keys and as much of values, and each
    compaction copies it into a new one: allocations above glibc's largest mmap threshold (32 MiB)
    unless the heap happens to hold a free chunk that large, so each was a fresh mapping whose pages
    faulted on first write (27-48k minor page faults, 8-15% of a sampling call; issue 53). Whether a
    chunk was free depended on what ran before: at b87d620 the trainer's padded batches left one, its
    length buckets (822b7a6) no longer do. Caches that ``take`` their buffers here and ``give`` them
    back when done write the same pages every call. ``take`` hands out the smallest kept buffer that
    fits, of the dtype and device asked for and of the caller's kind (an inference tensor in inference
    mode, else a normal one), or a new one as large as the largest request so far (so that a
    compaction's copy serves a whole cache on the next call); a kept buffer goes to one caller (a
    second caller at the same time gets a new one). Kept: at most ``keep`` buffers of at most
    ``max_bytes`` in all, the largest that fit; a request above half of ``max_bytes`` (an evaluation's
    batch of thousands of rows) is neither pooled nor counted in the largest request, so the pool
    never holds more than ``max_bytes`` (512 MiB: the RL step's caches at 64 x 8 take 171 MiB)
    after a call; :meth:`clear` frees them."""

    def __init__(self, keep: int = 8, max_bytes: int = 512 * 2**20):
        self.keep, self.max_bytes = keep, max_bytes
        self.free: list[torch.Tensor] = []  # flat buffers, smallest first
        self.peak_bytes = 0
        self.lock = threading.Lock()

    def take(self, shape: tuple[int, ...], dtype: torch.dtype, device) -> torch.Tensor:
        n, inference, device = math.prod(shape), torch.is_inference_mode_enabled(), torch.device(device)
        with self.lock:
            flat = next((t for t in self.free if t.numel() >= n and t.dtype == dtype and t.device == device
                         and t.is_inference() == inference), None)
            if flat is not None:
                self.free = [t for t in self.free if t is not flat]
            poolable = 2 * n * dtype.itemsize <= self.max_bytes
            size = max(n, self.peak_bytes // dtype.itemsize) if poolable else n
            if poolable:
                self.peak_bytes = max(self.peak_bytes, n * dtype.itemsize)
        if flat is None:
            flat = torch.empty(size, dtype=dtype, device=device)
        return flat[:n].view(shape)

    def give(self, t: torch.Tensor) -> None:
        """The whole storage under ``t`` (a buffer :meth:`take` handed out, no longer read or written by
        anyone) is free for the next ``take``."""
        storage = t.untyped_storage()
        flat = t.new_empty(0).set_(storage, 0, (storage.nbytes() // t.element_size(),))
        with self.lock:
            if all(b.data_ptr() != flat.data_ptr() for b in self.free):
                kept, total = [], 0
                for b in sorted([*self.free, flat], key=lambda b: b.untyped_storage().nbytes(), reverse=True):
                    nbytes = b.untyped_storage().nbytes()
                    if len(kept) < self.keep and 2 * nbytes <= self.max_bytes and total + nbytes <= self.max_bytes:
                        kept.append(b)
                        total += nbytes
                self.free = kept[::-1]  # smallest first

    def clear(self) -> None:
        with self.lock:
            self.free, self.peak_bytes = [], 0


DECODE_BUFFERS = BufferPool()
"""The pool of the sampler's shared-prefix caches (:class:`SharedPrefixCache`)."""


def keep_rows(t: torch.Tensor, rows: torch.Tensor, filled: int, pool: BufferPool | None = None) -> torch.Tensor:
    """Rows ``rows`` of a cache tensor t (L, B, H, T, Dh) -> (L, len(rows), H, T, Dh), copying only the
    ``filled`` positions (the rest is never read before it is written) and a row at a time (advanced
    indexing would compute an offset per element). With a ``pool``, the copy's buffer comes from it
    and ``t``'s goes back to it."""
    shape = (t.shape[0], len(rows), *t.shape[2:])
    out = t.new_empty(shape) if pool is None else pool.take(shape, t.dtype, t.device)
    torch.index_select(t[:, :, :, :filled], 1, rows, out=out[:, :, :, :filled])
    if pool is not None:
        pool.give(t)
    return out


class KVCache:
    """Preallocated keys/values (L, B, H, Tmax, Dh) plus the key mask (B, Tmax)."""

    def __init__(self, n_layer, batch, n_head, t_max, head_dim, dtype, device):
        shape = (n_layer, batch, n_head, t_max, head_dim)
        # uninitialised: a position is written (prefill or decode) before any attention reads it
        self.k = torch.empty(shape, dtype=dtype, device=device)
        self.v = torch.empty(shape, dtype=dtype, device=device)
        self.key_mask = torch.zeros((batch, t_max), dtype=torch.bool, device=device)
        self.length = 0

    def select(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` (a (B',) index) of the batch, e.g. to drop finished samples."""
        self.k, self.v = keep_rows(self.k, rows, self.length), keep_rows(self.v, rows, self.length)
        self.key_mask = self.key_mask[rows]


class SharedPrefixCache:
    """KV cache of rows that sample the same prompts: each prompt's keys/values once, the completions'
    per row. Prompt part: ``pk``/``pv`` (L, G, H, Tp, Dh) and ``pbias`` (G, 1, Tp) (0 on real prompt
    tokens, -inf on left padding), ``plen`` (G,) real prompt tokens; completion part: ``k``/``v``
    (L, N, H, Tc, Dh) with ``length`` positions filled (every one real: finished rows leave the
    batch). Row i samples prompt ``group[i]``; rows stay ordered by prompt (``select`` keeps order),
    so the rows of one prompt are the contiguous ``spans`` (g, start, end)."""

    shared = True

    def __init__(self, prefix: KVCache, prompt_mask: torch.Tensor, repeats: torch.Tensor, t_new: int):
        L, G, H, Tp, Dh = prefix.k.shape
        self.pk, self.pv = prefix.k[:, :, :, :Tp], prefix.v[:, :, :, :Tp]
        self.pbias = torch.zeros(prompt_mask.shape, device=prompt_mask.device).masked_fill_(
            ~prompt_mask, float("-inf"))[:, None]
        self.plen = prompt_mask.sum(-1)
        self.group = torch.arange(G, device=prompt_mask.device).repeat_interleave(repeats)
        N = self.group.numel()
        shape, dtype, device = (L, N, H, t_new, Dh), prefix.k.dtype, prefix.k.device
        self.pool = DECODE_BUFFERS
        self.k = self.pool.take(shape, dtype, device)  # uninitialised (or a past call's): written before read
        self.v = self.pool.take(shape, dtype, device)
        self.length = 0
        self._spans()

    def _spans(self) -> None:
        g, n = torch.unique_consecutive(self.group, return_counts=True)
        ends = n.cumsum(0).tolist()
        self.spans = [(gi, e - ni, e) for gi, ni, e in zip(g.tolist(), n.tolist(), ends)]
        self.classes = span_classes(self.spans, self.group.device)

    def select(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` (an increasing (N',) index) of the batch, e.g. to drop finished samples."""
        self.k = keep_rows(self.k, rows, self.length, self.pool)
        self.v = keep_rows(self.v, rows, self.length, self.pool)
        self.group = self.group[rows]
        self._spans()

    def release(self) -> None:
        """Done with this cache: its completion buffers go back to the pool for the next call."""
        if self.k is not None:
            self.pool.give(self.k)
            self.pool.give(self.v)
            self.k = self.v = None


def span_classes(spans: list[tuple[int, int, int]], device) -> list[tuple[torch.Tensor, torch.Tensor | None, int]]:
    """The spans (prompt g, start, end) of a :class:`SharedPrefixCache` grouped by their number of
    rows r: for each r, (the prompts (n,), the rows of their spans in span order (n*r,), or None when
    that is every row in order, r). One batched product per class then computes what one product per
    span did, with the same matrix shapes (so the same sums: bit-identical results)."""
    by_size: dict[int, list[tuple[int, int, int]]] = {}
    for span in spans:
        by_size.setdefault(span[2] - span[1], []).append(span)
    classes = []
    for r, members in by_size.items():
        prompts = torch.tensor([g for g, _, _ in members], device=device)
        rows = None if len(by_size) == 1 else torch.cat([torch.arange(a, b, device=device) for _, a, b in members])
        classes.append((prompts, rows, r))
    return classes


def prompt_scores(q: torch.Tensor, pk: torch.Tensor, pbias: torch.Tensor, classes) -> torch.Tensor:
    """Scores of each row's query against its prompt's keys: q (N, H, Dh), pk (G, H, Tp, Dh), pbias
    (G, 1, Tp) -> (N, H, Tp), one batched product per :func:`span_classes` class."""
    H, Tp, Dh = pk.shape[1:]
    return _per_class(q, classes, Tp, lambda q_rows, prompts: torch.baddbmm(
        pbias[prompts].repeat_interleave(H, 0), q_rows, pk[prompts].reshape(-1, Tp, Dh).transpose(1, 2)))


def prompt_values(att: torch.Tensor, pv: torch.Tensor, classes) -> torch.Tensor:
    """Attention-weighted prompt values: att (N, H, Tp), pv (G, H, Tp, Dh) -> (N, H, Dh), one batched
    product per :func:`span_classes` class."""
    Tp, Dh = pv.shape[2:]
    return _per_class(att, classes, Dh, lambda att_rows, prompts: torch.bmm(att_rows, pv[prompts].reshape(-1, Tp, Dh)))


def _per_class(x: torch.Tensor, classes, width: int, product) -> torch.Tensor:
    """x (N, H, X) -> (N, H, width): for each class of n prompts with r rows, ``product(its rows of x as
    (n*H, r, X), its prompts (n,))`` -> (n*H, r, width), written back to its rows."""
    N, H, X = x.shape
    out = None
    for prompts, rows, r in classes:
        n = len(prompts)
        part = (x if rows is None else x[rows]).reshape(n, r, H, X).transpose(1, 2).reshape(n * H, r, X)
        part = product(part, prompts).view(n, H, r, width).transpose(1, 2).reshape(n * r, H, width)
        if rows is None:
            return part
        if out is None:  # the products' dtype (bfloat16 under autocast)
            out = part.new_empty((N, H, width))
        out[rows] = part
    return out


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.d_model // cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x, cos, sin, mask, cache: KVCache | None, layer: int):
        T = x.shape[1]
        q, k, v = self.project(x, cos, sin)
        if cache is not None:
            s = cache.length
            cache.k[layer, :, :, s : s + T] = k
            cache.v[layer, :, :, s : s + T] = v
            k, v = cache.k[layer, :, :, : s + T], cache.v[layer, :, :, : s + T]
        return self.attend(q, k, v, mask)

    def project(self, x, cos, sin) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, D) -> q, k (rotated), v, each (B, H, T, Dh)."""
        B, T, _ = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(qkv[:2], cos, sin)  # q and k rotated in one call
        return q, k, qkv[2]

    def attend(self, q, k, v, mask) -> torch.Tensor:
        """q (B, H, T, Dh) against k, v (B, H, S, Dh); mask (B, 1, T, S) bool or None (causal) -> (B, T, D)."""
        B, H, T, Dh = q.shape
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, H * Dh))

    def decode(self, x, cos, sin, bias, cache: KVCache, layer: int):
        """One new token per row: x (N, 1, D); cos/sin (N, 1, 1, Dh/2); bias (N*H, 1, S) additive key
        mask over the S = cache.length + 1 keys -> (N, 1, D). Same maths as ``forward``, fewer ops."""
        N, H, Dh = x.shape[0], self.n_head, self.head_dim
        qk, s = self._append(x, cos, sin, cache, layer)
        k = cache.k[layer, :, :, : s + 1].reshape(N * H, s + 1, Dh)  # views of the cache, no copy
        v = cache.v[layer, :, :, : s + 1].reshape(N * H, s + 1, Dh)
        att = torch.baddbmm(bias, qk[:, 0].reshape(N * H, 1, Dh), k.transpose(1, 2), alpha=Dh**-0.5)
        return self.proj(torch.bmm(att.softmax(-1), v).view(N, 1, H * Dh))

    def _append(self, x, cos, sin, cache, layer: int) -> tuple[torch.Tensor, int]:
        """Project one new token per row, x (N, 1, D), write its key and value at the cache's next
        position -> (rotated q and k (N, 2, H, Dh), that position)."""
        N, H, Dh = x.shape[0], self.n_head, self.head_dim
        qkv = self.qkv(x).view(N, 3, H, Dh)
        qk = apply_rope(qkv[:, :2], cos, sin)
        s = cache.length
        cache.k[layer, :, :, s] = qk[:, 1]
        cache.v[layer, :, :, s] = qkv[:, 2]
        return qk, s

    def decode_shared(self, x, cos, sin, cache: SharedPrefixCache, layer: int):
        """``decode`` against a :class:`SharedPrefixCache`: x (N, 1, D) -> (N, 1, D). The scores
        against a prompt's keys are one matrix product for all rows sampling that prompt (per head:
        (rows, Dh) @ (Dh, Tp)) instead of one vector product per row, the products of all prompts with
        as many rows in one batched call (:func:`prompt_scores`); the completion part is as in
        ``decode``. One softmax over both parts, so the result equals ``decode`` on the expanded cache."""
        N, H, Dh = x.shape[0], self.n_head, self.head_dim
        qk, s = self._append(x, cos, sin, cache, layer)
        q = qk[:, 0] * Dh**-0.5  # (N, H, Dh)
        pk, pv, Tp = cache.pk[layer], cache.pv[layer], cache.pk.shape[3]  # (G, H, Tp, Dh)
        sp = prompt_scores(q, pk, cache.pbias, cache.classes)  # (N, H, Tp)
        k = cache.k[layer, :, :, : s + 1].reshape(N * H, s + 1, Dh)
        v = cache.v[layer, :, :, : s + 1].reshape(N * H, s + 1, Dh)
        sc = torch.bmm(q.reshape(N * H, 1, Dh), k.transpose(1, 2)).view(N, H, s + 1)
        att = torch.cat((sp, sc), -1).softmax(-1)  # (N, H, Tp + s + 1)
        y = torch.bmm(att[..., Tp:].reshape(N * H, 1, s + 1), v).view(N, H, Dh)
        y = y + prompt_values(att[..., :Tp], pv, cache.classes)
        return self.proj(y.reshape(N, 1, H * Dh))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.kind = cfg.mlp
        if cfg.mlp == "swiglu":
            hidden = int(8 * cfg.d_model / 3 + 63) // 64 * 64
            self.up = nn.Linear(cfg.d_model, 2 * hidden, bias=False)
        else:
            hidden = 4 * cfg.d_model
            self.up = nn.Linear(cfg.d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, cfg.d_model, bias=False)

    def forward(self, x):
        if self.kind == "swiglu":  # gate and value as two products: each output contiguous, so the
            w = self.up.weight      # activation runs at the contiguous rate (a chunk of one product is strided)
            n = w.shape[0] // 2
            h = F.silu(F.linear(x, w[:n])) * F.linear(x, w[n:])
        else:
            h = F.gelu(self.up(x))
        return self.down(h)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(cfg.d_model), RMSNorm(cfg.d_model)
        self.attn, self.mlp = Attention(cfg), MLP(cfg)

    def forward(self, x, cos, sin, mask, cache, layer):
        x = x + self.attn(self.norm1(x), cos, sin, mask, cache, layer)
        return x + self.mlp(self.norm2(x))


def autocast_for(device: torch.device, dtype: str) -> tuple[str, bool]:
    """(device_type, enabled) of the autocast region for weights on ``device`` with compute ``dtype``:
    autocast follows the weights (as the KV cache does), never a hard-coded "cpu". An unresolved
    "auto" computes in float32 (``rlvr.model.precision`` resolves it where a policy is built)."""
    return torch.device(device).type, dtype == "bfloat16"


class TinyGPT(nn.Module):
    """Decoder-only LM. ``forward`` returns logits (B, T, V) (float32 when fp32_logits)."""

    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg, self.vocab_size = cfg, vocab_size
        self.embed = nn.Embedding(vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.embed.weight
        cos, sin = rope_tables(cfg.context, cfg.d_model // cfg.n_head)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)
        for b in self.blocks:  # scaled init of residual projections (GPT-2)
            for lin in (b.attn.proj, b.mlp.down):
                nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def set_dtype(self, dtype: str) -> None:
        """Compute in ``dtype`` from now on ("float32" | "bfloat16"; weights stay float32)."""
        self.cfg = replace(self.cfg, dtype=dtype)

    def set_fp32_logits(self, on: bool) -> None:
        """LM head in float32 (True) or in the compute dtype (False) from now on."""
        self.cfg = replace(self.cfg, fp32_logits=on)

    def _autocast(self):
        kind, on = autocast_for(self.device, self.cfg.dtype)
        return torch.autocast(kind, dtype=torch.bfloat16, enabled=on)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self) -> int:
        """Forward FLOPs per token (2 x matmul parameters; attention scores ignored)."""
        return 2 * (self.num_params() - self.embed.weight.numel() * (0 if self.cfg.tie_weights else 1))

    def hidden(self, ids, key_mask=None, cache: KVCache | None = None) -> torch.Tensor:
        """ids (B, T) -> final-normed hidden states (B, T, D).

        key_mask: None (plain causal, positions 0..T-1, the packed pretraining path) or
        (B, S) bool over all keys including cached ones (S = cache.length + T), True on real
        tokens. Position ids count real tokens, so left padding does not change outputs.
        """
        B, T = ids.shape
        s = cache.length if cache is not None else 0
        mask = None
        if key_mask is None:
            pos = torch.arange(s, s + T, device=ids.device).expand(B, T)
        else:
            pos = (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, s:]
            S = key_mask.shape[1]
            q = torch.arange(s, s + T, device=ids.device)[:, None]
            k = torch.arange(S, device=ids.device)[None, :]
            mask = (((k <= q)[None] & key_mask[:, None, :]) | (k == q)[None])[:, None]
        cos, sin = self.rope_cos[pos].unsqueeze(1), self.rope_sin[pos].unsqueeze(1)
        x = self.embed(ids)
        with self._autocast():
            for i, block in enumerate(self.blocks):
                x = block(x, cos, sin, mask, cache, i)
        if cache is not None:
            cache.length += T
        return self.norm(x)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """h (B, T, D) -> logits (B, T, V); float32 LM head when cfg.fp32_logits."""
        if self.cfg.fp32_logits:  # autocast off, in case the caller is inside an autocast region
            with torch.autocast(self.device.type, enabled=False):
                return F.linear(h.float(), self.lm_head.weight.float())
        with self._autocast():
            return self.lm_head(h).float()

    def forward(self, ids, key_mask=None, cache=None):
        """ids (B, T), key_mask (B, S) bool or None -> logits (B, T, V)."""
        return self.logits(self.hidden(ids, key_mask, cache))

    def decode_step(self, tok: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """The sampler's step: tok (N,) -> next-token logits (N, V), appending one position to the
        cache. ``cache.key_mask[:, cache.length]`` must already be True (the new token is real).
        Equals ``forward(tok[:, None], cache.key_mask[:, :length + 1], cache)[:, -1]`` with a third
        of its ops: the rotary angles and the key mask are prepared once for all layers."""
        N, S, H = tok.shape[0], cache.length + 1, self.cfg.n_head
        km = cache.key_mask[:, :S]
        # real tokens before this one; a row that finished stays in the batch (fed, its outputs discarded)
        # until the sampler compacts it and may pass the context: its angle is clamped. Live rows never
        # reach it (rlvr.rollout.sample.generate checks prompt + new tokens <= context).
        pos = (km.sum(-1) - 1).clamp(max=self.cfg.context - 1)
        cos, sin = self.rope_cos[pos][:, None, None], self.rope_sin[pos][:, None, None]
        bias = torch.zeros(km.shape, device=tok.device).masked_fill_(~km, float("-inf"))
        bias = bias[:, None, None].expand(N, H, 1, S).reshape(N * H, 1, S)
        x = self.embed(tok)[:, None]
        with self._autocast():
            for i, b in enumerate(self.blocks):
                x = x + b.attn.decode(b.norm1(x), cos, sin, bias, cache, i)
                x = x + b.mlp(b.norm2(x))
        cache.length += 1
        return self.logits(self.norm(x))[:, 0]

    def decode_shared(self, tok: torch.Tensor, cache: SharedPrefixCache) -> torch.Tensor:
        """``decode_step`` for a :class:`SharedPrefixCache`: tok (N,) -> next-token logits (N, V)."""
        pos = cache.plen[cache.group] + cache.length  # real tokens before this one
        cos, sin = self.rope_cos[pos][:, None, None], self.rope_sin[pos][:, None, None]
        x = self.embed(tok)[:, None]
        with self._autocast():
            for i, b in enumerate(self.blocks):
                x = x + b.attn.decode_shared(b.norm1(x), cos, sin, cache, i)
                x = x + b.mlp(b.norm2(x))
        cache.length += 1
        return self.logits(self.norm(x))[:, 0]

    def prefill_shared(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, repeats: torch.Tensor,
                       t_new: int) -> tuple[SharedPrefixCache, torch.Tensor]:
        """Prefill G prompts (G, Tp) once for ``repeats`` (G,) samples each -> (the cache of the
        repeats.sum() rows, their next-token logits (N, V)); decode with :meth:`decode_shared`."""
        G, Tp = prompt_ids.shape
        prefix = self.new_cache(G, Tp)
        prefix.key_mask[:] = prompt_mask
        logits = self.logits(self.hidden(prompt_ids, prompt_mask, prefix)[:, -1:])[:, -1]
        cache = SharedPrefixCache(prefix, prompt_mask, repeats, t_new)
        return cache, logits[cache.group]

    def new_cache(self, batch: int, t_max: int) -> KVCache:
        c = self.cfg
        dtype = torch.bfloat16 if c.dtype == "bfloat16" else torch.float32
        return KVCache(c.n_layer, batch, c.n_head, t_max, c.d_model // c.n_head, dtype, self.device)

    # --------------------------------------------------------------- io
    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in self.state_dict().items() if k != "lm_head.weight"
                 or not self.cfg.tie_weights}
        save_file(state, str(d / "model.safetensors"))
        (d / "model_config.json").write_text(json.dumps({"vocab_size": self.vocab_size, **asdict(self.cfg)}))

    @classmethod
    def load(cls, directory: str | Path) -> TinyGPT:
        from safetensors.torch import load_file

        d = Path(directory)
        meta = json.loads((d / "model_config.json").read_text())
        vocab = meta.pop("vocab_size")
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in meta.items()}
        model = cls(ModelConfig(**fields), vocab)
        state = load_file(str(d / "model.safetensors"))
        if model.cfg.tie_weights:
            state["lm_head.weight"] = state["embed.weight"]
        model.load_state_dict(state)
        return model
