"""The built-in families as record models, for data-augmentation MCMC (Ju, Awan, Gong & Rao 2022).

``da_model(release, prior) -> (Model, observed)`` per family: the record model f(x | theta),
each record's contribution t(x_i) to the released sums, and the conjugate draw of theta | x
(``complete_posterior``) that Ju et al. use for the parameter step of their Gibbs sampler.
The engine is :func:`dpposterior.inference.da_mcmc.da_mcmc`; families register it as
``methods["da-mcmc"]``.

* ``linreg-ju`` (Xiong, Ju & Zhang Sec. 4.2, App. E.2 -- the DA-MCMC rows of Tables 2-4):
  records (x0_i, y_i), x0_i ~ N_2(m, Sigma), y_i | x0_i ~ N(x_i beta, sigma^2); t(x_i) is the
  record's share of the 9 clamped, rescaled statistics (x~ y~, y~^2, x~ x~') / n; beta | x, y is
  normal (prior N(mu0, Sigma0), known sigma^2): precision Sigma0^-1 + X'X / sigma^2.  The
  complete data are the *unclamped* records: clamping only enters through t.  A non-centred step
  (y moved by x (beta' - beta), noise held fixed) is interweaved with the conjugate one: at
  eps = 0.1 the plain Gibbs step crawls (beta | x is ~4x tighter than beta | s_dp).
* ``binomial`` (Bernstein & Sheldon 2018, Sec. 3.2): x_i ~ Bernoulli(p), t(x_i) = x_i,
  p | x ~ Beta(alpha + sum x, beta + n - sum x).
* ``multinomial``: x_i categorical, t(x_i) = one-hot, p | x ~ Dirichlet(alpha + counts).
* ``gaussian`` (Kazan & Reiter Sec. 2-4, the unconstrained analysis model): y_i ~ N(mu, sigma^2),
  t(y) = (y, y^2), released (sample mean, sample variance) -- a non-linear map of the sums, each
  with its own Laplace scale; (mu, sigma^2) | y is normal-inverse-gamma (or, under the flat
  prior, sigma^2 | y ~ IG((n-3)/2, SS/2), mu | sigma^2, y ~ N(ybar, sigma^2/n)); non-centred
  step y = mu + sigma e.
* ``naive-bayes`` / ``loglinear`` (Karwa, Kifer & Slavkovic Sec. 4; Xiong et al. App. E.3): a
  record is (y, x_1..x_K); t(x_i) = the indicators of its K cells (y, x_k) in the two-way tables
  (on the release's scale); p | x ~ Dirichlet(alpha + class counts) and p^k_i. | x ~
  Dirichlet(alpha^k_i. + table row counts).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from ..errors import InputError
from ..mechanisms import Laplace
from ..model import MEAN_VARIANCE, Model


# --------------------------------------------------------------------------- linreg-ju
def linreg_ju(release, prior):
    from .linreg_ju import parse_prior

    prior = parse_prior(prior) if not hasattr(prior, "cov") else prior
    rec = release.statistics.sufficient
    design, n = release.design, release.n
    mean = np.asarray(design.x_mean, float)
    chol = np.linalg.cholesky(np.asarray(design.x_cov, float))
    sigma2, clamp = float(design.noise_variance), float(design.clamp)
    mu0 = np.asarray(prior.mean, float)
    prec0 = np.linalg.inv(np.asarray(prior.cov, float))
    prec0_mu0 = prec0 @ mu0

    def records(theta, size, rng):
        beta = theta["beta"]
        x0 = mean + rng.standard_normal((size, 2)) @ chol.T
        y = beta[0] + x0 @ beta[1:] + np.sqrt(sigma2) * rng.standard_normal(size)
        return np.column_stack([x0, y])

    # a = (1, x~1, x~2, y~): the record's share of x~'y~/n, y~'y~/n and the five entries of
    # x~'x~/n (release order) are the products a[L] a[R] / n
    left, right = np.array([0, 1, 2, 3, 0, 0, 1, 1, 2]), np.array([3, 3, 3, 3, 1, 2, 1, 2, 2])

    def statistic(r):
        a = np.empty((len(r), 4))
        a[:, 0] = 1.0
        np.clip(r, -clamp, clamp, out=a[:, 1:])
        a[:, 1:] *= 1.0 / clamp
        return a[:, left] * a[:, right] * (1.0 / n)

    def complete_posterior(r, rng):
        X = np.column_stack([np.ones(len(r)), r[:, :2]])
        prec = prec0 + X.T @ X / sigma2
        L = np.linalg.cholesky(prec)
        m = np.linalg.solve(prec, prec0_mu0 + X.T @ r[:, 2] / sigma2)
        # beta = m + L^-T z has covariance prec^-1
        return {"beta": m + np.linalg.solve(L.T, rng.standard_normal(3))}

    def noncentred(r, theta, theta_new):
        # y_i = x_i beta + sigma e_i with (x0_i, e_i) held fixed: y moves by x_i (beta_new - beta)
        out = r.copy()
        d = theta_new["beta"] - theta["beta"]
        out[:, 2] += d[0] + r[:, :2] @ d[1:]
        return out

    def record_logpdf(r, theta):
        beta = theta["beta"]
        resid = r[:, 2] - beta[0] - r[:, :2] @ beta[1:]
        return stats.norm.logpdf(resid, scale=np.sqrt(sigma2)) + stats.multivariate_normal(mean, design.x_cov).logpdf(
            r[:, :2])

    model = Model(params={"beta": stats.multivariate_normal(mu0, np.asarray(prior.cov, float))}, records=records,
                  statistic=statistic, mechanism=Laplace(rec.epsilon, rec.sensitivity), n=n,
                  record_logpdf=record_logpdf, complete_posterior=complete_posterior, noncentred=noncentred,
                  name="linreg-ju",
                  dims={"beta": ["coef"]}, coords={"coef": [0, 1, 2]})
    return model, rec.array()


# --------------------------------------------------------------------------- binomial / multinomial
def binomial(release, prior):
    from ._expfam import parse_beta_prior

    prior = parse_beta_prior(prior)
    a, b, n = float(prior.alpha), float(prior.beta), release.n

    def complete_posterior(x, rng):
        k = float(x.sum())
        return {"p": rng.beta(a + k, b + n - k)}

    model = Model(params={"p": stats.beta(a, b)},
                  records=lambda theta, size, rng: (rng.random(size) < theta["p"]).astype(np.float64),
                  statistic=lambda x: x, mechanism=release.mechanism,  # whatever noise the release states
                  n=n, complete_posterior=complete_posterior,
                  record_logpdf=lambda x, theta: stats.bernoulli.logpmf(x, theta["p"]), name="binomial")
    return model, release.released


def multinomial(release, prior):
    from ._expfam import parse_dirichlet_prior

    counts = release.released
    k = counts.size
    alpha = parse_dirichlet_prior(prior).vector(k)
    n = release.n
    eye = np.eye(k)

    def records(theta, size, rng):
        cum = np.cumsum(theta["p"])
        return np.minimum(np.searchsorted(cum, rng.random(size) * cum[-1], side="right"), k - 1)

    def complete_posterior(x, rng):
        return {"p": _dirichlet(alpha + np.bincount(x, minlength=k), rng)}

    model = Model(params={"p": stats.dirichlet(alpha)}, records=records, statistic=lambda x: eye[x],
                  mechanism=release.mechanism, n=n, complete_posterior=complete_posterior,
                  name="multinomial", dims={"p": ["category"]}, coords={"category": release.category_labels})
    return model, counts


def _dirichlet(alpha, rng):
    g = rng.standard_gamma(alpha)
    return g / g.sum()


# --------------------------------------------------------------------------- naive Bayes tables
def _tables_model(name, n, classes, levels, alpha_class, alpha_feat, mechanism, unit, observed,
                  class_var, feat_var, dims, coords):
    """Records (y, x_1..x_K) with the K two-way tables as the statistic; ``unit`` = 1 (counts)
    or 1/n (proportions).  ``alpha_feat[k]`` is (classes, J_k)."""
    K = len(levels)
    offsets = np.concatenate([[0], np.cumsum([classes * J for J in levels])]).astype(int)
    r = int(offsets[-1])

    params = {"class_prob": stats.dirichlet(alpha_class)}
    for k in range(K):
        for i in range(classes):
            params[f"f{k}_{i}"] = stats.dirichlet(alpha_feat[k][i])

    def records(theta, size, rng):
        out = np.empty((size, K + 1), dtype=np.int64)
        out[:, 0] = _categorical(theta["class_prob"], size, rng)
        for k in range(K):
            probs = np.stack([theta[f"f{k}_{i}"] for i in range(classes)])   # (I, J_k)
            cum = np.cumsum(probs[out[:, 0]], axis=1)
            u = rng.random(size)[:, None] * cum[:, -1:]
            out[:, k + 1] = np.minimum((u >= cum).sum(axis=1), levels[k] - 1)
        return out

    def statistic(x):
        t = np.zeros((len(x), r))
        rows = np.arange(len(x))
        for k in range(K):
            t[rows, offsets[k] + x[:, 0] * levels[k] + x[:, k + 1]] = unit
        return t

    def complete_posterior(x, rng):
        draw = {"class_prob": _dirichlet(alpha_class + np.bincount(x[:, 0], minlength=classes), rng)}
        for k in range(K):
            cell = np.bincount(x[:, 0] * levels[k] + x[:, k + 1], minlength=classes * levels[k])
            cell = cell.reshape(classes, levels[k])
            for i in range(classes):
                draw[f"f{k}_{i}"] = _dirichlet(alpha_feat[k][i] + cell[i], rng)
        return draw

    class _TablesModel(Model):
        def posterior_variables(self, values):
            first = values["class_prob"]
            lead = first.shape[:-1]
            jmax = max(levels)
            feat = np.full((*lead, K, classes, jmax), np.nan)
            for k in range(K):
                for i in range(classes):
                    feat[..., k, i, :levels[k]] = values[f"f{k}_{i}"]
            return {class_var: first, feat_var: feat}, dims, coords

    model = _TablesModel(params=params, records=records, statistic=statistic, mechanism=mechanism, n=n,
                         complete_posterior=complete_posterior, name=name)
    return model, np.asarray(observed, float).ravel()


def _categorical(p, size, rng):
    cum = np.cumsum(p)
    return np.minimum(np.searchsorted(cum, rng.random(size) * cum[-1], side="right"), len(p) - 1)


def loglinear(release, prior):
    from .loglinear import parse_prior

    prior = parse_prior(prior, release) if not hasattr(prior, "alphas") else prior
    I, levels, n = release.classes, list(release.levels), release.n
    rec = release.statistics.tables
    alphas = [np.asarray(a, float) for a in prior.alphas]
    alpha_class, rest = alphas[0], alphas[1:]
    alpha_feat = [[rest[k * I + i] for i in range(I)] for k in range(len(levels))]
    unit = 1.0 / n if getattr(rec, "scale", "proportions") == "proportions" else 1.0
    observed = np.concatenate([np.asarray(v, float).ravel() for v in rec.value])
    dims = {"class_prob": ["class"], "feature_prob": ["feature", "class", "level"]}
    coords = {"class": list(range(I)), "feature": list(range(len(levels))), "level": list(range(max(levels)))}
    return _tables_model("loglinear", n, I, levels, alpha_class, alpha_feat, Laplace(rec.epsilon, rec.sensitivity),
                         unit, observed, "class_prob", "feature_prob", dims, coords)


def naive_bayes(release, prior):
    from .naive_bayes import parse_prior

    prior = parse_prior(prior, release)
    I, levels, n = release.classes, list(release.levels), release.n
    rec = release.statistics.tables
    alpha_feat = [[prior.feature_alpha[k, i, :jk] for i in range(I)] for k, jk in enumerate(levels)]
    unit = 1.0 if release.scale == "counts" else 1.0 / n
    observed = np.concatenate([np.asarray(v, float).ravel() for v in rec.value])
    dims = {"class_prob": ["class"], "feature_prob": ["feature", "class", "level"]}
    # every cell gets Laplace(sensitivity / epsilon) on the release's scale (per table for counts)
    return _tables_model("naive-bayes", n, I, levels, np.asarray(prior.class_alpha, float), alpha_feat,
                         Laplace(rec.epsilon, rec.sensitivity), unit, observed, "class_prob", "feature_prob", dims,
                         release.coords())


# --------------------------------------------------------------------------- gaussian
class _GaussianJointPrior:
    """(mu, sigma^2) jointly: normal-inverse-gamma (Kazan & Reiter eq. 2), or flat (improper).

    The flat prior cannot be sampled; its ``rvs`` gives starting points near the released values
    (used only to start the chains and to check the model), and ``logpdf`` is 0 on sigma^2 > 0.
    """

    def __init__(self, prior, start_mean, start_var):
        self.prior = prior
        self.start_mean, self.start_var = float(start_mean), max(float(start_var), 1e-12)

    def rvs(self, size=None, random_state=None):
        rng = np.random.default_rng(random_state)
        size = 1 if size is None else int(np.prod(size))
        p = self.prior
        if p.kind == "flat":
            s2 = self.start_var * rng.gamma(20.0, 1 / 20.0, size)
            return np.column_stack([self.start_mean + np.sqrt(s2 / 10) * rng.standard_normal(size), s2])
        s2 = 1.0 / rng.gamma(p.nu0 / 2.0, 2.0 / (p.nu0 * p.sigma0_sq), size)
        return np.column_stack([rng.normal(p.mu0, np.sqrt(s2 / p.kappa0)), s2])

    def logpdf(self, v):
        v = np.atleast_2d(np.asarray(v, float))
        mu, s2 = v[:, 0], v[:, 1]
        p = self.prior
        with np.errstate(all="ignore"):
            if p.kind == "flat":
                out = np.zeros(len(v))
            else:
                out = (stats.invgamma.logpdf(s2, p.nu0 / 2.0, scale=p.nu0 * p.sigma0_sq / 2.0)
                       + stats.norm.logpdf(mu, p.mu0, np.sqrt(np.abs(s2) / p.kappa0)))
        return np.where(s2 > 0, out, -np.inf)


def gaussian(release, prior):
    """Records y_i ~ N(mu, sigma^2) (the unconstrained analysis model of Kazan & Reiter); t(y) =
    (y, y^2); the release is the sample mean and variance (a non-linear map of the sums, see
    ``model.MEAN_VARIANCE``) with their own Laplace scales."""
    from .gaussian import parse_prior

    prior = parse_prior(prior, release)
    n = release.n
    sm, sv = release.statistics.mean, release.statistics.variance
    joint = _GaussianJointPrior(prior, sm.value, sv.value)

    def records(theta, size, rng):
        mu, s2 = theta["theta"]
        return rng.normal(mu, np.sqrt(s2), size)

    def complete_posterior(y, rng):
        ybar, ss = y.mean(), ((y - y.mean()) ** 2).sum()
        if prior.kind == "flat":
            # p(mu, s2 | y) propto s2^(-n/2) exp(-(ss + n (ybar - mu)^2) / (2 s2)): s2 ~ IG((n-3)/2, ss/2)
            s2 = 0.5 * ss / rng.gamma((n - 3) / 2.0)
            return {"theta": np.array([rng.normal(ybar, np.sqrt(s2 / n)), s2])}
        kn = prior.kappa0 + n
        mun = (prior.kappa0 * prior.mu0 + n * ybar) / kn
        rate = 0.5 * (prior.nu0 * prior.sigma0_sq + ss + prior.kappa0 * n * (ybar - prior.mu0) ** 2 / kn)
        s2 = rate / rng.gamma((prior.nu0 + n) / 2.0)
        return {"theta": np.array([rng.normal(mun, np.sqrt(s2 / kn)), s2])}

    def noncentred(y, theta, theta_new):
        # y = mu + sigma e with e held fixed
        (mu, s2), (mu2, s22) = theta["theta"], theta_new["theta"]
        return mu2 + np.sqrt(s22 / s2) * (y - mu)

    class _GaussianModel(Model):
        def posterior_variables(self, values):
            v = np.asarray(values["theta"])
            return {"mu": v[..., 0], "sigma2": v[..., 1]}, {}, {}

    model = _GaussianModel(params={"theta": joint}, records=records, statistic=lambda y: np.column_stack([y, y * y]),
                           mechanism=Laplace(sm.epsilon, sm.sensitivity), n=n, complete_posterior=complete_posterior,
                           noncentred=noncentred, name="gaussian")
    model.release_transform = MEAN_VARIANCE
    model.noise_scales = np.array([sm.sensitivity / sm.epsilon, sv.sensitivity / sv.epsilon])
    return model, np.array([float(sm.value), float(sv.value)])


#: family -> da_model hook
DA_MODELS = {"linreg-ju": linreg_ju, "binomial": binomial, "multinomial": multinomial, "loglinear": loglinear,
             "naive-bayes": naive_bayes, "gaussian": gaussian}


def da_model(release, prior):
    hook = DA_MODELS.get(release.family)
    if hook is None:
        raise InputError("method", f"family {release.family!r} has no record model for da-mcmc")
    return hook(release, prior)
