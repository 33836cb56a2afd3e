"""The trainer's forward with each prompt computed once for all the completions that follow it.

The G samples of a prompt share its tokens; the plain forward runs the prompt again in every row.
Here the prompts run once (P rows, their own causal attention), and each group of completion rows
(B_k rows cut to their own width) attends to its prompt's keys and values gathered per row, then to
its own: per layer the same attention over the same keys as the full sequence, the prompt's work
done once. Gradients reach the prompt through the gathered keys and values (summed over its rows).

Shapes: P prompts, Tp prompt positions, B_k rows of one group, W_k their completion inputs, D width,
H heads, Dh = D/H.
"""

from __future__ import annotations

import torch


def positions_and_mask(key_mask: torch.Tensor, tp: int) -> tuple[torch.Tensor, torch.Tensor]:
    """key_mask (B, Tp + W) of prompt and completion -> (position ids (B, W) of the completion
    inputs, their attention mask (B, 1, W, Tp + W)): as :meth:`rlvr.model.tiny.TinyGPT.hidden` builds
    them for the whole sequence (a position counts real tokens; a query sees the real keys up to
    itself, and itself)."""
    S = key_mask.shape[1]
    pos = (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, tp:]
    q = torch.arange(tp, S, device=key_mask.device)[:, None]
    k = torch.arange(S, device=key_mask.device)[None, :]
    mask = (((k <= q)[None] & key_mask[:, None, :]) | (k == q)[None])[:, None]
    return pos, mask


def shared_prompt_hidden(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                         groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
                         ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A :class:`rlvr.model.tiny.TinyGPT`'s final-normed hidden states, each prompt run once.

    prompt_ids, prompt_mask: (P, Tp) left-padded; groups: (prompt (B_k,) index into the prompts,
    completion input ids (B_k, W_k), their key mask (B_k, W_k)) with W_k >= 1. -> (the prompts'
    hidden states (P, Tp, D), each group's (B_k, W_k, D)): equal, up to float rounding, to
    ``model.hidden`` of each row's whole sequence at those positions."""
    tp = prompt_ids.shape[1]
    cos_sin = []
    masks = []
    for prompt, _, key_mask in groups:
        pos, mask = positions_and_mask(torch.cat([prompt_mask[prompt], key_mask], 1), tp)
        cos_sin.append((model.rope_cos[pos].unsqueeze(1), model.rope_sin[pos].unsqueeze(1)))
        masks.append(mask)
    p_pos, p_mask = positions_and_mask(prompt_mask, 0)
    p_cos, p_sin = model.rope_cos[p_pos].unsqueeze(1), model.rope_sin[p_pos].unsqueeze(1)
    x_prompt = model.embed(prompt_ids)
    xs = [model.embed(ids) for _, ids, _ in groups]
    with model._autocast():
        for block in model.blocks:
            attn = block.attn
            q, k_prompt, v_prompt = attn.project(block.norm1(x_prompt), p_cos, p_sin)
            x_prompt = x_prompt + attn.attend(q, k_prompt, v_prompt, p_mask)
            x_prompt = x_prompt + block.mlp(block.norm2(x_prompt))
            for i, ((prompt, _, _), (cos, sin), mask) in enumerate(zip(groups, cos_sin, masks)):
                q, k, v = attn.project(block.norm1(xs[i]), cos, sin)
                k, v = torch.cat([k_prompt[prompt], k], 2), torch.cat([v_prompt[prompt], v], 2)
                x = xs[i] + attn.attend(q, k, v, mask)
                xs[i] = x + block.mlp(block.norm2(x))
    return model.norm(x_prompt), [model.norm(x) for x in xs]
