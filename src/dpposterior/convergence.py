"""Convergence diagnostics and summary statistics of MCMC draws, in numpy: rank-normalised split R-hat,
bulk and tail effective sample size, the highest-density interval.

Source: Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2), 667-718
(Sec. 3-4); Geyer (1992) for the initial positive and monotone sequences.  The arithmetic follows ArviZ
0.23's ``arviz.stats.diagnostics`` (``_rhat_rank``, ``_ess_bulk``, ``_ess_tail``, ``_ess``) and
``arviz.stats.stats._hdi`` step by step -- the same ranks (average ties), Blom offset 3/8, normal quantile
(``scipy.special.ndtri``, which is ``scipy.stats.norm.ppf``), FFT length (the next 5-smooth number above
2n), R's type-7 quantile and the same NaN rule (any NaN -> NaN) -- so the values agree with ArviZ's to
rounding (``tests/test_convergence.py`` checks 1e-10 on many shapes, seeds, ties, constant chains and NaN).

Why not call ArviZ: ``import arviz`` takes 2.4 s here (it imports matplotlib, xarray, pandas and
scipy.stats, and compiles its numba ufuncs in every process), far more than a default ``dpposterior
infer``'s sampler; these checks run after every ``infer`` (``dpposterior.checks``) and in the table the
CLI prints (``dpposterior.console``).  ArviZ stays the library of record for files, plots and
``Posterior.summary()`` (docs/architecture.md, "Imports stay light").
"""

from __future__ import annotations

import math

import numpy as np

#: Blom's (1958) fractional offset of the rank back-transformation (Vehtari et al. 2021, eq. 14)
BLOM_OFFSET = 3 / 8
#: the quantiles whose indicator ESS is the tail ESS (Vehtari et al. 2021, Sec. 4.3)
TAIL_PROBS = (0.05, 0.95)


def _valid(x: np.ndarray, min_chains: int) -> bool:
    """ArviZ's ``_not_valid``, negated: no NaN, at least ``min_chains`` chains and 4 draws."""
    return not (np.isnan(x).any() or x.shape[0] < min_chains or x.shape[1] < 4)


def _as_chains(x) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"draws must have shape (chain, draw), got {x.shape}")
    return x


def split_chains(x: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as separate chains (an odd middle draw is dropped)."""
    half = x.shape[1] // 2
    return np.vstack((x[:, :half], x[:, -half:]))


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..N of all values together, ties given their average rank (``scipy.stats.rankdata``)."""
    flat = x.ravel()
    order = np.argsort(flat, kind="mergesort")
    inverse = np.empty(order.size, dtype=np.intp)
    inverse[order] = np.arange(order.size)
    sorted_ = flat[order]
    first = np.r_[True, sorted_[1:] != sorted_[:-1]]
    dense = first.cumsum()[inverse]
    starts = np.r_[np.nonzero(first)[0], len(first)]
    return (0.5 * (starts[dense] + starts[dense - 1] + 1)).reshape(x.shape)


def z_scale(x: np.ndarray) -> np.ndarray:
    """Rank-normalise: the normal quantile of (rank - 3/8) / (N + 1/4) (Vehtari et al. 2021, eq. 14)."""
    from scipy.special import ndtri

    ranks = average_ranks(x)
    return ndtri((ranks - BLOM_OFFSET) / (ranks.size - 2 * BLOM_OFFSET + 1))


def _rhat(x: np.ndarray) -> float:
    """Split-free R-hat of (chain, draw) values (BDA3 eq. 11.4): sqrt(((n-1)/n W + B/n) / W)."""
    x = np.asarray(x, dtype=float)
    if np.isnan(x).any():
        return math.nan
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), ddof=1)
    within = np.mean(np.var(x, axis=1, ddof=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.sqrt((between / within + n - 1) / n))


def rhat(x, fold_split: bool = True) -> float:
    """Rank-normalised split R-hat: the larger of the bulk and the folded (tail) R-hat (Vehtari et al.
    2021, eq. 16).  NaN for fewer than 2 chains or 4 draws or any NaN draw (as ArviZ).

    The fold is about the median of the split chains (``arviz.rhat``) or, with ``fold_split=False``, of
    all draws (``arviz.summary``); the two differ only when an odd draw count drops a middle draw."""
    x = _as_chains(x)
    if not _valid(x, min_chains=2):
        return math.nan
    split = split_chains(x)
    bulk = _rhat(z_scale(split))
    folded = np.abs(split - np.median(split)) if fold_split else split_chains(np.abs(x - np.median(x)))
    return max(bulk, _rhat(z_scale(folded)))


def next_fast_len(target: int) -> int:
    """The smallest 2^a 3^b 5^c >= ``target`` (``scipy.fftpack.next_fast_len``)."""
    if target <= 6:
        return max(int(target), 1)
    best = 1 << (int(target) - 1).bit_length()  # a power of two is always a candidate
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            # the smallest power of two times p35 that reaches target
            quotient = -(-int(target) // p35)
            candidate = p35 * (1 << (quotient - 1).bit_length())
            best = min(best, candidate)
            p35 *= 3
        p5 *= 5
    return best


def _autocov(x: np.ndarray) -> np.ndarray:
    """Autocovariance of each chain at every lag, by FFT (biased: divided by n)."""
    n = x.shape[1]
    m = next_fast_len(2 * n)
    centred = x - x.mean(axis=1, keepdims=True)
    spectrum = np.fft.rfft(centred, n=m, axis=1)
    spectrum *= np.conjugate(spectrum)
    cov = np.fft.irfft(spectrum, n=m, axis=1)[:, :n]
    cov /= n
    return cov


def _ess(x: np.ndarray) -> float:
    """Effective sample size of (chain, draw) values (Vehtari et al. 2021, eqs. 10-13; Geyer's initial
    positive then monotone sequence)."""
    x = np.asarray(x, dtype=float)
    if np.isnan(x).any():
        return math.nan
    if np.max(x) - np.min(x) < np.finfo(float).resolution:
        return float(x.size)
    n_chain, n_draw = x.shape
    acov = _autocov(x)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(x.mean(axis=1), ddof=1)
    rho = np.zeros(n_draw)
    rho_even = 1.0
    rho[0] = rho_even
    rho_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    rho[1] = rho_odd
    t = 1
    while t < n_draw - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1] = rho_even
            rho[t + 2] = rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = (rho[t - 1] + rho[t]) / 2.0
            rho[t + 2] = rho[t + 1]
        t += 2
    size = n_chain * n_draw
    tau = -1.0 + 2.0 * np.sum(rho[: max_t + 1]) + np.sum(rho[max_t + 1: max_t + 2])
    tau = max(tau, 1 / np.log10(size))
    return math.nan if np.isnan(rho).any() else float(size / tau)


def ess_bulk(x) -> float:
    """Bulk ESS: the ESS of the rank-normalised split chains (Vehtari et al. 2021, Sec. 4.2)."""
    x = _as_chains(x)
    if not _valid(x, min_chains=1):
        return math.nan
    return _ess(z_scale(split_chains(x)))


def quantile_type7(x: np.ndarray, prob: float) -> float:
    """R's type-7 quantile of all values (``scipy.stats.mstats.mquantiles(alphap=1, betap=1)``)."""
    values = np.sort(x.ravel())
    n = len(values)
    if n == 1:
        return float(values[0])
    aleph = n * prob + (1.0 + prob * -1.0)
    k = int(np.floor(np.clip(aleph, 1, n - 1)))
    gamma = float(np.clip(aleph - k, 0, 1))
    return float((1.0 - gamma) * values[k - 1] + gamma * values[k])


def ess_tail(x, probs=TAIL_PROBS) -> float:
    """Tail ESS: the smaller ESS of the indicators x <= q_5% and x <= q_95% (Vehtari et al. 2021, Sec. 4.3)."""
    x = _as_chains(x)
    if not _valid(x, min_chains=1):
        return math.nan
    return min(_ess(split_chains(x <= quantile_type7(x, p))) for p in probs)


def hdi(values, prob: float) -> tuple[float, float]:
    """The narrowest interval holding ``floor(prob * N)`` + 1 of the sorted draws (unimodal HDI)."""
    values = np.sort(np.asarray(values).ravel())
    n = len(values)
    inside = int(np.floor(prob * n))
    widths = np.subtract(values[inside:], values[: n - inside], dtype=np.float64)
    if len(widths) == 0:
        raise ValueError("too few draws for an interval")
    lo = int(np.argmin(widths))
    return float(values[lo]), float(values[lo + inside])


#: the summary columns' rounding, as ArviZ's default ``summary`` (3 decimals; ESS 0; R-hat 2)
DECIMALS = {"ess_bulk": 0, "ess_tail": 0, "r_hat": 2}


def summary_rows(post, hdi_prob: float = 0.95, diagnostics: bool | None = None):
    """``(columns, rows)`` of ArviZ's default summary of a Posterior, without ArviZ.

    ``columns``: mean, sd, hdi_lo%, hdi_hi% and, with more than one chain and more than 3 draws (or
    ``diagnostics=True``), ess_bulk, ess_tail, r_hat.  ``rows``: ``(label, values)`` per scalar
    component, labelled ``name`` or ``name[coord, ...]`` in C order as ``arviz.summary`` does; the values
    are unrounded (round with :data:`DECIMALS`, 3 otherwise, for ArviZ's printed table).
    """
    if diagnostics is None:
        diagnostics = post.nchains > 1 and post.ndraws > 3
    alpha = 1 - hdi_prob
    columns = ["mean", "sd", f"hdi_{100 * alpha / 2:g}%", f"hdi_{100 * (1 - alpha / 2):g}%"]
    if diagnostics:
        columns += ["ess_bulk", "ess_tail", "r_hat"]
    rows = []
    for name, arr in post.posterior.items():
        arr = np.asarray(arr)
        event = arr.shape[2:]
        dims = list(post.dims.get(name, [])) or [f"{name}_dim_{i}" for i in range(len(event))]
        labels = [post.coords.get(dim, range(size)) if dim in post.coords else range(size)
                  for dim, size in zip(dims, event)]
        mean = np.mean(arr, axis=(0, 1))
        sd = np.std(arr, axis=(0, 1), ddof=1)
        for index in np.ndindex(*event):
            x = arr[(slice(None), slice(None), *index)]
            label = name if not index else f"{name}[{', '.join(str(labels[d][i]) for d, i in enumerate(index))}]"
            values = [float(mean[index]), float(sd[index]), *hdi(x, hdi_prob)]
            if diagnostics:
                values += [ess_bulk(x), ess_tail(x), rhat(x, fold_split=False)]
            rows.append((label, values))
    return columns, rows
