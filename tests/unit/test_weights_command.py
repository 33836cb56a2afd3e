"""``rlvr weights`` on small safetensors models written here (and rlvr.analysis.weight_io)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from rlvr.analysis.weight_io import layer_index, pick_checkpoint, resolve_weight_files, tensor_kind
from rlvr.cli import main

PAIR_KEYS = {"base", "tuned", "sparsity", "spectral_drift", "principal_angle_mean_deg",
             "principal_energy_share", "random_energy_share", "per_kind", "per_matrix"}


def _model(seed: int = 0, dtype: torch.dtype = torch.bfloat16) -> dict[str, torch.Tensor]:
    """A two-layer Llama-shaped model: hidden 16, mlp 32, vocab 40 (2,112 + 2*1,072 parameters)."""
    g = torch.Generator().manual_seed(seed)
    shapes = {"model.embed_tokens.weight": (40, 16), "model.norm.weight": (16,), "lm_head.weight": (40, 16)}
    for i in range(2):
        shapes |= {f"model.layers.{i}.self_attn.q_proj.weight": (16, 16),
                   f"model.layers.{i}.mlp.up_proj.weight": (32, 16),
                   f"model.layers.{i}.input_layernorm.weight": (16,)}
    return {name: (torch.randn(shape, generator=g) * 0.1 + 0.01).to(dtype) for name, shape in shapes.items()}


def _bump(model: dict[str, torch.Tensor], offset: int, every: int = 7) -> tuple[dict[str, torch.Tensor], int]:
    """Copy of a bf16 model with entries offset, offset+every, ... moved by exactly one bf16 ulp;
    returns it and the number of changed entries."""
    out, changed = {}, 0
    for name, w in model.items():
        bits = w.flatten().view(torch.int16).clone()
        bits[offset::every] += 1
        changed += bits[offset::every].numel()
        out[name] = bits.view(torch.bfloat16).view(w.shape)
    return out, changed


def _write(path: Path, model: dict[str, torch.Tensor]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.items()}, str(path))
    return str(path)


def test_two_files_give_exact_sparsity_and_json_keys(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = _model()
    tuned, changed = _bump(base, offset=3)
    total = sum(w.numel() for w in base.values())
    b, t = _write(tmp_path / "base.safetensors", base), _write(tmp_path / "rl.safetensors", tuned)
    out = tmp_path / "w.json"
    assert main(["weights", b, t, "--k", "4", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result) == {"pairs", "mask_overlap"} and result["mask_overlap"] == {}
    pair = result["pairs"][0]
    assert set(pair) == PAIR_KEYS and (pair["base"], pair["tuned"]) == (b, t)
    assert pair["sparsity"] == pytest.approx(1 - changed / total, abs=1e-12)
    assert set(pair["per_kind"]) == {"attention", "mlp", "embedding", "norm", "lm_head", "all"}
    assert pair["per_kind"]["attention"]["params"] == 2 * 256 and pair["per_kind"]["all"]["params"] == total
    rows = {r["name"]: r for r in pair["per_matrix"]}
    assert len(rows) == len(base)
    q = rows["model.layers.1.self_attn.q_proj.weight"]
    assert (q["kind"], q["layer"], q["k"]) == ("attention", 1, 4) and len(q["principal_angles_left_deg"]) == 4
    assert q["changed"] == len(range(3, 256, 7)) and q["random_energy_share"] == pytest.approx(16 / 256)
    assert "spectral_drift" not in rows["model.norm.weight"]  # 1-D: sparsity only
    assert rows["model.norm.weight"]["sparsity"] == pytest.approx(1 - 2 / 16)  # entries 3 and 10
    assert 0 < pair["spectral_drift"] < 0.05 and 0 <= pair["principal_angle_mean_deg"] < 90
    text = capsys.readouterr().out
    assert "attention" in text and "lm_head" in text and "sparsity" in text


def test_update_in_the_principal_subspace_is_found(tmp_path: Path) -> None:
    base = _model(dtype=torch.float32)
    name = "model.layers.0.mlp.up_proj.weight"
    u, s, vh = torch.linalg.svd(base[name].double(), full_matrices=False)
    tuned = dict(base)
    tuned[name] = (base[name].double() + 0.05 * u[:, :1] @ vh[:1]).float()  # along the top direction
    b, t = _write(tmp_path / "b.safetensors", base), _write(tmp_path / "t.safetensors", tuned)
    out = tmp_path / "w.json"
    assert main(["weights", b, t, "--k", "2", "--precision", "fp32", "--json", str(out)]) == 0
    pair = json.loads(out.read_text())["pairs"][0]
    rows = {r["name"]: r for r in pair["per_matrix"]}
    assert rows[name]["principal_energy_share"] > 0.999
    assert rows[name]["topk_rel_change"][0] == pytest.approx(0.05 / s[0].item(), rel=1e-3)
    unchanged = rows["model.layers.1.mlp.up_proj.weight"]
    assert unchanged["sparsity"] == 1.0 and unchanged["principal_energy_share"] is None  # dW = 0
    assert pair["sparsity"] == pytest.approx(1 - 512 / sum(w.numel() for w in base.values()), abs=1e-3)


def test_mismatched_shape_names_the_tensor(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = _model()
    tuned = dict(base)
    tuned["model.layers.0.mlp.up_proj.weight"] = torch.zeros(33, 16, dtype=torch.bfloat16)
    b, t = _write(tmp_path / "b.safetensors", base), _write(tmp_path / "t.safetensors", tuned)
    assert main(["weights", b, t]) == 2
    err = capsys.readouterr().err
    assert "model.layers.0.mlp.up_proj.weight" in err and "[32, 16]" in err and "[33, 16]" in err


def test_missing_tensor_names_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = _model()
    tuned = {k: v for k, v in base.items() if k != "lm_head.weight"}
    b, t = _write(tmp_path / "b.safetensors", base), _write(tmp_path / "t.safetensors", tuned)
    assert main(["weights", b, t]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: tensor 'lm_head.weight'") and "missing from" in err
    assert main(["weights", b, str(tmp_path / "nope.safetensors")]) == 2
    assert main(["weights", b, t, "--precision", "fp8"]) == 2 and main(["weights", b, b, "--k", "x"]) == 2


def test_two_tuned_models_give_mask_overlap(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = _model()
    same_a, _ = _bump(base, offset=0, every=4)
    same_b, _ = _bump(base, offset=0, every=4)
    disjoint, _ = _bump(base, offset=2, every=4)
    paths = [_write(tmp_path / f"{n}.safetensors", m)
             for n, m in (("base", base), ("a", same_a), ("b", same_b), ("c", disjoint))]
    out = tmp_path / "w.json"
    assert main(["weights", *paths, "--k", "2", "--json", str(out)]) == 0
    overlap = json.loads(out.read_text())["mask_overlap"]
    assert set(overlap) == {"1-2", "1-3", "2-3"}
    assert overlap["1-2"]["jaccard"] == 1.0 and overlap["1-3"]["jaccard"] == 0.0
    p = overlap["1-2"]["density_a"]  # ~1/4 per tensor: chance Jaccard p^2 / (2p - p^2) = 1/7 at p = 1/4
    assert p == pytest.approx(0.25, abs=0.01)
    assert overlap["1-2"]["jaccard_chance"] == pytest.approx(1 / 7, rel=0.05)
    assert overlap["1-2"]["ratio"] == pytest.approx(7, rel=0.05)
    assert "mask overlap 1-3" in capsys.readouterr().out


def test_checkpoint_rule_and_sharded_dirs_match_the_single_file(tmp_path: Path) -> None:
    base, (tuned, _) = _model(), _bump(_model(), offset=1)
    single = _write(tmp_path / "t.safetensors", tuned)
    run = tmp_path / "run" / "checkpoints"
    _write(run / "step_000010" / "model.safetensors", base)
    _write(run / "step_000200" / "model.safetensors", tuned)
    _write(run / "step_000020" / "model.safetensors", base)
    assert resolve_weight_files(tmp_path / "run") == [run / "step_000200" / "model.safetensors"]
    _write(run / "final" / "model.safetensors", tuned)
    assert pick_checkpoint(run).name == "final"
    hf = tmp_path / "hf"
    names = sorted(tuned)
    shards = {"model-00001-of-00002.safetensors": names[:4], "model-00002-of-00002.safetensors": names[4:]}
    for file, keys in shards.items():
        _write(hf / file, {k: tuned[k] for k in keys})
    weight_map = {k: file for file, keys in shards.items() for k in keys}
    (hf / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert [p.name for p in resolve_weight_files(hf)] == sorted(shards)
    b = _write(tmp_path / "b.safetensors", base)
    results = []
    for target in (single, str(tmp_path / "run"), str(hf)):
        out = tmp_path / "w.json"
        assert main(["weights", b, target, "--k", "3", "--json", str(out)]) == 0
        pair = json.loads(out.read_text())["pairs"][0]
        results.append((pair["sparsity"], pair["spectral_drift"], pair["principal_energy_share"]))
    assert results[0] == results[1] == results[2]


def test_plots_and_progress(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = _model() | {f"extra.{i}.bias": torch.ones(4, dtype=torch.bfloat16) for i in range(30)}
    tuned, _ = _bump(base, offset=0)
    b, t = _write(tmp_path / "b.safetensors", base), _write(tmp_path / "t.safetensors", tuned)
    assert main(["weights", b, t, "--k", "2", "--plots", str(tmp_path / "plots")]) == 0
    for name in ("pair1_layers.png", "pair1_angles.png"):
        assert (tmp_path / "plots" / name).stat().st_size > 5000
    err = capsys.readouterr().err
    assert "[weights] 25/39 tensors" in err and "[weights] 39/39 tensors" in err


def test_tensor_kinds_and_layers() -> None:
    cases = {
        "model.layers.0.self_attn.q_proj.weight": ("attention", 0),
        "model.layers.11.mlp.gate_proj.weight": ("mlp", 11),
        "model.layers.3.post_attention_layernorm.weight": ("norm", 3),
        "model.embed_tokens.weight": ("embedding", None),
        "lm_head.weight": ("lm_head", None),
        "transformer.h.2.attn.c_attn.weight": ("attention", 2),
        "transformer.h.2.mlp.c_proj.weight": ("mlp", 2),
        "transformer.h.2.ln_1.weight": ("norm", 2),
        "transformer.wte.weight": ("embedding", None),
        "layers.4.attention.wo.weight": ("attention", 4),
        "layers.4.feed_forward.w2.weight": ("mlp", 4),
        "blocks.7.attn_norm.weight": ("norm", 7),
        "tok_emb.weight": ("embedding", None),
        "rotary.inv_freq": ("other", None),
    }
    assert {n: (tensor_kind(n), layer_index(n)) for n in cases} == cases


def test_integer_buffers_get_exact_sparsity_only(tmp_path: Path) -> None:
    base = _model() | {"model.position_ids": torch.arange(12).view(3, 4)}
    tuned = dict(base) | {"model.position_ids": base["model.position_ids"].clone().index_fill_(1, torch.tensor([0]), 7)}
    b, t = _write(tmp_path / "b.safetensors", base), _write(tmp_path / "t.safetensors", tuned)
    out = tmp_path / "w.json"
    assert main(["weights", b, t, "--k", "2", "--json", str(out)]) == 0
    rows = {r["name"]: r for r in json.loads(out.read_text())["pairs"][0]["per_matrix"]}
    ids = rows["model.position_ids"]
    assert ids["changed"] == 3 and ids["sparsity"] == pytest.approx(0.75) and "k" not in ids  # column 0 only
    assert rows["lm_head.weight"]["changed"] == 0 and rows["lm_head.weight"]["principal_energy_share"] is None
