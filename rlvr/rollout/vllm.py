"""Optional vLLM rollout engine (GPU only; ``pip install 'rlvr[vllm]'``), same call shape as
:func:`rlvr.rollout.engine.sample`: prompts in, a :class:`~rlvr.types.RolloutBatch` out.

    engine = VLLMEngine("models/qwen2.5-0.5b-instruct", gpu_memory_utilization=0.3)
    rb = sample(engine, tok, prompts, params, version=st.version, generator=st.gen)
    ...  # optimiser step on the HF policy
    engine.load_weights(policy)           # weight sync after each update (version += 1)

Behaviour log-probs come from vLLM's sampler in ``logprobs_mode="processed_logprobs"``: the
log-prob of each sampled token after temperature (and after top-k/top-p truncation, which the
native sampler does not renormalise: keep top_p=1, top_k=0 for identical definitions).
Entropies are the top-``entropy_topk`` truncation of -sum p log p (a lower bound; vLLM does not
return full distributions). Weights are synchronised in process: vLLM's engine core runs in this
process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, tensor parallel 1) and ``collective_rpc`` calls the
model's own ``load_weights`` with HF-named tensors, then the prefix cache is reset.
Not supported here: forced length interruption, self-certainty, in-flight ``weight_sync``.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Sequence

import torch

from rlvr.errors import UserError
from rlvr.rollout.sample import SampleParams
from rlvr.types import RolloutBatch

INSTALL_HINT = ("pip install 'rlvr[vllm]' on a Linux machine with a CUDA GPU (vllm>=0.27,<0.33, the releases "
                "pinned to torch 2.13.0; vllm 0.32 caps transformers <5.20, 0.31 <5.18: see docs/vllm.md)")


def import_vllm():
    """The ``vllm`` module, or a UserError saying how to install it."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in process: weight sync
    try:
        import vllm
    except ImportError:
        raise UserError(f"the vLLM engine needs vLLM, which is not installed; {INSTALL_HINT}, "
                        "or use the native engine (rlvr.rollout.engine.sample)") from None
    return vllm


def unknown_llm_args(vllm, kwargs: dict) -> list[str]:
    """Names in ``kwargs`` that ``vllm.LLM`` does not accept: its named parameters, plus the fields
    of ``vllm.EngineArgs`` when ``LLM`` forwards ``**kwargs`` to it. [] when it cannot tell (a
    ``**kwargs`` constructor and no ``EngineArgs``)."""
    try:
        params = inspect.signature(vllm.LLM).parameters
    except (TypeError, ValueError):  # no introspectable signature
        return []
    named = {n for n, q in params.items() if q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)}
    if any(q.kind == q.VAR_KEYWORD for q in params.values()):
        engine_args = getattr(vllm, "EngineArgs", None)
        if engine_args is None or not dataclasses.is_dataclass(engine_args):
            return []
        named |= {f.name for f in dataclasses.fields(engine_args)}
    return sorted(k for k in kwargs if k not in named)


def _load_weights_on_worker(worker, weights: list[tuple[str, torch.Tensor]]) -> int:
    """Runs inside each vLLM worker (``collective_rpc``): the model's HF-name weight loader."""
    worker.model_runner.model.load_weights(weights=weights)
    return len(weights)


class VLLMEngine:
    """A vLLM ``LLM`` on one GPU plus the bookkeeping rlvr needs (policy version, weight sync)."""

    def __init__(self, model_path: str, *, dtype: str = "bfloat16", gpu_memory_utilization: float = 0.3,
                 max_model_len: int | None = None, seed: int = 0, entropy_topk: int = 20, **llm_kwargs):
        vllm = import_vllm()
        self.entropy_topk = entropy_topk
        self.version = 0
        kwargs = dict(model=model_path, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization,
                      max_model_len=max_model_len, seed=seed, logprobs_mode="processed_logprobs",
                      max_logprobs=max(20, entropy_topk), **llm_kwargs)
        unknown = unknown_llm_args(vllm, kwargs)
        if unknown:  # checked up front: a TypeError raised inside vLLM keeps its own message and traceback
            version = getattr(vllm, "__version__", "?")
            raise UserError(f"vLLM {version} does not take {', '.join(unknown)}; {INSTALL_HINT}")
        self.llm = vllm.LLM(**kwargs)
        self._sampling_params = vllm.SamplingParams

    def sampling_params(self, p: SampleParams, tok, seed: int):
        """vLLM SamplingParams equivalent to the native sampler's ``p``."""
        if p.interruption_budget or p.self_certainty:
            raise UserError("the vLLM engine does not do forced length interruption or self-certainty; "
                            "set sampling.interruption_budget=0 and reward.kind=verifier, "
                            "or use the native engine")
        single = [s[0] for s in p.stop_ids if len(s) == 1]
        multi = [tok.decode(list(s)) for s in p.stop_ids if len(s) > 1]
        return self._sampling_params(
            n=1, temperature=p.temperature, top_p=p.top_p, top_k=p.top_k if p.top_k > 0 else -1,
            max_tokens=p.max_new_tokens, logprobs=self.entropy_topk, seed=seed, stop_token_ids=single,
            stop=multi, include_stop_str_in_output=True, skip_special_tokens=True)

    def generate(self, prompt_ids: list[list[int]], p: SampleParams, tok, seeds: list[int]):
        """Raw vLLM RequestOutputs, one per prompt, in order."""
        reqs = [{"prompt_token_ids": ids} for ids in prompt_ids]
        sps = [self.sampling_params(p, tok, s) for s in seeds]
        return self.llm.generate(reqs, sps, use_tqdm=False)

    @torch.no_grad()
    def load_weights(self, policy_or_weights) -> int:
        """Copy the trainer's weights into the engine (an HFPolicy: LoRA merged; or (name, tensor)
        pairs with HF names); resets the prefix cache. Returns the new engine version."""
        if hasattr(policy_or_weights, "merged_state"):
            items = list(policy_or_weights.merged_state().items())
        elif hasattr(policy_or_weights, "state_dict"):
            items = list(policy_or_weights.state_dict().items())
        else:
            items = list(policy_or_weights)
        self.llm.collective_rpc(_load_weights_on_worker, args=(items,))
        self.llm.reset_prefix_cache()
        self.version += 1
        return self.version


_REASONS = {"length": "length", "abort": "length"}


def finish_reason(completion) -> str:
    """vLLM's (finish_reason, stop_reason) -> eos | stop | length."""
    if completion.finish_reason == "stop":
        return "eos" if completion.stop_reason is None else "stop"
    return _REASONS.get(completion.finish_reason, "length")


def _entropy(top: dict) -> float:
    """Top-k truncated entropy -sum p log p over the returned log-probs (nats)."""
    lp = torch.tensor([v.logprob for v in top.values()], dtype=torch.float64)
    lp = lp[torch.isfinite(lp)]
    return float(-(lp.exp() * lp).sum())


def to_rollout_batch(outputs: Sequence, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, tok,
                     version: int = 0) -> RolloutBatch:
    """vLLM RequestOutputs (B, each with ``outputs[0]``: token_ids, logprobs (list of {id: Logprob}),
    finish_reason, stop_reason) + the left-padded prompts (B, Tp) -> RolloutBatch (completions
    right-padded to T = the longest)."""
    comps = [o.outputs[0] for o in outputs]
    B, T = len(comps), max((len(c.token_ids) for c in comps), default=0)
    ids = torch.full((B, T), tok.pad_id, dtype=torch.long)
    logp, ent = torch.zeros(B, T), torch.zeros(B, T)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for i, c in enumerate(comps):
        n = len(c.token_ids)
        ids[i, :n] = torch.tensor(list(c.token_ids), dtype=torch.long)
        mask[i, :n] = True
        if c.logprobs is None:
            raise UserError("vLLM returned no logprobs; sample with SamplingParams(logprobs=0 or more)")
        for t, (tid, top) in enumerate(zip(c.token_ids, c.logprobs)):
            logp[i, t] = top[tid].logprob
            ent[i, t] = _entropy(top)
    return RolloutBatch(
        prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=ids, completion_mask=mask,
        loss_mask=mask.clone(), behaviour_logp=logp, entropy=ent,
        versions=torch.full((B, T), version, dtype=torch.long),
        finish_reason=[finish_reason(c) for c in comps],
        texts=[tok.decode(row[m]) for row, m in zip(ids, mask)])


def sample(engine: VLLMEngine, tok, prompts: list[str], params: SampleParams, *, version: int = 0,
           generator: torch.Generator | None = None, batch_size: int = 4096,
           weight_sync: Callable[[], int | None] | None = None) -> RolloutBatch:
    """One completion per prompt through vLLM (the call shape of ``rlvr.rollout.engine.sample``).
    Per-request seeds are drawn from ``generator``, so a seeded run is reproducible."""
    if weight_sync is not None:
        raise UserError("the vLLM engine does not take in-flight weight updates; call engine.load_weights "
                        "between rounds, or use the native engine for weight_sync")
    parts = []
    for s in range(0, len(prompts), batch_size):
        ids, mask = tok.batch_encode_left(prompts[s : s + batch_size])
        seeds = torch.randint(0, 2**31 - 1, (ids.shape[0],), generator=generator).tolist()
        rows = [row[m].tolist() for row, m in zip(ids, mask)]
        parts.append(to_rollout_batch(engine.generate(rows, params, tok, seeds), ids, mask, tok, version))
    return RolloutBatch.concat(parts, tok.pad_id)
