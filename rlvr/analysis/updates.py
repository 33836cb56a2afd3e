"""Where a fine-tune moved the weights (docs/methods/weight_updates.md, "The Path Not Taken").

Pure functions on one weight matrix ``w0`` (base) and ``w1`` (tuned), both (m, n), with
``dw = w1 - w0`` (:mod:`rlvr.analysis.matrix_compare` puts them together, a block of rows at a
time). Singular values and vectors are computed in float64 (see
:func:`spectrum` for the three methods and their accuracy). Dimension letters here:
m rows, n columns, N = m*n entries, k kept singular directions, r = min(m, n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from rlvr.analysis.row_blocks import Rows, TensorRows, as_rows, whole
from rlvr.errors import UserError

Precision = str | float  # "bf16" | "fp32" | "rel:<rtol>" | absolute tolerance
METHODS = ("gram", "svd", "lowrank")


def parse_precision(text: str) -> Precision:
    """``"bf16"``, ``"fp32"``, ``"rel:1e-3"`` (|dw| > rtol*|w0|) or a float (|dw| > atol)."""
    low = text.strip().lower()
    if low in ("bf16", "fp32"):
        return low
    try:
        tol = float(low[4:]) if low.startswith("rel:") else float(low)
    except ValueError:
        raise UserError(
            f"unknown precision {text!r}; use bf16, fp32, a tolerance like 1e-5 or rel:1e-3"
        ) from None
    if not tol >= 0:
        raise UserError(f"precision tolerance {text!r} is negative; use a tolerance >= 0")
    return f"rel:{tol}" if low.startswith("rel:") else tol


def resolve_k(k: int | float, m: int, n: int) -> int:
    """Number of singular directions: an int (capped at r = min(m, n)) or a fraction of r in (0, 1]."""
    r = min(m, n)
    if isinstance(k, bool) or not isinstance(k, int | float) or k <= 0:
        raise UserError(f"k={k!r} is not positive; pass an integer like 16 or a fraction of rank like 0.05")
    if isinstance(k, float):
        if k > 1:
            raise UserError(f"k={k} is a fraction above 1; pass a fraction of rank in (0, 1] or an integer")
        return max(1, min(r, round(k * r)))
    return min(k, r)


def update_mask(w0: torch.Tensor, w1: torch.Tensor, precision: Precision = "bf16") -> torch.Tensor:
    """Bool mask (same shape as w0) of entries the update changed.

    bf16 / fp32: both values cast to that dtype differ bitwise (so values that round to the
    same bf16 number count as unchanged); a float: |dw| > atol; ``"rel:<rtol>"``: |dw| > rtol*|w0|.
    """
    if precision in ("bf16", "fp32"):
        dtype, bits = (torch.bfloat16, torch.int16) if precision == "bf16" else (torch.float32, torch.int32)
        return w0.to(dtype).view(bits) != w1.to(dtype).view(bits)
    dw = (w1.float() - w0.float()).abs()
    if isinstance(precision, str) and precision.startswith("rel:"):
        return dw > float(precision[4:]) * w0.float().abs()
    return dw > float(precision)


def update_sparsity(w0: torch.Tensor, w1: torch.Tensor, precision: Precision = "bf16") -> float:
    """1 - |M| / N: the fraction of entries left unchanged at ``precision``."""
    return 1.0 - _count(update_mask(w0, w1, precision)) / max(1, w0.numel())


@dataclass(frozen=True)
class Spectrum:
    """Singular values ``s`` (r,) descending (only the top q for ``lowrank``), and the top-k
    singular vectors ``u`` (m, k), ``v`` (n, k); all float64, so that w ~= u diag(s[:k]) v^T."""

    s: torch.Tensor
    u: torch.Tensor
    v: torch.Tensor


def spectrum(w: torch.Tensor | Rows, k: int, method: str = "gram", niter: int = 6, oversample: int = 10) -> Spectrum:
    """Full singular values and top-k singular vectors of w (m, n): a tensor, or :class:`Rows` read
    a block at a time (a tall matrix's Gram matrix is built from its row blocks; a wide one, and the
    ``svd`` / ``lowrank`` methods, read it whole).

    ``gram`` (default): float64 Gram matrix of the short side, all its eigenvalues and only its top-k
    eigenvectors (:func:`top_eigh`), then u = w v / s. The top singular values and vectors are exact
    to float64 rounding; s_i has absolute error about 1e-16 * s_1**2 / s_i, far below float32 SVD's
    1e-7 * s_1. Single-threaded CPU time for 768x768 / 2048x768 / 32000x768: 0.12 / 0.17 / 1.7 s,
    against 0.49 / 0.99 / 10.6 s for float64 SVD and 0.25 / 0.57 / 5.5 s for float32 SVD.
    ``svd``: torch.linalg.svd in float64 (the reference). Falls back to it when s_k is ~0.
    ``lowrank``: torch.svd_lowrank with q = k + oversample columns and ``niter`` power steps; for
    k << r on matrices too large for ``gram`` (r in the many thousands; below that it is not faster).
    Only the top q singular values are returned (so spectral drift covers those), and the subspace
    error shrinks like (s_{q+1}/s_k)**(2*niter+1): accurate on decaying spectra, but on a flat one
    (a 300x120 Gaussian) the top-10 subspace is ~27 degrees off, which swamps real rotations.
    """
    if len(w.shape) != 2:
        raise ValueError(f"spectrum needs a 2-D matrix, got shape {tuple(w.shape)}")
    if method not in METHODS:
        raise UserError(f"unknown SVD method {method!r}; use one of {', '.join(METHODS)}")
    k = min(k, min(w.shape))
    if method == "lowrank":
        q = min(k + oversample, min(w.shape))
        u, s, v = torch.svd_lowrank(whole(w).double(), q=q, niter=niter)
        return Spectrum(s, u[:, :k], v[:, :k])
    if method == "gram":
        spec = _gram_spectrum(w, k)
        if spec is not None:
            return spec
    u, s, vh = torch.linalg.svd(whole(w).double(), full_matrices=False)
    return Spectrum(s, u[:, :k], vh[:k].T)


def _gram_spectrum(w: torch.Tensor | Rows, k: int, chunk: int = 8192) -> Spectrum | None:
    """Spectrum via the float64 Gram matrix of the short side, built in row chunks so that memory
    stays near one float64 chunk (a wide matrix: plus the matrix as stored, read whole and read by
    columns). None when s_k is too small for u = w v / s to be accurate."""
    tall = w.shape[0] >= w.shape[1]
    x = as_rows(w) if tall else TensorRows(whole(w).T)  # (rows, cols), rows >= cols
    evals, vk = top_eigh(gram_lower(x, chunk), k)  # (cols,) descending, (cols, k)
    s = evals.clamp_min(0).sqrt()
    if not s[k - 1] > 1e-6 * s[0]:
        return None
    uk = torch.cat([x.block(i, i + chunk).double() @ vk for i in range(0, x.shape[0], chunk)]) / s[:k]
    return Spectrum(s, uk, vk) if tall else Spectrum(s, vk, uk)


def gram_lower(x: torch.Tensor | Rows, chunk: int = 8192) -> torch.Tensor:
    """x^T x in float64 for x (rows, cols), accumulated over row chunks; only the lower triangle
    is guaranteed (BLAS dsyrk, half the flops of a matmul), which is all :func:`top_eigh` reads."""
    x = as_rows(x)
    cols = x.shape[1]
    if not USE_SCIPY:
        gram = torch.zeros(cols, cols, dtype=torch.float64)
        for i in range(0, x.shape[0], chunk):
            c = x.block(i, i + chunk).double()
            gram.addmm_(c.T, c)
        return gram
    from scipy.linalg import blas

    gram = np.zeros((cols, cols), dtype=np.float64, order="F")
    for i in range(0, x.shape[0], chunk):
        c = x.block(i, i + chunk).double().numpy()  # C-ordered (r, cols): its transpose is Fortran-ordered
        gram = blas.dsyrk(1.0, c.T, beta=1.0, c=gram, trans=0, lower=1, overwrite_c=1)
    return torch.from_numpy(gram)


def top_eigh(a: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All eigenvalues (n,) descending and the top-k eigenvectors (n, k) of a symmetric float64
    (n, n) matrix of which only the lower triangle is read.

    One Householder tridiagonalisation (LAPACK dsytrd), all eigenvalues of the tridiagonal (dsterf),
    k of its eigenvectors (MRRR) and the back-transform of those k only (dormqr): about 3x faster
    than torch.linalg.eigh, which forms all n eigenvectors, at the same float64 accuracy.
    """
    n = a.shape[0]
    if USE_SCIPY and n > 2 * k:
        import scipy.linalg as sl
        from scipy.linalg import lapack

        lwork = int(lapack.dsytrd_lwork(n, lower=1)[0])
        refl, d, e, tau, info = lapack.dsytrd(a.numpy(), lower=1, lwork=lwork)
        evals, info2 = lapack.dsterf(d.copy(), e.copy())[:2]
        if info == 0 and info2 == 0:
            _, z = sl.eigh_tridiagonal(d, e, select="i", select_range=(n - k, n - 1))
            z = z.copy(order="F")
            z[1:], _, info3 = lapack.dormqr("L", "N", refl[1:, :-1], tau, z[1:], lwork=max(1, 64 * k))
            if info3 == 0:
                return torch.from_numpy(evals[::-1].copy()), torch.from_numpy(z[:, ::-1].copy())
    evals, evecs = torch.linalg.eigh(a)  # ascending; reads the lower triangle
    return evals.flip(0), evecs[:, -k:].flip(1)


# scipy's LAPACK/BLAS for the Gram matrix and the partial eigensolver; False: torch only (slower).
USE_SCIPY = True


def spectral_drift(s0: torch.Tensor, s1: torch.Tensor) -> float:
    """||s(W1) - s(W0)|| / ||s(W0)|| over the singular values (r,) of both matrices."""
    norm0 = torch.linalg.vector_norm(s0.double()).item()
    return torch.linalg.vector_norm(s1.double() - s0.double()).item() / norm0 if norm0 > 0 else math.nan


def topk_relative_change(s0: torch.Tensor, s1: torch.Tensor, k: int) -> torch.Tensor:
    """(k,) relative change (s1_i - s0_i) / s0_i of the top-k singular values."""
    return (s1[:k].double() - s0[:k].double()) / s0[:k].double()


def principal_angles(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(k,) principal angles in degrees, ascending, between span(a) and span(b), a and b (m, k).

    Small angles come from sines (accurate to ~1e-14 rad), large ones from cosines
    (the Knyazev-Argentati split at 45 degrees), so a 1e-6 degree rotation is resolved.
    """
    qa, qb = torch.linalg.qr(a.double()).Q, torch.linalg.qr(b.double()).Q
    cross = qa.T @ qb  # (k, k)
    cos = torch.linalg.svdvals(cross).clamp(0, 1)  # descending: angles ascending
    sin = torch.linalg.svdvals(qb - qa @ cross).clamp(0, 1).flip(0)  # ascending: angles ascending
    theta = torch.where(cos**2 < 0.5, torch.arccos(cos), torch.arcsin(sin))
    return torch.rad2deg(theta)


def principal_energy_share(dw: torch.Tensor, u0: torch.Tensor, v0: torch.Tensor) -> float:
    """||U0_k^T dW V0_k||_F^2 / ||dW||_F^2 for dw (m, n), u0 (m, k), v0 (n, k); nan if dw = 0."""
    total = torch.linalg.vector_norm(dw, dtype=torch.float64).item() ** 2
    if total == 0:
        return math.nan
    proj = (u0.T.to(dw.dtype) @ dw).double() @ v0.double()  # (k, k)
    return torch.linalg.vector_norm(proj).item() ** 2 / total


def random_energy_share(k: int, m: int, n: int) -> float:
    """Expected principal energy share of an isotropic random update: k^2 / (m n)."""
    return k * k / (m * n)


def as_float(w: torch.Tensor) -> torch.Tensor:
    """float64 stays float64 (tests, analysis in double); anything else becomes float32, which holds
    bf16/fp16/fp32 weights exactly."""
    return w if w.dtype == torch.float64 else w.float()


def top_mask(score: torch.Tensor, count: int, largest: bool = True) -> torch.Tensor:
    """Bool mask with exactly ``count`` True entries: the largest (or smallest) ``score`` values
    (float32/64); ties at the threshold are taken in index order, so the count is exact."""
    flat = score.reshape(-1)
    n = flat.numel()
    if count <= 0 or count >= n:
        return torch.full(score.shape, count >= n and n > 0, dtype=torch.bool)
    pos = n - count if largest else count - 1  # ascending rank of the threshold value
    thr = float(np.partition(flat.numpy(), pos)[pos])  # introselect: ~5x faster than torch.kthvalue
    mask = flat > thr if largest else flat < thr
    need = count - _count(mask)
    mask[torch.nonzero(flat == thr).squeeze(1)[:need]] = True
    return mask.view(score.shape)


def _count(mask: torch.Tensor) -> int:
    return int(torch.count_nonzero(mask).item())


def principal_mask(spec: Spectrum, k: int, count: int) -> torch.Tensor:
    """(m, n) mask of the ``count`` largest-magnitude entries of the rank-k reconstruction of w0."""
    recon = (spec.u[:, :k] * spec.s[:k]).float() @ spec.v[:, :k].T.float()
    return top_mask(recon.abs_(), count, largest=True)


def low_magnitude_mask(w0: torch.Tensor, count: int) -> torch.Tensor:
    """(m, n) mask of the ``count`` smallest-magnitude entries of w0."""
    return top_mask(as_float(w0).abs(), count, largest=False)


def jaccard(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int]:
    """(|A and B|, |A or B|) of two boolean masks of the same shape; Jaccard = first / second."""
    return _count(a & b), _count(a | b)


def jaccard_chance(count_a: float, count_b: float, n: float) -> tuple[float, float]:
    """Expected (|A and B|, |A or B|) for independent random masks with those counts out of n.
    Their ratio is the chance Jaccard p_a p_b / (p_a + p_b - p_a p_b) (exact as n grows)."""
    inter = count_a * count_b / n if n else 0.0
    return inter, count_a + count_b - inter


def _weighted_mean(rows: list[dict], key: str) -> float | None:
    """Parameter-weighted mean of ``key`` over rows that have a finite value."""
    pairs = [(r["numel"], r[key]) for r in rows if r.get(key) is not None and math.isfinite(r[key])]
    total = sum(w for w, _ in pairs)
    return sum(w * x for w, x in pairs) / total if total else None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def summarize(records: list[dict]) -> dict:
    """Aggregate per-tensor records (each with ``numel``, ``changed`` and, for 2-D matrices, the
    :func:`rlvr.analysis.matrix_compare.compare_matrix` fields) into parameter-weighted statistics.

    Sparsity and mask overlaps are exact ratios of sums; spectral drift, angles and energy shares
    are means over matrices weighted by parameter count (the random share over the same matrices
    as the energy share, so the two compare like for like).
    """
    mats = [r for r in records if "k" in r]
    shared = [r for r in mats if r["principal_energy_share"] is not None and
              math.isfinite(r["principal_energy_share"])]
    changed_2d = sum(r["changed"] for r in mats)
    params = sum(r["numel"] for r in records)
    return {
        "tensors": len(records),
        "matrices": len(mats),
        "params": params,
        "changed": sum(r["changed"] for r in records),
        "sparsity": 1.0 - sum(r["changed"] for r in records) / params if params else None,
        "spectral_drift": _weighted_mean(mats, "spectral_drift"),
        "principal_angle_mean_deg": _weighted_mean(mats, "principal_angle_mean_deg"),
        "principal_angle_max_deg": max((r["principal_angle_max_deg"] for r in mats), default=None),
        "principal_energy_share": _weighted_mean(shared, "principal_energy_share"),
        "random_energy_share": _weighted_mean(shared, "random_energy_share"),
        "update_rel_norm": _weighted_mean(mats, "update_rel_norm"),
        "principal_mask_overlap": _ratio(sum(r["principal_hits"] for r in mats), changed_2d),
        "low_magnitude_overlap": _ratio(sum(r["low_magnitude_hits"] for r in mats), changed_2d),
        "mask_chance": _ratio(sum(r["chance_hits"] for r in mats), changed_2d),
    }


def summarize_by_kind(records: list[dict]) -> dict[str, dict]:
    """{kind: summarize(records of that kind)} plus ``"all"`` over every record."""
    kinds = sorted({r["kind"] for r in records})
    out = {kind: summarize([r for r in records if r["kind"] == kind]) for kind in kinds}
    out["all"] = summarize(records)
    return out


def jaccard_record(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Counts for two runs' update masks a, b of one tensor (same shape): observed and chance."""
    inter, union = jaccard(a, b)
    count_a, count_b = _count(a), _count(b)
    chance_inter, chance_union = jaccard_chance(count_a, count_b, a.numel())
    return {"numel": a.numel(), "count_a": count_a, "count_b": count_b, "inter": inter, "union": union,
            "chance_inter": chance_inter, "chance_union": chance_union}


def summarize_jaccard(rows: list[dict]) -> dict:
    """Jaccard over many tensors as a ratio of sums, against the chance Jaccard of the same sums."""
    params = sum(r["numel"] for r in rows)
    observed = _ratio(sum(r["inter"] for r in rows), sum(r["union"] for r in rows))
    chance = _ratio(sum(r["chance_inter"] for r in rows), sum(r["chance_union"] for r in rows))
    return {
        "params": params,
        "density_a": _ratio(sum(r["count_a"] for r in rows), params),
        "density_b": _ratio(sum(r["count_b"] for r in rows), params),
        "jaccard": observed,
        "jaccard_chance": chance,
        "ratio": observed / chance if observed is not None and chance else None,
    }
