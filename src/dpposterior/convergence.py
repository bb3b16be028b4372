"""Convergence diagnostics and summary statistics of MCMC draws, in numpy: rank-normalised split R-hat,
bulk and tail effective sample size, the highest-density interval -- each computed for every scalar
component of a variable at once.

Source: Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), "Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2), 667-718
(Sec. 3-4); Geyer (1992) for the initial positive and monotone sequences.  The arithmetic follows ArviZ
0.23's ``arviz.stats.diagnostics`` (``_rhat_rank``, ``_ess_bulk``, ``_ess_tail``, ``_ess``) and
``arviz.stats.stats._hdi`` step by step -- the same ranks (average ties), Blom offset 3/8, normal quantile
(``scipy.special.ndtri``, which is ``scipy.stats.norm.ppf``), FFT length (the next 5-smooth number above
2n), R's type-7 quantile and the same NaN rule (any NaN -> NaN) -- so the values agree with ArviZ's to
rounding (``tests/test_convergence.py`` checks 1e-10 on many shapes, seeds, ties, constant chains and NaN,
one component at a time and many at once).

Vectorised: :func:`diagnose` takes a (chain, draw, *event) array and returns R-hat and ESS for every
component, working on blocks of components (:data:`BLOCK_VALUES` values at a time, so memory stays
bounded): the ranks are one sort per component along a row, Geyer's sequences are cumulative sums and
minima over the lag axis instead of a Python loop per component.  The scalar :func:`rhat`,
:func:`ess_bulk` and :func:`ess_tail` are the same code with one component.  At 10^6 components
(a small-area posterior's ``u``) this is what makes checking every component affordable.

Why not call ArviZ: ``import arviz`` takes 2.4 s here (it imports matplotlib, xarray, pandas and
scipy.stats, and compiles its numba ufuncs in every process), far more than a default ``dpposterior
infer``'s sampler, and it computes one component at a time in Python; these checks run after every
``infer`` (``dpposterior.checks``), in the table the CLI prints (``dpposterior.console``) and in
``dpposterior report``'s table, and ``Posterior.summary()`` (with the MCSE columns) -- so those numbers are ArviZ
0.23's under ArviZ 1 as well, whose summary defaults to another interval (docs/architecture.md, "ArviZ 0.x and
1.x").  ArviZ stays the library of record for reading files and for plots (``dpposterior.arviz_compat``).
"""

from __future__ import annotations


import os

import numpy as np

#: Blom's (1958) fractional offset of the rank back-transformation (Vehtari et al. 2021, eq. 14)
BLOM_OFFSET = 3 / 8
#: the quantiles whose indicator ESS is the tail ESS (Vehtari et al. 2021, Sec. 4.3)
TAIL_PROBS = (0.05, 0.95)
#: the diagnostics are computed on blocks of components of about this many draws (bounded memory, about
#: 40 bytes of temporaries per value; blocks that stay in cache were 10-20% faster than 2,000,000)
BLOCK_VALUES = 250_000
#: the diagnostics read from the split chains alone (with an even number of draws they hold every draw)
SPLIT_ONLY = frozenset({"rhat", "ess_bulk"})
#: the most threads that diagnose blocks of components at once
MAX_THREADS = 4
#: from this many draws in all, the rank normalisation (the same numbers), the ESS and the R-hat (the same to
#: rounding) run compiled (``convergence_kernels``): below it numba's import and the kernels' load would cost more
#: than they save
KERNEL_MIN_VALUES = 10_000_000


def _as_chains(x) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"draws must have shape (chain, draw), got {x.shape}")
    return x


def split_chains(x: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as separate chains (an odd middle draw is dropped): (chain, draw)
    -> (2 chain, draw // 2), or (K, chain, draw) -> (K, 2 chain, draw // 2) for K components."""
    half = x.shape[-1] // 2
    return np.concatenate((x[..., :half], x[..., x.shape[-1] - half:]), axis=-2)


def _sorted_keys(ordered: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
    """For rows of sorted values (K, N): 2 (average rank) - 2 of each position, an integer in 0..2N-2 (ties
    share their average rank, as ``scipy.stats.rankdata``) -- or, given ``table`` (indexed by that integer),
    ``table[key]``."""
    K, N = ordered.shape
    new = np.empty((K, N), dtype=bool)  # a value differing from the one before it starts a tie group
    new[:, 0] = True
    np.not_equal(ordered[:, 1:], ordered[:, :-1], out=new[:, 1:])
    idx = np.arange(N, dtype=np.int64)
    values = np.empty((K, N), dtype=np.int64 if table is None else table.dtype)
    values[:] = 2 * idx if table is None else table[0::2][:N]  # no ties: the rank is the position
    tied = np.flatnonzero(~new.all(axis=1))
    if tied.size:  # rows with ties (repeated draws: MCMC rejections, discrete values)
        new = new[tied]
        start = np.maximum.accumulate(np.where(new, idx, 0), axis=1)
        last = np.empty_like(new)
        last[:, -1] = True
        last[:, :-1] = new[:, 1:]
        end = np.minimum.accumulate(np.where(last, idx, N)[:, ::-1], axis=1)[:, ::-1]
        values[tied] = start + end if table is None else table[start + end]
    return values


def _scatter(order: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.empty_like(values)
    np.put_along_axis(out, order, values, axis=1)
    return out


def _rank_keys(flat: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
    """:func:`_sorted_keys` of each row of (K, N) values, in the values' own order.  The order within a tie
    does not matter (its members share one rank), so the fastest sort serves."""
    order = np.argsort(flat, axis=1)
    return _scatter(order, _sorted_keys(np.take_along_axis(flat, order, axis=1), table))


def _z_and_folded_z(x: np.ndarray, kernel=None) -> tuple[np.ndarray, np.ndarray]:
    """Rank-normalised values of each component of (K, chain, draw) and of its distances from its median
    (the folded values), with one full sort: in sorted order the distances fall then rise, two sorted
    runs that a stable sort merges in linear time.  ``kernel``: ``convergence_kernels.z_and_folded``, for
    finite draws (the same numbers in one compiled pass per component)."""
    K = x.shape[0]
    n = x[0].size
    flat = x.reshape(K, n)
    table = _z_table(n)
    if kernel is not None and np.isfinite(flat).all():
        flat = np.ascontiguousarray(flat)
        z, folded = np.empty_like(flat), np.empty_like(flat)
        kernel(flat, np.argsort(flat, axis=1), table, z, folded)
        return z.reshape(x.shape), folded.reshape(x.shape)
    order = np.argsort(flat, axis=1)
    ordered = np.take_along_axis(flat, order, axis=1)
    z = _scatter(order, _sorted_keys(ordered, table))
    half = n // 2
    median = ordered[:, half] if n % 2 else np.mean(ordered[:, half - 1:half + 1], axis=1)  # (as np.median)
    distance = np.abs(ordered - median[:, None])
    del ordered
    order2 = np.argsort(distance, axis=1, kind="stable")
    folded = _scatter(np.take_along_axis(order, order2, axis=1),
                      _sorted_keys(np.take_along_axis(distance, order2, axis=1), table))
    return z.reshape(x.shape), folded.reshape(x.shape)


def _z_table(n: int) -> np.ndarray:
    """The normal score of each possible average rank (steps of 1/2) among n values (eq. 14)."""
    from scipy.special import ndtri

    ranks = 0.5 * (np.arange(2 * n - 1) + 2)
    return ndtri((ranks - BLOM_OFFSET) / (n - 2 * BLOM_OFFSET + 1))


def _z_rows(x: np.ndarray) -> np.ndarray:
    """Rank-normalise each component of (K, chain, draw) over all its chains and draws together."""
    K = x.shape[0]
    n = x[0].size
    return _rank_keys(x.reshape(K, n), _z_table(n)).reshape(x.shape)


def _rhat_rows(x: np.ndarray) -> np.ndarray:
    """Split-free R-hat of (K, chain, draw) values (BDA3 eq. 11.4): sqrt(((n-1)/n W + B/n) / W)."""
    n = x.shape[2]
    between = n * np.var(x.mean(axis=2), axis=1, ddof=1)
    within = np.mean(np.var(x, axis=2, ddof=1), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _rows_median(x: np.ndarray) -> np.ndarray:
    return np.median(x.reshape(x.shape[0], -1), axis=1)[:, None, None]


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
    """Autocovariance of each chain at every lag along the last axis, by FFT (biased: divided by n)."""
    n = x.shape[-1]
    m = next_fast_len(2 * n)
    centred = x - x.mean(axis=-1, keepdims=True)
    spectrum = np.fft.rfft(centred, n=m, axis=-1)
    spectrum *= np.conjugate(spectrum)
    cov = np.fft.irfft(spectrum, n=m, axis=-1)[..., :n]
    cov /= n
    return cov


def _ess_rows(x: np.ndarray) -> np.ndarray:
    """Effective sample size of each component of (K, chain, draw) values (Vehtari et al. 2021, eqs.
    10-13; Geyer's initial positive then monotone sequence, as ArviZ's ``_ess``, over all components).

    With rho_t the autocorrelation at lag t and P_k = rho_2k + rho_2k+1 (P_0 = 1 + rho_1): the initial
    positive sequence keeps the pairs before the first P_k <= 0 (J of them, at most (n - 1) // 2 - 1
    beyond P_0), the monotone sequence replaces each P_k by min(P_0..P_k), and tau = -1 + 2 sum_{k<J} P_k
    + rho_2J (the even lag after the last pair, where positive or the pair was kept)."""
    x = np.asarray(x, dtype=float)
    K, n_chain, n_draw = x.shape
    size = n_chain * n_draw
    out = np.full(K, np.nan)
    ok = ~np.isnan(x).any(axis=(1, 2))
    flat = x.reshape(K, -1)
    with np.errstate(invalid="ignore"):
        const = ok & (flat.max(axis=1) - flat.min(axis=1) < np.finfo(float).resolution)
    out[const] = float(size)
    live = ok & ~const
    if not live.any():
        return out
    x = x[live] if not live.all() else x
    acov = _autocov(x)
    mean_var = np.mean(acov[:, :, 0], axis=1) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus = var_plus + np.var(x.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - np.mean(acov, axis=1)) / var_plus[:, None]  # (K, n_draw)
    j_max = max((n_draw - 1) // 2 - 1, 0)
    pairs = np.empty((rho.shape[0], j_max + 1))
    pairs[:, 0] = 1.0 + rho[:, 1]
    if j_max:
        pairs[:, 1:] = rho[:, 2:2 * j_max + 2:2] + rho[:, 3:2 * j_max + 2:2]
    positive = pairs > 0
    first_not = np.where(positive.all(axis=1), j_max + 1, np.argmin(positive, axis=1))
    J = np.minimum(j_max, first_not)
    monotone = np.minimum.accumulate(pairs, axis=1)
    kept = np.concatenate((np.zeros((rho.shape[0], 1)), np.cumsum(monotone, axis=1)), axis=1)
    kept = np.take_along_axis(kept, J[:, None], axis=1)[:, 0]
    rows = np.arange(rho.shape[0])
    even = rho[rows, 2 * J]
    last_pair = pairs[rows, J]
    rho_2j = np.where(J == 0, 1.0, np.where((even > 0) | (last_pair >= 0), even, 0.0))
    tau = -1.0 + 2.0 * kept + rho_2j
    floor = 1 / np.log10(size)
    tau = np.where(floor > tau, floor, tau)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(np.isnan(rho[:, 1]), np.nan, size / tau)
    out[live] = ess
    return out


def _quantile7_rows(flat: np.ndarray, prob: float) -> np.ndarray:
    """R's type-7 quantile of each row of (K, N) values."""
    n = flat.shape[1]
    if n == 1:
        return flat[:, 0].astype(float)
    aleph = n * prob + (1.0 + prob * -1.0)
    k = int(np.floor(np.clip(aleph, 1, n - 1)))
    gamma = float(np.clip(aleph - k, 0, 1))
    part = np.partition(flat, (k - 1, k), axis=1)
    return (1.0 - gamma) * part[:, k - 1] + gamma * part[:, k]


def _block_diagnostics(x: np.ndarray, which, fold_split: bool, kernel=None,
                       split: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """R-hat / ESS of a block of components, (K, chain, draw) float64 (``kernel``: a :class:`_Compiled`, whose
    rank normalisation gives numpy's numbers bit for bit and whose ESS and R-hat give them to rounding).
    ``split``: instead of ``x``, its split chains (:func:`split_chains`) of an even number of draws, which hold
    every draw -- enough for R-hat and the bulk ESS (:data:`SPLIT_ONLY`)."""
    if split is not None:
        K, chains, draws = split.shape[0], split.shape[1] // 2, 2 * split.shape[2]
        x = split
    else:
        K, chains, draws = x.shape
        split = split_chains(x)
    out: dict[str, np.ndarray] = {}
    nan_rows = np.isnan(x).any(axis=(1, 2))
    short = draws < 4
    z_split = z_folded = None
    ess_of, rhat_of = (_ess_rows, _rhat_rows) if kernel is None else (kernel.ess_rows, kernel.rhat_rows)
    if "rhat" in which and fold_split and chains >= 2 and not short:
        z_split, z_folded = _z_and_folded_z(split, None if kernel is None else kernel.z_and_folded)  # (one sort)
    elif "rhat" in which or "ess_bulk" in which:
        z_split = _z_rows(split)
    if "ess_bulk" in which:
        ess = ess_of(z_split)
        ess[nan_rows | short] = np.nan
        out["ess_bulk"] = ess
    if "rhat" in which:
        if chains < 2 or short:
            out["rhat"] = np.full(K, np.nan)
        else:
            bulk = rhat_of(z_split)
            if z_folded is None:  # folded about the median of all draws (arviz.summary)
                z_folded = _z_rows(split_chains(np.abs(x - _rows_median(x))))
            tail = rhat_of(z_folded)
            rhat = np.where(tail > bulk, tail, bulk)
            rhat[nan_rows] = np.nan
            out["rhat"] = rhat
    if "mcse_mean" in which or "mcse_sd" in which:
        # ArviZ 0.23's summary (_multichain_statistics): the mean's MCSE from the ESS of the split chains
        # (not rank-normalised), the sd's from the ESS of the squared deviations and their variance
        size = chains * draws
        squared = (x - x.mean(axis=(1, 2), keepdims=True)) ** 2
        total = squared.sum(axis=(1, 2))
        bad = nan_rows | short
        with np.errstate(divide="ignore", invalid="ignore"):
            if "mcse_mean" in which:
                mcse = np.sqrt(total / (size - 1) / _ess_rows(split_chains(x)))
                mcse[bad] = np.nan
                out["mcse_mean"] = mcse
            if "mcse_sd" in which:
                evar = total / size
                varvar = ((squared ** 2).mean(axis=(1, 2)) - evar ** 2) / _ess_rows(split_chains(squared))
                mcse = np.sqrt(varvar / evar / 4)
                mcse[bad] = np.nan
                out["mcse_sd"] = mcse
    if "ess_tail" in which:
        flat = x.reshape(K, -1)
        tail = None
        for p in TAIL_PROBS:
            with np.errstate(invalid="ignore"):
                q = _quantile7_rows(flat, p)
            ess = _ess_rows(split_chains((x <= q[:, None, None]).astype(float)))
            tail = ess if tail is None else np.where(ess < tail, ess, tail)
        tail[nan_rows | short] = np.nan
        out["ess_tail"] = tail
    return out

#: bytes per draw of one component that the R-hat / bulk-ESS checks of an MCMC posterior hold while they
#: diagnose it (``convergence.diagnose``: the block's contiguous copy, its ranks, z-scores, folded draws and
#: FFT autocovariances -- measured at 120-130 bytes per draw with 4 chains)
DIAGNOSTIC_BYTES = 128.0


def diagnostics_bytes(chains: int, draws: int, components: int) -> float:
    """Peak of the convergence checks of an MCMC posterior whose largest variable has ``components`` scalar
    components: ``convergence.diagnose`` works on blocks of about ``BLOCK_VALUES`` draws (at least one
    component), up to ``MAX_THREADS`` blocks at a time."""
    if draws < 4:  # (too few draws to diagnose: the checks only say so)
        return 0.0
    per_component = float(chains) * float(draws)
    step = max(1, BLOCK_VALUES // max(1, int(per_component)))
    blocks = -(-max(int(components), 1) // step)
    at_once = min(max(int(components), 1), step * min(blocks, os.cpu_count() or 1, MAX_THREADS))
    return DIAGNOSTIC_BYTES * per_component * at_once


def diagnose(arr, which=("rhat", "ess_bulk", "ess_tail"), fold_split: bool = True) -> dict[str, np.ndarray]:
    """R-hat (``"rhat"``), bulk ESS (``"ess_bulk"``) and tail ESS (``"ess_tail"``) of every scalar component
    of a (chain, draw, *event) array: ``{name: array of the event shape}`` (ArviZ's numbers, to rounding).

    NaN for a component with a NaN draw, for fewer than 4 draws, and (R-hat) for fewer than 2 chains.
    ``fold_split``: the tail R-hat folds about the median of the split chains (``arviz.rhat``) or, if
    False, of all draws (``arviz.summary``); the two differ only when an odd draw count drops a middle
    draw.  Components are processed in blocks of about :data:`BLOCK_VALUES` draws."""
    arr = np.asarray(arr)
    if arr.ndim < 2:
        raise ValueError(f"draws must have shape (chain, draw, ...), got {arr.shape}")
    chains, draws = arr.shape[:2]
    event = arr.shape[2:]
    K = int(np.prod(event, dtype=np.int64))
    flat = arr.reshape(chains, draws, K)
    out = {name: np.empty(K) for name in which}
    step = max(1, BLOCK_VALUES // max(1, chains * draws))
    kernel = _Compiled() if K * chains * draws >= KERNEL_MIN_VALUES and chains >= 2 else None

    presplit = kernel is not None and fold_split and draws % 2 == 0 and set(which) <= SPLIT_ONLY

    def run(k0: int) -> None:
        if presplit:  # the block's split chains gathered straight from the draws: one copy, not two
            half = draws // 2
            part = flat[:, :, k0:k0 + step]
            block = np.empty((part.shape[2], 2 * chains, half))
            block[:, :chains] = part[:, :half].transpose(2, 0, 1)
            block[:, chains:] = part[:, half:].transpose(2, 0, 1)
            values = _block_diagnostics(None, which, fold_split, kernel, split=block)
        else:
            block = np.ascontiguousarray(flat[:, :, k0:k0 + step].transpose(2, 0, 1), dtype=np.float64)
            values = _block_diagnostics(block, which, fold_split, kernel)
        for name, v in values.items():
            out[name][k0:k0 + step] = v

    starts = range(0, K, step)
    workers = min(len(starts), os.cpu_count() or 1, MAX_THREADS)
    if workers > 1:
        # numpy's sorts and FFTs release the GIL: blocks in threads use every core; each block writes its own
        # slice, so the numbers are those of the serial loop
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, starts))
    else:
        for k0 in starts:
            run(k0)
    return {name: values.reshape(event) for name, values in out.items()}


class _Compiled:
    """The compiled twins of the rank normalisation, the ESS and the R-hat of rank-normalised rows
    (``convergence_kernels``), with the numpy functions' signatures; built in the calling thread, which loads the
    kernels (or compiles them, once per installation) before any block runs."""

    def __init__(self):
        from . import convergence_kernels as kernels

        self.z_and_folded = kernels.z_and_folded
        self._ess, self._rhat = kernels.ess_rows, kernels.rhat_rows
        flat = np.zeros((1, 4))  # (the types the blocks pass: loaded, or compiled once, before any block runs)
        self.z_and_folded(flat, np.argsort(flat, axis=1), _z_table(4), np.empty_like(flat), np.empty_like(flat))
        self.ess_rows(flat.reshape(1, 2, 2))
        self.rhat_rows(flat.reshape(1, 2, 2))

    def ess_rows(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(x.shape[0])
        self._ess(np.ascontiguousarray(x, dtype=np.float64), np.finfo(float).resolution, out)
        return out

    def rhat_rows(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(x.shape[0])
        self._rhat(np.ascontiguousarray(x, dtype=np.float64), out)
        return out


def rhat(x, fold_split: bool = True) -> float:
    """Rank-normalised split R-hat: the larger of the bulk and the folded (tail) R-hat (Vehtari et al.
    2021, eq. 16).  NaN for fewer than 2 chains or 4 draws or any NaN draw (as ArviZ).

    The fold is about the median of the split chains (``arviz.rhat``) or, with ``fold_split=False``, of
    all draws (``arviz.summary``); the two differ only when an odd draw count drops a middle draw."""
    return float(diagnose(_as_chains(x), ("rhat",), fold_split)["rhat"])


def ess_bulk(x) -> float:
    """Bulk ESS: the ESS of the rank-normalised split chains (Vehtari et al. 2021, Sec. 4.2)."""
    return float(diagnose(_as_chains(x), ("ess_bulk",))["ess_bulk"])


def ess_tail(x, probs=TAIL_PROBS) -> float:
    """Tail ESS: the smaller ESS of the indicators x <= q_5% and x <= q_95% (Vehtari et al. 2021, Sec. 4.3)."""
    if tuple(probs) != TAIL_PROBS:
        raise ValueError(f"tail ESS is defined at the quantiles {TAIL_PROBS}")
    return float(diagnose(_as_chains(x), ("ess_tail",))["ess_tail"])


def hdi(values, prob: float) -> tuple[float, float]:
    """The narrowest interval holding ``floor(prob * N)`` + 1 of the sorted draws (unimodal HDI)."""
    lo, hi = hdi_rows(np.asarray(values).reshape(1, -1), prob)
    return float(lo[0]), float(hi[0])


def hdi_rows(values: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`hdi` of each row of (K, N) draws (ArviZ's rule on a tie of width: the lowest window)."""
    from .intervals import hpd

    values = np.asarray(values)
    if values.shape[1] - int(np.floor(prob * values.shape[1])) == 0:
        raise ValueError("too few draws for an interval")
    lo, hi = hpd(values.T, prob, ties="first")
    return lo.astype(float), hi.astype(float)


#: the summary columns' rounding, as ArviZ's default ``summary`` (3 decimals; ESS 0; R-hat 2)
DECIMALS = {"ess_bulk": 0, "ess_tail": 0, "r_hat": 2}


def _component_labels(name: str, post, event: tuple, flat_index: np.ndarray) -> list[str]:
    """``name`` or ``name[coord, ...]`` (C order, as ``arviz.summary`` labels them) of the given components."""
    if not event:
        return [name]
    dims = list(post.dims.get(name, [])) or [f"{name}_dim_{i}" for i in range(len(event))]
    labels = [post.coords.get(dim, range(size)) if dim in post.coords else range(size)
              for dim, size in zip(dims, event)]
    index = np.unravel_index(flat_index, event)
    return [f"{name}[{', '.join(str(labels[d][int(index[d][j])]) for d in range(len(event)))}]"
            for j in range(len(flat_index))]


def summary_rows(post, hdi_prob: float = 0.95, diagnostics: bool | None = None, limit: tuple[int, int] | None = None,
                 mcse: bool = False):
    """``(columns, rows)`` of ArviZ 0.23's default summary of a Posterior (its ``hdi_prob`` HDI), without ArviZ.

    ``columns``: mean, sd, hdi_lo%, hdi_hi% and, with more than one chain and more than 3 draws (or
    ``diagnostics=True``), (with ``mcse``: mcse_mean, mcse_sd,) ess_bulk, ess_tail, r_hat.  ``rows``: ``(label, values)`` per scalar
    component, labelled ``name`` or ``name[coord, ...]`` in C order as ``arviz.summary`` does; the values
    are unrounded (round with :data:`DECIMALS`, 3 otherwise, for ArviZ's printed table).

    ``limit = (most, first)``: when the posterior has more than ``most`` components, a variable with more
    than ``most`` gets rows for only its first ``first`` components with a finite mean (padding of a ragged
    variable is no component), followed by ``("... N more NAME", None)`` -- what a terminal shows; the
    intervals and diagnostics are computed for those rows only.
    """
    if diagnostics is None:
        diagnostics = post.nchains > 1 and post.ndraws > 3
    alpha = 1 - hdi_prob
    columns = ["mean", "sd", f"hdi_{100 * alpha / 2:g}%", f"hdi_{100 * (1 - alpha / 2):g}%"]
    which = ("mcse_mean", "mcse_sd") if mcse else ()
    if diagnostics:
        columns += [*which, "ess_bulk", "ess_tail", "r_hat"]
    which += ("ess_bulk", "ess_tail", "rhat")
    sizes = {name: int(np.prod(np.shape(arr)[2:], dtype=np.int64)) for name, arr in post.posterior.items()}
    rows = []
    for name, arr in post.posterior.items():
        arr = np.asarray(arr)
        chains, draws, event = arr.shape[0], arr.shape[1], arr.shape[2:]
        flat = arr.reshape(chains, draws, -1)
        mean = np.mean(arr, axis=(0, 1)).reshape(-1)
        chosen = np.arange(flat.shape[2])
        hidden = 0
        if limit is not None and sizes[name] > limit[0] and sum(sizes.values()) > limit[0]:
            finite = np.flatnonzero(np.isfinite(mean))
            chosen = finite[: limit[1]]
            hidden = sizes[name] - limit[1] if len(finite) > limit[1] else 0
        x = flat[:, :, chosen]
        sd = np.std(x, axis=(0, 1), ddof=1)
        lo, hi = hdi_rows(x.reshape(chains * draws, -1).T, hdi_prob)
        diag = diagnose(x, which, fold_split=False) if diagnostics else None
        for j, label in enumerate(_component_labels(name, post, event, chosen)):
            values = [float(mean[chosen[j]]), float(sd[j]), float(lo[j]), float(hi[j])]
            if diag is not None:
                values += [float(diag[key][j]) for key in which]
            rows.append((label, values))
        if hidden:
            rows.append((f"... {hidden} more {name}", None))
    return columns, rows
