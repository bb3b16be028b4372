"""Draws from truncated normal and gamma distributions, robust in the far tails.

Every sampler first tries a few rounds of draws from the untruncated distribution (cheap
numpy generator) and keeps those that fall inside the interval; the rest are drawn by
the inverse CDF in log space: ``log_ndtr`` / ``ndtri_exp`` for the normal and the
regularised incomplete gamma functions ``gammainc`` / ``gammaincc`` and their
inverses for the gamma (scipy.special).  Keeping an accepted draw and otherwise
drawing afresh (again, or from the truncated law) is exact: every branch returns the
truncated distribution.  The truncated normal comes vectorised (:func:`truncnorm_rvs`) and
compiled (:func:`nb_truncnorm`), the truncated gamma compiled (:func:`nb_truncgamma`), for the
per-iteration kernels.

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


def truncnorm_rvs(mean, sd, lo, hi, rng: np.random.Generator):
    """N(mean, sd^2) truncated to [lo, hi] (bounds may be infinite); broadcast shapes."""
    mean, sd, lo, hi = np.broadcast_arrays(*(np.asarray(v, float) for v in (mean, sd, lo, hi)))
    out = np.empty(mean.shape)
    todo = np.ones(mean.shape, bool)
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


# ---------------------------------------------------------------------------------------
# compiled scalar versions (numba), for the per-iteration kernels
# ---------------------------------------------------------------------------------------
# One scalar at a time, drawing from a numpy ``Generator``
# passed into the kernel (one per chain, so draws do not depend on how chains are spread
# over threads).  scipy's special functions are bound as *named* LLVM symbols, as in
# ``gibbs_ss``: a ctypes address would be baked into the machine code and numba would
# refuse to cache the kernels, so every process would recompile them.
import math  # noqa: E402

import llvmlite.binding as _llvm  # noqa: E402
import numba  # noqa: E402
from numba.extending import get_cython_function_address  # noqa: E402

_SCIPY = {  # our symbol -> (cython_special name, arity)
    "gammainc": ("gammainc", 2), "gammaincc": ("gammaincc", 2),
    "gammaincinv": ("gammaincinv", 2), "gammainccinv": ("gammainccinv", 2),
    "log_ndtr": ("__pyx_fuse_1log_ndtr", 1), "ndtri_exp": ("ndtri_exp", 1),
}
for _ours, (_theirs, _k) in _SCIPY.items():
    _llvm.add_symbol(f"dpposterior_trunc_{_ours}", get_cython_function_address("scipy.special.cython_special", _theirs))
_f8 = numba.types.float64
_nb_gammainc = numba.types.ExternalFunction("dpposterior_trunc_gammainc", _f8(_f8, _f8))
_nb_gammaincc = numba.types.ExternalFunction("dpposterior_trunc_gammaincc", _f8(_f8, _f8))
_nb_gammaincinv = numba.types.ExternalFunction("dpposterior_trunc_gammaincinv", _f8(_f8, _f8))
_nb_gammainccinv = numba.types.ExternalFunction("dpposterior_trunc_gammainccinv", _f8(_f8, _f8))
_nb_log_ndtr = numba.types.ExternalFunction("dpposterior_trunc_log_ndtr", _f8(_f8))
_nb_ndtri_exp = numba.types.ExternalFunction("dpposterior_trunc_ndtri_exp", _f8(_f8))

_jit = numba.njit(cache=True, nogil=True)


@_jit
def nb_log_ndtr(x):
    return _nb_log_ndtr(x)


@_jit
def nb_logaddexp(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    m = max(a, b)
    return m + math.log1p(math.exp(-abs(a - b)))


@_jit
def nb_log_diff_exp(la, lb):
    """log(exp(la) - exp(lb)) for la >= lb (-inf when equal)."""
    if lb == -np.inf:
        return la
    if la <= lb:
        return -np.inf
    return la + math.log1p(-math.exp(lb - la))


@_jit
def nb_log_gammainc(a, x):
    """Scalar :func:`log_gammainc`."""
    v = _nb_gammainc(a, x)
    out = math.log(v) if v > 0.0 else -np.inf
    if out < -600.0 and x > 0.0:
        term = 1.0
        total = 1.0
        for k in range(1, 200):
            term = term * x / (a + k)
            total += term
            if term < 1e-17 * total:
                break
        out = a * math.log(x) - x - math.lgamma(a + 1.0) + math.log(total)
    return out


@_jit
def nb_log_gammaincc(a, x):
    """Scalar :func:`log_gammaincc`."""
    v = _nb_gammaincc(a, x)
    out = math.log(v) if v > 0.0 else -np.inf
    if out < -600.0 and math.isfinite(x):
        term = 1.0
        total = 1.0
        for k in range(1, 30):
            term = term * (a - k) / x
            total += term
            if abs(term) < 1e-17 * abs(total):
                break
        out = (a - 1.0) * math.log(x) - x - math.lgamma(a) + math.log(total)
    return out


@_jit
def nb_truncnorm(rng, mean, sd, lo, hi):
    """Scalar :func:`truncnorm_rvs` (same plain tries, then the log-space inverse CDF)."""
    for _ in range(PLAIN_TRIES):
        x = mean + sd * rng.standard_normal()
        if x >= lo and x <= hi:
            return x
    a = (lo - mean) / sd
    b = (hi - mean) / sd
    flip = (a + b) > 0
    a2 = -b if flip else a
    b2 = -a if flip else b
    la = _nb_log_ndtr(a2)
    lb = _nb_log_ndtr(b2)
    lmass = nb_log_diff_exp(lb, la)
    u = rng.random()
    lu = nb_logaddexp(la, (math.log(u) if u > 0.0 else -np.inf) + lmass)
    z = _nb_ndtri_exp(min(lu, 0.0))
    z = min(max(z, a2), b2)
    if flip:
        z = -z
    return min(max(mean + sd * z, lo), hi)


@_jit
def nb_truncgamma(rng, shape, rate, lo, hi):
    """Gamma(shape, rate) truncated to (lo, hi] (0 <= lo < hi <= inf): the same plain tries, then the
    log-space inverse CDF -- of the upper tail Q right of the bulk, of P left of it."""
    for _ in range(PLAIN_TRIES):
        x = rng.standard_gamma(shape) / rate
        if x > lo and x <= hi:
            return x
    xl = rate * lo
    xh = rate * hi
    u = rng.random()
    lu = math.log(u) if u > 0.0 else -np.inf
    if xl > shape:  # interval right of the bulk: invert the upper tail Q
        ql = nb_log_gammaincc(shape, xl)
        qh = nb_log_gammaincc(shape, xh)
        q = math.exp(nb_logaddexp(qh, lu + nb_log_diff_exp(ql, qh)))
        z = _nb_gammainccinv(shape, q)
        if not (q > _TINY) or not math.isfinite(z):
            # Q underflowed: the tail is ~ exponential with rate 1 - (a-1)/x beyond xl
            rt = max(1.0 - (shape - 1.0) / xl, 1e-3)
            z = xl - math.log1p(-u * -math.expm1(-rt * (xh - xl))) / rt
    else:
        pl = nb_log_gammainc(shape, xl)
        ph = nb_log_gammainc(shape, xh)
        p = math.exp(nb_logaddexp(pl, lu + nb_log_diff_exp(ph, pl)))
        z = _nb_gammaincinv(shape, p)
        if not (p > _TINY) or not math.isfinite(z) or z <= 0.0:
            # P underflowed: near 0 the density is ~ x^{a-1}, so x^a is uniform
            la_lo = shape * math.log(max(xl, _TINY))
            la_hi = shape * math.log(xh)
            lv = nb_logaddexp(la_lo, lu + nb_log_diff_exp(la_hi, la_lo))
            z = math.exp(lv / shape)
    return min(max(z / rate, lo), hi)


@_jit
def nb_inverse_gaussian_recip(rng, a, b):
    """1/w for w ~ InverseGaussian(mean 1/a, shape 1/b^2), a = b |z| >= 0, without cancellation.

    Michael, Schucany & Haas (1976) written for 1/w, as ``gibbs_ss._sigma2``: with
    Y ~ chi^2_1 and c = Y b^2 / 2 the roots of MSH's quadratic are 1/D and D/a^2,
    D = a + c + sqrt(c (c + 2a)); 1/w = D with probability D/(D + a), else a^2/D.
    ``1/rng.wald(...)`` cancels to 1/0 once mean/shape exceeds ~1e15 and loses
    precision well before; a = 0 is the exact Levy limit 1/w = 2c.
    """
    g = rng.standard_normal()
    c = 0.5 * g * g * b * b
    d = a + c + math.sqrt(c * (c + 2.0 * a))
    if rng.random() * (d + a) <= d:
        out = d
    else:
        out = (a / d) * a if d > 0.0 else a
    return max(out, 2.2250738585072014e-308)


def inverse_gaussian_recip(a, b, rng: np.random.Generator):
    """Vectorised :func:`nb_inverse_gaussian_recip` (numpy generator)."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    g = rng.standard_normal(a.shape)
    c = 0.5 * g * g * b * b
    d = a + c + np.sqrt(c * (c + 2.0 * a))
    first = rng.random(a.shape) * (d + a) <= d
    with np.errstate(divide="ignore", invalid="ignore"):
        second = np.where(d > 0.0, (a / d) * a, a)
    return np.maximum(np.where(first, d, second), 2.2250738585072014e-308)
