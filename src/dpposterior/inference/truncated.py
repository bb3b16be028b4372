"""Vectorised draws from truncated normal and gamma distributions, robust in the far tails.

Every sampler first tries a few rounds of draws from the untruncated distribution (cheap
numpy generator) and keeps those that fall inside the interval; the rest are drawn by
the inverse CDF in log space: ``log_ndtr`` / ``ndtri_exp`` for the normal and the
regularised incomplete gamma functions ``gammainc`` / ``gammaincc`` and their
inverses for the gamma (scipy.special).  Keeping an accepted draw and otherwise
drawing afresh (again, or from the truncated law) is exact: every branch returns the
truncated distribution.

``log_gammainc`` / ``log_gammaincc`` extend log P(a, x) and log Q(a, x) past the
point where scipy's values underflow (series for small x, asymptotic expansion for
large x), so mixture weights (Kazan & Reiter, eq. 4) stay finite in the tails.
"""

from __future__ import annotations

import numpy as np
from scipy import special

_TINY = 1e-300
#: rounds of untruncated tries before the inverse CDF (each round only for the rejected)
PLAIN_TRIES = 3


def log_gammainc(a, x):
    """log P(a, x) (regularised lower incomplete gamma), finite where P underflows."""
    a, x = np.broadcast_arrays(np.asarray(a, float), np.asarray(x, float))
    with np.errstate(divide="ignore"):
        out = np.log(special.gammainc(a, x))
    bad = (out < -600) & (x > 0)
    if bad.any():
        ab, xb = a[bad], x[bad]
        # P(a, x) = x^a e^{-x} / Gamma(a+1) * sum_k x^k / ((a+1)...(a+k)); used for x << a
        term = np.ones_like(xb)
        total = np.ones_like(xb)
        for k in range(1, 200):
            term = term * xb / (ab + k)
            total += term
            if np.all(term < 1e-17 * total):
                break
        out = out.copy()
        out[bad] = ab * np.log(xb) - xb - special.gammaln(ab + 1.0) + np.log(total)
    return out


def log_gammaincc(a, x):
    """log Q(a, x) (regularised upper incomplete gamma), finite where Q underflows."""
    a, x = np.broadcast_arrays(np.asarray(a, float), np.asarray(x, float))
    with np.errstate(divide="ignore"):
        out = np.log(special.gammaincc(a, x))
    bad = (out < -600) & np.isfinite(x)
    if bad.any():
        ab, xb = a[bad], x[bad]
        # Q(a, x) ~ x^{a-1} e^{-x} / Gamma(a) * (1 + (a-1)/x + (a-1)(a-2)/x^2 + ...), x >> a
        term = np.ones_like(xb)
        total = np.ones_like(xb)
        for k in range(1, 30):
            term = term * (ab - k) / xb
            total += term
            if np.all(np.abs(term) < 1e-17 * np.abs(total)):
                break
        out = out.copy()
        out[bad] = (ab - 1.0) * np.log(xb) - xb - special.gammaln(ab) + np.log(total)
    return out


def log_diff_exp(la, lb):
    """log(exp(la) - exp(lb)) for la >= lb (-inf when equal)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return la + np.log1p(-np.exp(np.minimum(lb - la, 0.0)))


def log_normal_mass(a, b):
    """log(Phi(b) - Phi(a)) for a <= b, accurate in both tails."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    flip = (a + b) > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    return log_diff_exp(special.log_ndtr(hi), special.log_ndtr(lo))


def truncnorm_rvs(mean, sd, lo, hi, rng: np.random.Generator, try_plain: bool = True):
    """N(mean, sd^2) truncated to [lo, hi] (bounds may be infinite); broadcast shapes."""
    mean, sd, lo, hi = np.broadcast_arrays(*(np.asarray(v, float) for v in (mean, sd, lo, hi)))
    out = np.empty(mean.shape)
    todo = np.ones(mean.shape, bool)
    if try_plain:
        idx = np.arange(mean.size).reshape(mean.shape)
        for _ in range(PLAIN_TRIES):
            sel = idx[todo]
            x = mean[todo] + sd[todo] * rng.standard_normal(sel.shape)
            ok = (x >= lo[todo]) & (x <= hi[todo])
            out.flat[sel[ok]] = x[ok]
            todo.flat[sel[ok]] = False
            if not todo.any():
                return out
    if todo.any():
        m, s, l, h = mean[todo], sd[todo], lo[todo], hi[todo]
        a = (l - m) / s
        b = (h - m) / s
        # work where the interval sits in the lower tail, where log_ndtr is accurate
        flip = (a + b) > 0
        a2 = np.where(flip, -b, a)
        b2 = np.where(flip, -a, b)
        la = special.log_ndtr(a2)
        lb = special.log_ndtr(b2)
        lmass = log_diff_exp(lb, la)
        u = rng.random(m.shape)
        with np.errstate(divide="ignore"):
            lu = np.logaddexp(la, np.log(u) + lmass)
        z = special.ndtri_exp(np.minimum(lu, 0.0))
        z = np.clip(z, a2, b2)
        z = np.where(flip, -z, z)
        out[todo] = np.clip(m + s * z, l, h)
    return out


def truncgamma_rvs(shape, rate, lo, hi, rng: np.random.Generator, try_plain: bool = True):
    """Gamma(shape, rate) truncated to (lo, hi] (0 <= lo < hi <= inf); broadcast shapes."""
    shape, rate, lo, hi = np.broadcast_arrays(*(np.asarray(v, float) for v in (shape, rate, lo, hi)))
    out = np.empty(shape.shape)
    todo = np.ones(shape.shape, bool)
    if try_plain:
        idx = np.arange(shape.size).reshape(shape.shape)
        for _ in range(PLAIN_TRIES):
            sel = idx[todo]
            x = rng.standard_gamma(shape[todo]) / rate[todo]
            ok = (x > lo[todo]) & (x <= hi[todo])
            out.flat[sel[ok]] = x[ok]
            todo.flat[sel[ok]] = False
            if not todo.any():
                return out
    if todo.any():
        a, r, l, h = shape[todo], rate[todo], lo[todo], hi[todo]
        xl, xh = r * l, r * h
        u = rng.random(a.shape)
        res = np.empty(a.shape)
        upper = xl > a  # interval right of the bulk: invert the upper tail Q
        if upper.any():
            aa, ql_log, qh_log = a[upper], log_gammaincc(a[upper], xl[upper]), log_gammaincc(a[upper], xh[upper])
            # q = Q(xh) + u (Q(xl) - Q(xh)), in logs
            lmass = log_diff_exp(ql_log, qh_log)
            with np.errstate(divide="ignore"):
                lq = np.logaddexp(qh_log, np.log(u[upper]) + lmass)
            q = np.exp(lq)
            z = special.gammainccinv(aa, q)
            # Q underflowed: the tail is ~ exponential with rate 1 - (a-1)/x beyond xl
            under = ~(q > _TINY) | ~np.isfinite(z)
            if under.any():
                xlu = xl[upper][under]
                rate_tail = np.maximum(1.0 - (aa[under] - 1.0) / xlu, 1e-3)
                z[under] = xlu - np.log1p(-u[upper][under] * -np.expm1(-rate_tail * (xh[upper][under] - xlu))) / rate_tail
            res[upper] = z
        lower = ~upper
        if lower.any():
            aa = a[lower]
            pl_log, ph_log = log_gammainc(aa, xl[lower]), log_gammainc(aa, xh[lower])
            lmass = log_diff_exp(ph_log, pl_log)
            with np.errstate(divide="ignore"):
                lp = np.logaddexp(pl_log, np.log(u[lower]) + lmass)
            p = np.exp(lp)
            z = special.gammaincinv(aa, p)
            # P underflowed: near 0 the density is ~ x^{a-1}, so x^a is uniform
            under = ~(p > _TINY) | ~np.isfinite(z) | (z <= 0)
            if under.any():
                al = aa[under]
                la_lo = al * np.log(np.maximum(xl[lower][under], _TINY))
                la_hi = al * np.log(xh[lower][under])
                with np.errstate(divide="ignore"):
                    lv = np.logaddexp(la_lo, np.log(u[lower][under]) + log_diff_exp(la_hi, la_lo))
                z[under] = np.exp(lv / al)
            res[lower] = z
        out[todo] = np.clip(res / r, l, h)
    return out
