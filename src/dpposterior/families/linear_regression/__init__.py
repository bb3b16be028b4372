"""Linear regression from noisy summary statistics, one or several data holders.

Alparslan, Yildirim & Birbil (ICML 2023), Sec. 3: data holder j = 1..J releases

    xtx_j = X_j'X_j + sigma_s M_j      (M_j symmetric, upper triangle iid N(0, 1)),   eq. (2), (8)
    xty_j = X_j'y_j + sigma_z v_j      (v_j ~ N(0, I_d)),                             eq. (3), (8)

with sigma_s = sigma_z = Delta sigma(eps, delta) from the analytic Gaussian mechanism
(Balle & Wang 2018) and Delta the sensitivity of one record's contribution
f(x, y) = (upper(x x'), x y[, y^2]) from the public bounds ||x||_2 <= X (``bounds.x_norm``) and
|y| <= Y (``bounds.y_abs``).  The Bernstein & Sheldon (2019) variant (004 App. C.1) also releases
``yty`` = y'y; with Laplace noise every upper-triangle entry gets Laplace(Delta_1/eps).  With
``intercept = true`` the released matrices are those of the design [1, x] (App. B.2).

Sensitivity: replace-one, not add/remove.  A release states n, so neighbouring data sets have the
same n and differ in ONE REPLACED record (also Alparslan et al.'s own Sec. 2 definition):
Delta = sup ||f(x, y) - f(x', y')|| over two records in the public domain.  The paper's
Delta = sqrt(X^4 + X^2 Y^2) is sup ||f(x, y)|| (a record added or removed), up to 1.5x too small:
X = Y = 1, d = 2 gives 2.121, not 1.414.  We calibrate on the replace-one value:

* Gaussian (L2), exact.  Write r = ||x||, r' = ||x'||, c = cos(x, x').  Rotating x and x' together
  changes nothing but the diagonal of D = xx' - x'x'^T, and ||upper(D)||^2 = (||D||_F^2 +
  sum_a D_aa^2)/2 <= ||D||_F^2 with equality in D's eigenbasis (any d >= 2), so
      ||f - f'||^2 = r^4 + r'^4 - 2 r^2 r'^2 c^2                       (xtx)
                   + r^2 y^2 + r'^2 y'^2 - 2 r r' c y y'                 (xty)
                   + (y^2 - y'^2)^2                                      (yty)
  and, with an intercept ([1, x]; r, r', c now of the features only), also + ||x - x'||^2 =
  r^2 + r'^2 - 2 r r' c (entries (0, b) of xtx) and + (y - y')^2 (entry 0 of xty).  Delta^2 is the
  maximum of this polynomial over r, r' in [0, X], c in [-1, 1] (c = +-1 with one feature),
  y, y' in [-Y, Y]: a grid of the five invariants polished by bounded L-BFGS
  (:func:`replace_one_sensitivity`).  Without intercept and yty it has the closed form
  Delta^2 = 2X^4 + 2X^2 Y^2 + Y^4/2 when Y^2 <= 2X^2, else 4X^2 Y^2 (the c-quadratic is maximised
  at c = Y^2 / (2X^2)), which the tests check; separately, xtx alone has sqrt(2) X^2 (d >= 2),
  xty alone 2XY, yty alone Y^2.
* Laplace (L1), an upper bound: the sum of the blocks' worst cases.  xty: ||xy - x'y'||_1 <=
  2 sqrt(d) X Y (attained at x' = -x spread evenly, y = y' = Y); yty: Y^2; xtx: sum_{a<=b} |D_ab| =
  (||D||_1 + sum_a |D_aa|)/2 <= (d + 1)/2 ||D||_* <= (d + 1) X^2 (||D||_1 <= sum_i |lambda_i|
  ||e_i||_1^2 for D's two eigenpairs), X^2 for d = 1; with an intercept + 2 sqrt(d_x) X (entries
  (0, b)) + 2Y (entry 0 of xty).  The blocks' worst cases are not attained together, so the bound
  is conservative: 6.83 at X = Y = 1, d = 2 with yty, where a search finds 4.37 (the old
  add/remove value, 3.91, was too small).  ``dpposterior audit --family linear-regression``
  prints both.

adaSSP's lambda_min(X'X) moves by at most ||D||_2 <= max(r^2, r'^2) <= ||[1, x]||^2 (Weyl), so
its sensitivity X_eff^2 is already the replace-one value.

Each party spends the full (eps, delta) on its own rows; the parties' rows are
disjoint, so the release as a whole is (eps, delta)-DP by parallel composition
(:meth:`LinearRegressionRelease.privacy`).

Priors (004 eq. 4 and Sec. 4.1): theta ~ N(m, C), sigma_y^2 ~ IG(a, b),
Sigma_x ~ IW(Lambda, kappa).  Defaults as in Sec. 5.1: a = 20, b = 0.5, m = 0,
C = b/(a-1) I (see the papers' README), Lambda = I, kappa = (number of features) + 1.

Engines (``dpposterior.inference``): ``mcmc-normalx`` (Algorithm 1), ``mcmc-fixeds``
(Algorithm 2, auto), ``bayes-fixeds-fast`` (Algorithm 3), ``mcmc-bs`` (Bernstein &
Sheldon 2019 Gibbs-SS, App. C.1; the only engine that enforces ``constrained = true``,
Kazan & Reiter Sec. 5 / App. I), ``adassp`` (Wang 2018, App. C.2, point estimate) and
``naive`` (treats the noisy statistics as exact).

The package's table of contents: ``release`` (schema and validation), ``sensitivity``, ``prior``,
``curate`` (the curator), ``simulate`` (simulated data and releases), ``predictive``, ``observation`` (the
observation model through which the engines name their draws); ``FAMILY``
is defined here, and every public name is re-exported (``families.linear_regression.X``).
"""

from __future__ import annotations

from .. import EngineSpec, Family
from .sensitivity import (design_row_norm, joint_sensitivity, replace_one_sensitivity,  # noqa: F401
                          separate_sensitivity)
from .release import (ADASSP_MECHANISM, ADASSP_RHO, Bounds, FAMILY_NAME, LINREG_MECHANISMS,  # noqa: F401
                      LinearRegressionRelease, Party, PartyStatistics, RegressionData, SENSITIVITY_RTOL, SPLITS,
                      SYMMETRY_RTOL)
from .prior import LinRegPrior, PRIOR_KEYS, default_prior, parse_prior, prior_moments  # noqa: F401
from .curate import curate, split_plan  # noqa: F401
from .simulate import make_release, simulate  # noqa: F401
from .predictive import posterior_predictive
from .observation import observation_model


#: the batched calibration path of the four Gaussian-mechanism engines (inference/linreg_batch.py)
_BATCH = "dpposterior.inference.linreg_batch:run_batch"

FAMILY = Family(
    name=FAMILY_NAME,
    release_model=LinearRegressionRelease,
    methods={
        "mcmc-normalx": EngineSpec.of("dpposterior.inference.linreg_normalx", "mcmc_normalx", "NormalXOptions",
                                      batch=_BATCH),
        "mcmc-fixeds": EngineSpec.of("dpposterior.inference.linreg_fixeds", "mcmc_fixeds", "FixedSOptions",
                                     batch=_BATCH),
        "bayes-fixeds-fast": EngineSpec.of("dpposterior.inference.linreg_fast", "bayes_fixeds_fast", "FastOptions",
                                           batch=_BATCH),
        "mcmc-bs": EngineSpec.of("dpposterior.inference.linreg_bs", "mcmc_bs", "BSOptions"),
        "adassp": EngineSpec.of("dpposterior.inference.linreg_adassp", "adassp", "AdasspOptions"),
        "naive": EngineSpec.of("dpposterior.inference.linreg_naive", "naive", "NaiveOptions", batch=_BATCH),
    },
    auto_method="mcmc-fixeds",
    parse_prior=parse_prior,
    curate=curate,
    naive_method="naive",
    mechanisms=LINREG_MECHANISMS,
    constrainable=True,
    description="Linear regression from noisy X'X, X'y (Alparslan, Yildirim & Birbil; Bernstein & Sheldon 2019)",
    simulate=simulate,
    hooks={"posterior_predictive": posterior_predictive, "make_release": make_release,
           "prior_moments": prior_moments, "observation_model": observation_model,
           # one draw: beta and sigma2, and (mcmc-normalx) the features' mean and covariance: at most d^2 + 2d + 2
           "draw_values": lambda release: release.d ** 2 + 2 * release.d + 2},
)
