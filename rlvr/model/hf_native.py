"""Native forward of Hugging Face Llama / Qwen2 decoders for rlvr's sampler and trainer.

:class:`NativeDecoder` computes the same function as the HF decoder from the HF modules' own
parameters, with a preallocated KV cache (:class:`NativeCache`) and none of HF's mask/cache
machinery, which dominates the cost of small models on CPU. :func:`native_unsupported` says why a
model must use the HF decoder instead (other architectures, gradient checkpointing,
``RLVR_HF_NATIVE=0``). Used by :class:`rlvr.model.hf.HFPolicy`. Shapes: B batch, T new positions,
S = cached + T keys, D width.
"""

from __future__ import annotations

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from rlvr.config import ModelConfig

NATIVE_ARCHS = ("llama", "qwen2")
NATIVE_ROPE = ("default", "linear", "llama3", "yarn")  # inv_freq fixed at init (no dynamic update)


class NativeCache:
    """Preallocated keys/values (L, B, Hkv, Tmax, Dh) plus the key mask (B, Tmax) bool."""

    def __init__(self, n_layer: int, batch: int, kv_heads: int, t_max: int, head_dim: int, dtype, device):
        shape = (n_layer, batch, kv_heads, t_max, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.key_mask = torch.zeros((batch, t_max), dtype=torch.bool, device=device)
        self.length = 0
        self.lean = False  # filled by NativeDecoder's lean path (q/k head dims permuted)

    def select(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` (B',) of the batch (drop finished samples)."""
        rows = rows.to(self.key_mask.device)
        self.k, self.v = self.k.index_select(1, rows), self.v.index_select(1, rows)  # a copy per row, not per element
        self.key_mask = self.key_mask[rows]


def native_unsupported(lm: nn.Module, cfg: ModelConfig) -> str | None:
    """Why the native forward cannot stand in for ``lm``'s HF decoder (None: it can)."""
    c = lm.config
    rope = (getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {}).get("rope_type", "default")
    checks = [
        (os.environ.get("RLVR_HF_NATIVE", "1") == "0", "RLVR_HF_NATIVE=0"),
        (getattr(c, "model_type", "") not in NATIVE_ARCHS, f"model_type {getattr(c, 'model_type', '?')!r}"),
        (cfg.gradient_checkpointing, "gradient checkpointing"),
        (getattr(c, "hidden_act", "silu") != "silu", f"hidden_act {getattr(c, 'hidden_act', '')!r}"),
        (float(getattr(c, "attention_dropout", 0.0) or 0.0) > 0, "attention dropout"),
        ("sliding_attention" in (getattr(c, "layer_types", None) or ()), "sliding-window layers"),
        (rope not in NATIVE_ROPE, f"rope_type {rope!r}"),
        (getattr(c, "pretraining_tp", 1) not in (None, 1), "pretraining_tp > 1"),
    ]
    return next((why for bad, why in checks if bad), None)


class NativeDecoder:
    """The Llama / Qwen2 decoder function (embedding, L x [RMSNorm, GQA attention with RoPE,
    RMSNorm, SwiGLU MLP], final RMSNorm) computed from the HF model's own modules: no weights are
    copied, so optimiser steps, checkpoint loads and LoRA adapters (called as modules) act on it.
    Matches the HF decoder on every real (unmasked) position; padded query positions attend to
    themselves instead of to nothing (finite, and never read).

    Sampling (a :class:`NativeCache`, no gradient, float32, plain ``nn.Linear`` projections) takes
    a leaner path with fewer, larger ops: q/k/v and gate/up each as one matmul on concatenated
    weights (rebuilt whenever a parameter changes in place), RoPE as one complex multiply (q and k
    rows permuted within each head so rotation pairs are adjacent; attention scores do not change,
    and the cached keys are in that order), and the residual adds fused into the output matmuls.

    Shapes: B batch, T new positions, S = cached + T keys, H heads, Hkv key/value heads, Dh head
    size, D width, I MLP width.
    """

    FUSE_MAX_PARAMS = 100_000_000  # above this, concatenated copies of the weights cost too much memory

    def __init__(self, lm: nn.Module, fuse: bool = True):
        c = lm.config
        decoder = lm.get_decoder()
        self.embed = decoder.embed_tokens
        self.layers = decoder.layers
        self.norm = decoder.norm
        self.n_head, self.n_kv = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        self.scale = self.head_dim**-0.5
        rot = decoder.rotary_emb
        self.inv_freq = rot.inv_freq.detach().float().clone()  # (Dh/2,) of HF's own rope init
        self.rope_scale = float(getattr(rot, "attention_scaling", 1.0) or 1.0)
        self._rope: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # cos, sin, cis (P, Dh/2)
        plain = all(type(getattr(layer.self_attn, n)) is nn.Linear for layer in self.layers
                    for n in ("q_proj", "k_proj", "v_proj", "o_proj")) and all(
            type(getattr(layer.mlp, n)) is nn.Linear for layer in self.layers for n in ("gate_proj", "up_proj",
                                                                                         "down_proj"))
        n_params = sum(p.numel() for p in lm.parameters())
        self.fuse = fuse and plain and n_params <= self.FUSE_MAX_PARAMS and self.embed.weight.dtype == torch.float32
        half = self.head_dim // 2
        self._perm = torch.stack((torch.arange(half), torch.arange(half) + half), -1).reshape(-1)  # (Dh,)
        self._fused: list | None = None
        self._fused_key: tuple | None = None
        self._params = [p for layer in self.layers for p in layer.parameters()]  # what the fused weights copy

    # --------------------------------------------------------------- rotary tables
    def _tables(self, need: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._rope is None or self._rope[0].shape[0] < need or self._rope[0].device != device:
            n = max(need, 2 * self._rope[0].shape[0] if self._rope is not None else 256)
            ang = torch.outer(torch.arange(n, dtype=torch.float32, device=device), self.inv_freq.to(device))
            cos, sin = ang.cos() * self.rope_scale, ang.sin() * self.rope_scale
            self._rope = (cos, sin, torch.complex(cos, sin))
        return self._rope

    def rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """pos (B, T) long -> cos, sin (B, 1, T, Dh/2) float32, from tables grown on demand."""
        cos, sin, _ = self._tables(int(pos.max()) + 1 if pos.numel() else 1, pos.device)
        return cos[pos].unsqueeze(1), sin[pos].unsqueeze(1)

    def cis(self, pos: torch.Tensor) -> torch.Tensor:
        """pos (...) long -> exp(i * angle) * scale (..., Dh/2) complex64."""
        return self._tables(int(pos.max()) + 1 if pos.numel() else 1, pos.device)[2][pos]

    # --------------------------------------------------------------- masks
    @staticmethod
    def positions_and_mask(key_mask, B: int, T: int, s: int, device, cached: bool):
        """-> (pos (B, T) long, mask): None (causal), additive (B, 1, 1, S) float for one decoding
        step, or (B, 1, T, S) bool."""
        if key_mask is None:
            pos = torch.arange(s, s + T, device=device).expand(B, T)
            if cached and s > 0:  # causal over cached + new keys
                q = torch.arange(s, s + T, device=device)[:, None]
                return pos, (torch.arange(s + T, device=device)[None, :] <= q)[None, None]
            return pos, None
        if T == 1 and cached:  # one decoding step: the new token sees every real key
            bias = torch.zeros(key_mask.shape, device=device).masked_fill_(~key_mask, float("-inf"))
            return key_mask.sum(-1, keepdim=True) - 1, bias[:, None, None]
        pos = (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, s:]
        q = torch.arange(s, s + T, device=device)[:, None]
        k = torch.arange(key_mask.shape[1], device=device)[None, :]
        return pos, (((k <= q)[None] & key_mask[:, None, :]) | (k == q)[None])[:, None]

    # --------------------------------------------------------------- the general path (training)
    def __call__(self, ids: torch.Tensor, key_mask: torch.Tensor | None, cache: NativeCache | None) -> torch.Tensor:
        """ids (B, T); key_mask None (causal, positions from the cache length) or (B, S) bool ->
        final-normed hidden states (B, T, D)."""
        if cache is not None and self._lean(cache):
            return self._lean_forward(ids, key_mask, cache)
        B, T = ids.shape
        s = cache.length if cache is not None else 0
        pos, mask = self.positions_and_mask(key_mask, B, T, s, ids.device, cache is not None)
        cos, sin = self.rope(pos)
        x = self.embed(ids)
        for i, layer in enumerate(self.layers):
            x = x + self.attention(layer.self_attn, _rms_norm(layer.input_layernorm, x), cos, sin, mask, cache, i)
            x = x + self.mlp(layer.mlp, _rms_norm(layer.post_attention_layernorm, x))
        if cache is not None:
            cache.length += T
        return _rms_norm(self.norm, x)

    @staticmethod
    def mlp(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return m.down_proj(F.silu(m.gate_proj(x)) * m.up_proj(x))

    def attention(self, a: nn.Module, x, cos, sin, mask, cache: NativeCache | None, layer: int) -> torch.Tensor:
        """x (B, T, D) -> attention output (B, T, D), through a's q/k/v/o projections."""
        B, T, _ = x.shape
        H, Hkv, Dh = self.n_head, self.n_kv, self.head_dim
        q = a.q_proj(x).view(B, T, H, Dh).transpose(1, 2)
        k = a.k_proj(x).view(B, T, Hkv, Dh).transpose(1, 2)
        v = a.v_proj(x).view(B, T, Hkv, Dh).transpose(1, 2)
        qk = _apply_rope(torch.cat((q, k), dim=1), cos.to(q.dtype), sin.to(q.dtype))  # q and k in one call
        q, k = qk[:, :H], qk[:, H:]
        if cache is not None:
            s = cache.length
            cache.k[layer, :, :, s : s + T] = k
            cache.v[layer, :, :, s : s + T] = v
            k, v = cache.k[layer, :, :, : s + T], cache.v[layer, :, :, : s + T]
        if T == 1 and mask is not None and mask.dtype != torch.bool:  # decoding: one query, additive mask
            qg = q.reshape(B, Hkv, H // Hkv, Dh)  # head h = kv head h // (H/Hkv), as HF's repeat_kv
            att = torch.matmul(qg, k.transpose(-1, -2)).mul_(self.scale).add_(mask)
            y = torch.matmul(att.softmax(-1), v).reshape(B, H, 1, Dh)  # cheaper than SDPA for one query
        else:
            y = _sdpa(q, k, v, mask, self.scale)
        return a.o_proj(y.transpose(1, 2).reshape(B, T, H * Dh))

    # --------------------------------------------------------------- the lean sampling path
    def _lean(self, cache: NativeCache) -> bool:
        """Whether this cache's forward takes the lean path; a cache keeps the path of its prefill
        (the key layouts differ)."""
        lean = self.fuse and not torch.is_grad_enabled()
        if cache.length == 0:
            cache.lean = lean
        elif cache.lean != lean:
            raise RuntimeError("a NativeCache filled without gradient was used with gradient on (or the "
                               "reverse); sample under torch.no_grad() / inference_mode throughout")
        return lean

    def _weights(self) -> list:
        """Per layer: (wqkv (H*Dh + 2*Hkv*Dh, D), bqkv or None, o_proj, wgu (2I, D), bgu or None,
        down_proj, norm1, norm2); the concatenations are rebuilt when any parameter changed in place."""
        key = tuple((p.data_ptr(), p._version) for p in self._params)
        if self._fused is not None and key == self._fused_key:
            return self._fused
        H, Hkv, Dh = self.n_head, self.n_kv, self.head_dim
        perm = self._perm.to(self.embed.weight.device)

        def rows(w, heads):  # permute the rows of each head: rotation pairs (j, j + Dh/2) adjacent
            return w.reshape(heads, Dh, *w.shape[1:])[:, perm].reshape(w.shape)

        out = []
        with torch.no_grad():
            for layer in self.layers:
                a, m = layer.self_attn, layer.mlp
                wqkv = torch.cat((rows(a.q_proj.weight, H), rows(a.k_proj.weight, Hkv), a.v_proj.weight))
                bqkv = None
                if a.q_proj.bias is not None:
                    bqkv = torch.cat((rows(a.q_proj.bias, H), rows(a.k_proj.bias, Hkv), a.v_proj.bias))
                wgu = torch.cat((m.gate_proj.weight, m.up_proj.weight))
                bgu = None if m.gate_proj.bias is None else torch.cat((m.gate_proj.bias, m.up_proj.bias))
                out.append((wqkv, bqkv, a.o_proj, wgu, bgu, m.down_proj, layer.input_layernorm,
                            layer.post_attention_layernorm))
        self._fused, self._fused_key = out, key
        return out

    def _lean_forward(self, ids: torch.Tensor, key_mask, cache: NativeCache) -> torch.Tensor:
        B, T = ids.shape
        s = cache.length
        pos, mask = self.positions_and_mask(key_mask, B, T, s, ids.device, True)
        if mask is not None and mask.dtype != torch.bool:  # one decoding step: (B * Hkv, 1, S) additive
            S = mask.shape[-1]
            mask = mask.expand(B, self.n_kv, 1, S).reshape(B * self.n_kv, 1, S)
        h = self._lean_layers(self.embed(ids), self.cis(pos)[:, :, None], mask, cache)
        cache.length += T
        return h

    def decode_step(self, tok: torch.Tensor, cache: NativeCache) -> torch.Tensor:
        """tok (N,) -> final-normed hidden states (N, D) of one new position per row; the cache's
        key mask must already be True at ``cache.length``."""
        S = cache.length + 1
        km = cache.key_mask[:, :S]
        if not self._lean(cache):
            return self(tok[:, None], km, cache)[:, 0]
        N = tok.shape[0]
        bias = torch.zeros(km.shape, device=tok.device).masked_fill_(~km, float("-inf"))
        bias = bias[:, None, None].expand(N, self.n_kv, 1, S).reshape(N * self.n_kv, 1, S)
        cis = self.cis(km.sum(-1) - 1)[:, None, None]  # (N, 1, 1, Dh/2)
        h = self._lean_layers(self.embed(tok)[:, None], cis, bias, cache)
        cache.length += 1
        return h[:, 0]

    def _lean_layers(self, x: torch.Tensor, cis: torch.Tensor, mask, cache: NativeCache) -> torch.Tensor:
        """x (B, T, D) embeddings, cis (B, T, 1, Dh/2); mask None | (B, 1, T, S) bool | (B*Hkv, 1, S)
        additive (T = 1) -> final-normed hidden states (B, T, D)."""
        B, T, D = x.shape
        H, Hkv, Dh = self.n_head, self.n_kv, self.head_dim
        s, S = cache.length, cache.length + T
        x = x.reshape(B * T, D)
        for i, (wqkv, bqkv, o, wgu, bgu, down, n1, n2) in enumerate(self._weights()):
            qkv = F.linear(_rms_norm(n1, x), wqkv, bqkv).view(B, T, H + 2 * Hkv, Dh)
            qk = torch.view_as_complex(qkv[:, :, : H + Hkv].unflatten(-1, (Dh // 2, 2)))
            qk = torch.view_as_real(qk * cis).flatten(-2)  # RoPE of q and k: (B, T, H + Hkv, Dh)
            cache.k[i, :, :, s:S] = qk[:, :, H:].transpose(1, 2)
            cache.v[i, :, :, s:S] = qkv[:, :, H + Hkv :].transpose(1, 2)
            if T == 1 and mask is not None and mask.dtype != torch.bool:  # one query per row: two bmm
                k = cache.k[i, :, :, :S].reshape(B * Hkv, S, Dh)  # views of the cache, no copy
                v = cache.v[i, :, :, :S].reshape(B * Hkv, S, Dh)
                q = qk[:, 0, :H].reshape(B * Hkv, H // Hkv, Dh)  # head h uses kv head h // (H / Hkv)
                att = torch.baddbmm(mask, q, k.transpose(1, 2), alpha=self.scale)
                y = torch.bmm(att.softmax(-1), v).view(B, H * Dh)
            else:
                y = _sdpa(qk[:, :, :H].transpose(1, 2), cache.k[i, :, :, :S], cache.v[i, :, :, :S], mask, self.scale)
                y = y.transpose(1, 2).reshape(B * T, H * Dh)
            x = torch.addmm(x, y, o.weight.t())  # residual + o_proj in one op
            if o.bias is not None:
                x = x + o.bias
            g, u = F.linear(_rms_norm(n2, x), wgu, bgu).chunk(2, dim=-1)
            x = torch.addmm(x, F.silu(g).mul_(u), down.weight.t())  # residual + down_proj
            if down.bias is not None:
                x = x + down.bias
        return _rms_norm(self.norm, x).view(B, T, D)


def _sdpa(q, k, v, mask, scale: float) -> torch.Tensor:
    """q (B, H, T, Dh), k/v (B, Hkv, S, Dh), mask None (causal) or (B, 1, T, S) bool -> (B, H, T, Dh)."""
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, scale=scale, **gqa)


def _rms_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """HF's LlamaRMSNorm / Qwen2RMSNorm as one fused op (the module itself for mixed dtypes)."""
    if norm.weight.dtype != x.dtype:
        return norm(x)
    return F.rms_norm(x, (x.shape[-1],), norm.weight, norm.variance_epsilon)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, T, Dh); cos/sin (B, 1, T, Dh/2) -> rotated x (HF's rotate-half convention)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
