"""Credible intervals from posterior draws of integer counts.

An equal-tailed interval of an integer posterior -- [q(0.05), q(0.95)] with whole-valued ends, both included --
holds *more* than its nominal mass, and where the posterior piles up at zero (a rare cell of a small area) its lower
end is 0 with no mass below it, so a "90%" equal-tailed interval [0, q(0.95)] holds 0.95 or more: it is a 95%
interval in disguise, and a calibrated posterior covers at that mass. The **highest posterior density (HPD)
interval** -- the shortest interval holding at least the nominal mass (Box & Tiao 1973, Sec. 2.8; Chen & Shao
1999, "Monte Carlo estimation of Bayesian credible and HPD intervals", J. Comput. Graph. Stat. 8, who estimate it
from sorted draws as here) -- spends its mass where the posterior is: one-sided at zero, near equal-tailed for a
symmetric law.

From n sorted draws s the HPD interval is the window [s_i, s_(i+k)], k = floor(prob n), of least width (ArviZ's
``hdi``, to the draw). Integer draws tie: several windows have the least width, and ArviZ keeps the first (the
lowest). Here the tie goes to the window holding the most draws, ends included, so that for a unimodal law on the
integers the interval is the HPD *set* -- the values taken in decreasing posterior probability until the nominal
mass is reached -- and the first of those on a tie of mass too. Continuous draws (no ties) give ArviZ's interval.
"""
from __future__ import annotations

import numpy as np

#: interval kinds, by the names the commands take
KINDS = ("hpd", "equal-tailed")

#: cells per chunk: the sorted draws and their tie indices are (draws x chunk) arrays
_CHUNK = 8192


def equal_tailed(draws: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """The equal-tailed interval of each column of ``draws`` (draws along axis 0): the (1 - prob)/2 and
    (1 + prob)/2 quantiles by the inverted CDF, so the ends are draws."""
    lo, hi = np.quantile(draws, [(1.0 - prob) / 2.0, (1.0 + prob) / 2.0], axis=0, method="inverted_cdf")
    return lo, hi


def hpd(draws: np.ndarray, prob: float, ties: str = "heaviest") -> tuple[np.ndarray, np.ndarray]:
    """The HPD interval of each column of ``draws`` (draws along axis 0; any further axes are cells): the
    shortest window of sorted draws holding floor(prob n) + 1 of them, on a tie of width the one holding the most
    draws (ends included), then the lowest; ``ties="first"``: the lowest, as ArviZ's ``hdi``."""
    if ties not in ("heaviest", "first"):
        raise ValueError(f"ties must be 'heaviest' or 'first' (got {ties!r})")
    draws = np.asarray(draws)
    n = draws.shape[0]
    k = int(np.floor(prob * n))
    if n - k < 1:
        raise ValueError(f"{n} draws are too few for a {prob:g} interval")
    cells = draws.shape[1:]
    flat = draws.reshape(n, -1)
    lo = np.empty(flat.shape[1], dtype=flat.dtype)
    hi = np.empty(flat.shape[1], dtype=flat.dtype)
    rows = np.arange(n)[:, None]
    for a in range(0, flat.shape[1], _CHUNK):
        s = np.sort(flat[:, a:a + _CHUNK], axis=0)
        width = np.subtract(s[k:], s[:n - k], dtype=np.float64)
        cols = np.arange(s.shape[1])
        if ties == "first":
            best = np.argmin(width, axis=0)
            lo[a:a + _CHUNK], hi[a:a + _CHUNK] = s[best, cols], s[best + k, cols]
            continue
        # the last index of each draw's value among the sorted draws.  last[i + k] - i + 1 counts the draws in
        # [s_i, s_(i+k)] from index i on: the mass, ends included, where i is its value's first index, and less
        # elsewhere, so its largest value over a tie of width is that of the first index of the heaviest window
        end = np.ones(s.shape, dtype=bool)
        end[:-1] = s[:-1] != s[1:]
        last = np.flip(np.minimum.accumulate(np.flip(np.where(end, rows, n - 1), axis=0), axis=0), axis=0)
        held = last[k:] - rows[:n - k] + 1
        shortest = width == width.min(axis=0)
        best = np.argmax(np.where(shortest, held, -1), axis=0)
        lo[a:a + _CHUNK] = s[best, cols]
        hi[a:a + _CHUNK] = s[best + k, cols]
    return lo.reshape(cells), hi.reshape(cells)


def interval(draws: np.ndarray, prob: float, kind: str = "hpd") -> tuple[np.ndarray, np.ndarray]:
    """The ``kind`` interval (:data:`KINDS`) of each column of ``draws``."""
    if kind == "hpd":
        return hpd(draws, prob)
    if kind == "equal-tailed":
        return equal_tailed(draws, prob)
    raise ValueError(f"interval kind must be one of {', '.join(KINDS)} (got {kind!r})")
