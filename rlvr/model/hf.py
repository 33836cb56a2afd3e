"""Hugging Face causal LMs behind the policy interface of :class:`rlvr.model.tiny.TinyGPT`.

``load_hf_policy(path)`` wraps any ``AutoModelForCausalLM`` + ``AutoTokenizer`` (local directory or
hub name) as :class:`HFPolicy` + :class:`HFTokenizer`, so that the KV-cache sampler, the trainer,
checkpoints and evaluation work unchanged. Shapes: B batch, T new positions, S = cached + T keys,
D width, V vocab.

Llama and Qwen2 models run a native forward (:class:`rlvr.model.hf_native.NativeDecoder`): the same function as the HF
decoder, computed from the HF modules' own parameters with a preallocated KV cache and no HF
mask/cache machinery, which dominates the cost of small models on CPU. Other architectures, and
gradient checkpointing, go through the HF decoder (``RLVR_HF_NATIVE=0`` forces that path).

``model.path: tiny-hf:llama`` (or ``tiny-hf:qwen2``) names ``<cache>/hf-tiny/<arch>`` (:func:`tiny_hf_dir`),
a tiny random model with a byte-level tokenizer that :mod:`rlvr.train.tiny_hf` builds (the training
and evaluation commands build it on first use); this module only loads it.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from rlvr.config import ConfigError, ModelConfig
from rlvr.errors import UserError
from rlvr.model.hf_native import NativeCache, NativeDecoder, native_unsupported
from rlvr.model.tokenizer import left_pad
from rlvr.paths import cache_root
from rlvr.types import Prompt, check_messages, is_messages

TINY_PREFIX = "tiny-hf:"
SIDECAR = "rlvr_hf.json"  # ModelConfig fields a checkpoint must be re-loaded with
LORA_FILE = "lora_adapter.safetensors"  # LoRA weights (resume); model.safetensors holds the merged model
SAVED_FIELDS = ("fp32_logits", "dtype", "chat_template", "chat_template_kwargs")


class HFCache:
    """A transformers ``DynamicCache`` plus the key mask (B, t_max) bool the sampler fills."""

    def __init__(self, kv, batch: int, t_max: int, device):
        self.kv = kv
        self.key_mask = torch.zeros((batch, t_max), dtype=torch.bool, device=device)
        self.length = 0

    def select(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` (B',) of the batch (drop finished samples)."""
        rows = rows.to(self.key_mask.device)
        self.kv.batch_select_indices(rows)
        self.key_mask = self.key_mask[rows]

class HFPolicy(nn.Module):
    """An HF causal LM with TinyGPT's interface (``hidden``/``logits``/``forward``/``new_cache``).

    Master weights are float32 (``model.dtype=bfloat16`` autocasts the compute), except the frozen
    base of a LoRA model, which is kept in bfloat16 then. ``cfg`` is the ModelConfig with
    ``tie_weights`` read from the HF config. ``native`` (default: when :func:`native_unsupported`
    finds no reason against it) runs :class:`NativeDecoder` instead of the HF decoder;
    ``self.native_off`` says why not, when not.
    """

    def __init__(self, causal_lm: nn.Module, cfg: ModelConfig, native: bool | None = None):
        super().__init__()
        hf_cfg = causal_lm.config
        tied = bool(getattr(hf_cfg, "tie_word_embeddings", False))
        self.cfg = dataclasses.replace(cfg, kind="hf", tie_weights=tied)
        if cfg.gradient_checkpointing:
            _checkpointing(causal_lm)
        self.lora = cfg.lora_r > 0
        if self.lora:
            causal_lm = _with_lora(causal_lm, cfg.lora_r)
        self.hf = causal_lm  # a PeftModel when LoRA is on
        self.lm = causal_lm.get_base_model() if self.lora else causal_lm  # the plain causal LM
        self.decoder = self.lm.get_decoder()
        self.lm_head = self.lm.get_output_embeddings()
        self.softcap = getattr(hf_cfg, "final_logit_softcapping", None)
        params = inspect.signature(self.decoder.forward).parameters  # transformers >= 5.2x: `cache`
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        why = native_unsupported(self.lm, cfg)
        self.native_off = "native=False" if native is False else why
        fuse = cfg.dtype != "bfloat16"  # the lean sampling path computes in float32 only (an unresolved auto too)
        self.native = NativeDecoder(self.lm, fuse) if self.native_off is None else None  # uses the HF modules

    def set_dtype(self, dtype: str) -> None:
        """Compute in ``dtype`` from now on ("float32" | "bfloat16"; the stored weights are unchanged)."""
        if dtype == self.cfg.dtype:
            return
        self.cfg = dataclasses.replace(self.cfg, dtype=dtype)
        if self.native is not None:  # its lean sampling path is float32 only
            self.native = NativeDecoder(self.lm, dtype != "bfloat16")

    def set_fp32_logits(self, on: bool) -> None:
        """LM head in float32 (True) or in the compute dtype (False) from now on."""
        self.cfg = dataclasses.replace(self.cfg, fp32_logits=on)

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg.dtype == "bfloat16")

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self) -> int:
        """Forward FLOPs per token (2 x matmul parameters; the embedding lookup is free)."""
        embed = self.lm.get_input_embeddings().weight.numel()
        return 2 * (self.num_params() - (0 if self.cfg.tie_weights else embed))

    def hidden(self, ids, key_mask=None, cache: HFCache | None = None) -> torch.Tensor:
        """ids (B, T) -> final-normed hidden states (B, T, D).

        key_mask: None (plain causal, positions 0..T-1) or (B, S) bool over all keys including cached
        ones (S = cache.length + T). Position ids are cumsum(key_mask) - 1, so left padding does not
        change outputs.
        """
        B, T = ids.shape
        ids = ids.to(self.device)
        if self.native is not None:
            with self._autocast():
                return self.native(ids, None if key_mask is None else key_mask.to(ids.device), cache)
        s = cache.length if cache is not None else 0
        if key_mask is None:
            pos, attn = torch.arange(s, s + T, device=ids.device).expand(B, T), None
        else:
            key_mask = key_mask.to(ids.device)
            pos = (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, s:]
            attn = key_mask.long()
        with self._autocast():
            kv = {self._cache_kw: cache.kv} if cache is not None else {}
            out = self.decoder(input_ids=ids, attention_mask=attn, position_ids=pos,
                               use_cache=cache is not None, **kv)
        if cache is not None:
            cache.length += T
        return out.last_hidden_state

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """h (B, T, D) -> logits (B, T, V) float32; the projection itself in float32 when fp32_logits."""
        w, b = self.lm_head.weight, getattr(self.lm_head, "bias", None)
        if self.cfg.fp32_logits:  # autocast off: called inside an autocast region it would recast to bf16
            with torch.autocast(self.device.type, enabled=False):
                out = F.linear(h.float(), w.float(), None if b is None else b.float())
        else:
            with self._autocast():
                out = self.lm_head(h).float()
        if self.softcap:  # Gemma-2 style final logit soft-capping
            out = torch.tanh(out / self.softcap) * self.softcap
        return out

    def forward(self, ids, key_mask=None, cache=None):
        """ids (B, T), key_mask (B, S) bool or None -> logits (B, T, V) float32."""
        return self.logits(self.hidden(ids, key_mask, cache))

    def decode_step(self, tok: torch.Tensor, cache) -> torch.Tensor:
        """The sampler's step: tok (N,) -> next-token logits (N, V), appending one position to the
        cache, whose key mask must already be True at ``cache.length``. Equals
        ``forward(tok[:, None], cache.key_mask[:, :length + 1], cache)[:, -1]``."""
        tok = tok.to(self.device)
        if self.native is not None and isinstance(cache, NativeCache):
            with self._autocast():
                h = self.native.decode_step(tok, cache)
            return self.logits(h)  # outside autocast: float32 logits as in the prefill and the trainer
        return self(tok[:, None], cache.key_mask[:, : cache.length + 1], cache)[:, -1]

    def new_cache(self, batch: int, t_max: int) -> HFCache | NativeCache:
        if self.native is not None:
            n = self.native
            dtype = torch.bfloat16 if self.cfg.dtype == "bfloat16" else torch.float32
            return NativeCache(len(n.layers), batch, n.n_kv, t_max, n.head_dim, dtype, self.device)
        from transformers import DynamicCache

        return HFCache(DynamicCache(config=self.lm.config), batch, t_max, self.device)

    # --------------------------------------------------------------- weights and io
    def merged_state(self) -> dict[str, torch.Tensor]:
        """The plain HF state dict (LoRA deltas merged in, no peft key names): what a checkpoint's
        ``model.safetensors`` holds and what an inference engine loads."""
        sd = self.lm.state_dict()
        if not self.lora:
            return sd
        from peft.tuners.lora import LoraLayer

        merged = {}
        for name, mod in self.lm.named_modules():
            if isinstance(mod, LoraLayer) and "default" in getattr(mod, "lora_A", {}):
                base = mod.get_base_layer().weight
                merged[f"{name}.weight"] = (base + mod.get_delta_weight("default").to(base.dtype)).detach()
        out = {}
        for k, v in sd.items():
            if "lora_" in k:
                continue
            k = k.replace(".base_layer.", ".")
            out[k] = merged.get(k, v)
        return out

    def save_pretrained(self, directory: str | Path) -> None:
        """A plain HF model directory (loadable by transformers and vLLM) + the rlvr sidecar."""
        d = Path(directory)
        self.lm.save_pretrained(d, state_dict=self.merged_state(), max_shard_size="1000GB")
        if self.lora:
            from peft import get_peft_model_state_dict
            from safetensors.torch import save_file

            lora = {k: v.contiguous() for k, v in get_peft_model_state_dict(self.hf).items()}
            save_file(lora, str(d / LORA_FILE))
        (d / SIDECAR).write_text(json.dumps({k: getattr(self.cfg, k) for k in SAVED_FIELDS}))

    def load_checkpoint(self, directory: str | Path) -> None:
        """Load the weights of a directory written by :meth:`save_pretrained` into this model, in
        place (the optimiser keeps its parameters): the LoRA adapter when LoRA is on, else all."""
        from safetensors.torch import load_file

        d = Path(directory)
        if self.lora:
            from peft import set_peft_model_state_dict

            if not (d / LORA_FILE).exists():
                raise UserError(f"{d}: no {LORA_FILE} (not a LoRA checkpoint); resume with model.lora_r=0")
            set_peft_model_state_dict(self.hf, load_file(str(d / LORA_FILE)))
            return
        files = sorted(d.glob("model*.safetensors"))
        if not files:
            raise UserError(f"{d}: no model.safetensors inside; use an earlier checkpoint")
        state = {k: v for f in files for k, v in load_file(str(f)).items()}
        missing, unexpected = self.lm.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (self.cfg.tie_weights and k.endswith("lm_head.weight"))]
        if missing or unexpected:
            raise UserError(f"{d}: weights do not fit this model (missing {missing[:3]}, unexpected "
                            f"{unexpected[:3]}); resume with the model.path the run was started with")


def _checkpointing(causal_lm: nn.Module) -> None:
    """Recompute activations in backward (non-reentrant); transformers >= 5.2x renamed the switch."""
    if hasattr(causal_lm, "activation_checkpointing_enable"):
        causal_lm.activation_checkpointing_enable({"use_reentrant": False})
    else:
        causal_lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def _with_lora(causal_lm: nn.Module, r: int) -> nn.Module:
    """LoRA (rank r, alpha 2r, no dropout) on every linear projection of attention and MLP."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise UserError("model.lora_r > 0 needs peft; pip install peft, or set model.lora_r=0") from None
    conf = LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.0, target_modules="all-linear", bias="none")
    return get_peft_model(causal_lm, conf)


class HFTokenizer:
    """An HF tokenizer with CharTokenizer's interface. :meth:`render` is the one place a task prompt
    becomes the text the model sees: chat messages (``[{"role", "content"}]``, TRL's conversational
    format) and, when ``chat`` is true, plain prompts (as ``[{"role": "user", "content": prompt}]``) go
    through the tokenizer's chat template with ``add_generation_prompt=True`` and
    ``chat_template_kwargs`` (e.g. ``{"enable_thinking": False}``); a plain prompt without a chat
    template is encoded raw after BOS (if the tokenizer has one); chat messages without one are an error."""

    def __init__(self, tok, chat: bool = True, chat_template_kwargs: dict | None = None):
        self.tok = tok
        self.has_template = bool(getattr(tok, "chat_template", None))
        self.chat = bool(chat and self.has_template)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.eos_id = tok.eos_token_id
        if self.eos_id is None:
            raise UserError("the tokenizer has no EOS token; use a model whose tokenizer defines eos_token")
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.eos_id
        self.bos_id = tok.bos_token_id

    @property
    def vocab_size(self) -> int:
        return len(self.tok)

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        ids = self.tok.encode(text, add_special_tokens=False)
        head = [self.bos_id] if bos and self.bos_id is not None else []
        return head + ids + ([self.eos_id] if eos else [])

    def decode(self, ids, skip_special: bool = True) -> str:
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else [int(i) for i in ids]
        return self.tok.decode(ids, skip_special_tokens=skip_special)

    def render(self, prompt: Prompt) -> str | None:
        """The chat-template text of ``prompt`` (str or chat messages), or None for a plain prompt
        encoded raw (no template, or ``model.chat_template=false``). Chat messages need a template
        and ``model.chat_template=true``: else ``ConfigError``."""
        if is_messages(prompt):
            if not self.chat:
                key, why = ("model.chat_template", "it is false") if self.has_template else \
                    ("model.path", "this tokenizer has no chat template")
                raise ConfigError(f"{key}: the task's prompts are chat messages, which need the tokenizer's chat "
                                  f"template ({why}); use a tokenizer with one and model.chat_template=true, or "
                                  "plain-text prompts")
            try:
                messages = check_messages(prompt)
            except (TypeError, ValueError) as e:
                raise UserError(f"a task prompt is malformed chat messages ({e})") from None
        elif self.chat:
            messages = [{"role": "user", "content": prompt}]
        else:
            return None
        try:
            return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                **self.chat_template_kwargs)
        except Exception as e:  # noqa: BLE001 - jinja errors (roles out of order), a kwarg clashing with ours
            first = (str(e).strip().splitlines() or [""])[0][:200]
            raise UserError(f"the chat template failed on a prompt ({type(e).__name__}: {first}); check the "
                            "messages and model.chat_template_kwargs") from None

    def tool_message_ids(self, content: str, tool: str = "", after: tuple[str, ...] = ()) -> list[int] | None:
        """Token ids of a tool's output ``content`` as this model's chat template writes it: whatever
        follows an assistant turn that called ``tool`` (its end-of-turn), the ``tool`` message, and the
        next assistant header (``add_generation_prompt=True``), as transformers documents tool use
        (an assistant message with ``tool_calls``, then a ``role: tool`` message). None when the
        policy's text is not chat-templated or the template cannot render a tool message: the sampler
        then writes the call format's text. ``after``: the call format's closing strings; the
        observation starts after the last of them the template writes for the call (the policy's
        turn stopped there), else where the conversation without the tool message stops matching."""
        if not self.chat:
            return None
        text = self._tool_message_text(content, tool, after)
        return None if text is None else self.tok.encode(text, add_special_tokens=False)

    def _tool_message_text(self, content: str, tool: str, after: tuple[str, ...]) -> str | None:
        name = tool or "tool"
        called = [{"role": "user", "content": "."},
                  {"role": "assistant", "content": "", "tool_calls": [
                      {"type": "function", "function": {"name": name, "arguments": {}}}]}]

        def rendered(messages: list[dict], generation: bool) -> str:
            return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation,
                                                **self.chat_template_kwargs)

        try:
            before = rendered(called, False)
            marked = rendered([*called, {"role": "tool", "name": name, "content": _MARK}], True)
            whole = rendered([*called, {"role": "tool", "name": name, "content": content}], True)
        except Exception:  # noqa: BLE001 - a template without tool messages (jinja errors of any kind)
            return None
        at = marked.find(_MARK)
        if at < 0:
            return None
        closes = [marked.rfind(s, 0, at) + len(s) for s in after if s and marked.rfind(s, 0, at) >= 0]
        cut = max(closes) if closes else _common_prefix(before, marked)
        return whole[cut:] if whole[:cut] == marked[:cut] else None

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        """Token ids the model sees for one task prompt (:meth:`render`, or BOS + raw text)."""
        text = self.render(prompt)
        if text is not None:
            return self.tok.encode(text, add_special_tokens=False)
        return self.encode(prompt, bos=True)

    def batch_encode_left(self, texts: list[Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded prompts (text or chat messages): ids (B, Tp) long, mask (B, Tp) bool."""
        seqs = [self.prompt_ids(t) for t in texts]
        return left_pad(seqs, self.pad_id)

    def save_pretrained(self, directory: str | Path) -> None:
        self.tok.save_pretrained(str(directory))


_MARK = "\x00rlvr-tool-output\x00"
"""Stands for a tool's output while :meth:`HFTokenizer.tool_message_ids` finds where it goes."""


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


# ----------------------------------------------------------------------------- loading
def _saved_cfg(path: str) -> ModelConfig:
    """ModelConfig for a directory loaded without a run config (evaluation of a checkpoint)."""
    side = Path(path) / SIDECAR
    extra = json.loads(side.read_text()) if side.exists() else {}
    return ModelConfig(kind="hf", path=path, **{k: extra[k] for k in SAVED_FIELDS if k in extra})


def model_source(path_or_name: str) -> str:
    """What from_pretrained gets: a local directory (tiny-hf builds and cached hub models too) or a
    hub name (downloaded by transformers)."""
    if path_or_name.startswith(TINY_PREFIX):
        d = tiny_hf_dir(path_or_name[len(TINY_PREFIX):])
        if not (d / "config.json").exists():
            raise UserError(f"{path_or_name} is not built yet (it would be in {d}); `rlvr train` and `rlvr eval` "
                            "build it on first use, or run `python -m rlvr.train.tiny_hf build-tiny "
                            f"{d} --arch {d.name}`")
        return str(d)
    p = Path(path_or_name).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise UserError(f"{p}: no config.json inside; pass an HF model directory or a hub name")
        return str(p)
    if p.exists() or path_or_name.startswith(("/", ".", "~")) or path_or_name.count("/") > 1:
        raise UserError(f"{path_or_name}: model directory not found; pass an existing HF model directory, "
                        f"a hub name like Qwen/Qwen2.5-0.5B-Instruct, or {TINY_PREFIX}llama")
    cached = _cached_snapshot(path_or_name)
    if cached is not None:  # already in the local HF cache: no network at all
        return cached
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "false", ""):
        raise UserError(f"cannot load HF model {path_or_name!r}: HF_HUB_OFFLINE is set and it is not in "
                        "the local HF cache; download it where the hub is reachable "
                        "(`hf download NAME --local-dir DIR`) and set model.path=DIR")
    return path_or_name


def tiny_hf_dir(arch: str) -> Path:
    """Where ``tiny-hf:<arch>`` lives: ``<cache>/hf-tiny/<arch>`` (``llama`` when ``arch`` is empty)."""
    return cache_root() / "hf-tiny" / (arch or "llama")


def _cached_snapshot(name: str) -> str | None:
    """The local snapshot directory of hub model ``name`` if the HF cache holds its config, else None."""
    from huggingface_hub import snapshot_download

    try:
        d = snapshot_download(name, local_files_only=True)
    except (OSError, ValueError):  # not cached (LocalEntryNotFoundError), or not a valid repo id
        return None
    return d if (Path(d) / "config.json").exists() else None


def load_hf_policy(path_or_name: str, model_cfg: ModelConfig | None = None,
                   native: bool | None = None) -> tuple[HFPolicy, HFTokenizer]:
    """-> (HFPolicy, HFTokenizer) from a local HF directory, a hub name (when the hub is reachable or
    the model is in the local HF cache) or ``tiny-hf:<arch>``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = model_source(path_or_name)
    cfg = model_cfg or _saved_cfg(src)
    dtype = torch.bfloat16 if cfg.dtype == "bfloat16" and cfg.lora_r > 0 else torch.float32
    try:
        lm = AutoModelForCausalLM.from_pretrained(src, dtype=dtype)
        tok = AutoTokenizer.from_pretrained(src)
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"cannot load HF model {path_or_name!r} ({first[:200]}); download it where the hub "
                        "is reachable (`hf download NAME --local-dir DIR`) and set model.path=DIR") from None
    return HFPolicy(lm, cfg, native), HFTokenizer(tok, chat=cfg.chat_template,
                                                  chat_template_kwargs=cfg.chat_template_kwargs)


def load_hf_vocabulary(path_or_name: str) -> tuple[HFTokenizer, int]:
    """-> (tokenizer, V) of an HF model without its weights: the tokenizer and the output width its
    config declares (``vocab_size`` of the text config), for checks made before anything is built."""
    from transformers import AutoConfig, AutoTokenizer

    src = model_source(path_or_name)
    try:
        tok = AutoTokenizer.from_pretrained(src)
        width = AutoConfig.from_pretrained(src).get_text_config().vocab_size
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"cannot read HF model {path_or_name!r} ({first[:200]}); download it where the hub "
                        "is reachable (`hf download NAME --local-dir DIR`) and pass DIR") from None
    return HFTokenizer(tok, chat=False), int(width)
