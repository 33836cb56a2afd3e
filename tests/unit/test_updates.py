"""Known answers for the weight-update measures of docs/methods/weight_updates.md (rlvr.analysis.updates)."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.analysis import updates as U
from rlvr.analysis.matrix_compare import compare_matrix
from rlvr.errors import UserError


def _orthogonal(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64)).Q


def _matrix(m: int = 40, n: int = 30, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """W = U diag(s) V^T with distinct, decaying singular values; returns (W, U, s, V)."""
    u, v = _orthogonal(m, seed), _orthogonal(n, seed + 1)
    s = torch.linspace(10.0, 1.0, min(m, n), dtype=torch.float64)
    w = u[:, : len(s)] @ torch.diag(s) @ v[:, : len(s)].T
    return w, u, s, v


@pytest.mark.parametrize("method", ["gram", "svd"])
def test_spectrum_matches_float64_svd(method: str) -> None:
    torch.manual_seed(0)
    w = torch.randn(70, 25, dtype=torch.float64)
    for mat in (w, w.T):  # tall and wide
        sp = U.spectrum(mat, 5, method)
        ref = torch.linalg.svd(mat, full_matrices=False)
        assert torch.allclose(sp.s, ref.S, rtol=1e-12, atol=1e-12)
        recon = (sp.u * sp.s[:5]) @ sp.v.T
        assert torch.allclose(recon, (ref.U[:, :5] * ref.S[:5]) @ ref.Vh[:5], atol=1e-10)


def test_scipy_partial_eigensolver_matches_torch_eigh(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    w = torch.randn(90, 60, dtype=torch.float64)
    fast = U.spectrum(w, 7, "gram")
    monkeypatch.setattr(U, "USE_SCIPY", False)
    slow = U.spectrum(w, 7, "gram")
    assert torch.allclose(fast.s, slow.s, rtol=1e-12)
    assert U.principal_angles(fast.u, slow.u).max().item() < 1e-9
    assert U.principal_angles(fast.v, slow.v).max().item() < 1e-9


def test_lowrank_is_accurate_on_a_decaying_spectrum() -> None:
    u, v = _orthogonal(200, 3), _orthogonal(150, 4)
    s = 0.5 ** torch.arange(150, dtype=torch.float64)  # fast decay: randomized SVD converges
    w = u[:, :150] @ torch.diag(s) @ v.T
    torch.manual_seed(0)
    sp = U.spectrum(w, 4, "lowrank")
    assert torch.allclose(sp.s[:4], s[:4], rtol=1e-8)
    assert U.principal_angles(sp.u, u[:, :4]).max().item() < 1e-4


def test_energy_share_one_inside_top_k_and_zero_outside() -> None:
    w0, u, s, v = _matrix()
    k = 5
    spec = U.spectrum(w0, k)
    g = torch.Generator().manual_seed(7)
    inside = u[:, :k] @ torch.randn(k, k, generator=g, dtype=torch.float64) @ v[:, :k].T
    outside = u[:, k:] @ torch.randn(40 - k, 30 - k, generator=g, dtype=torch.float64) @ v[:, k:].T
    mixed = u[:, :k] @ torch.randn(k, 30 - k, generator=g, dtype=torch.float64) @ v[:, k:].T  # one side only
    assert U.principal_energy_share(inside, spec.u, spec.v) == pytest.approx(1.0, abs=1e-10)
    assert U.principal_energy_share(outside, spec.u, spec.v) == pytest.approx(0.0, abs=1e-10)
    assert U.principal_energy_share(mixed, spec.u, spec.v) == pytest.approx(0.0, abs=1e-10)
    both = U.principal_energy_share(inside + outside, spec.u, spec.v)  # the two parts are orthogonal
    assert both == pytest.approx(inside.norm().item() ** 2 / (inside + outside).norm().item() ** 2, rel=1e-9)
    assert math.isnan(U.principal_energy_share(torch.zeros(40, 30), spec.u, spec.v))


def test_random_update_gets_the_chance_share() -> None:
    torch.manual_seed(0)
    m, n, k = 300, 200, 30
    w0 = torch.randn(m, n)
    spec = U.spectrum(w0, k)
    shares = [U.principal_energy_share(torch.randn(m, n), spec.u, spec.v) for _ in range(3)]
    chance = U.random_energy_share(k, m, n)
    assert chance == pytest.approx(900 / 60000)
    # relative sd of one draw is sqrt(2/k^2) ~ 4.7%; 3 draws averaged ~ 2.7%: a 10% band can fail
    assert sum(shares) / 3 == pytest.approx(chance, rel=0.10)


@pytest.mark.parametrize("degrees", [30.0, 1e-5])
def test_rotating_top_k_subspace_gives_that_angle(degrees: float) -> None:
    w0, u, s, v = _matrix()
    k, r = 6, 2  # rotate the first r of the top-k left vectors towards directions k..k+r
    th = math.radians(degrees)
    u1 = u.clone()
    for j in range(r):
        u1[:, j] = math.cos(th) * u[:, j] + math.sin(th) * u[:, k + j]
        u1[:, k + j] = -math.sin(th) * u[:, j] + math.cos(th) * u[:, k + j]
    w1 = u1[:, :30] @ torch.diag(s) @ v.T
    rec = compare_matrix(w0, w1, k, "fp32")
    left = torch.tensor(rec["principal_angles_left_deg"])
    assert left.shape == (k,)
    assert torch.allclose(left[-r:], torch.full((r,), degrees, dtype=left.dtype), rtol=1e-6, atol=1e-9)
    assert left[:-r].abs().max().item() < 1e-9
    assert max(rec["principal_angles_right_deg"]) < 1e-9
    assert rec["principal_angle_max_deg"] == pytest.approx(degrees, rel=1e-6)
    assert rec["principal_angle_mean_deg"] == pytest.approx(degrees * r / (2 * k), rel=1e-6)
    assert rec["spectral_drift"] < 1e-12  # a rotation keeps the spectrum


def test_scaling_gives_known_spectral_drift() -> None:
    w0, *_ = _matrix()
    w1 = 1.5 * w0
    rec = compare_matrix(w0, w1, 4, "fp32")
    assert rec["spectral_drift"] == pytest.approx(0.5, rel=1e-9)
    assert rec["topk_rel_change"] == pytest.approx([0.5] * 4, rel=1e-9)
    # dW = 0.5 W0: its energy in the top-4 directions is sum(s_1..4^2)/sum(s^2)
    s = torch.linspace(10.0, 1.0, 30, dtype=torch.float64)
    expected = (s[:4] ** 2).sum().item() / (s**2).sum().item()
    assert rec["principal_energy_share"] == pytest.approx(expected, rel=1e-9)


def test_bf16_sparsity_counts_entries_that_round_to_the_same_value() -> None:
    # bf16 spacing on [1, 2) is 2^-7; half of it, 2^-8, is the rounding boundary (ties to even).
    half = 2.0**-8
    w0 = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0 + 2 * half, 1.0 + 2 * half, 0.5, 3.0], dtype=torch.float32)
    w1 = torch.tensor([
        1.0 + half * 0.99,  # below the boundary: rounds back to 1.0 -> unchanged
        1.0 + half,  # exactly half: ties to even 1.0 -> unchanged
        1.0 + half * 1.01,  # above: rounds to 1 + 2^-7 -> changed
        1.0 - half * 0.49,  # below 1 the spacing halves: 1 - 2^-9*0.98 rounds to 1.0 -> unchanged
        1.0 + 3 * half,  # 1+2^-7 is odd, the tie at 1+3*2^-8 goes to even 1+2^-6 -> changed
        1.0 + 2 * half + half * 0.99,  # unchanged
        0.5 + 2.0**-9 * 1.01,  # spacing on [0.5, 1) is 2^-8; just past its half -> changed
        3.0,  # identical -> unchanged
    ], dtype=torch.float32)
    mask = U.update_mask(w0, w1, "bf16")
    assert mask.tolist() == [False, False, True, False, True, False, True, False]
    assert U.update_sparsity(w0, w1, "bf16") == pytest.approx(5 / 8, abs=0)
    assert U.update_sparsity(w0, w1, "fp32") == pytest.approx(1 / 8, abs=0)  # only the identical entry
    assert U.update_mask(w0, w1, 0.005).tolist() == [False] * 8  # every |dW| <= 1.01 * 2^-8 < 0.005
    # |dW| > 0.0039 only where |dW| >= 2^-8 = 0.00390625
    assert U.update_mask(w0, w1, 0.0039).tolist() == [False, True, True, False, True, False, False, False]
    # |dW| > 0.003 |w0|: all but the 1 - 0.49*2^-8 entry (0.0019) and the identical one
    assert U.update_mask(w0, w1, "rel:0.003").tolist() == [True, True, True, False, True, True, True, False]


def test_parse_precision_and_resolve_k() -> None:
    assert U.parse_precision("BF16") == "bf16" and U.parse_precision("1e-5") == 1e-5
    assert U.parse_precision("rel:1e-3") == "rel:0.001"
    with pytest.raises(UserError, match="unknown precision"):
        U.parse_precision("fp8")
    assert U.resolve_k(16, 768, 2048) == 16 and U.resolve_k(16, 8, 100) == 8
    assert U.resolve_k(0.05, 768, 2048) == 38 and U.resolve_k(0.001, 64, 64) == 1
    assert U.resolve_k(1.0, 5, 9) == 5
    for bad in (0, -3, 1.5):
        with pytest.raises(UserError, match="k="):
            U.resolve_k(bad, 10, 10)


def test_top_mask_has_exact_count_with_ties() -> None:
    score = torch.tensor([[1.0, 2.0, 2.0], [2.0, 3.0, 0.0]])
    top = U.top_mask(score, 3)
    assert top.sum().item() == 3 and top[1, 1] and not top[1, 2] and not top[0, 0]
    low = U.low_magnitude_mask(torch.tensor([[-1.0, 2.0], [0.5, -0.25]]), 2)
    assert low.tolist() == [[False, False], [True, True]]
    assert U.top_mask(score, 0).sum().item() == 0 and U.top_mask(score, 6).all()


def test_mask_overlap_counts_against_chance() -> None:
    w0, u, s, v = _matrix(20, 10)
    k, count = 2, 30
    spec = U.spectrum(w0, k)
    principal = U.principal_mask(spec, k, count)
    w1 = w0 + principal.double() * 1e-3  # update exactly the principal entries
    rec = compare_matrix(w0, w1, k, "fp32")
    assert rec["principal_hits"] == count
    assert rec["chance_hits"] == pytest.approx(count * count / 200)
    low = U.low_magnitude_mask(w0, count)
    assert rec["low_magnitude_hits"] == int((low & principal).sum())
    summary = U.summarize([dict(rec, numel=200, changed=count, kind="mlp")])
    assert summary["principal_mask_overlap"] == 1.0 and summary["mask_chance"] == pytest.approx(count / 200)


def test_jaccard_and_chance_by_hand() -> None:
    a = torch.tensor([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], dtype=torch.bool)
    b = torch.tensor([1, 1, 0, 0, 1, 0, 0, 0, 0, 0], dtype=torch.bool)
    assert U.jaccard(a, b) == (2, 5)
    inter, union = U.jaccard_chance(4, 3, 10)  # E|A&B| = 4*3/10, E|A|B| = 4 + 3 - 1.2
    assert (inter, union) == pytest.approx((1.2, 5.8))
    rows = [U.jaccard_record(a, b), U.jaccard_record(a, a)]
    out = U.summarize_jaccard(rows)
    assert out["jaccard"] == pytest.approx((2 + 4) / (5 + 4))
    assert out["jaccard_chance"] == pytest.approx((1.2 + 1.6) / (5.8 + 6.4))
    assert out["density_a"] == pytest.approx(0.4) and out["density_b"] == pytest.approx(0.35)


def test_summarize_weights_by_parameters() -> None:
    rows = [
        {"kind": "mlp", "numel": 300, "changed": 30, "k": 2, "spectral_drift": 0.1,
         "principal_angle_mean_deg": 1.0, "principal_angle_max_deg": 2.0,
         "principal_energy_share": 0.2, "random_energy_share": 0.01,
         "update_rel_norm": 0.0, "principal_hits": 3, "low_magnitude_hits": 6, "chance_hits": 3.0},
        {"kind": "mlp", "numel": 100, "changed": 50, "k": 2, "spectral_drift": 0.5,
         "principal_angle_mean_deg": 3.0, "principal_angle_max_deg": 5.0,
         "principal_energy_share": float("nan"), "random_energy_share": 0.04,
         "update_rel_norm": 0.0, "principal_hits": 10, "low_magnitude_hits": 0, "chance_hits": 25.0},
        {"kind": "norm", "numel": 100, "changed": 100},
    ]
    out = U.summarize_by_kind(rows)
    assert set(out) == {"mlp", "norm", "all"}
    mlp = out["mlp"]
    assert mlp["sparsity"] == pytest.approx(1 - 80 / 400)
    assert mlp["spectral_drift"] == pytest.approx((300 * 0.1 + 100 * 0.5) / 400)
    assert mlp["principal_energy_share"] == pytest.approx(0.2)  # the nan matrix (dW = 0) is skipped
    assert mlp["random_energy_share"] == pytest.approx(0.01)  # over the same matrices
    assert mlp["principal_angle_max_deg"] == 5.0
    assert mlp["principal_mask_overlap"] == pytest.approx(13 / 80)
    assert mlp["mask_chance"] == pytest.approx(28 / 80)
    assert out["all"]["sparsity"] == pytest.approx(1 - 180 / 500) and out["norm"]["spectral_drift"] is None


def _whole_matrix_record(w0: torch.Tensor, w1: torch.Tensor, k: int, precision: str) -> dict:
    """The measures as the whole-matrix functions give them (the code before row blocks)."""
    mask = U.update_mask(w0, w1, precision)
    w0f, w1f = U.as_float(w0), U.as_float(w1)
    spec0, spec1 = U.spectrum(w0f, k), U.spectrum(w1f, k)
    dw = w1f - w0f
    changed = int(mask.sum())
    return {"spec0": spec0, "spec1": spec1, "changed": changed,
            "principal_hits": int((mask & U.principal_mask(spec0, k, changed)).sum()),
            "low_magnitude_hits": int((mask & U.low_magnitude_mask(w0f, changed)).sum()),
            "principal_energy_share": U.principal_energy_share(dw, spec0.u, spec0.v),
            "update_rel_norm": torch.linalg.vector_norm(dw, dtype=torch.float64).item()
            / torch.linalg.vector_norm(w0f, dtype=torch.float64).item()}


@pytest.mark.parametrize(("shape", "dtype", "precision", "block"),
                         [((40, 12), torch.bfloat16, "bf16", 3), ((12, 40), torch.bfloat16, "bf16", 5),
                          ((33, 9), torch.float32, "fp32", 7), ((30, 30), torch.float64, "rel:0.01", 4)])
def test_row_blocks_give_the_whole_matrix_measures(shape, dtype, precision, block) -> None:
    g = torch.Generator().manual_seed(3)
    w0 = (torch.randn(shape, generator=g, dtype=torch.float64) * 0.05).to(dtype)
    hit = torch.rand(shape, generator=g) < 0.3
    w1 = torch.where(hit, w0.double() * 1.02 + 1e-3, w0.double()).to(dtype)
    w1[0, :] = w0[0, :]  # ties at the mask threshold: repeated magnitudes in bf16, equal rows
    want = _whole_matrix_record(w0, w1, 4, precision)
    got = compare_matrix(w0, w1, 4, precision, rows_per_block=block)
    for key in ("changed", "principal_hits", "low_magnitude_hits"):
        assert got[key] == want[key], key  # bitwise: counts and masks
    drift = U.spectral_drift(want["spec0"].s, want["spec1"].s)
    assert got["spectral_drift"] == drift  # the same Gram chunks: the same spectra
    assert got["update_rel_norm"] == pytest.approx(want["update_rel_norm"], rel=1e-14)
    rel = 1e-6 if dtype != torch.float64 else 1e-12  # the whole-matrix U0^T dW was a float32 product
    assert got["principal_energy_share"] == pytest.approx(want["principal_energy_share"], rel=rel)


def test_block_counts_match_top_mask_with_ties(monkeypatch) -> None:
    from rlvr.analysis import row_blocks
    from rlvr.analysis.row_blocks import TopCount, blocks

    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        for budget in (1 << 24, 0):  # 0: the threshold's bin refined down to one value
            monkeypatch.setattr(row_blocks, "CANDIDATE_BUDGET", budget)
            for values in (5, 1000):
                score = (torch.randint(0, values, (17, 6), generator=g).to(dtype) / 7).abs()
                flags = torch.rand(17, 6, generator=g) < 0.5

                def scores(score=score):
                    return (score[a:b] for a, b in blocks(17, 4))

                for count in (0, 1, 7, 50, 101, 102, 103):
                    for largest in (True, False):
                        top = TopCount(score.numel(), largest)
                        for block in scores():
                            top.observe(block)
                        top.settle(count, scores)
                        for (a, b), block in zip(blocks(17, 4), scores()):
                            top.collect(block, flags[a:b])
                        want = int((flags & U.top_mask(score, count, largest)).sum())
                        assert top.hits() == want, (dtype, budget, values, count, largest)


def test_safetensors_file_reads_what_safetensors_writes(tmp_path) -> None:
    from safetensors.torch import save_file

    from rlvr.analysis.safetensors_file import SafetensorsFile

    tensors = {"a": torch.randn(7, 5).to(torch.bfloat16), "b": torch.arange(6, dtype=torch.int64),
               "c": torch.randn(3, 4, dtype=torch.float64), "d": torch.tensor([True, False])}
    save_file(tensors, str(tmp_path / "m.safetensors"), metadata={"format": "pt"})
    with SafetensorsFile(tmp_path / "m.safetensors") as f:
        assert sorted(f.names()) == ["a", "b", "c", "d"]
        for name, tensor in tensors.items():
            assert f.dtype(name) == tensor.dtype and torch.equal(f.get(name), tensor)
        assert torch.equal(f.rows("a", 2, 5), tensors["a"][2:5]) and f.rows("a", 6, 99).shape == (1, 5)
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(UserError, match="cannot read .* as safetensors"):
        SafetensorsFile(tmp_path / "bad.safetensors")
