"""Family ``loglinear``: the naive Bayes log-linear model of Xiong, Ju & Zhang App. E.3, for SBI.

Class Y in {1..I}, features X_1..X_K with J_k levels; p_i = P(Y = i) ~ Dirichlet(alpha),
p^k_{i.} = P(X_k = . | Y = i) ~ Dirichlet(alpha) (alpha = 2 in the paper).  Data:
(n_1..n_I) ~ Multinomial(n, p), (n^k_{i1}..n^k_{iJ}) ~ Multinomial(n_i, p^k_{i.}).
Release: the two-way tables n^k_{ij}, as proportions n^k_{ij}/n with Laplace noise of
scale 2K/(n epsilon) (total epsilon) -- or as counts (``"scale": "counts"``, noise
scale sensitivity/epsilon).  The flows work in unconstrained additive-log-ratio
coordinates of every simplex, with the Jacobian in the prior density
(:class:`~dpposterior.sbi.DirichletALRPrior`).  Outputs ``class_prob`` (dim ``class``)
and ``feature_prob`` (dims ``feature``, ``class``, ``level``; ragged levels padded
with NaN), as in the ``naive-bayes`` family.  This module is self-contained: it
shares no code with ``naive-bayes``.

Release file::

    {"format": "dpposterior-release/1", "family": "loglinear", "n": 100, "classes": 2, "levels": [2, 2],
     "statistics": {"tables": {"value": [[[r111, r112], [r121, r122]], [[...], [...]]],
                               "mechanism": "laplace", "epsilon": 10.0, "sensitivity": 0.04,
                               "scale": "proportions"}}}

``value[k][i][j]`` is the noisy proportion (or count) of (Y = i, X_k = j).  Optional
``class_name``, ``class_labels``, ``feature_names``, ``level_labels`` (written by the curator)
say what the 0-based indices stand for.

Curator (:func:`curate`, ``dpposterior release DATA.csv --family loglinear --columns Y,X1,...
--epsilon E [--scale proportions|counts]``): categorical records -> the K tables with
Laplace(2K/(n epsilon)) noise on the proportions (counts: Laplace(2K/epsilon), sensitivity 2K),
``epsilon`` the total; noise from OpenDP (numpy with ``--seed``) via ``mechanisms.draw_noise``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Annotated

from . import SimulatedRelease
from ..errors import InputError
from ..mechanisms import Laplace, draw_noise
from ..release import (ReleaseBase, StatisticRecord, load_release, padded_shape, require_noise_at_least,
                       require_within_reach)
from ..sbi import DirichletALRPrior, SimulatorModel
from ._curate import class_feature_tables, curator, curator_options
from ._simulator import sbi_family

#: the mechanism of the released tables (Xiong, Ju & Zhang App. E.3: Laplace noise)
LOGLINEAR_MECHANISMS = ("laplace",)


class LoglinearStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tables: StatisticRecord


class LoglinearRelease(ReleaseBase):
    family: Literal["loglinear"]
    n: Annotated[int, Field(strict=True, ge=1)]
    classes: Annotated[int, Field(strict=True, ge=2)]
    levels: list[Annotated[int, Field(strict=True, ge=2)]]
    statistics: LoglinearStatistics
    #: optional public codebook written by the curator: what the 0-based indices stand for
    class_name: str | None = None
    class_labels: list[str] | None = None
    feature_names: list[str] | None = None
    level_labels: list[list[str]] | None = None

    @classmethod
    def model_validate(cls, obj, *args, **kwargs):
        release = super().model_validate(obj, *args, **kwargs)
        rec = release.statistics.tables
        K = len(release.levels)
        required = proportion_sensitivity(release.n, K) if rec.scale == "proportions" else count_sensitivity(K)
        require_noise_at_least("release.statistics.tables.sensitivity", rec.sensitivity, required,
                               f"sensitivity ({rec.scale})", release)
        # every cell counts records (or their proportion): in [0, n] (or [0, 1]) before the noise
        top = float(release.n) if rec.scale == "counts" else 1.0
        require_within_reach("release.statistics.tables.value", release.flat_value(), 0.0, top,
                             rec.sensitivity / rec.epsilon, f"a table cell of {release.n} records ({rec.scale})")
        return release

    @model_validator(mode="after")
    def _check(self):
        if self.class_labels is not None and len(self.class_labels) != self.classes:
            raise ValueError(f"class_labels must have {self.classes} entries (classes)")
        if self.feature_names is not None and len(self.feature_names) != len(self.levels):
            raise ValueError(f"feature_names must have {len(self.levels)} entries (one per feature)")
        if self.level_labels is not None:
            if len(self.level_labels) != len(self.levels):
                raise ValueError(f"level_labels must have {len(self.levels)} lists (one per feature)")
            for k, labels in enumerate(self.level_labels):
                if len(labels) != self.levels[k]:
                    raise ValueError(f"level_labels[{k}] must have {self.levels[k]} entries (levels[{k}])")
        rec = self.statistics.tables
        if rec.mechanism not in LOGLINEAR_MECHANISMS:
            raise ValueError("statistics.tables.mechanism must be 'laplace'")
        if rec.sensitivity is None:
            raise ValueError("statistics.tables.sensitivity is required")
        if rec.scale not in ("proportions", "counts"):
            raise ValueError("statistics.tables.scale must be 'proportions' or 'counts'")
        if len(self.levels) < 1:
            raise ValueError("levels must list at least one feature")
        value = rec.value
        if not isinstance(value, list) or len(value) != len(self.levels):
            raise ValueError(f"statistics.tables.value must hold one table per feature ({len(self.levels)})")
        for k, table in enumerate(value):
            if not isinstance(table, list) or len(table) != self.classes:
                raise ValueError(f"statistics.tables.value[{k}] must have {self.classes} rows (classes)")
            for i, row in enumerate(table):
                if not isinstance(row, list) or len(row) != self.levels[k]:
                    raise ValueError(f"statistics.tables.value[{k}][{i}] must have {self.levels[k]} entries")
        return self

    def flat_value(self) -> np.ndarray:
        return np.concatenate([np.asarray(t, float).ravel() for t in self.statistics.tables.value])


def proportion_sensitivity(n: int, features: int) -> float:
    """L1 sensitivity 2K/n of the K proportion tables (App. E.3)."""
    return 2.0 * features / n


def count_sensitivity(features: int) -> float:
    """L1 sensitivity 2K of the K count tables together (n public: a changed record moves one
    unit between two cells of every table), so ``epsilon`` stays the total, as for proportions."""
    return 2.0 * features


def parse_prior(prior, release=None):
    classes = release.classes if release is not None else 2
    levels = list(release.levels) if release is not None else [2, 2]
    if isinstance(prior, DirichletALRPrior):
        return prior
    alpha = 2.0
    if prior is not None:
        if not isinstance(prior, dict):
            raise InputError("prior", "must be a table with key alpha")
        unknown = set(prior) - {"alpha", "kind"}
        if unknown:
            raise InputError(f"prior.{sorted(unknown)[0]}", "unknown key (use alpha)")
        alpha = prior.get("alpha", alpha)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not np.isfinite(alpha) or alpha <= 0:
            raise InputError("prior.alpha", "must be a positive number")
    alphas = [[float(alpha)] * classes]
    for jk in levels:
        alphas += [[float(alpha)] * jk for _ in range(classes)]
    return DirichletALRPrior(alphas)


def _unpack(prior: DirichletALRPrior, theta, classes, levels):
    """theta (n, d) -> class probs (n, I), list over k of (n, I, J_k)."""
    parts = prior.simplices(theta)
    class_prob = parts[0]
    feats, pos = [], 1
    for jk in levels:
        feats.append(np.stack(parts[pos:pos + classes], axis=1))
        pos += classes
    return class_prob, feats


def sbi_model(release: LoglinearRelease, prior: DirichletALRPrior) -> SimulatorModel:
    classes, levels, n = release.classes, list(release.levels), release.n
    expected = 1 + classes * len(levels)
    if len(prior.alphas) != expected:
        raise InputError("prior", f"needs {expected} Dirichlet simplices for this release")
    rec = release.statistics.tables
    proportions = rec.scale == "proportions"
    jmax = max(levels)

    def simulate(theta, rng):
        class_prob, feats = _unpack(prior, theta, classes, levels)
        counts_y = rng.multinomial(n, class_prob)                          # (B, I)
        out = []
        for fp in feats:
            tab = rng.multinomial(counts_y, fp)                             # (B, I, J_k)
            out.append(tab.reshape(len(theta), -1))
        s = np.concatenate(out, axis=1).astype(float)
        return s / n if proportions else s

    def outputs(theta):
        class_prob, feats = _unpack(prior, theta, classes, levels)
        fp = np.full((len(theta), len(levels), classes, jmax), np.nan)
        for k, f in enumerate(feats):
            fp[:, k, :, :f.shape[-1]] = f
        return ({"class_prob": class_prob, "feature_prob": fp},
                {"class_prob": ["class"], "feature_prob": ["feature", "class", "level"]},
                {"class": list(range(classes)), "feature": list(range(len(levels))), "level": list(range(jmax))})

    names = ["alr_class"] + [f"alr_f{k}_c{i}_{j}" for k, jk in enumerate(levels) for i in range(classes)
                             for j in range(jk - 1)]
    return SimulatorModel(prior=prior, mechanism=Laplace(rec.epsilon, rec.sensitivity),
                          observed=release.flat_value(), simulate=simulate, parameter_names=names,
                          outputs=outputs, name="loglinear")


def make_release(tables, epsilon: float, n: int = 100, classes: int = 2, levels=(2, 2),
                 description: str | None = None) -> dict:
    rel = {"format": "dpposterior-release/1", "family": "loglinear", "n": n, "classes": classes,
           "levels": list(levels),
           "statistics": {"tables": {"value": tables, "mechanism": "laplace", "epsilon": float(epsilon),
                                     "sensitivity": proportion_sensitivity(n, len(levels)),
                                     "scale": "proportions"}}}
    if description:
        rel["description"] = description
    return rel


def simulate(prior, n, epsilon, rng) -> SimulatedRelease:
    base = load_release(make_release([[[0.25, 0.25], [0.25, 0.25]]] * 2, epsilon, n))
    prior = parse_prior(prior, base)
    model = sbi_model(base, prior)
    theta = prior.sample(1, rng)
    s = model.statistics(theta, rng)[0]
    noisy = model.privatize(s, rng)
    tables = noisy.reshape(2, 2, 2).tolist()
    post, _, _ = model.posterior_variables(theta)
    return SimulatedRelease(theta={k: v[0] for k, v in post.items()},
                            release=load_release(make_release(tables, epsilon, n)), confidential={"s": s})


#: the loglinear curator's typed options (docs/cli.md, "Curator options")
LoglinearCuratorOptions = curator_options("loglinear", "columns", "scale", "mechanism", module=__name__)


@curator(LoglinearCuratorOptions)
def curate(frame, options) -> dict:
    """Curator (App. E.3): CSV records -> ``loglinear`` release.  ``--columns Y,X1,...`` (class
    first), ``--scale proportions`` (default, the paper's) or ``counts``.

    Every column is categorical (binary or more levels); the level sets are read from the
    data and treated as public (a codebook, written as ``class_labels`` / ``level_labels``,
    levels sorted: numbers first, then strings) -- a curator whose level sets are confidential
    must recode the columns first.  Noise: Laplace(2K/(n epsilon)) on every proportion (or
    Laplace(2K/epsilon) on every count); ``epsilon`` is the total over the K tables.
    """

    if options.mechanism not in (None, *LOGLINEAR_MECHANISMS):
        raise InputError("mechanism", "loglinear tables are released with the Laplace mechanism only")
    scale = options.scale or "proportions"
    if scale not in ("proportions", "counts"):
        raise InputError("scale", f"must be 'proportions' or 'counts' (got {scale!r})")
    cols = list(options.columns or [])
    tables, labels, n = class_feature_tables(frame, cols, "loglinear")
    classes = len(labels[0])
    features = len(tables)
    sens = proportion_sensitivity(n, features) if scale == "proportions" else count_sensitivity(features)
    # one call draws independent Laplace(sens/epsilon) noise for every cell of every table
    flat = np.concatenate([(t / n if scale == "proportions" else t).ravel() for t in tables])
    noisy_flat, sampler = draw_noise("laplace", flat, sens / float(options.epsilon), options.seed)
    noisy, start = [], 0
    for t in tables:
        noisy.append(noisy_flat[start:start + t.size].reshape(t.shape).tolist())
        start += t.size
    return {"format": "dpposterior-release/1", "family": "loglinear", "n": int(n), "classes": classes,
            "levels": [len(lab) for lab in labels[1:]],
            "class_name": str(cols[0]), "class_labels": labels[0],
            "feature_names": [str(c) for c in cols[1:]], "level_labels": labels[1:],
            "statistics": {"tables": {"value": noisy, "mechanism": "laplace", "epsilon": float(options.epsilon),
                                      "sensitivity": sens, "scale": scale, "sampler": sampler,
                                      "note": "epsilon is the total over the K tables"}}}


def da_model(release, prior):
    """The record model of data-augmentation MCMC (``da-mcmc``; Ju, Awan, Gong & Rao 2022): ``(Model, observed)``: records (y, x_1..x_K), the K two-way tables (Xiong et al. App. E.3)."""
    from .naive_bayes import tables_record_model

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
    return tables_record_model("loglinear", n, I, levels, alpha_class, alpha_feat, Laplace(rec.epsilon, rec.sensitivity),
                         unit, observed, "class_prob", "feature_prob", dims, coords)


FAMILY = sbi_family("loglinear", LoglinearRelease, parse_prior, simulate, sbi_model,
                    "naive Bayes log-linear model by simulation-based inference (Xiong, Ju & Zhang App. E.3)",
                    curate=curate, da_model=da_model, mechanisms=LOGLINEAR_MECHANISMS)


def draw_values(release) -> int:
    """The values of one draw (``api.check_stored_draws``): the conditional tables padded to the most levels
    (ragged levels are stored padded with NaN) plus the class probabilities."""
    box = padded_shape(release.statistics.tables.value)
    return int(np.prod(box)) + max(box)


FAMILY.hooks["draw_values"] = draw_values
