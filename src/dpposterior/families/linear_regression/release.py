"""The linear-regression release file: parties' noisy X'X, X'y[, y'y], validated against the bounds and
the derived replace-one sensitivities (Alparslan et al. Sec. 3.2; Bernstein & Sheldon 2019 App. C.1)."""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import sensitivity
from ...errors import InputError
from ...mechanisms import analytic_sigma, get_mechanism
from ...mechanisms.base import NoiseShape
from ...release import (FiniteFloat, PositiveFloat, ReleaseBase, StatisticRecord, require_noise_at_least,
                        require_within_reach)
from .sensitivity import design_row_norm


FAMILY_NAME = "linear-regression"
#: the mechanisms a party's xtx, xty (and yty) may be released with: Gaussian (Alparslan et al., L2
#: sensitivity, (epsilon, delta)) or Laplace (Bernstein & Sheldon, L1 sensitivity, pure epsilon)
LINREG_MECHANISMS = ("gaussian", "laplace")
#: the mechanism of adaSSP's noisy smallest eigenvalue of X'X (Wang 2018, Alg. 2)
ADASSP_MECHANISM = "gaussian"
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
    mechanism: str           # one of LINREG_MECHANISMS
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
    def noise_shape(self) -> NoiseShape:
        """The form of the noise on xtx, xty, yty: Gaussian (``sigma_*``) or Laplace (``laplace_scale``)."""
        return get_mechanism(self.mechanism).noise_shape

    @property
    def x_eff(self) -> float:
        """Bound on the norm of a design row (with the intercept's 1 when present)."""
        return design_row_norm(self.x_norm, self.intercept)


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

    def privacy(self):
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
        from ...mechanisms.accounting import PrivacyCost

        eps, dlt = max(eps_j), max(delta_j)
        return PrivacyCost(eps, dlt, None, "approximate" if dlt > 0 else "pure", self.privacy_composition)

    privacy_composition: ClassVar[str] = "parallel (each data holder spends (epsilon, delta) on its own disjoint rows)"


def _bad(message: str) -> InputError:
    """``"path: reason"`` -> InputError("release.path", "reason")."""
    path, _, reason = message.partition(": ")
    return InputError(f"release.{path}", reason)


def _validate_release(rel: LinearRegressionRelease) -> None:
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
            if rec.mechanism not in LINREG_MECHANISMS:
                raise _bad(f"{where}.{name}.mechanism: must be 'gaussian' or 'laplace'")
            if rec.mechanism != mech:
                raise _bad(f"{where}.{name}.mechanism: xtx, xty and yty are one joint mechanism "
                                 f"and must share it (xtx has {mech!r})")
            if party.composition == "joint" and (rec.epsilon != st.xtx.epsilon or rec.delta != st.xtx.delta):
                raise _bad(f"{where}.{name}: epsilon and delta must equal those of xtx "
                                 "(one joint mechanism)")
            # Gaussian noise is (epsilon, delta)-DP and may state its sigma; Laplace noise is pure epsilon-DP
            gaussian = get_mechanism(rec.mechanism).noise_shape is NoiseShape.GAUSSIAN
            if gaussian and rec.delta is None:
                raise _bad(f"{where}.{name}.delta: required for the gaussian mechanism")
            if not gaussian and (rec.delta is not None or rec.sigma is not None):
                raise _bad(f"{where}.{name}: the laplace mechanism takes no delta or sigma")
            if party.composition == "joint":
                derived = sensitivity.joint_sensitivity(mech, rel.bounds.x_norm, rel.bounds.y_abs, d,
                                                        st.yty is not None, rel.intercept)
            else:
                derived = sensitivity.separate_sensitivity(mech, name, rel.bounds.x_norm, rel.bounds.y_abs, d,
                                                           rel.intercept)
            # a larger stated sensitivity (more noise) is private and is what the engines use
            if rec.sensitivity is not None:
                require_noise_at_least(f"release.{where}.{name}.sensitivity", rec.sensitivity, derived,
                                       "sensitivity", rel)
            if gaussian and rec.sigma is not None:
                required = analytic_sigma(rec.epsilon, rec.delta, max(derived, rec.sensitivity or 0.0))
                require_noise_at_least(f"release.{where}.{name}.sigma", rec.sigma, required,
                                       "sigma (analytic Gaussian at the sensitivity)", rel)
        if st.lambda_min is not None:
            rec = st.lambda_min
            if rec.mechanism != ADASSP_MECHANISM or rec.delta is None:
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

    data = rel.regression_data()
    xe, ya = data.x_eff, data.y_abs
    for j in range(data.J):
        nj = float(data.n[j])
        if data.noise_shape is NoiseShape.LAPLACE:
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
    d = rel.d
    J = len(rel.parties)
    has_yty = rel.parties[0].statistics.yty is not None
    has_lambda = rel.parties[0].statistics.lambda_min is not None
    mech = rel.parties[0].statistics.xtx.mechanism
    if any(p.statistics.xtx.mechanism != mech for p in rel.parties):
        raise InputError("release.parties", "all parties must use the same mechanism")
    gaussian = get_mechanism(mech).noise_shape is NoiseShape.GAUSSIAN
    x_eff = _x_eff(rel)
    sens = sensitivity.joint_sensitivity(mech, rel.bounds.x_norm, rel.bounds.y_abs, d, has_yty, rel.intercept)
    xtx = np.empty((J, d, d))
    xty = np.empty((J, d))
    yty = np.empty(J) if has_yty else None
    sig = {k: np.empty(J) for k in ("xtx", "xty", "yty")}
    lap = None if gaussian else np.empty((J, 3))
    eps = np.empty(J)
    dlt = np.empty(J) if gaussian else None
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
        if gaussian:
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
                    sig[name][j] = analytic_sigma(rec.epsilon, rec.delta, rec.sensitivity
                                                  or sensitivity.separate_sensitivity(
                                                      mech, name, rel.bounds.x_norm, rel.bounds.y_abs, d,
                                                      rel.intercept))
        else:
            for k, name in enumerate(("xtx", "xty", "yty")):
                rec = getattr(st, name)
                if rec is None:
                    lap[j, k] = np.nan
                    sig[name][j] = np.nan
                    continue
                sens_k = rec.sensitivity or (sens if joint else sensitivity.separate_sensitivity(
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
