"""Family ``naive-bayes``: the naive Bayes log-linear model released as Laplace-noised two-way tables.

Karwa, Kifer & Slavković, *Private Posterior Distributions from Variational
Approximations* (paper 002), Sec. 4: a class variable Y with I levels and K
features X_k with J_k levels; the sufficient statistics are the K two-way tables
n^k_ij = #(Y = i, X_k = j).  Model (Sec. 4, also Xiong, Ju & Zhang App. E.3):

    p = (p_1..p_I) ~ Dirichlet(alpha_i),     p^k_i. ~ Dirichlet(alpha^k_i.)
    (n_1..n_I) ~ Multinomial(n, p),          n^k_i. | n_i ~ Multinomial(n_i, p^k_i.)

n is public.  Two release parameterisations (recorded in ``statistics.tables.scale``):

* ``counts`` (Karwa et al. Sec. 4): m^k_ij = n^k_ij + Laplace(2/eps) -- each table has
  L1 sensitivity 2 (n fixed: one record moves from one cell to another), so each
  table is eps-DP and the release is K*eps-DP by composition; ``epsilon`` is per table.
* ``proportions`` (Xiong et al. App. E.3): m^k_ij = n^k_ij/n + Laplace(2K/(n eps)) --
  the K tables together have sensitivity 2K/n, so ``epsilon`` is the total.

Internally both are handled on the count scale: proportions times n with noise
scale 2K/eps (a Laplace density rescales exactly).  Indices in ``value[k][i][j]``
are 0-based positions; labels, when the curator knows them, are in
``class_labels`` / ``feature_names`` / ``level_labels``.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from . import DA_MCMC, EngineSpec, Family, SimulatedRelease, prior_moments
from ..errors import InputError, RefusedError, shown
from ..mechanisms.noise import draw_noise
from ..mechanisms.registry import get_mechanism, is_continuous_laplace, is_integer_noise
from ..observation import (ENUMERATE, RECORDS, SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior,
                           Variable)
from ..release import FORMAT, ReleaseBase, StatisticRecord, load_release, padded_shape, require_within_reach
from ._curate import class_feature_tables, curator, curator_options


SCALES = ("counts", "proportions")
#: the tables' mechanisms: Laplace (Karwa et al.), and integer noise on the counts -- these and any other
#: registered integer noise law (:func:`accepts_mechanism`)
NB_MECHANISMS = ("laplace", "discrete-laplace", "discrete-gaussian")


def accepts_mechanism(name) -> bool:
    """Laplace (Karwa et al.'s model), or integer, additive, symmetric noise on the counts (the exact engine
    enumerates it from its mass function)."""
    return name in NB_MECHANISMS or is_integer_noise(name)


class _FieldError(ValueError):
    """A whole-release check failing on a nested field; re-raised as ``release.<field>: reason``."""

    def __init__(self, field: str, reason: str):
        self.field, self.reason = field, reason
        super().__init__(f"{field}: {reason}")


class NaiveBayesStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the K noisy two-way tables, value[k][i][j]
    tables: StatisticRecord


class NaiveBayesRelease(ReleaseBase):
    """Release file of family ``naive-bayes`` (see docs/release-format.md)."""

    family: Literal["naive-bayes"]
    #: public number of records
    n: int
    #: number of levels I of the class variable Y
    classes: int
    #: numbers of levels J_k of the features X_1..X_K
    levels: list[int]
    statistics: NaiveBayesStatistics
    class_name: str | None = None
    class_labels: list[str] | None = None
    feature_names: list[str] | None = None
    level_labels: list[list[str]] | None = None

    @field_validator("n", mode="before")
    @classmethod
    def _n(cls, v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"must be an integer (the public number of records), got {v!r}")
        if v < 1:
            raise ValueError(f"must be an integer >= 1 (the public number of records), got {v}")
        return v

    @field_validator("classes", mode="before")
    @classmethod
    def _classes(cls, v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"must be an integer, got {v!r}")
        if v < 2:
            raise ValueError(f"the class variable needs at least 2 levels, got {v}")
        return v

    @field_validator("levels", mode="before")
    @classmethod
    def _levels(cls, v):
        if not isinstance(v, list) or len(v) == 0:
            raise ValueError("must be a non-empty list of the features' numbers of levels")
        for k, j in enumerate(v):
            if isinstance(j, bool) or not isinstance(j, int):
                raise ValueError(f"feature {k}: number of levels must be an integer, got {j!r}")
            if j < 2:
                raise ValueError(f"feature {k} needs at least 2 levels, got {j}")
        return v

    @model_validator(mode="after")
    def _check_tables(self):
        rec = self.statistics.tables
        where = "statistics.tables"
        if not accepts_mechanism(rec.mechanism):
            raise _FieldError(f"{where}.mechanism", f"naive-bayes tables are released with one of "
                              f"{', '.join(NB_MECHANISMS)} or a registered integer noise law (got {rec.mechanism!r})")
        kind = get_mechanism(rec.mechanism)
        own = getattr(kind, "record_fields", ())
        for name in ("delta", "trials", "m") + (("sigma",) if not kind.integer_valued else ()):
            if getattr(rec, name) is not None and name not in own:
                raise _FieldError(f"{where}.{name}", f"not used by the {rec.mechanism} tables (remove it)")
        if rec.scale is None:
            raise _FieldError(f"{where}.scale", f"missing (one of: counts, proportions)")
        if rec.scale not in SCALES:
            raise _FieldError(f"{where}.scale", f"must be 'counts' or 'proportions' (got {rec.scale!r})")
        if kind.integer_valued and rec.scale != "counts":
            raise _FieldError(f"{where}.scale", f"integer noise ({rec.mechanism}) is released on counts: scale "
                              "must be 'counts'")
        value = rec.value
        K, I = len(self.levels), self.classes
        if not isinstance(value, list) or len(value) != K:
            got = len(value) if isinstance(value, list) else "a number"
            raise _FieldError(f"{where}.value", f"expected {K} tables (one per feature, levels has {K}), got {got}")
        for k, table in enumerate(value):
            if not isinstance(table, list) or len(table) != I:
                got = len(table) if isinstance(table, list) else "a number"
                raise _FieldError(f"{where}.value[{k}]", f"expected {I} rows (classes = {I}), got {got}")
            for i, row in enumerate(table):
                if not isinstance(row, list) or len(row) != self.levels[k]:
                    got = len(row) if isinstance(row, list) else "a number"
                    raise _FieldError(f"{where}.value[{k}][{i}]", f"expected {self.levels[k]} cells "
                                     f"(levels[{k}] = {self.levels[k]}), got {got}")
                if any(isinstance(x, list) for x in row):
                    raise _FieldError(f"{where}.value[{k}][{i}]", f"cells must be numbers")
        # discrete Gaussian: the whole release's L2 change (one record moves one cell pair in each of the
        # K tables: sqrt(2K)); discrete Laplace: L1 per table (2), epsilon per table, as for Laplace counts
        expected = math.sqrt(2.0 * K) if kind.accounts_rho else sensitivity_for(rec.scale, self.n, K)
        if rec.sensitivity is None:
            rec.sensitivity = expected
        elif not math.isclose(rec.sensitivity, expected, rel_tol=1e-9):
            what = (f"sqrt(2K) = {shown(float(expected))} (L2 over the K = {K} tables)" if kind.accounts_rho
                    else "2 per table (counts, n fixed)" if rec.scale == "counts"
                    else f"2K/n = {shown(float(expected))} for the K = {K} proportion tables")
            smaller = " (smaller than the replace-one value)" if rec.sensitivity < expected else ""
            raise _FieldError(f"{where}.sensitivity", f"must be {what}, got {shown(float(rec.sensitivity))}{smaller}")
        if self.class_labels is not None and len(self.class_labels) != I:
            raise _FieldError("class_labels", f"expected {I} labels, got {len(self.class_labels)}")
        if self.feature_names is not None and len(self.feature_names) != K:
            raise _FieldError("feature_names", f"expected {K} names, got {len(self.feature_names)}")
        if self.level_labels is not None:
            if len(self.level_labels) != K or any(len(lab) != j for lab, j in zip(self.level_labels, self.levels)):
                raise _FieldError("level_labels", f"must list levels[k] labels for each feature")
        return self

    @classmethod
    def model_validate(cls, obj, *args, **kwargs):
        try:
            release = super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            err = exc.errors()[0]
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, _FieldError):
                raise InputError(f"release.{cause.field}", cause.reason) from None
            raise
        # every cell counts records (or their proportion): in [0, n] (or [0, 1]) before the noise
        rec = release.statistics.tables
        top = float(release.n) if rec.scale == "counts" else 1.0
        cells = np.concatenate([np.asarray(t, float).ravel() for t in rec.value])
        if get_mechanism(rec.mechanism).accounts_rho and rec.rho is not None:
            from ..mechanisms.registry import from_record

            try:
                from_record(rec)
            except InputError as exc:
                raise InputError(f"release.statistics.tables.{exc.field}", exc.reason) from None
        require_within_reach("release.statistics.tables.value", cells, 0.0, top,
                             release.noise_scale_counts() / (1.0 if rec.scale == "counts" else release.n),
                             f"a table cell of {release.n} records ({rec.scale})")
        return release

    # -- derived quantities -------------------------------------------------------
    @property
    def K(self) -> int:
        return len(self.levels)

    @property
    def scale(self) -> str:
        return self.statistics.tables.scale

    def privacy(self):
        """counts: epsilon is per table, K tables compose to K*eps; proportions: epsilon is the total;
        discrete Gaussian: rho = (2K) / (2 sigma^2) for the whole release (its sensitivity is sqrt(2K)); any other
        integer law: one record moves a cell pair in each table, 2K unit shifts, composed from its mass function."""
        from ..mechanisms.accounting import PrivacyCost

        rec = self.statistics.tables
        kind = get_mechanism(rec.mechanism)
        if kind.accounts_rho:
            return super().privacy()
        if kind.loss_kind is None:
            return self.mechanism.privacy_accounting(self.reporting_delta(), 2, (1.0,) * (2 * self.K))
        eps = rec.epsilon * self.K if self.scale == "counts" else rec.epsilon
        return PrivacyCost(eps, 0.0, None, "pure", "epsilon per table, K tables compose"
                           if self.scale == "counts" else "epsilon is the total over the K tables")

    @property
    def mechanism(self):
        """The mechanism of the tables' cells (count scale for the integer mechanisms)."""
        from ..mechanisms.registry import from_record

        return from_record(self.statistics.tables)

    def require_laplace(self, method: str) -> None:
        """Karwa et al.'s engines model Laplace noise (a scale mixture): refuse integer noise in one line."""
        mech = self.statistics.tables.mechanism
        if not is_continuous_laplace(mech):
            raise RefusedError("method", f"{method!r} models Laplace noise; these tables carry {mech!r} noise: "
                               "use method 'exact' (auto)")

    def noise_scale_counts(self) -> float:
        """Noise scale on the count scale: Laplace b (2/eps for counts, n * 2K/(n eps) = 2K/eps for
        proportions), discrete-Laplace scale 2/eps, or the discrete Gaussian's sigma."""
        rec = self.statistics.tables
        if get_mechanism(rec.mechanism).integer_valued:
            return float(self.mechanism.noise_scale)
        b = rec.sensitivity / rec.epsilon
        return b if self.scale == "counts" else b * self.n

    def released_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(m, mask): noisy counts on the count scale, shape (K, I, Jmax), padded with 0 where mask is False."""
        jmax = max(self.levels)
        m = np.zeros((self.K, self.classes, jmax))
        mask = np.zeros((self.K, self.classes, jmax), dtype=bool)
        factor = 1.0 if self.scale == "counts" else float(self.n)
        for k, table in enumerate(self.statistics.tables.value):
            jk = self.levels[k]
            m[k, :, :jk] = np.asarray(table, dtype=float) * factor
            mask[k, :, :jk] = True
        return m, mask

    def coords(self) -> dict[str, list]:
        return {
            "class": list(self.class_labels) if self.class_labels else list(range(self.classes)),
            "feature": list(self.feature_names) if self.feature_names else list(range(self.K)),
            "level": list(range(max(self.levels))),
        }


def sensitivity_for(scale: str, n: int, K: int) -> float:
    """L1 sensitivity of one release of the tables (n public, one record changed)."""
    return 2.0 if scale == "counts" else 2.0 * K / n


# -- prior ------------------------------------------------------------------------------

@dataclass
class DirichletPrior:
    """Dirichlet priors on p (``class_alpha``, shape (I,)) and each p^k_i. (``feature_alpha``,
    shape (K, I, Jmax), NaN where level j does not exist).  ``uniform`` holds the common alpha
    while the shape is unknown (no release yet); :meth:`resolve` fixes the shape."""

    uniform: float | None = 1.0
    class_alpha: np.ndarray | None = None
    feature_alpha: np.ndarray | None = None

    @property
    def resolved(self) -> bool:
        return self.class_alpha is not None

    def resolve(self, classes: int, levels: list[int], field: str = "prior.alpha") -> "DirichletPrior":
        K, jmax = len(levels), max(levels)
        if self.resolved:
            if self.class_alpha.shape != (classes,):
                raise InputError(f"{field}.class", f"expected {classes} values (classes), got {self.class_alpha.shape[0]}")
            if self.feature_alpha.shape[:2] != (K, classes):
                raise InputError(f"{field}.features",
                                 f"expected {K} x {classes} rows (features x classes), got "
                                 f"{self.feature_alpha.shape[0]} x {self.feature_alpha.shape[1]}")
            for k, jk in enumerate(levels):
                row = self.feature_alpha[k, 0]
                got = int(np.sum(np.isfinite(row)))
                if got != jk:
                    raise InputError(f"{field}.features", f"feature {k}: expected {jk} values per class, got {got}")
            fa = np.full((K, classes, jmax), np.nan)
            fa[:, :, : self.feature_alpha.shape[2]] = self.feature_alpha[:, :, :jmax]
            # a resolved uniform prior stays described as uniform (parsing a parsed prior changes nothing)
            return DirichletPrior(uniform=self.uniform, class_alpha=self.class_alpha.copy(), feature_alpha=fa)
        fa = np.full((K, classes, jmax), np.nan)
        for k, jk in enumerate(levels):
            fa[k, :, :jk] = self.uniform
        return DirichletPrior(uniform=self.uniform, class_alpha=np.full(classes, float(self.uniform)), feature_alpha=fa)

    def feature_alpha_filled(self) -> np.ndarray:
        """feature_alpha with 0 in place of NaN padding (for vectorised arithmetic under a mask)."""
        return np.nan_to_num(self.feature_alpha, nan=0.0)

    def to_dict(self) -> dict:
        """The analysis-file ``[prior]`` form (parse_prior(to_dict()) gives this prior back)."""
        if self.uniform is not None:
            return {"kind": "dirichlet", "alpha": float(self.uniform)}
        features = [[[float(a) for a in row if np.isfinite(a)] for row in table] for table in self.feature_alpha]
        return {"kind": "dirichlet", "alpha": {"class": [float(a) for a in self.class_alpha], "features": features}}

    def describe(self) -> str:
        if self.uniform is not None:
            return f"dirichlet(alpha={self.uniform:g})"
        return "dirichlet(structured alpha)"


def _positive(x, field: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise InputError(field, f"must be a finite number > 0 (got {x!r})")
    return float(x)


def parse_prior(prior, release=None) -> DirichletPrior:
    """``None`` (uniform Dirichlet(1)), ``{"kind": "dirichlet", "alpha": a}`` or
    ``{"kind": "dirichlet", "alpha": {"class": [..I..], "features": [k][i][j]}}``, or a DirichletPrior."""
    if prior is None:
        obj = DirichletPrior(uniform=1.0)
    elif isinstance(prior, DirichletPrior):
        obj = prior
    elif isinstance(prior, dict):
        unknown = set(prior) - {"kind", "alpha"}
        if unknown:
            raise InputError(f"prior.{sorted(unknown)[0]}", "unknown key for family 'naive-bayes' (kind, alpha)")
        kind = prior.get("kind", "dirichlet")
        if kind != "dirichlet":
            raise InputError("prior.kind", f"must be 'dirichlet' for family 'naive-bayes' (got {kind!r})")
        alpha = prior.get("alpha", 1.0)
        if isinstance(alpha, dict):
            obj = _structured_alpha(alpha)
        else:
            obj = DirichletPrior(uniform=_positive(alpha, "prior.alpha"))
    else:
        raise InputError("prior", f"must be a table (kind, alpha) for family 'naive-bayes', got {type(prior).__name__}")
    if release is not None:
        obj = obj.resolve(release.classes, release.levels)
    return obj


def _structured_alpha(alpha: dict) -> DirichletPrior:
    unknown = set(alpha) - {"class", "features"}
    if unknown or "class" not in alpha or "features" not in alpha:
        raise InputError("prior.alpha", "a structured alpha needs exactly the keys 'class' and 'features'")
    cls = alpha["class"]
    if not isinstance(cls, list) or len(cls) < 2:
        raise InputError("prior.alpha.class", "must be a list of at least 2 numbers > 0")
    class_alpha = np.array([_positive(x, "prior.alpha.class") for x in cls])
    feats = alpha["features"]
    if not isinstance(feats, list) or not feats:
        raise InputError("prior.alpha.features", "must be a list (one entry per feature) of [class][level] lists")
    rows = []
    for k, table in enumerate(feats):
        if not isinstance(table, list) or len(table) != len(cls):
            raise InputError("prior.alpha.features", f"feature {k}: expected {len(cls)} rows (one per class)")
        lens = {len(r) if isinstance(r, list) else -1 for r in table}
        if len(lens) != 1 or min(lens) < 2:
            raise InputError("prior.alpha.features", f"feature {k}: every row must list the same >= 2 numbers")
        rows.append([[_positive(x, "prior.alpha.features") for x in r] for r in table])
    jmax = max(len(t[0]) for t in rows)
    fa = np.full((len(rows), len(cls), jmax), np.nan)
    for k, t in enumerate(rows):
        fa[k, :, : len(t[0])] = np.asarray(t)
    return DirichletPrior(uniform=None, class_alpha=class_alpha, feature_alpha=fa)


# -- curator ---------------------------------------------------------------------------

#: the naive-bayes curator's typed options (docs/cli.md, "Curator options")
NaiveBayesCuratorOptions = curator_options("naive-bayes", "rho", "columns", "scale", "mechanism", module=__name__)


@curator(NaiveBayesCuratorOptions)
def curate(frame, options) -> dict:
    """CSV of categorical columns -> release.  ``--columns Y,X1,...`` (class first), ``--scale``.

    The level sets are taken from the data and treated as public (a codebook); a curator
    whose level sets are themselves confidential must recode the columns first.
    """

    scale = options.scale or "counts"
    if scale not in SCALES:
        raise InputError("scale", f"must be 'counts' or 'proportions' (got {scale!r})")
    mechanism = options.mechanism or "laplace"
    if not accepts_mechanism(mechanism):
        raise InputError("mechanism", f"naive-bayes tables are released with one of {', '.join(NB_MECHANISMS)} "
                         "or a registered integer noise law")
    kind = get_mechanism(mechanism)
    if kind.integer_valued and scale != "counts":
        raise InputError("scale", f"integer noise ({mechanism}) is released on counts: use --scale counts")
    cols = options.columns
    tables, labels, n = class_feature_tables(frame, cols, "naive-bayes")
    K = len(tables)
    if kind.accounts_rho:
        # one replaced record moves one cell pair in each of the K tables: L2 sqrt(2K); --rho is the total
        sens = math.sqrt(2.0 * K)
        note = "rho is the total over the K tables (L2 sensitivity sqrt(2K))"
    else:
        sens = sensitivity_for(scale, n, K)
        note = ("epsilon per table; K tables compose to K*epsilon" if scale == "counts"
                else "epsilon is the total over the K proportion tables")
    noise, budget = kind.noise_for_budget(sens, epsilon=options.epsilon, rho=options.rho)
    # one call draws the noise of every cell of every table (independent noise of one scale each)
    flat = np.concatenate([(t if scale == "counts" else t / n).ravel() for t in tables])
    out, sampler = draw_noise(mechanism, flat, noise, options.seed)
    if kind.integer_valued:
        out = np.round(out).astype(int)  # integer noise on integer counts: already integers
    noisy, start = [], 0
    for t in tables:
        noisy.append(out[start:start + t.size].reshape(t.shape).tolist())
        start += t.size
    return {
        "format": FORMAT,
        "family": "naive-bayes",
        "n": int(n),
        "classes": len(labels[0]),
        "levels": [len(lab) for lab in labels[1:]],
        "class_name": cols[0],
        "class_labels": labels[0],
        "feature_names": list(cols[1:]),
        "level_labels": labels[1:],
        "statistics": {"tables": {
            "value": noisy, "mechanism": mechanism, **budget, "sensitivity": sens,
            "scale": scale, "sampler": sampler, "note": note,
        }},
    }


# -- simulation (for ``dpposterior calibrate`` and the benchmarks) ---------------------------

def draw_parameters(prior: DirichletPrior, rng) -> tuple[np.ndarray, np.ndarray]:
    """(class_prob (I,), feature_prob (K, I, Jmax) NaN-padded) from the prior."""
    class_prob = rng.dirichlet(prior.class_alpha)
    fa = prior.feature_alpha
    feature_prob = np.full(fa.shape, np.nan)
    for k in range(fa.shape[0]):
        jk = int(np.sum(np.isfinite(fa[k, 0])))
        for i in range(fa.shape[1]):
            feature_prob[k, i, :jk] = rng.dirichlet(fa[k, i, :jk])
    return class_prob, feature_prob


def draw_tables(class_prob, feature_prob, n: int, rng) -> np.ndarray:
    """Confidential counts n^k_ij, shape (K, I, Jmax) (0 in padding), as in Karwa et al. Sec. 5 steps 3-4."""
    class_counts = rng.multinomial(n, class_prob)
    K, I, jmax = feature_prob.shape
    tables = np.zeros((K, I, jmax))
    for k in range(K):
        jk = int(np.sum(np.isfinite(feature_prob[k, 0])))
        for i in range(I):
            tables[k, i, :jk] = rng.multinomial(class_counts[i], feature_prob[k, i, :jk])
    return tables


def release_from_tables(tables: np.ndarray, levels: list[int], n: int, epsilon: float, rng,
                        scale: str = "counts") -> dict:
    """Release dict of confidential tables (K, I, Jmax) with numpy Laplace noise."""
    K = len(levels)
    b = sensitivity_for(scale, n, K) / epsilon
    values = []
    for k, jk in enumerate(levels):
        t = tables[k, :, :jk] if scale == "counts" else tables[k, :, :jk] / n
        values.append((t + rng.laplace(0.0, b, size=t.shape)).tolist())
    return {
        "format": FORMAT, "family": "naive-bayes", "n": int(n), "classes": int(tables.shape[1]),
        "levels": [int(j) for j in levels],
        "statistics": {"tables": {"value": values, "mechanism": "laplace", "epsilon": float(epsilon),
                                  "sensitivity": sensitivity_for(scale, n, K), "scale": scale,
                                  "sampler": f"numpy-{np.__version__} (simulation)"}},
    }


def simulate(prior, n: int, epsilon: float, rng, *, classes: int = 2, levels=(2, 2),
             scale: str = "counts") -> SimulatedRelease:
    """theta ~ prior, tables ~ model, release through the Laplace mechanism (Karwa et al. Sec. 5).

    The shape comes from a structured prior if given, else ``classes`` / ``levels``
    (default I = K = J = 2, as in Xiong et al. App. E.3).  ``epsilon`` is per table for
    ``scale="counts"``.  ``theta`` is keyed by the posterior variable names.
    """

    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError("n", f"must be an integer >= 1 (got {n!r})")
    p = parse_prior(prior, None)
    if p.resolved:
        classes = p.class_alpha.shape[0]
        levels = [int(np.sum(np.isfinite(p.feature_alpha[k, 0]))) for k in range(p.feature_alpha.shape[0])]
    p = p.resolve(classes, list(levels))
    class_prob, feature_prob = draw_parameters(p, rng)
    tables = draw_tables(class_prob, feature_prob, int(n), rng)
    release = load_release(release_from_tables(tables, list(levels), int(n), epsilon, rng, scale))
    return SimulatedRelease(theta={"class_prob": class_prob, "feature_prob": feature_prob}, release=release,
                            confidential={"tables": tables})


# ------------------------------------------------------------------ record model (da-mcmc)
def tables_record_model(name, n, classes, levels, alpha_class, alpha_feat, mechanism, unit, observed,
                  class_var, feat_var, dims, coords):
    """Records (y, x_1..x_K) with the K two-way tables as the statistic; ``unit`` = 1 (counts)
    or 1/n (proportions).  ``alpha_feat[k]`` is (classes, J_k).  Shared with the loglinear family."""
    from scipy import stats

    from ..model import Model

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
        draw = {"class_prob": dirichlet_draw(alpha_class + np.bincount(x[:, 0], minlength=classes), rng)}
        for k in range(K):
            cell = np.bincount(x[:, 0] * levels[k] + x[:, k + 1], minlength=classes * levels[k])
            cell = cell.reshape(classes, levels[k])
            for i in range(classes):
                draw[f"f{k}_{i}"] = dirichlet_draw(alpha_feat[k][i] + cell[i], rng)
        return draw

    class _TablesModel(Model):
        # each feature's levels sum to one per class (NaN beyond its own levels): "unit", as the family's model says
        derived_support = {feat_var: "unit"}

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


def dirichlet_draw(alpha, rng):
    g = rng.standard_gamma(alpha)
    return g / g.sum()


def da_model(release, prior):
    """The record model of data-augmentation MCMC (``da-mcmc``; Ju, Awan, Gong & Rao 2022): ``(Model, observed)``
    (Karwa, Kifer & Slavkovic Sec. 4): a record is (y, x_1..x_K); t(x_i) = the
    indicators of its K cells (y, x_k) on the release's scale; p | x and each table row | x are Dirichlet."""

    prior = parse_prior(prior, release)
    I, levels, n = release.classes, list(release.levels), release.n
    rec = release.statistics.tables
    alpha_feat = [[prior.feature_alpha[k, i, :jk] for i in range(I)] for k, jk in enumerate(levels)]
    unit = 1.0 if release.scale == "counts" else 1.0 / n
    observed = np.concatenate([np.asarray(v, float).ravel() for v in rec.value])
    dims = {"class_prob": ["class"], "feature_prob": ["feature", "class", "level"]}
    # every cell gets the tables' noise on the release's scale (Laplace: sensitivity / epsilon per table for counts)
    return tables_record_model("naive-bayes", n, I, levels, np.asarray(prior.class_alpha, float), alpha_feat,
                               release.mechanism, unit, observed, "class_prob", "feature_prob", dims,
                               release.coords())


# ------------------------------------------------------------------ observation model
@dataclass(frozen=True)
class TwoWayTable:
    """The query of released table k: the confidential counts n^k_ij (classes x levels[k]) of the latent
    tables (K, I, Jmax, zero-padded), times ``unit`` (1 for counts, 1/n for proportions)."""

    feature: int
    classes: int
    levels: int
    unit: float = 1.0

    @property
    def shape(self) -> tuple[int, int]:
        return (self.classes, self.levels)

    def __call__(self, tables) -> np.ndarray:
        return np.asarray(tables, float)[..., self.feature, :, :self.levels] * self.unit


@dataclass(frozen=True)
class NaiveBayesTables:
    """The latent statistic: the K confidential two-way tables of n records, shape (K, I, Jmax) padded with 0."""

    n: int
    classes: int
    levels: tuple[int, ...]

    def simulate(self, class_prob, feature_prob, rng) -> np.ndarray:
        """One draw of the tables given the parameters (class counts, then each class's feature counts)."""
        return draw_tables(np.asarray(class_prob, float), np.asarray(feature_prob, float), self.n, rng)


def prior_log_density(prior: DirichletPrior, class_prob, feature_prob) -> float:
    """log Dir(class_prob | class_alpha) + sum_k,i log Dir(feature_prob[k, i, :J_k] | feature_alpha[k, i, :J_k])."""
    from scipy import stats

    total = float(stats.dirichlet.logpdf(np.asarray(class_prob, float), prior.class_alpha))
    feature_prob = np.asarray(feature_prob, float)
    for k in range(prior.feature_alpha.shape[0]):
        jk = int(np.sum(np.isfinite(prior.feature_alpha[k, 0])))
        for i in range(prior.feature_alpha.shape[1]):
            total += float(stats.dirichlet.logpdf(feature_prob[k, i, :jk], prior.feature_alpha[k, i, :jk]))
    return total


def observation_model(release: NaiveBayesRelease, prior=None) -> ObservationModel:
    """The release as K measurements, one per noisy two-way table, of the confidential tables of n records.

    Variables ``class_prob`` (class) and ``feature_prob`` (feature, class, level; NaN at the levels a feature
    lacks), labelled by :meth:`NaiveBayesRelease.coords`; ``prior``: a :class:`DirichletPrior` or anything
    :func:`parse_prior` reads."""
    prior = parse_prior(prior, release)
    rec = release.statistics.tables
    mechanism = release.mechanism
    unit = 1.0 if release.scale == "counts" else 1.0 / release.n
    levels = tuple(int(j) for j in release.levels)
    measurements = tuple(
        Measurement(f"statistics.tables.value[{k}]", np.asarray(table, float),
                    TwoWayTable(k, release.classes, jk, unit), mechanism)
        for k, (table, jk) in enumerate(zip(rec.value, levels)))
    # records: da-mcmc moves one record at a time (da_model); enumerate: the exact engines enumerate the
    # latent tables; simulate: draw_tables.  No engine uses the tables' moments.
    latent = LatentStatistic(f"the {len(levels)} class-by-feature tables of {release.n} records",
                             frozenset({RECORDS, ENUMERATE, SIMULATE}),
                             NaiveBayesTables(int(release.n), int(release.classes), levels))
    coords = release.coords()
    # feature_prob sums to one over its last axis only (a simplex per class and feature, NaN-padded), which no
    # support name says: "unit" is what holds for every cell
    variables = (Variable("class_prob", ("class",), {"class": coords["class"]}, "simplex"),
                 Variable("feature_prob", ("feature", "class", "level"), coords, "unit"))

    def sample(rng):
        class_prob, feature_prob = draw_parameters(prior, rng)
        return {"class_prob": class_prob, "feature_prob": feature_prob}

    def log_density(values):
        return prior_log_density(prior, values["class_prob"], values["feature_prob"])

    return ObservationModel("naive-bayes", variables, Prior(sample, prior.to_dict(), log_density, prior.describe()),
                            latent, measurements, int(release.n))


#: the module of the variational engine and its baselines
_VB = "dpposterior.inference.naive_bayes_vb"

def table_draw_values(release) -> int:
    """The values of one posterior draw: every conditional table cell, padded to the most levels (a ragged table is
    stored padded with NaN), plus the class probabilities -- the padded box of the released tables plus its
    longest side."""
    box = padded_shape(release.statistics.tables.value)
    return int(np.prod(box)) + max(box)


FAMILY = Family(
    name="naive-bayes",
    release_model=NaiveBayesRelease,
    methods={
        "vb": EngineSpec.of(_VB, "vb_engine", "VBOptions"),
        "naive": EngineSpec.of(_VB, "naive_engine", "NaiveOptions"),
        "non-private": EngineSpec.of(_VB, "nonprivate_engine", "NonPrivateOptions"),
        "exact-enumeration": EngineSpec.of("dpposterior.inference.naive_bayes_exact", "exact_engine",
                                           "ExactEnumerationOptions"),
        "exact": EngineSpec.of("dpposterior.inference.exact_counts", "exact_naive_bayes", "ExactOptions"),
        "da-mcmc": DA_MCMC,
    },
    hooks={"da_model": da_model, "draw_values": table_draw_values, "observation_model": observation_model},
    auto_method="vb",
    # the variational and enumeration engines of Karwa et al. assume Laplace noise; integer noise -> exact
    auto_rule=lambda release: "vb" if is_continuous_laplace(release.statistics.tables.mechanism) else "exact",
    mechanisms=NB_MECHANISMS,
    parse_prior=parse_prior,
    curate=curate,
    naive_method="naive",
    description="naive Bayes log-linear model from Laplace-noised two-way tables (Karwa, Kifer & Slavkovic)",
    simulate=simulate,
)

# the prior's moments in the posterior's variables, for the prior-equals-posterior check
FAMILY.hooks["prior_moments"] = prior_moments.naive_bayes
