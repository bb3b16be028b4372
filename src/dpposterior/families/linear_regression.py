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
(:meth:`LinearRegressionRelease.total_privacy_cost`).

Priors (004 eq. 4 and Sec. 4.1): theta ~ N(m, C), sigma_y^2 ~ IG(a, b),
Sigma_x ~ IW(Lambda, kappa).  Defaults as in Sec. 5.1: a = 20, b = 0.5, m = 0,
C = b/(a-1) I (see the papers' README), Lambda = I, kappa = (number of features) + 1.

Engines (``dpposterior.inference``): ``mcmc-normalx`` (Algorithm 1), ``mcmc-fixeds``
(Algorithm 2, auto), ``bayes-fixeds-fast`` (Algorithm 3), ``mcmc-bs`` (Bernstein &
Sheldon 2019 Gibbs-SS, App. C.1; the only engine that enforces ``constrained = true``,
Kazan & Reiter Sec. 5 / App. I), ``adassp`` (Wang 2018, App. C.2, point estimate) and
``naive`` (treats the noisy statistics as exact).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InputError
from ..release import (FORMAT, FiniteFloat, PositiveFloat, ReleaseBase, StatisticRecord,
                       require_noise_at_least)
from . import EngineSpec, Family, SimulatedRelease

FAMILY_NAME = "linear-regression"
SPLITS = ("xtx,xty", "xtx,xty,yty", "halves", "min-variance", "adassp")
#: relative tolerance for symmetry of xtx and for a stated sensitivity to match the derived one
SYMMETRY_RTOL = 1e-9
SENSITIVITY_RTOL = 1e-9
#: adaSSP failure probability rho (Wang 2018)
ADASSP_RHO = 0.05


# ----------------------------------------------------------------------------- release model


class Bounds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: public bound on the Euclidean norm of a feature row (without the intercept's 1)
    x_norm: PositiveFloat
    #: public bound on |y|
    y_abs: PositiveFloat
    #: optional public range of every feature / of the response (needed for ``constrained``)
    x_range: tuple[FiniteFloat, FiniteFloat] | None = None
    y_range: tuple[FiniteFloat, FiniteFloat] | None = None

    @model_validator(mode="after")
    def _ranges(self):
        for name in ("x_range", "y_range"):
            rng = getattr(self, name)
            if rng is not None and not rng[0] < rng[1]:
                raise ValueError(f"{name}: lower end must be below the upper end (got {rng[0]:g}, {rng[1]:g})")
        return self


class PartyStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    xtx: StatisticRecord
    xty: StatisticRecord
    yty: StatisticRecord | None = None
    #: adaSSP (Wang 2018) releases a noisy smallest eigenvalue of X'X with its own budget
    lambda_min: StatisticRecord | None = None


class Party(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: Annotated[int, Field(strict=True, ge=1)]
    statistics: PartyStatistics
    #: "joint": xtx, xty (, yty) are ONE mechanism calibrated on their joint sensitivity (the paper's
    #: Sec. 3); "separate": each record is its own mechanism with its own sensitivity
    #: (xtx: ||X||^2, xty: ||X|| ||Y||, yty: ||Y||^2) and budget, composed by basic composition
    #: (Dwork et al. 2014b; the authors' code; Wang's adaSSP).
    composition: Literal["joint", "separate"] = "joint"


@dataclass
class RegressionData:
    """The numbers engines work with, resolved from a release (arrays over parties j)."""

    names: list[str]
    features: list[str]
    intercept: bool
    n: np.ndarray            # (J,)
    xtx: np.ndarray          # (J, d, d), symmetric
    xty: np.ndarray          # (J, d)
    yty: np.ndarray | None   # (J,) or None
    mechanism: str           # "gaussian" | "laplace"
    sigma_s: np.ndarray      # (J,) Gaussian sd of each upper-triangle entry of xtx (Laplace: sd sqrt(2) b)
    sigma_z: np.ndarray      # (J,)
    sigma_u: np.ndarray | None
    laplace_scale: np.ndarray | None  # (J, 3) Laplace scale b of xtx, xty, yty entries (laplace mechanism)
    epsilon: np.ndarray      # (J,) budget of the joint (xtx, xty[, yty]) mechanism
    delta: np.ndarray | None
    lambda_min: np.ndarray | None
    sigma_lambda: np.ndarray | None
    lambda_epsilon: np.ndarray | None
    lambda_delta: np.ndarray | None
    x_norm: float
    y_abs: float
    x_range: tuple[float, float] | None
    y_range: tuple[float, float] | None

    @property
    def d(self) -> int:
        return self.xtx.shape[-1]

    @property
    def J(self) -> int:
        return self.xtx.shape[0]

    @property
    def n_total(self) -> int:
        return int(self.n.sum())

    @property
    def x_eff(self) -> float:
        """Bound on the norm of a design row (with the intercept's 1 when present)."""
        return design_row_norm(self.x_norm, self.intercept)


def design_row_norm(x_norm: float, intercept: bool) -> float:
    """Bound on ||[1, x]|| (or ||x||) from the feature-row bound ``x_norm``."""
    return math.sqrt(x_norm ** 2 + 1.0) if intercept else x_norm


#: which per-record blocks each released statistic holds (the mechanism's input is their concatenation)
_BLOCKS = ("xtx", "xty", "yty")


def _gaussian_sq_objective(v, intercept, w):
    """||f(x, y) - f(x', y')||_2^2 in the invariants v = (r, r', c, y, y') (module docstring)."""
    r, rp, c, y, yp = v
    out = 0.0
    if w[0]:
        out = out + r ** 4 + rp ** 4 - 2 * r * r * rp * rp * c * c
        if intercept:
            out = out + r * r + rp * rp - 2 * r * rp * c
    if w[1]:
        out = out + r * r * y * y + rp * rp * yp * yp - 2 * r * rp * c * y * yp
        if intercept:
            out = out + (y - yp) ** 2
    if w[2]:
        out = out + (y * y - yp * yp) ** 2
    return out


@functools.lru_cache(maxsize=256)
def _gaussian_replace_one(x_norm: float, y_abs: float, d_x: int, intercept: bool, blocks: tuple) -> float:
    """max over the invariants of the squared L2 distance, by a grid and bounded polishing."""
    from scipy.optimize import minimize

    w = tuple(b in blocks for b in _BLOCKS)
    X, Y = float(x_norm), float(y_abs)
    grid = 9
    rs = np.linspace(0.0, X, grid)
    ys = np.linspace(-Y, Y, 2 * grid - 1)
    cs = np.linspace(-1.0, 1.0, 2 * grid - 1) if d_x >= 2 else np.array([-1.0, 1.0])
    R, RP, C, Yv, YP = np.meshgrid(rs, rs, cs, ys, ys, indexing="ij", sparse=True)
    vals = _gaussian_sq_objective((R, RP, C, Yv, YP), intercept, w)
    vals = np.broadcast_to(vals, (grid, grid, len(cs), len(ys), len(ys)))
    flat = vals.ravel()
    top = np.argpartition(flat, -8)[-8:]
    top = top[np.argsort(flat[top])]
    best = float(flat[top[-1]])
    bounds = [(0.0, X), (0.0, X), (-1.0, 1.0), (-Y, Y), (-Y, Y)]
    for idx in top:
        i = np.unravel_index(idx, vals.shape)
        v0 = np.array([rs[i[0]], rs[i[1]], cs[i[2]], ys[i[3]], ys[i[4]]])
        if d_x >= 2:
            res = minimize(lambda v: -_gaussian_sq_objective(v, intercept, w), v0, method="L-BFGS-B",
                           bounds=bounds)
        else:  # one free feature: x and x' are collinear, c = +-1 fixed
            c0 = v0[2]
            res = minimize(lambda v: -_gaussian_sq_objective((v[0], v[1], c0, v[2], v[3]), intercept, w),
                           np.delete(v0, 2), method="L-BFGS-B", bounds=bounds[:2] + bounds[3:])
        best = max(best, float(-res.fun))
    return math.sqrt(best)


def _laplace_replace_one(x_norm: float, y_abs: float, d_x: int, intercept: bool, blocks: tuple) -> float:
    """Upper bound on the L1 replace-one sensitivity: the sum of the blocks' worst cases (docstring)."""
    X, Y = float(x_norm), float(y_abs)
    out = 0.0
    if "xtx" in blocks:
        out += (d_x + 1) * X ** 2 if d_x >= 2 else X ** 2
        if intercept:  # entries (0, b) = x_b - x'_b
            out += 2.0 * math.sqrt(d_x) * X
    if "xty" in blocks:
        out += 2.0 * math.sqrt(d_x) * X * Y + (2.0 * Y if intercept else 0.0)
    if "yty" in blocks:
        out += Y ** 2
    return out


def replace_one_sensitivity(mechanism: str, blocks, x_norm: float, y_abs: float, d: int,
                            intercept: bool = False) -> float:
    """Replace-one sensitivity of the statistics ``blocks`` (a subset of xtx, xty, yty) released as
    ONE mechanism: L2 (gaussian; the exact worst case) or L1 (laplace; an upper bound).

    ``x_norm`` bounds the feature row WITHOUT the intercept's 1; ``d`` is the design dimension
    (features + 1 with an intercept).  Derivation in the module docstring.
    """
    blocks = tuple(b for b in _BLOCKS if b in set(blocks))
    if not blocks:
        raise ValueError("blocks: name at least one of xtx, xty, yty")
    d_x = int(d) - (1 if intercept else 0)
    if d_x < 1:
        raise ValueError("d: at least one feature")
    # X^4 and Y^4 enter the L2 sensitivity: beyond 1e75 they overflow double precision
    for name, v in (("x_norm", x_norm), ("y_abs", y_abs)):
        if not (math.isfinite(v) and 0 < v <= 1e75):
            raise InputError(f"bounds.{name}", f"must be a finite number in (0, 1e75] (got {v:g}): its 4th power "
                             "must be finite")
    if mechanism == "gaussian":
        return _gaussian_replace_one(float(x_norm), float(y_abs), d_x, bool(intercept), blocks)
    if mechanism == "laplace":
        return _laplace_replace_one(x_norm, y_abs, d_x, intercept, blocks)
    raise ValueError(f"mechanism: {mechanism!r} has no linear-regression sensitivity")


def separate_sensitivity(mechanism: str, name: str, x_norm: float, y_abs: float, d: int,
                         intercept: bool = False) -> float:
    """Replace-one sensitivity of one statistic released on its own (L2 gaussian, L1 laplace)."""
    return replace_one_sensitivity(mechanism, (name,), x_norm, y_abs, d, intercept)


def joint_sensitivity(mechanism: str, x_norm: float, y_abs: float, d: int, with_yty: bool,
                      intercept: bool = False) -> float:
    """Replace-one sensitivity of one row's [upper(xx'), x y, (y^2)] as one mechanism."""
    blocks = ("xtx", "xty", "yty") if with_yty else ("xtx", "xty")
    return replace_one_sensitivity(mechanism, blocks, x_norm, y_abs, d, intercept)


class LinearRegressionRelease(ReleaseBase):
    """Noisy (X'X, X'y[, y'y]) of J data holders (Alparslan et al. Sec. 3.2)."""

    family: Literal["linear-regression"]
    features: list[str]
    intercept: bool = False
    bounds: Bounds
    parties: list[Party]
    #: optional public total number of rows; must equal the sum of the parties' n
    n: Annotated[int, Field(strict=True, ge=1)] | None = None

    @classmethod
    def model_validate(cls, obj, *args, **kwargs):
        release = super().model_validate(obj, *args, **kwargs)
        _validate_release(release)
        _check_reach(release)
        return release

    # -- derived quantities
    @property
    def d(self) -> int:
        return len(self.features) + (1 if self.intercept else 0)

    @property
    def coef_names(self) -> list[str]:
        return (["intercept"] if self.intercept else []) + list(self.features)

    def regression_data(self) -> RegressionData:
        return _resolve(self)

    def total_privacy_cost(self) -> tuple[float, float]:
        """Parallel composition: every party spends (eps, delta) on its own, disjoint rows.

        Within a party with ``composition = "joint"``, xtx/xty(/yty) are one mechanism (one
        sensitivity) and count once; with ``"separate"`` their budgets add up; a released
        ``lambda_min`` (adaSSP) adds to either.  The release costs the largest per-party spend.
        """
        eps_j, delta_j = [], []
        for party in self.parties:
            st = party.statistics
            if party.composition == "joint":
                eps = st.xtx.epsilon
                dlt = st.xtx.delta or 0.0
            else:
                recs = [r for r in (st.xtx, st.xty, st.yty) if r is not None]
                eps = sum(r.epsilon for r in recs)
                dlt = sum(r.delta or 0.0 for r in recs)
            if st.lambda_min is not None:
                eps += st.lambda_min.epsilon
                dlt += st.lambda_min.delta or 0.0
            eps_j.append(eps)
            delta_j.append(dlt)
        return max(eps_j), max(delta_j)

    privacy_composition: ClassVar[str] = "parallel (each data holder spends (epsilon, delta) on its own disjoint rows)"


def _bad(message: str) -> InputError:
    """``"path: reason"`` -> InputError("release.path", "reason")."""
    path, _, reason = message.partition(": ")
    return InputError(f"release.{path}", reason)


def _validate_release(rel: LinearRegressionRelease) -> None:
    from ..mechanisms import analytic_sigma

    if len(rel.features) == 0:
        raise _bad("features: must list at least one feature name")
    if any((not isinstance(f, str)) or not f.strip() for f in rel.features):
        raise _bad("features: names must be non-empty strings")
    if len(set(rel.features)) != len(rel.features):
        raise _bad("features: names must be unique")
    if rel.intercept and "intercept" in rel.features:
        raise _bad("features: 'intercept' is reserved for the intercept coefficient")
    if len(rel.parties) == 0:
        raise _bad("parties: must hold at least one data holder")
    d = rel.d
    total = 0
    has_yty = rel.parties[0].statistics.yty is not None
    has_lambda = rel.parties[0].statistics.lambda_min is not None
    for j, party in enumerate(rel.parties):
        where = f"parties.{j}.statistics"
        st = party.statistics
        total += party.n
        xtx = np.asarray(st.xtx.value, dtype=float) if _is_rect(st.xtx.value) else None
        if xtx is None or xtx.shape != (d, d):
            raise _bad(f"{where}.xtx.value: must be a {d} x {d} matrix "
                             f"({len(rel.features)} features{' + intercept' if rel.intercept else ''})")
        scale = max(1.0, float(np.max(np.abs(xtx))))
        if np.max(np.abs(xtx - xtx.T)) > SYMMETRY_RTOL * scale:
            raise _bad(f"{where}.xtx.value: must be symmetric")
        xty = np.asarray(st.xty.value, dtype=float) if _is_rect(st.xty.value) else None
        if xty is None or xty.shape != (d,):
            raise _bad(f"{where}.xty.value: must be a list of {d} numbers")
        if (st.yty is not None) != has_yty:
            raise _bad(f"{where}.yty: every party or none must release yty")
        if (st.lambda_min is not None) != has_lambda:
            raise _bad(f"{where}.lambda_min: every party or none must release lambda_min")
        if st.yty is not None and isinstance(st.yty.value, list):
            raise _bad(f"{where}.yty.value: must be a single number")
        joint = [("xtx", st.xtx), ("xty", st.xty)] + ([("yty", st.yty)] if st.yty is not None else [])
        mech = st.xtx.mechanism
        for name, rec in joint:
            if rec.mechanism not in ("gaussian", "laplace"):
                raise _bad(f"{where}.{name}.mechanism: must be 'gaussian' or 'laplace'")
            if rec.mechanism != mech:
                raise _bad(f"{where}.{name}.mechanism: xtx, xty and yty are one joint mechanism "
                                 f"and must share it (xtx has {mech!r})")
            if party.composition == "joint" and (rec.epsilon != st.xtx.epsilon or rec.delta != st.xtx.delta):
                raise _bad(f"{where}.{name}: epsilon and delta must equal those of xtx "
                                 "(one joint mechanism)")
            if rec.mechanism == "gaussian" and rec.delta is None:
                raise _bad(f"{where}.{name}.delta: required for the gaussian mechanism")
            if rec.mechanism == "laplace" and (rec.delta is not None or rec.sigma is not None):
                raise _bad(f"{where}.{name}: the laplace mechanism takes no delta or sigma")
            if party.composition == "joint":
                derived = joint_sensitivity(mech, rel.bounds.x_norm, rel.bounds.y_abs, d, st.yty is not None,
                                            rel.intercept)
            else:
                derived = separate_sensitivity(mech, name, rel.bounds.x_norm, rel.bounds.y_abs, d, rel.intercept)
            # a larger stated sensitivity (more noise) is private and is what the engines use
            if rec.sensitivity is not None:
                require_noise_at_least(f"release.{where}.{name}.sensitivity", rec.sensitivity, derived,
                                       "sensitivity", rel)
            if rec.mechanism == "gaussian" and rec.sigma is not None:
                required = analytic_sigma(rec.epsilon, rec.delta, max(derived, rec.sensitivity or 0.0))
                require_noise_at_least(f"release.{where}.{name}.sigma", rec.sigma, required,
                                       "sigma (analytic Gaussian at the sensitivity)", rel)
        if st.lambda_min is not None:
            rec = st.lambda_min
            if rec.mechanism != "gaussian" or rec.delta is None:
                raise _bad(f"{where}.lambda_min: must be a gaussian record with delta")
            if isinstance(rec.value, list):
                raise _bad(f"{where}.lambda_min.value: must be a single number")
            if rec.sigma is not None:
                # lambda_min(X'X) moves by at most ||xx' - x'x'^T||_2 <= X_eff^2 (Weyl)
                require_noise_at_least(f"release.{where}.lambda_min.sigma", rec.sigma,
                                       analytic_sigma(rec.epsilon, rec.delta, _x_eff(rel) ** 2),
                                       "sigma (analytic Gaussian, sensitivity X_eff^2)", rel)
    if rel.n is not None and rel.n != total:
        raise _bad(f"n: {rel.n} does not equal the sum of the parties' n ({total}, "
                         f"{len(rel.parties)} parties)")


def _check_reach(rel) -> None:
    """Released x'x, x'y, y'y within reach of bounded rows (the shared rule, release.require_within_reach).

    A party of n_j rows with ||[1,] x|| <= X_eff and |y| <= y_abs has |(x'x)_kl| <= n_j X_eff^2 (diagonal
    >= 0), |(x'y)_k| <= n_j X_eff y_abs and 0 <= y'y <= n_j y_abs^2.
    """
    from ..release import require_within_reach

    data = rel.regression_data()
    xe, ya = data.x_eff, data.y_abs
    for j in range(data.J):
        nj = float(data.n[j])
        if data.mechanism == "laplace":
            scales = data.laplace_scale[j]
        else:
            scales = (data.sigma_s[j], data.sigma_z[j], data.sigma_u[j] if data.sigma_u is not None else 0.0)
        where = f"release.parties.{j}.statistics"
        lo = np.full((data.d, data.d), -nj * xe * xe)
        np.fill_diagonal(lo, 0.0)
        require_within_reach(f"{where}.xtx.value", data.xtx[j], lo, nj * xe * xe, float(scales[0]),
                             f"x'x of {nj:g} rows with norm <= {xe:g}")
        require_within_reach(f"{where}.xty.value", data.xty[j], -nj * xe * ya, nj * xe * ya, float(scales[1]),
                             f"x'y of {nj:g} rows (|y| <= {ya:g})")
        if data.yty is not None:
            require_within_reach(f"{where}.yty.value", data.yty[j], 0.0, nj * ya * ya, float(scales[2]),
                                 f"y'y of {nj:g} rows (|y| <= {ya:g})")


def _is_rect(value) -> bool:
    try:
        arr = np.asarray(value, dtype=float)
    except (ValueError, TypeError):
        return False
    return arr.dtype != object


def _x_eff(rel) -> float:
    return design_row_norm(rel.bounds.x_norm, rel.intercept)


def _resolve(rel: LinearRegressionRelease) -> RegressionData:
    from ..mechanisms import analytic_sigma

    d = rel.d
    J = len(rel.parties)
    has_yty = rel.parties[0].statistics.yty is not None
    has_lambda = rel.parties[0].statistics.lambda_min is not None
    mech = rel.parties[0].statistics.xtx.mechanism
    if any(p.statistics.xtx.mechanism != mech for p in rel.parties):
        raise InputError("release.parties", "all parties must use the same mechanism")
    x_eff = _x_eff(rel)
    sens = joint_sensitivity(mech, rel.bounds.x_norm, rel.bounds.y_abs, d, has_yty, rel.intercept)
    xtx = np.empty((J, d, d))
    xty = np.empty((J, d))
    yty = np.empty(J) if has_yty else None
    sig = {k: np.empty(J) for k in ("xtx", "xty", "yty")}
    lap = np.empty((J, 3)) if mech == "laplace" else None
    eps = np.empty(J)
    dlt = np.empty(J) if mech == "gaussian" else None
    lam = lam_sig = lam_eps = lam_dlt = None
    if has_lambda:
        lam, lam_sig, lam_eps, lam_dlt = (np.empty(J) for _ in range(4))
    for j, party in enumerate(rel.parties):
        st = party.statistics
        a = np.asarray(st.xtx.value, dtype=float)
        xtx[j] = 0.5 * (a + a.T)
        xty[j] = np.asarray(st.xty.value, dtype=float)
        eps[j] = st.xtx.epsilon
        joint = party.composition == "joint"
        if mech == "gaussian":
            dlt[j] = st.xtx.delta
            derived = None
            for name in ("xtx", "xty", "yty"):
                rec = getattr(st, name)
                if rec is None:
                    continue
                if rec.sigma is not None:
                    sig[name][j] = rec.sigma
                elif joint:
                    if derived is None:
                        derived = analytic_sigma(rec.epsilon, rec.delta, rec.sensitivity or sens)
                    sig[name][j] = derived
                else:
                    sig[name][j] = analytic_sigma(rec.epsilon, rec.delta, rec.sensitivity or separate_sensitivity(
                        mech, name, rel.bounds.x_norm, rel.bounds.y_abs, d, rel.intercept))
        else:
            for k, name in enumerate(("xtx", "xty", "yty")):
                rec = getattr(st, name)
                if rec is None:
                    lap[j, k] = np.nan
                    sig[name][j] = np.nan
                    continue
                sens_k = rec.sensitivity or (sens if joint else separate_sensitivity(
                    mech, name, rel.bounds.x_norm, rel.bounds.y_abs, d, rel.intercept))
                lap[j, k] = sens_k / rec.epsilon
                sig[name][j] = math.sqrt(2.0) * lap[j, k]
        if has_yty:
            yty[j] = float(st.yty.value)
        if has_lambda:
            rec = st.lambda_min
            lam[j] = float(rec.value)
            lam_eps[j] = rec.epsilon
            lam_dlt[j] = rec.delta
            lam_sig[j] = rec.sigma if rec.sigma is not None else analytic_sigma(rec.epsilon, rec.delta, x_eff ** 2)
    b = rel.bounds
    return RegressionData(
        names=rel.coef_names, features=list(rel.features), intercept=rel.intercept,
        n=np.array([p.n for p in rel.parties], dtype=float), xtx=xtx, xty=xty, yty=yty, mechanism=mech,
        sigma_s=sig["xtx"], sigma_z=sig["xty"], sigma_u=sig["yty"] if has_yty else None, laplace_scale=lap,
        epsilon=eps, delta=dlt, lambda_min=lam, sigma_lambda=lam_sig, lambda_epsilon=lam_eps,
        lambda_delta=lam_dlt, x_norm=b.x_norm, y_abs=b.y_abs,
        x_range=tuple(b.x_range) if b.x_range else None, y_range=tuple(b.y_range) if b.y_range else None,
    )


# ----------------------------------------------------------------------------- prior

PRIOR_KEYS = ("theta_mean", "theta_cov", "a", "b", "iw_scale", "iw_df", "mu_kappa")


@dataclass
class LinRegPrior:
    """theta ~ N(theta_mean, theta_cov), sigma_y^2 ~ IG(a, b), Sigma_x ~ IW(iw_scale, iw_df).

    ``mu_kappa`` (k0) is used only by ``mcmc-bs`` and ``mcmc-normalx`` with an intercept, where the feature
    mean mu is unknown: mu | Sigma_x ~ N(0, Sigma_x / k0) (a choice of ours; App. B.2
    leaves the prior of mu open).  ``mcmc-bs`` uses the conjugate form
    theta | sigma^2 ~ N(theta_mean, sigma^2 theta_cov) of App. C.1.
    """

    theta_mean: np.ndarray
    theta_cov: np.ndarray
    a: float = 20.0
    b: float = 0.5
    iw_scale: np.ndarray | None = None
    iw_df: float | None = None
    mu_kappa: float = 1.0

    @property
    def d(self) -> int:
        return self.theta_mean.shape[0]

    def to_dict(self) -> dict:
        return {"theta_mean": self.theta_mean.tolist(), "theta_cov": self.theta_cov.tolist(), "a": self.a,
                "b": self.b, "iw_scale": None if self.iw_scale is None else self.iw_scale.tolist(),
                "iw_df": self.iw_df, "mu_kappa": self.mu_kappa}


def default_prior(d: int, n_features: int | None = None) -> LinRegPrior:
    """The paper's Sec. 5.1 hyperparameters: a = 20, b = 0.5, m = 0, C = b/(a-1) I, kappa = d_x + 1."""
    dx = d if n_features is None else n_features
    a, b = 20.0, 0.5
    return LinRegPrior(theta_mean=np.zeros(d), theta_cov=b / (a - 1.0) * np.eye(d), a=a, b=b,
                       iw_scale=np.eye(dx), iw_df=float(dx + 1))


def _number(value, field, positive=True):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(field, "must be a number")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise InputError(field, "must be a finite number > 0")
    return value


def _matrix(value, size, field):
    """A size x size symmetric positive-definite matrix (a scalar c means c I)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = _number(value, field) * np.eye(size)
    try:
        arr = np.asarray(value, dtype=float)
    except (ValueError, TypeError):
        raise InputError(field, f"must be a {size} x {size} matrix of numbers") from None
    if arr.shape != (size, size):
        raise InputError(field, f"must be a {size} x {size} matrix (got shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise InputError(field, "must be finite")
    if np.max(np.abs(arr - arr.T)) > 1e-9 * max(1.0, np.max(np.abs(arr))):
        raise InputError(field, "must be symmetric")
    try:
        np.linalg.cholesky(arr)
    except np.linalg.LinAlgError:
        raise InputError(field, "must be positive definite") from None
    return 0.5 * (arr + arr.T)


def prior_moments(prior: LinRegPrior) -> dict[str, tuple[float, float]]:
    """Prior mean and sd of the scalar sigma2 ~ IG(a, b), for the prior-dominance check (dpposterior.checks).

    A release without y'y informs sigma2 only through the noisy x'y (barely): its posterior is then its
    prior, which the check flags instead of presenting the prior's interval as an estimate (issue 17).
    """
    a, b = float(prior.a), float(prior.b)
    if not a > 2:
        return {}
    mean = b / (a - 1.0)
    return {"sigma2": (mean, mean / math.sqrt(a - 2.0))}


def parse_prior(prior, release=None) -> LinRegPrior:
    """Prior from None (the paper's defaults), a ``[prior]`` dict, or a :class:`LinRegPrior`."""
    if release is not None:
        d, dx = release.d, len(release.features)
    elif isinstance(prior, LinRegPrior):
        d, dx = prior.d, (prior.iw_scale.shape[0] if prior.iw_scale is not None else prior.d)
    elif isinstance(prior, dict) and "theta_mean" in prior and isinstance(prior["theta_mean"], list):
        d = len(prior["theta_mean"])
        dx = d
    else:
        d = dx = 2
    if prior is None:
        return default_prior(d, dx)
    if isinstance(prior, LinRegPrior):
        prior = prior.to_dict()
    if not isinstance(prior, dict):
        raise InputError("prior", "must be a table (dict) with keys " + ", ".join(PRIOR_KEYS))
    for key in prior:
        if key not in PRIOR_KEYS and key != "kind":
            raise InputError(f"prior.{key}", "unknown key (" + ", ".join(PRIOR_KEYS) + ")")
    if prior.get("kind", "normal") not in ("normal", "default"):
        raise InputError("prior.kind", "linear-regression priors have kind 'normal' (or omit it)")
    out = default_prior(d, dx)
    if prior.get("a") is not None:
        out.a = _number(prior["a"], "prior.a")
    if prior.get("b") is not None:
        out.b = _number(prior["b"], "prior.b")
    if prior.get("theta_mean") is not None:
        value = prior["theta_mean"]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value] * d
        try:
            arr = np.asarray(value, dtype=float)
        except (ValueError, TypeError):
            raise InputError("prior.theta_mean", f"must be a list of {d} numbers") from None
        if arr.shape != (d,) or not np.all(np.isfinite(arr)):
            raise InputError("prior.theta_mean", f"must be a list of {d} finite numbers (got shape {arr.shape})")
        out.theta_mean = arr
    if prior.get("theta_cov") is not None:
        out.theta_cov = _matrix(prior["theta_cov"], d, "prior.theta_cov")
    else:
        out.theta_cov = out.b / (out.a - 1.0) * np.eye(d) if out.a > 1 else np.eye(d)
    if prior.get("iw_scale") is not None:
        out.iw_scale = _matrix(prior["iw_scale"], dx, "prior.iw_scale")
    if prior.get("iw_df") is not None:
        out.iw_df = _number(prior["iw_df"], "prior.iw_df")
        if out.iw_df <= dx - 1:
            raise InputError("prior.iw_df", f"must exceed (number of features) - 1 = {dx - 1}")
    if prior.get("mu_kappa") is not None:
        out.mu_kappa = _number(prior["mu_kappa"], "prior.mu_kappa")
    return out


# ----------------------------------------------------------------------------- curator


def curate(frame, options) -> dict:
    """Clip rows to the public bounds, split them into J parties in order, add noise per party.

    ``--epsilon-split`` chooses what each party releases with its full (eps, delta):
    ``xtx,xty`` (default; the paper's joint Gaussian mechanism, Sec. 3), ``xtx,xty,yty``
    (Bernstein & Sheldon; default with ``--mechanism laplace``), ``halves`` ((eps/2, delta/2)
    on each of xtx and xty with their own sensitivities, Dwork et al. 2014b), ``min-variance``
    (``halves`` when its sigma_s^2 + sigma_z^2 <= sigma_joint^2, else ``xtx,xty`` -- the rule of
    the authors' code, which reproduces their Table 1; it depends only on public bounds) or
    ``adassp`` (Wang 2018 Alg. 2, as in the authors' code: (eps/3, delta/3) on each of xtx,
    xty and the smallest eigenvalue of xtx).
    """
    from ._curate import require_column
    from ..mechanisms import analytic_sigma, draw_noise

    feats = options.features
    if not feats:
        raise InputError("features", "is required for linear-regression (--features A,B)")
    cols = [require_column(frame, f, "features") for f in feats]
    ycol = require_column(frame, options.response, "response")
    if options.response in feats:
        raise InputError("response", "must not also be a feature")
    try:
        X = np.column_stack([np.asarray(c, dtype=float) for c in cols])
        y = np.asarray(ycol, dtype=float)
    except (ValueError, TypeError):
        raise InputError("features", "feature and response columns must be numeric") from None
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise InputError("data", "feature and response columns must not hold missing or infinite values")
    mechanism = options.mechanism or "gaussian"
    if mechanism not in ("gaussian", "laplace"):
        raise InputError("mechanism", f"must be gaussian or laplace (got {mechanism!r})")
    from ._curate import reject_unused

    # --delta is the Gaussian mechanism's; the Laplace mechanism is pure epsilon-DP
    reject_unused(options, {"features", "response", "bounds", "x_norm", "y_abs", "epsilon_split", "mechanism",
                            "parties", "intercept"} | ({"delta"} if mechanism == "gaussian" else set()),
                  "linear-regression" + (" (laplace)" if mechanism == "laplace" else ""))
    split = options.epsilon_split or ("xtx,xty,yty" if mechanism == "laplace" else "xtx,xty")
    split = split.replace(" ", "")
    if split not in SPLITS:
        raise InputError("epsilon-split", "must be one of " + ", ".join(SPLITS) + " for linear-regression")
    if split in ("adassp", "min-variance") and mechanism != "gaussian":
        raise InputError("epsilon-split", f"{split} uses the gaussian mechanism")
    x_range = y_range = None
    if options.bounds is not None:
        lo, hi = (float(v) for v in options.bounds)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InputError("bounds", f"must be finite with LO < HI (got {lo:g} {hi:g})")
        X = np.clip(X, lo, hi)
        y = np.clip(y, lo, hi)
        x_range = y_range = [lo, hi]
    x_norm, y_abs = options.x_norm, options.y_abs
    if x_norm is None and x_range is not None:
        x_norm = math.sqrt(X.shape[1]) * max(abs(x_range[0]), abs(x_range[1]))
    if y_abs is None and y_range is not None:
        y_abs = max(abs(y_range[0]), abs(y_range[1]))
    if x_norm is None:
        raise InputError("x-norm", "is required (public bound on the row norm of x; or give --bounds)")
    if y_abs is None:
        raise InputError("y-abs", "is required (public bound on |y|; or give --bounds)")
    for name, v in (("x-norm", x_norm), ("y-abs", y_abs)):
        if not (math.isfinite(v) and v > 0):
            raise InputError(name, f"must be a finite number > 0 (got {v})")
    # clip each row to the public bounds (sensitivity holds only for clipped rows)
    norms = np.linalg.norm(X, axis=1)
    X = X * np.minimum(1.0, x_norm / np.maximum(norms, 1e-300))[:, None]
    y = np.clip(y, -y_abs, y_abs)
    n = X.shape[0]
    J = options.parties
    if isinstance(J, bool) or not isinstance(J, (int, np.integer)) or J < 1:
        raise InputError("parties", f"must be an integer >= 1 (got {J!r})")
    if J > n:
        raise InputError("parties", f"{J} parties for {n} rows: every party needs at least one row")
    from ..release import default_delta

    delta = options.delta
    if delta is None:
        delta = default_delta(n)
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise InputError("delta", f"must lie in (0, 1) (got {delta})")
    if options.intercept:
        if "intercept" in feats:
            raise InputError("features", "'intercept' is reserved for the intercept coefficient")
        X = np.column_stack([np.ones(n), X])
    eps = float(options.epsilon)
    d = X.shape[1]
    seeds = ([None] * (4 * J) if options.seed is None
             else [int(s) for s in np.random.SeedSequence(options.seed).generate_state(4 * J)])
    parties = []
    for j, rows in enumerate(np.array_split(np.arange(n), J)):
        Xj, yj = X[rows], y[rows]
        stats, comp = _party_release(Xj, yj, eps, delta, mechanism, split, x_norm, y_abs, seeds[4 * j:4 * j + 4],
                                     draw_noise, analytic_sigma, options.intercept)
        parties.append({"n": int(len(rows)), "statistics": stats, "composition": comp})
    bounds: dict[str, Any] = {"x_norm": float(x_norm), "y_abs": float(y_abs)}
    if x_range is not None:
        bounds["x_range"] = x_range
        bounds["y_range"] = y_range
    return {"format": FORMAT, "family": FAMILY_NAME, "features": list(feats), "intercept": bool(options.intercept),
            "bounds": bounds, "n": int(n), "parties": parties,
            "description": f"linear regression, {J} data holder(s), {split} ({mechanism})"}


def split_plan(split, mechanism, eps, delta, x_norm, y_abs, d, analytic_sigma, intercept=False):
    """(composition, {statistic: (epsilon, delta, sensitivity, scale)}) for one party's budget."""
    gauss = mechanism == "gaussian"

    def scale(e, dl, sens):
        return analytic_sigma(e, dl, sens) if gauss else sens / e

    def joint(names):
        sens = joint_sensitivity(mechanism, x_norm, y_abs, d, "yty" in names, intercept)
        sc = scale(eps, delta, sens)
        return "joint", {k: (eps, delta, sens, sc) for k in names}

    def separate(names, share):
        out = {}
        for k in names:
            sens = separate_sensitivity(mechanism, k, x_norm, y_abs, d, intercept)
            out[k] = (eps * share, delta * share, sens, scale(eps * share, delta * share, sens))
        return "separate", out

    if split == "xtx,xty":
        return joint(("xtx", "xty"))
    if split == "xtx,xty,yty":
        return joint(("xtx", "xty", "yty"))
    if split == "halves":
        return separate(("xtx", "xty"), 0.5)
    if split == "adassp":
        return separate(("xtx", "xty"), 1.0 / 3.0)
    # min-variance: the authors' code uses the halves when sigma_s'^2 + sigma_z'^2 <= sigma_joint^2
    comp_j, plan_j = joint(("xtx", "xty"))
    comp_h, plan_h = separate(("xtx", "xty"), 0.5)
    sigma_joint = plan_j["xtx"][3]
    var_h = sum(v[3] ** 2 for v in plan_h.values())
    return (comp_h, plan_h) if var_h <= sigma_joint ** 2 else (comp_j, plan_j)


def _party_release(Xj, yj, eps, delta, mechanism, split, x_norm, y_abs, seeds, draw_noise, analytic_sigma,
                   intercept=False):
    """One party's release: ({statistics}, composition)."""
    d = Xj.shape[1]
    values = {"xtx": Xj.T @ Xj, "xty": Xj.T @ yj, "yty": np.array([float(yj @ yj)])}
    iu = np.triu_indices(d)
    composition, plan = split_plan(split, mechanism, eps, delta, x_norm, y_abs, d, analytic_sigma, intercept)
    out = {}
    for k, (name, (e, dl, sens, sc)) in enumerate(plan.items()):
        rec = {"mechanism": mechanism, "epsilon": e, "sensitivity": sens}
        if mechanism == "gaussian":
            rec.update(delta=dl, sigma=sc)
        if name == "xtx":
            upper, sampler = draw_noise(mechanism, values["xtx"][iu], sc, seeds[k])
            M = np.zeros((d, d))
            M[iu] = upper
            value = (M + np.triu(M, 1).T).tolist()
        else:
            noisy, sampler = draw_noise(mechanism, values[name], sc, seeds[k])
            value = float(noisy[0]) if name == "yty" else noisy.tolist()
        out[name] = {"value": value, **rec, "sampler": sampler}
    if split == "adassp":
        # Wang (2018) Alg. 2: lambda_min(X'X) + sqrt(log(6/delta))/(eps/3) ||X||^2 N(0,1)
        # Wang's sigma sqrt(log(6/delta)) X^2/(eps/3) is below the analytic (eps/3, delta/3) value for
        # eps > ~1 (3.65 vs 3.97 at eps = 3, delta = 1e-5): we take the larger, so the release is private.
        x_eff = design_row_norm(x_norm, intercept)
        sig_l = max(math.sqrt(math.log(6.0 / delta)) * x_eff ** 2 / (eps / 3.0),
                    analytic_sigma(eps / 3.0, delta / 3.0, x_eff ** 2))
        lam = float(np.linalg.eigvalsh(values["xtx"])[0])
        lhat, sampler = draw_noise("gaussian", np.array([lam]), sig_l, seeds[3])
        out["lambda_min"] = {"value": float(lhat[0]), "mechanism": "gaussian", "epsilon": eps / 3.0,
                             "delta": delta / 3.0, "sigma": sig_l, "sampler": sampler,
                             "note": "adaSSP (Wang 2018): smallest eigenvalue of X'X"}
    return out, composition


# ----------------------------------------------------------------------------- simulation


def make_release(X_parts, y_parts, *, features, epsilon, delta, x_norm, y_abs, intercept=False,
                 mechanism="gaussian", split="xtx,xty", rng=None, sigma=None) -> dict:
    """Release dict from already split data (numpy noise from ``rng``); for simulations and benchmarks.

    ``sigma`` overrides the calibrated Gaussian sd (e.g. to make the noise tiny in tests).
    Rows are NOT clipped here: the caller states the bounds.
    """
    from ..mechanisms import analytic_sigma

    rng = np.random.default_rng(rng)
    parties = []
    for Xj, yj in zip(X_parts, y_parts):
        Xj = np.asarray(Xj, float)
        if intercept:
            Xj = np.column_stack([np.ones(len(Xj)), Xj])
        seeds = [int(s) for s in rng.integers(0, 2**63 - 1, size=4)]
        if sigma is not None:
            stats, comp = _party_release(Xj, np.asarray(yj, float), epsilon, delta, mechanism, split, x_norm, y_abs,
                                         seeds, _numpy_noise, lambda e, dl, s: float(sigma), intercept)
            for rec in stats.values():
                rec.pop("sensitivity", None)
        else:
            stats, comp = _party_release(Xj, np.asarray(yj, float), epsilon, delta, mechanism, split, x_norm, y_abs,
                                         seeds, _numpy_noise, analytic_sigma, intercept)
        parties.append({"n": int(len(yj)), "statistics": stats, "composition": comp})
    out = {"format": FORMAT, "family": FAMILY_NAME, "features": list(features), "intercept": bool(intercept),
           "bounds": {"x_norm": float(x_norm), "y_abs": float(y_abs)}, "parties": parties}
    if sigma is not None:
        out["not_dp"] = f"noise sd set to {float(sigma):g} by the caller, not calibrated to (epsilon, delta)"
    return out


def _numpy_noise(mechanism, values, scale, seed):
    from ..mechanisms import draw_noise

    return draw_noise(mechanism, values, scale, seed)


def simulate(prior, n: int, epsilon: float, rng: np.random.Generator, parties: int = 1,
             delta: float | None = None) -> SimulatedRelease:
    """Draw (theta, sigma^2, Sigma_x) from the prior, x ~ N(0, Sigma_x), y, and a release.

    The model of ``mcmc-normalx`` is then exactly true (features are not clipped; the
    bounds are set to the simulated data's maxima, as in Sec. 5.1).  delta = 1/n.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise InputError("n", "must be an integer >= 2")
    prior = prior if isinstance(prior, LinRegPrior) else parse_prior(prior)
    d = prior.d
    rng = np.random.default_rng(rng)
    theta = rng.multivariate_normal(prior.theta_mean, prior.theta_cov)
    sigma2 = prior.b / rng.gamma(prior.a)
    Lam = prior.iw_scale if prior.iw_scale is not None else np.eye(d)
    kappa = prior.iw_df if prior.iw_df is not None else d + 1
    from scipy import stats as sps

    sigma_x = np.atleast_2d(sps.invwishart.rvs(df=kappa, scale=Lam, random_state=rng))
    X = rng.multivariate_normal(np.zeros(d), sigma_x, size=n)
    y = X @ theta + rng.normal(0.0, math.sqrt(sigma2), size=n)
    x_norm = float(np.max(np.linalg.norm(X, axis=1)))
    y_abs = float(np.max(np.abs(y)))
    idx = np.array_split(np.arange(n), parties)
    rel = make_release([X[i] for i in idx], [y[i] for i in idx], features=[f"x{k + 1}" for k in range(d)],
                       epsilon=epsilon, delta=delta if delta is not None else 1.0 / n, x_norm=x_norm,
                       y_abs=y_abs, rng=rng)
    conf = {"xtx": [(X[i].T @ X[i]).tolist() for i in idx], "xty": [(X[i].T @ y[i]).tolist() for i in idx],
            "yty": [float(y[i] @ y[i]) for i in idx], "sigma2": float(sigma2)}
    # only theta is calibrated generically: every method outputs it (sigma2 is not sampled by
    # bayes-fixeds-fast and adassp); the true sigma2 is kept in ``confidential``
    return SimulatedRelease(theta={"theta": theta}, release=rel, confidential=conf)


# ----------------------------------------------------------------------------- prediction


def posterior_predictive(posterior, X_new, rng=None, noise: bool = True) -> np.ndarray:
    """Draws of y at new rows ``X_new`` (m x features): array (chain, draw, m).

    Adds the intercept column when the posterior has one and ``X_new`` lacks it.  The
    observation noise uses the sampled ``sigma2`` (or the fixed sigma2 of
    ``bayes-fixeds-fast``); ``noise=False`` gives draws of the regression mean x'theta.
    """
    theta = np.asarray(posterior.posterior["theta"])
    d = theta.shape[-1]
    X_new = np.atleast_2d(np.asarray(X_new, dtype=float))
    if X_new.shape[1] == d - 1 and posterior.attrs.get("intercept"):
        X_new = np.column_stack([np.ones(len(X_new)), X_new])
    if X_new.shape[1] != d:
        raise InputError("X_new", f"must have {d} columns (got {X_new.shape[1]})")
    mean = np.einsum("cdk,mk->cdm", theta, X_new)
    if not noise:
        return mean
    if "sigma2" in posterior.posterior:
        s2 = np.asarray(posterior.posterior["sigma2"])[..., None]
    elif posterior.attrs.get("sigma2_fixed") is not None:
        s2 = float(posterior.attrs["sigma2_fixed"])
    else:
        return mean
    rng = np.random.default_rng(rng)
    return mean + np.sqrt(s2) * rng.standard_normal(mean.shape)


#: the batched calibration path of the four Gaussian-mechanism engines (inference/linreg_batch.py)
_BATCH = "dpposterior.inference.linreg_batch:run_batch"

FAMILY = Family(
    name=FAMILY_NAME,
    release_model=LinearRegressionRelease,
    methods={
        "mcmc-normalx": EngineSpec("dpposterior.inference.linreg_normalx:mcmc_normalx", batch=_BATCH),
        "mcmc-fixeds": EngineSpec("dpposterior.inference.linreg_fixeds:mcmc_fixeds", batch=_BATCH),
        "bayes-fixeds-fast": EngineSpec("dpposterior.inference.linreg_fast:bayes_fixeds_fast", batch=_BATCH),
        "mcmc-bs": "dpposterior.inference.linreg_bs:mcmc_bs",
        "adassp": "dpposterior.inference.linreg_adassp:adassp",
        "naive": EngineSpec("dpposterior.inference.linreg_naive:naive", batch=_BATCH),
    },
    auto_method="mcmc-fixeds",
    parse_prior=parse_prior,
    curate=curate,
    analysis_keys=frozenset({"sigma2_fixed", "rho", "max_rejections"}),
    naive_method="naive",
    mechanisms=("gaussian", "laplace"),
    description="Linear regression from noisy X'X, X'y (Alparslan, Yildirim & Birbil; Bernstein & Sheldon 2019)",
    simulate=simulate,
    hooks={"posterior_predictive": posterior_predictive, "make_release": make_release,
           "prior_moments": prior_moments},
)
