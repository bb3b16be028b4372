"""Shared pieces of the linear-regression engines (Alparslan, Yildirim & Birbil, Sec. 4; App. A).

Everything is batched: arrays carry a leading batch axis B (chains, or chains x
simulated datasets), then the party axis J where relevant, so one call advances
every chain at once.  Linear algebra goes through Cholesky factors and solves;
no explicit inverse appears in a sampling loop.

* :func:`nearest_psd` -- Higham (1988): clip negative eigenvalues (Algorithm 2's S~_j).
* :func:`theta_conditional` -- eq. (12): theta | S_{1:J}, sigma_y^2, zhat ~ N(m_p, Sigma_p) with
  Sigma_p^{-1} = sum_j S_j (sigma_y^2 S_j + sigma_z^2 I)^{-1} S_j + C^{-1}
  (z_j integrated out: zhat_j | S_j, theta, sigma_y^2 ~ N(S_j theta, sigma_y^2 S_j + sigma_z^2 I);
  the papers' README notes the "S theta" typo in the covariance of App. A.4).
* :func:`zhat_loglik`, :func:`sigma2_rw_step` -- the random-walk MH move of App. A.4.
* :func:`wishart_factor`, :func:`inverse_wishart` -- batched Bartlett sampling.
(The Robbins-Monro step adaptation the engines use lives in :mod:`.mcmc_common`.)
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ..errors import InputError, RefusedError
from ..mechanisms.base import NoiseShape
from ..posterior import Posterior

LOG2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------- matrices


def sym(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def nearest_psd(a: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """Nearest symmetric PSD matrix in Frobenius norm (Higham 1988): E max(D, floor) E'."""
    w, v = np.linalg.eigh(sym(a))
    return sym((v * np.maximum(w, floor)[..., None, :]) @ np.swapaxes(v, -1, -2))


def chol(a: np.ndarray) -> np.ndarray:
    return np.linalg.cholesky(a)


def _triangular(l: np.ndarray, b: np.ndarray, trans: bool) -> np.ndarray:
    """Batched triangular solve.  numpy's batched LU solve is fast for many small systems;
    for few large systems (the O(d^6) B&S step) a true triangular solve (scipy) is ~5x cheaper."""
    vec = b.ndim == l.ndim - 1
    if vec:
        b = b[..., None]
    batch = np.broadcast_shapes(l.shape[:-2], b.shape[:-2])
    nbatch = int(np.prod(batch)) if batch else 1
    if l.shape[-1] >= 48 and nbatch <= 16:
        from scipy.linalg import solve_triangular

        lb = np.broadcast_to(l, batch + l.shape[-2:]).reshape(-1, *l.shape[-2:])
        bb = np.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
        x = np.stack([solve_triangular(li, bi, lower=True, trans=1 if trans else 0, check_finite=False)
                      for li, bi in zip(lb, bb)]).reshape(batch + b.shape[-2:])
    else:
        x = np.linalg.solve(np.swapaxes(l, -1, -2) if trans else l, b)
    return x[..., 0] if vec else x


def tri_solve(l: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve L x = b (L lower triangular, batched; b may be a vector)."""
    return _triangular(l, b, False)


def tri_solve_t(l: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve L' x = b."""
    return _triangular(l, b, True)


def logdet_chol(l: np.ndarray) -> np.ndarray:
    return 2.0 * np.sum(np.log(np.diagonal(l, axis1=-2, axis2=-1)), axis=-1)


# ----------------------------------------------------------------------------- Wishart


def bartlett(df: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """Lower-triangular A with A A' ~ W(I, df) (Bartlett); ``df`` has any batch shape."""
    df = np.asarray(df, dtype=float)
    shape = df.shape
    a = np.zeros(shape + (d, d))
    il = np.tril_indices(d, -1)
    a[..., il[0], il[1]] = rng.standard_normal(shape + (len(il[0]),))
    k = np.arange(d)
    a[..., k, k] = np.sqrt(rng.chisquare(df[..., None] - k))
    return a


def wishart_factor(scale_chol: np.ndarray, df, rng) -> np.ndarray:
    """F with F F' ~ W(scale, df), scale = L L' (batched)."""
    d = scale_chol.shape[-1]
    df = np.broadcast_to(np.asarray(df, float), scale_chol.shape[:-2])
    return scale_chol @ bartlett(df, d, rng)


def inverse_wishart(psi: np.ndarray, df, rng) -> np.ndarray:
    """Sigma ~ IW(psi, df): Sigma = G G' with G = L_psi A^{-T} (A Bartlett), no inverse formed."""
    d = psi.shape[-1]
    lpsi = chol(psi)
    df = np.broadcast_to(np.asarray(df, float), psi.shape[:-2])
    a = bartlett(df, d, rng)
    gt = tri_solve(a, np.swapaxes(lpsi, -1, -2))   # G' = A^{-1} L_psi'
    return sym(np.swapaxes(gt, -1, -2) @ gt)


# ----------------------------------------------------------------------------- theta and sigma^2


def theta_precision(S: np.ndarray, zhat: np.ndarray, sigma2: np.ndarray, sz2: np.ndarray,
                    prior_prec: np.ndarray, prior_shift: np.ndarray):
    """Precision P and P m_p of eq. (12), batched.

    S: (B, J, d, d); zhat: (B|1, J, d); sigma2: (B,); sz2: (J,) or (B, J) noise variance of zhat_j;
    prior_prec = C^{-1}, prior_shift = C^{-1} m.
    """
    d = S.shape[-1]
    sz2 = np.asarray(sz2, float)
    K = sigma2[:, None, None, None] * S + sz2[..., None, None] * np.eye(d)
    L = chol(K)
    A = tri_solve(L, S)                                # L^{-1} S
    w = tri_solve(L, np.broadcast_to(zhat, S.shape[:-1]))  # L^{-1} zhat
    P = np.einsum("bjki,bjkl->bil", A, A) + prior_prec
    h = np.einsum("bjki,bjk->bi", A, w) + prior_shift
    return sym(P), h


def sample_gaussian_canonical(P: np.ndarray, h: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """Draw from N(P^{-1} h, P^{-1}) via the Cholesky factor of P; returns (draw, mean)."""
    L = chol(P)
    mean = tri_solve_t(L, tri_solve(L, h))
    draw = mean + tri_solve_t(L, rng.standard_normal(h.shape))
    return draw, mean


def zhat_loglik(S, zhat, theta, sigma2, sz2) -> np.ndarray:
    """sum_j log N(zhat_j; S_j theta, sigma2 S_j + sigma_z^2 I); returns (B,)."""
    d = S.shape[-1]
    sz2 = np.asarray(sz2, float)
    K = sigma2[:, None, None, None] * S + sz2[..., None, None] * np.eye(d)
    L = chol(K)
    r = zhat - np.einsum("bjkl,bl->bjk", S, theta)
    q = tri_solve(L, r)
    return np.sum(-0.5 * np.sum(q * q, -1) - 0.5 * logdet_chol(L) - 0.5 * d * LOG2PI, axis=-1)


def log_inv_gamma(x, a, b):
    x = np.asarray(x, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = a * math.log(b) - special.gammaln(a) - (a + 1) * np.log(x) - b / x
    return np.where(x > 0, out, -np.inf)


def sigma2_rw_step(sigma2, step, loglik_fn, a, b, rng):
    """Random-walk MH on sigma_y^2 (App. A.4): sigma2' ~ N(sigma2, step^2); returns (new, accept_prob)."""
    prop = sigma2 + step * rng.standard_normal(sigma2.shape)
    ok = prop > 0
    safe = np.where(ok, prop, sigma2)
    log_r = (log_inv_gamma(safe, a, b) + loglik_fn(safe)) - (log_inv_gamma(sigma2, a, b) + loglik_fn(sigma2))
    log_r = np.where(ok, log_r, -np.inf)
    accept_prob = np.exp(np.minimum(0.0, np.nan_to_num(log_r, nan=-np.inf)))
    accept = rng.random(sigma2.shape) < accept_prob
    return np.where(accept, safe, sigma2), accept_prob, accept


def theta_sigma2_step(S, zhat, sigma2, sz2, prec, shift, prior, step, rng):
    """One Gibbs pass over (theta, sigma_y^2) given the Gram matrices ``S`` (Algorithms 1-2).

    theta from its Gaussian full conditional (12) with z integrated out, then sigma_y^2 by
    random-walk MH with step ``step``.  Returns (theta, sigma2, sigma2 accept prob, accepted).
    """
    P, h = theta_precision(S, zhat, sigma2, sz2, prec, shift)
    theta, _ = sample_gaussian_canonical(P, h, rng)
    sigma2, accept_prob, accept = sigma2_rw_step(
        sigma2, step, lambda s2: zhat_loglik(S, zhat, theta, s2, sz2), prior.a, prior.b, rng)
    return theta, sigma2, accept_prob, accept


# ----------------------------------------------------------------------------- engine plumbing


def require_gaussian(data, method: str) -> None:
    if data.noise_shape is not NoiseShape.GAUSSIAN:
        raise RefusedError("method", f"{method} models Gaussian noise on xtx and xty; this release uses "
                                     f"{data.mechanism!r} noise (use mcmc-bs)")


def prior_arrays(prior):
    """C^{-1} and C^{-1} m through a Cholesky factor of C (done once, outside the loops)."""
    Lc = chol(prior.theta_cov)
    d = prior.d
    prec = tri_solve_t(Lc, tri_solve(Lc, np.eye(d)))
    prec = sym(prec)
    return prec, prec @ prior.theta_mean


def check_dims(data, prior) -> None:
    if prior.d != data.d:
        raise InputError("prior.theta_mean", f"has {prior.d} entries but the release has {data.d} coefficients")


def crude_sigma2(data) -> float:
    """The paper's crude estimate for Bayes-fixedS-fast: ||Y||/3 (Sec. 4.2, used as a variance)."""
    return data.y_abs / 3.0


def fixed_s(data) -> np.ndarray:
    """Algorithm 2's S~_j = nearest PSD matrix to Shat_j."""
    return nearest_psd(data.xtx)


def initial_theta(data, prior_prec, prior_shift, sigma2: float) -> np.ndarray:
    """Posterior mean of eq. (12) at S = S~ and the given sigma2 (a start for the chains)."""
    S = fixed_s(data)[None]
    P, h = theta_precision(S, data.xty[None], np.array([sigma2]), data.sigma_z ** 2, prior_prec, prior_shift)
    L = chol(P)
    return tri_solve_t(L, tri_solve(L, h))[0]


# ----------------------------------------------------------------------------- memory

def theta_draw_values(release) -> int:
    """The values one stored draw holds for the engines that draw (theta, sigma2) or theta alone, no Sigma_x
    (``EngineOptions.draw_values``; the family's hook counts mcmc-normalx's d x d Sigma_x)."""
    return int(release.d) + 1


def bs_dimension(d: int) -> int:
    """D, the free coordinates of vech(w w') that mcmc-bs moves (w = [x (d), y]; an upper bound with an
    intercept, which fixes one)."""
    p = d + 1
    return p * (p + 1) // 2


def memory_estimate(method: str, d: int, J: int, chains: int, draws: int) -> tuple[float, float, str]:
    """(working bytes, bytes per draw x chains, what the working bytes are) of a linear-regression engine at its
    peak, from d features, J parties, chains and draws (measured within 1.3x of the peak, tests/test_memory.py):

    * every engine keeps theta (d) and sigma2 per draw; the MCMC ones with the convergence checks of d
      components (``convergence.diagnostics_bytes``); bayes-fixeds-fast's draws are three (draws, d) arrays;
    * mcmc-normalx also keeps Sigma_x (d x d) per draw, and each iteration holds about 7 + 10 J (chains, d, d)
      arrays (the parties' S_j, their Cholesky factors, the Wishart proposals);
    * mcmc-bs's iteration holds about 9 + 3 J (chains, D, D) arrays, D = (d + 1)(d + 2)/2 (the row moments of
      vech(w w'), their Cholesky factor and the parties' conditional covariances): d = 100 is 0.2 GB a chain;
    * mcmc-fixeds and naive hold a few (J, d, d) arrays and a chain's d x d factors."""
    from ..convergence import diagnostics_bytes

    checks = diagnostics_bytes(chains, draws, d * d if method == "mcmc-normalx" else d) / (chains * draws)
    if method == "bayes-fixeds-fast":
        return 8.0 * 8 * J * d * d, 24.0 * d, f"{J} party statistics of {d} x {d}"
    if method == "mcmc-normalx":
        return (8.0 * chains * d * d * (7 + 10 * J), 8.0 * (d * d + 2 * d + 2) + checks,
                f"{chains} chains x {J} parties of {d} x {d} matrices per iteration")
    if method == "mcmc-bs":
        D = bs_dimension(d)
        return (8.0 * chains * D * D * (9 + 3 * J), 8.0 * (d + 2) + checks,
                f"{chains} chains x {J} parties of {D:,} x {D:,} moment matrices per iteration")
    return 8.0 * (5 * J * d * d + chains * (d * d + J * d)), 8.0 * (d + 1) + 1 + checks, \
        f"{J} party statistics of {d} x {d}"


def check_memory(method: str, data, options) -> None:
    """Refuse, before an engine allocates its chains, a run whose iteration's matrices or draws would not fit."""
    from ..memory import check_draws_fit

    fixed, per_draw, working = memory_estimate(method, int(data.d), int(data.J), int(options.chains),
                                               int(options.draws))
    check_draws_fit("draws", f"{method}: {options.draws} draws x {options.chains} chains of {data.d} coefficients "
                    f"({working})", draws=options.draws, chains=options.chains, per_draw=per_draw, fixed=fixed,
                    other="fewer --chains" + (", or an engine without the d x d moment matrices (mcmc-normalx, "
                                              "mcmc-fixeds)" if method == "mcmc-bs" else ""))


def make_posterior(model, method, data, variables: dict, options, *, sample_stats=None, attrs=None,
                   extras=None, sigma_x=None, iid: bool = False) -> Posterior:
    """The engine's draws (``variables``: theta, and sigma2 where the engine draws it; ``sigma_x``, the features'
    covariance, from mcmc-normalx) named through the release's observation model ``model`` (``data``: the
    release's resolved :class:`RegressionData`)."""
    draws = dict(variables)
    if sigma_x is not None:
        draws["sigma_x"] = sigma_x
    # an engine draws some of the model's variables (adassp and bayes-fixeds-fast: theta only; sigma_x:
    # mcmc-normalx only): its posterior is the model's marginal on those
    drawn = model.marginal(draws)
    base_attrs = {
        "intercept": int(data.intercept),
        "parties": data.J,
        "n_total": data.n_total,
        "noise_mechanism": data.mechanism,
        "privacy_composition": "parallel over data holders (each spends its full (epsilon, delta))",
        "draws_per_chain": int(np.shape(next(iter(variables.values())))[1]),  # adassp: 1 (a point estimate)
    }
    if hasattr(options, "warmup"):  # MCMC engines only
        base_attrs["warmup"] = options.warmup
    base_attrs.update(attrs or {})
    post = drawn.pack(draws, method, sample_stats=sample_stats or {}, attrs=base_attrs, iid=iid)
    post.extras.update(extras or {})
    return post
