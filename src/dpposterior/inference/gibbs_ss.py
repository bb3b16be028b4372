"""Gibbs-SS: Gibbs sampling over noisy sufficient statistics (Bernstein & Sheldon, NeurIPS 2018).

Paper: ``001_da4217b89717099b.txt``.

* Algorithm 1 (bounded statistics; ``binomial``, ``multinomial``):
  theta | s by conjugacy (App. A.1); s | theta, sigma^2, y from the normal
  approximation N(n mu, n Sigma) (eq. 1) times the augmented Laplace likelihood
  N(y; s, diag sigma^2) (NormProduct); 1/sigma_j^2 | s, y ~ InverseGaussian(mean
  eps / (Delta |y_j - s_j|), shape eps^2 / Delta^2) (App. B; the text of Algorithm 1
  line 6 is garbled), drawn as sigma^2 directly by a cancellation-free form of Michael,
  Schucany & Haas (:func:`_sigma2`; numpy's ``wald`` returns 0 for y ~ s).
* Algorithm 2 with the random-sum CLT (Prop. 1, Algorithm 3; ``exponential``,
  ``poisson``): latent lower / centre / upper statistics s_l, s_c, s_u, each
  N(n q mu_hat, n q Sigma_hat + n q (1 - q) mu_hat^2) with the truncated moments of
  Lemma 1 (eqs. 3-4) in closed form per family (:func:`exponential_region`,
  :func:`poisson_region`; tests cross-check them against autodiff of
  log(F(w; eta) - F(v; eta))).  s_c additionally gets the NormProduct with y.
  Deviation: Algorithm 2 line 10 redraws s_c from N(m_c, V_c) *without* y before the
  sigma^2 update; that is not the full conditional of s_c.  We keep the s_c drawn
  jointly with s_l, s_u in lines 7-8 (a blocked Gibbs step whose three blocks sum to
  the paper's line-8 draw of s), which is the exact conditional.
* Addition (truncated families only): before each sweep, ``MH_STEPS`` random-walk
  Metropolis steps on log theta target the collapsed posterior p(theta | y, sigma^2)
  of the same approximate model, y | theta, sigma^2 ~ N(m_c(theta), V_c(theta) + sigma^2)
  (the latent sums integrated out).  Without it the chain mixes like classic data
  augmentation: theta | s and s | theta are both tight when the Laplace noise is large
  (the App. C sensitivity b makes it so), theta moves by ~1/sqrt(n) per sweep, and the
  calibration fails for n >= 1000 (KS 0.23 at n = 1000, eps = 0.01, 300 trials, vs
  0.07 with the move).  Each of these steps is preceded by an independence Metropolis
  step proposing theta from the prior: the truncated sum is not monotone in theta, so a
  release can have two narrow, distant modes that a random walk cannot cross at large n
  (exponential, n = 10000, eps = 0.1: 95% intervals covered 89% without it).  Both moves
  are valid blocked updates of (theta, s) under the approximate joint, so they do not
  change what the sampler targets.
* Draws of s that are invalid for the model (counts < 0 or > n, negative sums) are
  rejected and redrawn (Sec. 3.3, "rejection sampling"); after ``MAX_TRIES`` failed
  proposals the previous s is kept and counted (posterior attr ``rejection_fallbacks``).

Samplers are numba kernels over state arrays with a leading batch axis (chains x
trials flattened), so a whole calibration cell runs in one call.  Randomness comes
from numba's generator seeded from a ``numpy.random.SeedSequence``: the same seed
gives the same draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import llvmlite.binding as _llvm
import numba
import numpy as np
from numba.extending import get_cython_function_address

from ..errors import InputError
from ..families._expfam import ExpFamModel, RecordLaw
from ..observation import ObservationModel
from ..options import MCMCOptions
from ..posterior import Posterior

#: proposals of s tried per iteration before keeping the previous value
MAX_TRIES = 1000
#: collapsed Metropolis steps on log theta per sweep (truncated families) and their step sizes
MH_STEPS = 2
MH_SCALES = (0.05, 0.3, 1.5)
#: warm-up and draws of the paper's experiments (Sec. 4)
PAPER_WARMUP, PAPER_DRAWS = 2000, 5000

# Regularized lower / upper incomplete gamma P(a, x), Q(a, x) from scipy.special, callable from
# numba.  They are bound as *named* external symbols (registered with LLVM at import), not as
# ctypes pointers: a ctypes pointer is baked into the machine code as a constant address, so
# numba refuses to cache such kernels and every new process (each worker of a study) spent
# ~6 s recompiling the truncated kernels.  A named symbol is resolved when the cached code is
# loaded, so every kernel here is cached: workers start warm.
for _name in ("gammainc", "gammaincc"):
    _llvm.add_symbol(f"dpposterior_scipy_{_name}",
                     get_cython_function_address("scipy.special.cython_special", _name))
_gammainc = numba.types.ExternalFunction("dpposterior_scipy_gammainc",
                                         numba.types.float64(numba.types.float64, numba.types.float64))
_gammaincc = numba.types.ExternalFunction("dpposterior_scipy_gammaincc",
                                          numba.types.float64(numba.types.float64, numba.types.float64))

#: codes of the truncated kernel's record laws (Lemma 1's region moments and the conjugate update of line 9)
EXPONENTIAL, POISSON = 0, 1
#: the rates a truncated kernel can hold: (1/rate)^2 and rate^2 stay finite, no division by 0
RATE_MIN, RATE_MAX = 1e-150, 1e150
LOG_RATE_MIN, LOG_RATE_MAX = math.log(RATE_MIN), math.log(RATE_MAX)
#: the truncated kernel's code of each record law it handles
TRUNCATED_CODES = {RecordLaw.EXPONENTIAL: EXPONENTIAL, RecordLaw.POISSON: POISSON}


# --------------------------------------------------------------------------- Lemma 1, closed forms
@numba.njit(cache=True)
def exponential_region(lam, v, w):
    """(q, mean, var) of x ~ Exponential(lam) restricted to [v, w] (w may be inf).

    Lemma 1 with eta = -lam, F(w) - F(v) = e^{-lam v} - e^{-lam w}:
    mu_hat = 1/lam + d/d eta log(...) = v + d h(lam d), Sigma_hat = d^2 g(lam d), d = w - v,
    h(x) = 1/x - 1/expm1(x), g(x) = 1/x^2 - 1/(4 sinh^2(x/2)); series for small x
    (the closed forms cancel catastrophically there).
    """
    if w == np.inf:
        inv = 1.0 / lam
        return math.exp(-lam * v), v + inv, inv * inv  # (1/lam^2 divided by 0 for lam < 1e-154)
    d = w - v
    x = lam * d
    q = math.exp(-lam * v) * (-math.expm1(-x))
    if x < 1e-2:
        h = 0.5 - x / 12.0 + x ** 3 / 720.0
        g = 1.0 / 12.0 - x * x / 240.0 + x ** 4 / 6048.0
    else:
        h = 1.0 / x - 1.0 / math.expm1(x)
        if x > 700.0:
            g = 1.0 / (x * x)
        else:
            sh = math.sinh(0.5 * x)
            g = 1.0 / (x * x) - 1.0 / (4.0 * sh * sh)
    return q, v + d * h, max(d * d * g, 0.0)


@numba.njit(cache=True)
def poisson_prob(lam, lo, hi):
    """P(lo <= X <= hi), X ~ Poisson(lam), integer lo, hi (hi may be inf), via incomplete gammas.

    P(X <= k) = Q(k + 1, lam), P(X >= k) = P(k, lam); the difference is taken on the
    side where both terms are small, so tail regions keep their relative accuracy.
    """
    if lo < 0.0:
        lo = 0.0
    if hi < lo:
        return 0.0
    if hi == np.inf:
        return 1.0 if lo == 0.0 else _gammainc(lo, lam)
    if lo == 0.0:
        return _gammaincc(hi + 1.0, lam)
    if lo > lam:
        return max(_gammainc(lo, lam) - _gammainc(hi + 1.0, lam), 0.0)
    return max(_gammaincc(hi + 1.0, lam) - _gammaincc(lo, lam), 0.0)


@numba.njit(cache=True)
def poisson_region(lam, lo, hi):
    """(q, mean, var) of X ~ Poisson(lam) restricted to the integers {lo, ..., hi}.

    Lemma 1 with eta = log lam: d/d eta P(lo..hi) = lam (p(lo - 1) - p(hi)), which gives the
    closed forms E[X; set] = lam P(lo-1..hi-1), E[X(X-1); set] = lam^2 P(lo-2..hi-2).
    """
    q = poisson_prob(lam, lo, hi)
    if q <= 0.0:
        return 0.0, max(lo, 0.0), 0.0
    p1 = poisson_prob(lam, lo - 1.0, hi - 1.0)
    p2 = poisson_prob(lam, lo - 2.0, hi - 2.0)
    mean = lam * p1 / q
    ex2 = (lam * lam * p2 + lam * p1) / q
    return q, mean, max(ex2 - mean * mean, 0.0)


@numba.njit(cache=True)
def region_moments(code, lam, v, w):
    if code == EXPONENTIAL:
        return exponential_region(lam, v, w)
    return poisson_region(lam, v, w)


@numba.njit(cache=True)
def rs_clt(code, lam, n, v, w):
    """Algorithm 3 / Prop. 1: mean and variance of the random sum over records in [v, w]."""
    q, mu, var = region_moments(code, lam, v, w)
    m = n * q * mu
    V = n * q * var + n * q * (1.0 - q) * mu * mu
    return m, max(V, 0.0)


@numba.njit(cache=True)
def _regions(code, lo, hi):
    """The three truncation regions (lower, centre, upper) of Algorithm 2, lines 2-4.

    Poisson regions are disjoint integer sets: {0..ceil(a)-1}, {ceil(a)..floor(b)}, {floor(b)+1..}.
    """
    if code == EXPONENTIAL:
        return 0.0, lo, lo, hi, hi, np.inf
    a = math.ceil(lo)
    b = math.floor(hi)
    return 0.0, a - 1.0, a, b, b + 1.0, np.inf


# --------------------------------------------------------------------------- kernels
#: smallest sigma^2 a kernel keeps (the smallest normal double): v + sigma^2 > 0 always
SIGMA2_FLOOR = 2.2250738585072014e-308


@numba.njit(cache=True)
def _sigma2(y, s, b):
    """App. B: sigma^2 = 1/w with w | z = y - s ~ Wald(mean mu = 1/(b |z|), shape lam = 1/b^2), b = Delta/eps.

    Michael, Schucany & Haas (1976), written for sigma^2 = 1/w directly so that no step
    cancels or overflows.  With Y ~ chi^2_1, a = 1/mu = b |z| and c = Y / (2 lam) = Y b^2 / 2,
    the two roots of MSH's quadratic are w1 = 1/D and w2 = D/a^2, D = a + c + sqrt(c (c + 2a));
    w1 is taken with probability mu/(mu + w1) = D/(D + a).  numpy's ``wald(mu, lam)``
    computes w1 as mu + (mu^2 Y/(2 lam)) - ..., which cancels to exactly 0 once mu/lam
    exceeds ~1e15 (|y - s| < ~1e-15 b): 1/0 would raise ZeroDivisionError, and the
    draws were already biased before it.  Here z = 0 is the exact Levy limit sigma^2 = 2c.
    """
    a = b * abs(y - s)
    g = np.random.standard_normal()
    c = 0.5 * g * g * b * b
    d = a + c + math.sqrt(c * (c + 2.0 * a))
    if np.random.random() * (d + a) <= d:
        out = d
    else:
        out = (a / d) * a if d > 0.0 else a
    return max(out, SIGMA2_FLOOR)


@numba.njit(cache=True)
def _log_gamma_draw(a):
    """log of a Gamma(a, 1) draw, finite for every a > 0: for a < 1 via Gamma(a) = Gamma(a + 1) U^(1/a)
    in log space (a Gamma(0.001) draw underflows to exactly 0 about half the time)."""
    if a >= 1.0:
        return math.log(np.random.gamma(a, 1.0))
    return math.log(np.random.gamma(a + 1.0, 1.0)) + math.log(1.0 - np.random.random()) / a


@numba.njit(cache=True)
def _beta(a, b):
    """A Beta(a, b) draw; for a or b < 1 from log-space gammas (numba's Johnk sampler returns 0 for
    every draw of Beta(1e-8, 1e-8), half of which belong near 1)."""
    if a >= 1.0 and b >= 1.0:
        return np.random.beta(a, b)
    la = _log_gamma_draw(a)
    lb = _log_gamma_draw(b)
    return 1.0 / (1.0 + math.exp(min(lb - la, 700.0)))


@numba.njit(cache=True)
def binomial_kernel(y, n, b, alpha, beta, warmup, draws, seed):
    """Algorithm 1 for the binomial; batch axis first.  Returns (p, s, fallbacks)."""
    np.random.seed(seed)
    B = y.shape[0]
    p_out = np.empty((B, draws))
    s_out = np.empty((B, draws))
    fallbacks = np.zeros(B, np.int64)
    s = np.empty(B)
    sig2 = np.empty(B)
    for i in range(B):
        s[i] = min(max(y[i], 0.0), n[i])
        sig2[i] = 2.0 * b[i] * b[i]  # prior mean of sigma^2 ~ Exp(1 / (2 b^2))
    for it in range(warmup + draws):
        for i in range(B):
            # line 3: theta | s ~ Beta(alpha + s, beta + n - s)
            p = _beta(alpha[i] + s[i], beta[i] + n[i] - s[i])
            # line 4: mean and variance of s | p from the log-partition function (Bernoulli)
            m = n[i] * p
            v = n[i] * p * (1.0 - p)
            # line 5: NormProduct(m, v, y, sigma^2), written so that v = 0 is harmless
            gain = v / (v + sig2[i])
            m3 = m + gain * (y[i] - m)
            sd3 = math.sqrt(v * sig2[i] / (v + sig2[i]))
            ok = False
            for _ in range(MAX_TRIES):
                cand = m3 + sd3 * np.random.standard_normal()
                if cand >= 0.0 and cand <= n[i]:
                    s[i] = cand
                    ok = True
                    break
            if not ok:
                fallbacks[i] += 1
            # line 6
            sig2[i] = _sigma2(y[i], s[i], b[i])
            if it >= warmup:
                p_out[i, it - warmup] = p
                s_out[i, it - warmup] = s[i]
    return p_out, s_out, fallbacks


@numba.njit(cache=True)
def multinomial_kernel(y, n, b, alpha, warmup, draws, seed):
    """Algorithm 1 for the multinomial; y, alpha of shape (B, K).  Returns (p, s, fallbacks).

    n Sigma = n (diag p - p p^T) is singular (counts sum to n), so the NormProduct is
    sampled by pathwise conditioning (Matheron's rule), exact for singular priors:
    s = s0 + C (C + D)^{-1} (y - s0 - e), s0 ~ N(n p, C), e ~ N(0, D), D = diag sigma^2,
    with (C + D) = diag(n p + sigma^2) - n p p^T inverted by Sherman-Morrison.
    """
    np.random.seed(seed)
    B, K = y.shape
    p_out = np.empty((B, draws, K))
    s_out = np.empty((B, draws, K))
    fallbacks = np.zeros(B, np.int64)
    s = np.empty((B, K))
    sig2 = np.empty((B, K))
    p = np.empty(K)
    s0 = np.empty(K)
    r = np.empty(K)
    lam = np.empty(K)
    cand = np.empty(K)
    for i in range(B):
        for j in range(K):
            s[i, j] = min(max(y[i, j], 0.0), n[i])
            sig2[i, j] = 2.0 * b[i] * b[i]
    for it in range(warmup + draws):
        for i in range(B):
            ni = n[i]
            # theta | s ~ Dirichlet(alpha + s)
            # (in log space: with small concentrations every gamma draw can underflow to 0)
            top = -np.inf
            for j in range(K):
                p[j] = _log_gamma_draw(alpha[i, j] + s[i, j])
                top = max(top, p[j])
            tot = 0.0
            for j in range(K):
                p[j] = math.exp(p[j] - top)
                tot += p[j]
            for j in range(K):
                p[j] /= tot
            ok = False
            for _ in range(MAX_TRIES):
                su = 0.0
                for j in range(K):
                    cand[j] = math.sqrt(p[j]) * np.random.standard_normal()
                    su += cand[j]
                pa = 0.0
                qc = 0.0  # 1 - n sum p_j^2 / lam_j = sum p_j sigma_j^2 / lam_j, summed without cancellation
                for j in range(K):
                    s0[j] = ni * p[j] + math.sqrt(ni) * (cand[j] - p[j] * su)
                    r[j] = y[i, j] - s0[j] - math.sqrt(sig2[i, j]) * np.random.standard_normal()
                    lam[j] = ni * p[j] + sig2[i, j]
                    pa += p[j] * r[j] / lam[j]
                    qc += p[j] * (sig2[i, j] / lam[j])
                if not qc > 0.0:  # C + D numerically singular: no usable proposal this try
                    continue
                coef = ni * pa / qc
                px = 0.0
                for j in range(K):
                    r[j] = r[j] / lam[j] + coef * p[j] / lam[j]  # x = (C + D)^{-1} r
                    px += p[j] * r[j]
                valid = True
                for j in range(K):
                    cand[j] = s0[j] + ni * (p[j] * r[j] - p[j] * px)
                    if not (cand[j] >= 0.0 and cand[j] <= ni):  # (written so that NaN is invalid too)
                        valid = False
                if valid:
                    for j in range(K):
                        s[i, j] = cand[j]
                    ok = True
                    break
            if not ok:
                fallbacks[i] += 1
            for j in range(K):
                sig2[i, j] = _sigma2(y[i, j], s[i, j], b[i])
            if it >= warmup:
                for j in range(K):
                    p_out[i, it - warmup, j] = p[j]
                    s_out[i, it - warmup, j] = s[i, j]
    return p_out, s_out, fallbacks


@numba.njit(cache=True)
def _collapsed_loglik(code, lam, y, n, vc, wc, sig2):
    """log N(y; m_c(theta), V_c(theta) + sigma^2): the release given theta, latent sums integrated out."""
    mc, Vc = rs_clt(code, lam, n, vc, wc)
    var = Vc + sig2
    return -0.5 * math.log(var) - 0.5 * (y - mc) ** 2 / var


@numba.njit(cache=True)
def _log_collapsed(code, log_lam, y, n, vc, wc, sig2, shape, rate):
    """log p(log theta | y, sigma^2) under the approximate model, up to a constant."""
    lam = math.exp(log_lam)
    return shape * log_lam - rate * lam + _collapsed_loglik(code, lam, y, n, vc, wc, sig2)


@numba.njit(cache=True)
def _prior_independence_mh(code, lam, y, n, vc, wc, sig2, shape, rate):
    """Independence Metropolis step proposing theta' from the Gamma prior: acceptance is the
    collapsed likelihood ratio.  It lets the chain jump between the (narrow, far apart) modes
    that a truncated sum can have, which the random walk cannot cross at large n."""
    prop = np.random.gamma(shape, 1.0 / rate)
    if not (prop >= RATE_MIN and prop <= RATE_MAX):  # outside the kernel's rates (see _clamp_rate)
        return lam
    log_ratio = (_collapsed_loglik(code, prop, y, n, vc, wc, sig2)
                 - _collapsed_loglik(code, lam, y, n, vc, wc, sig2))
    if math.log(np.random.random()) < log_ratio:
        return prop
    return lam


@numba.njit(cache=True)
def _collapsed_mh(code, lam, y, n, vc, wc, sig2, shape, rate):
    """One random-walk Metropolis step on log theta; the step size is drawn from a fixed
    scale mixture (independent of the state, so the proposal stays symmetric)."""
    u = np.random.random()
    step = MH_SCALES[0] if u < 1.0 / 3.0 else (MH_SCALES[1] if u < 2.0 / 3.0 else MH_SCALES[2])
    cur = math.log(lam)
    prop = cur + step * np.random.standard_normal()
    if not (prop >= LOG_RATE_MIN and prop <= LOG_RATE_MAX):  # outside the kernel's rates (see _clamp_rate)
        return lam
    log_ratio = (_log_collapsed(code, prop, y, n, vc, wc, sig2, shape, rate)
                 - _log_collapsed(code, cur, y, n, vc, wc, sig2, shape, rate))
    if math.log(np.random.random()) < log_ratio:
        return math.exp(prop)
    return lam


@numba.njit(cache=True)
def _clamp_rate(new, old):
    """``new`` kept inside [RATE_MIN, RATE_MAX] (``old`` if ``new`` is NaN).

    With a vague Gamma prior (shape 0.001) or a release that says almost nothing (epsilon ~ 1e-8)
    the conditional can put its mass on rates of 1e-300 (records of size 1e300), where the
    region moments overflow and 1/rate^2 divided by zero; the kernel clamps there instead (the
    draws are then pinned at the clamp, a region no bounded data set distinguishes).
    """
    if not new == new:
        return old
    return min(max(new, RATE_MIN), RATE_MAX)


@numba.njit(cache=True)
def truncated_kernel(code, y, n, b, lo, hi, shape, rate, warmup, draws, seed):
    """Algorithm 2 (+ Algorithm 3) for a truncated univariate family; returns (rate, s, fallbacks)."""
    np.random.seed(seed)
    B = y.shape[0]
    lam_out = np.empty((B, draws))
    s_out = np.empty((B, draws))
    fallbacks = np.zeros(B, np.int64)
    lam = np.empty(B)
    sl = np.empty(B)
    sc = np.empty(B)
    su = np.empty(B)
    sig2 = np.empty(B)
    for i in range(B):
        lam[i] = _clamp_rate(np.random.gamma(shape[i], 1.0 / rate[i]), 1.0)
        vl, wl, vc, wc, vu, wu = _regions(code, lo[i], hi[i])
        sl[i] = rs_clt(code, lam[i], n[i], vl, wl)[0]
        su[i] = rs_clt(code, lam[i], n[i], vu, wu)[0]
        sc[i] = min(max(y[i], 0.0), n[i] * hi[i])
        sig2[i] = 2.0 * b[i] * b[i]
    for it in range(warmup + draws):
        for i in range(B):
            vl, wl, vc, wc, vu, wu = _regions(code, lo[i], hi[i])
            # collapsed move (our addition, see the module docstring): y | theta, sigma^2 ~
            # N(m_c(theta), V_c(theta) + sigma^2) after integrating out the latent sums
            for _ in range(MH_STEPS):
                lam[i] = _prior_independence_mh(code, lam[i], y[i], n[i], vc, wc, sig2[i], shape[i], rate[i])
                lam[i] = _collapsed_mh(code, lam[i], y[i], n[i], vc, wc, sig2[i], shape[i], rate[i])
            # line 6: RS-CLT for the three regions at the current theta
            ml, Vl = rs_clt(code, lam[i], n[i], vl, wl)
            mc, Vc = rs_clt(code, lam[i], n[i], vc, wc)
            mu, Vu = rs_clt(code, lam[i], n[i], vu, wu)
            # line 7: NormProduct of the centre statistic with y
            gain = Vc / (Vc + sig2[i])
            mc2 = mc + gain * (y[i] - mc)
            sdc = math.sqrt(Vc * sig2[i] / (Vc + sig2[i]))
            sdl = math.sqrt(Vl)
            sdu = math.sqrt(Vu)
            # line 8: s = s_l + s_c + s_u, rejecting invalid (negative / impossible) parts
            ok = False
            for _ in range(MAX_TRIES):
                cl = ml + sdl * np.random.standard_normal()
                cc = mc2 + sdc * np.random.standard_normal()
                cu = mu + sdu * np.random.standard_normal()
                if cl >= 0.0 and cl <= n[i] * lo[i] and cc >= 0.0 and cc <= n[i] * hi[i] and cu >= 0.0 \
                        and cu < np.inf:
                    sl[i] = cl
                    sc[i] = cc
                    su[i] = cu
                    ok = True
                    break
            if not ok:
                fallbacks[i] += 1
            s = sl[i] + sc[i] + su[i]
            # line 9: conjugate Gamma update given the full statistic s
            if code == EXPONENTIAL:
                new = np.random.gamma(shape[i] + n[i], 1.0 / (rate[i] + s))
            else:
                new = np.random.gamma(shape[i] + s, 1.0 / (rate[i] + n[i]))
            lam[i] = _clamp_rate(new, lam[i])
            # line 11 (with the s_c of line 8, see the module docstring)
            sig2[i] = _sigma2(y[i], sc[i], b[i])
            if it >= warmup:
                lam_out[i, it - warmup] = lam[i]
                s_out[i, it - warmup] = s
    return lam_out, s_out, fallbacks


# --------------------------------------------------------------------------- Python API
def numba_seed(seed) -> int:
    """A uint32 seed for numba's generator from an int or a SeedSequence."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def _per_trial(value, T):
    arr = np.asarray(value, float)
    return np.broadcast_to(arr, (T,)) if arr.ndim == 0 else arr


def model_of(family) -> ExpFamModel:
    """The model Gibbs-SS samples: a family's name (looked up in the registry, as ``infer`` does), or the model
    itself (``release.expfam``)."""
    if isinstance(family, ExpFamModel):
        return family
    from ..families import get_family

    model = getattr(get_family(family, field="family").release_model, "expfam", None)
    if model is None:
        raise InputError("family", f"gibbs-ss does not handle family {family!r}")
    return model


def _check_inputs(model: ExpFamModel, y, n, scale, prior, bounds) -> None:
    """What the kernels need, else a one-line :class:`InputError` (never a crash or a hang in a kernel)."""
    if not np.all(np.isfinite(y)):
        raise InputError("release.released", "must be finite numbers")
    if model.vector and y.ndim != 2:
        raise InputError("release.released", "must hold one row of counts per release")
    n = np.asarray(n, float)
    if not np.all(np.isfinite(n)) or not np.all(n >= 1):
        raise InputError("release.n", "must be a finite number >= 1")
    scale = np.asarray(scale, float)
    if not np.all(np.isfinite(scale)) or not np.all(scale > 0):
        raise InputError("release.scale", "the Laplace scale (sensitivity / epsilon) must be finite and > 0")
    params = model.prior_parameters(prior, y.shape[-1])
    if not all(math.isfinite(float(v)) and float(v) > 0 for v in params):
        raise InputError("prior", f"parameters must be finite and > 0 (got {params})")
    if model.truncated:
        bnd = np.asarray(bounds, float) if bounds is not None else np.empty((0, 2))
        if bnd.shape[-1:] != (2,) or not np.all(np.isfinite(bnd)) or not np.all(bnd[..., 0] >= 0) \
                or not np.all(bnd[..., 1] > bnd[..., 0]):
            raise InputError("release.bounds", "must be finite with 0 <= lower < upper")


def _bernoulli(y, n_t, b_t, prior, bounds, chains, warmup, draws, seed):
    T = y.shape[0]
    yy = np.repeat(y.reshape(T), chains)
    a = np.full(T * chains, prior.alpha)
    bb = np.full(T * chains, prior.beta)
    return binomial_kernel(yy, n_t, b_t, a, bb, warmup, draws, seed)


def _categorical(y, n_t, b_t, prior, bounds, chains, warmup, draws, seed):
    T, K = y.shape
    yy = np.repeat(y, chains, axis=0)
    a = np.tile(prior.vector(K), (T * chains, 1))
    return multinomial_kernel(yy, n_t, b_t, a, warmup, draws, seed)


def _truncated(code):
    def run(y, n_t, b_t, prior, bounds, chains, warmup, draws, seed):
        T = y.shape[0]
        bounds = np.broadcast_to(np.asarray(bounds, float), (T, 2))
        yy = np.repeat(y.reshape(T), chains)
        lo = np.repeat(bounds[:, 0], chains)
        hi = np.repeat(bounds[:, 1], chains)
        sh = np.full(T * chains, prior.shape)
        rt = np.full(T * chains, prior.rate)
        return truncated_kernel(code, yy, n_t, b_t, lo, hi, sh, rt, warmup, draws, seed)
    return run


#: the kernel of each record law: Algorithm 1 (bounded counts) or Algorithm 2 (truncated sums)
KERNELS = {RecordLaw.BERNOULLI: _bernoulli, RecordLaw.CATEGORICAL: _categorical,
           **{law: _truncated(code) for law, code in TRUNCATED_CODES.items()}}


def sample_batch(family, y, n, scale, prior, *, bounds=None, chains: int = 1, warmup: int = PAPER_WARMUP,
                 draws: int = PAPER_DRAWS, seed=None) -> dict:
    """Gibbs-SS for T releases at once.

    ``family``: the family's name or its model (``release.expfam``, :class:`~dpposterior.families._expfam.
    ExpFamModel`); ``y``: released statistics, shape (T,) or (T, K) for a vector of counts; ``n``,
    ``scale`` (Laplace b = Delta/eps): scalars or (T,); ``bounds``: (T, 2) or (2,) for
    truncated families; ``prior``: the family's prior object.  Returns a dict with
    ``theta`` of shape (T, chains, draws[, K]), ``statistic`` (imputed full s, same
    shape) and ``fallbacks`` (T, chains): iterations whose s proposals were all rejected.
    """
    model = model_of(family)
    kernel = KERNELS.get(model.record_law)
    if kernel is None:
        raise InputError("family", f"gibbs-ss has no kernel for {model.record_law.value} records")
    y = np.asarray(y, float)
    T = y.shape[0]
    _check_inputs(model, y, n, scale, prior, bounds)
    n_t = np.repeat(_per_trial(n, T), chains)
    b_t = np.repeat(_per_trial(scale, T), chains)
    theta, stat, fb = kernel(y, n_t, b_t, prior, bounds, chains, int(warmup), int(draws), numba_seed(seed))
    shape = (T, chains) + theta.shape[1:]
    return {"theta": theta.reshape(shape), "statistic": stat.reshape(shape), "fallbacks": fb.reshape(T, chains)}


def release_arrays(release) -> dict:
    """(y, n, scale, bounds) of a release as the kernels want them."""
    out = {"y": release.released, "n": float(release.n), "scale": release.noise_scale, "bounds": None}
    if release.expfam.truncated:
        out["bounds"] = np.asarray(release.bounds, float)
    return out


def pack_draws(observation: ObservationModel, method: str, theta: np.ndarray, attrs: dict, sample_stats=None,
               iid: bool = False) -> Posterior:
    """Draws of shape (chain, draw[, K]) of the family's one parameter, named through the observation model; a
    sample statistic with the parameter's event axes (the imputed counts of a vector of counts) gets its dims."""
    (variable,) = observation.variables
    stats = dict(sample_stats or {})
    stats_dims = {key: variable.dims for key, value in stats.items()
                  if variable.dims and np.ndim(value) == 2 + len(variable.dims)}
    return observation.pack({variable.name: theta}, method, sample_stats=stats, sample_stats_dims=stats_dims,
                            attrs=attrs, iid=iid)


@dataclass(frozen=True)
class GibbsSSOptions(MCMCOptions):
    """Options of engine ``gibbs-ss`` (binomial, multinomial, exponential, poisson): draws, warmup, chains,
    seed -- nothing else (the sampler has no tuning options)."""

    engine: ClassVar[str] = "gibbs-ss"


#: bytes per drawn value (a draw of theta or of one of its K components): theta and the imputed statistic, float64,
#: written by the kernel and kept by the posterior (measured 16 for 2e6 binomial draws)
VALUE_BYTES = 16.0


def check_memory(values: int, chains: int, draws: int, method: str = "gibbs-ss") -> None:
    """Refuse, before the kernel allocates its output, draws that would not fit in memory with the convergence
    checks of ``values`` components each (``values``: theta's size, 1 or the K categories)."""
    from ..convergence import diagnostics_bytes
    from ..memory import check_draws_fit

    per_draw = VALUE_BYTES * values + diagnostics_bytes(chains, draws, values) / (chains * draws)
    check_draws_fit("draws", f"{method}: {draws} draws x {chains} chains of {values:,} values each (theta and the "
                    "imputed statistic)", draws=draws, chains=chains, per_draw=per_draw)


def gibbs_ss(model, options) -> Posterior:
    """Engine ``gibbs-ss``: the noise-aware posterior (Algorithm 1 / Algorithm 2).  Reads the model's release (its
    noisy statistic, n, Laplace scale and bounds, as the kernels take them) and parsed prior (``model.prior.spec``),
    and names its draws through the model."""
    release, prior = model.release, model.prior.spec
    release.laplace_scale  # refuses any noise but continuous Laplace (the scale mixture needs it)
    arrays = release_arrays(release)
    check_memory(int(np.size(arrays["y"])), options.chains, options.draws)
    expfam = release.expfam
    y = arrays["y"][None, ...] if expfam.vector else arrays["y"]
    out = sample_batch(expfam, y, arrays["n"], arrays["scale"], prior, bounds=arrays["bounds"],
                       chains=options.chains, warmup=options.warmup, draws=options.draws, seed=options.seed)
    fallbacks = int(out["fallbacks"].sum())
    attrs = {"algorithm": "Bernstein & Sheldon 2018, " + ("Algorithm 2 + RS-CLT (Algorithm 3)"
                                                          if expfam.truncated else "Algorithm 1"),
             "prior": str(prior.to_dict()), "warmup": options.warmup, "rejection_fallbacks": fallbacks}
    return pack_draws(model, "gibbs-ss", out["theta"][0], attrs, sample_stats={"statistic": out["statistic"][0]})
