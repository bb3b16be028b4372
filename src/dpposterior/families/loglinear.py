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

``value[k][i][j]`` is the noisy proportion (or count) of (Y = i, X_k = j).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Annotated

from ..errors import InputError
from ..inference.sbi_common import sbi_family
from ..mechanisms import Laplace
from ..release import ReleaseBase, StatisticRecord
from ..sbi import DirichletALRPrior, SimulatorModel
from . import SimulatedRelease


class LoglinearStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tables: StatisticRecord


class LoglinearRelease(ReleaseBase):
    family: Literal["loglinear"]
    n: Annotated[int, Field(strict=True, ge=1)]
    classes: Annotated[int, Field(strict=True, ge=2)]
    levels: list[Annotated[int, Field(strict=True, ge=2)]]
    statistics: LoglinearStatistics

    @model_validator(mode="after")
    def _check(self):
        rec = self.statistics.tables
        if rec.mechanism != "laplace":
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
    from ..release import load_release

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


FAMILY = sbi_family("loglinear", LoglinearRelease, parse_prior, simulate, sbi_model,
                    "naive Bayes log-linear model by simulation-based inference (Xiong, Ju & Zhang App. E.3)")
