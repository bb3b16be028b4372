"""Family ``marginals``: many noisy marginal tables of one categorical table (OpenDP's MST/AIM contingency
tables, Private-PGM, the Census noisy measurements).

The release (docs/marginals.md; the contract)::

    {"format": "dpposterior-release/1", "family": "marginals", "n": 48842,
     "domain": {"age": 5, "sex": 2, "income": 2},
     "measurements": [
       {"clique": ["age", "income"], "value": [[...], ...], "mechanism": "discrete-gaussian", "sigma": 12.0},
       {"clique": ["sex"], "value": [...], "mechanism": "discrete-laplace", "epsilon": 0.5, "sensitivity": 2}]}

Each measurement is the count table of its clique (C order over the clique's attributes) plus noise of a
registered mechanism.  Replacing one record moves one count of every marginal down by one and another up by one:
L1 sensitivity 2, L2 sensitivity sqrt(2), L-infinity 1, the same worst pair for every measurement at once, so the
release's privacy is the composition of every measurement's worst pair (``ReleaseBase.privacy``).

Model: n records x_i ~ p, p Markov with respect to the triangulated graph of the measured cliques (a decomposable
log-linear model, the maximum-entropy model of the measured marginals), with the hyper-Dirichlet prior of Dawid &
Lauritzen (1993) of total concentration A (``prior.concentration``; alpha_C(x_C) = A / |dom C|), by default
A = min(cells of the largest clique, max(1, n / 50)): a uniform Dirichlet on the largest clique's table where that
weighs at most 2% of the records, sparser beyond.
Posterior variables: the joint table of each clique of the junction tree, ``p[a,b]`` with dims (a, b).
The latent statistic is the confidential records (their marginal tables are the exact integer counts), which the
``da`` engine resamples one attribute at a time given every measurement's exact noise law.

The log-linear prior (``prior.kind = "log-linear"``): p(x) proportional to exp(sum_m lambda_m(x_m)) over the
measured cliques m (and the prior's ``cliques``), each log-potential cell lambda_m(x_m) independent N(0, s^2)
(``prior.scale``, default NAPSU-MQ's s = 10: Räisä, Jälkö, Kaski & Honkela, AISTATS 2023, Sec. 3).  This is the
maximum-entropy model itself, not its decomposable cover: where the measured cliques form a cycle (a triangle of
pairs) it has no interaction beyond the measured ones, where the hyper-Dirichlet's cover holds the triangle's whole
three-way table.  It has no conjugate update, so only ``clt`` samples it; the posterior variables are the same
clique tables (computed from the potentials by sum-product over the junction tree,
:meth:`JunctionTree.potential_log_conditionals`).

A release without ``n``: the total is a parameter too, with a prior P(n) -- flat (improper) on the integers n >= 1
by default, or uniform on the prior's ``n_range`` [lo, hi] -- and the posterior has a variable ``n``.  The flat
prior gives a proper posterior because every measurement's table sum is n plus noise of finite variance, so the
likelihood in n decays at least as fast as the noise law's tail.  Without an n to scale it by, the default A is the
cells of the largest clique.  ``da`` moves n by birth/death steps on the records
(:mod:`dpposterior.inference.marginals_da`).
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from ..cliques import JunctionTree
from ..errors import InputError
from ..mechanisms.registry import from_record, get_mechanism, is_integer_noise
from ..observation import MOMENTS, RECORDS, SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior, Variable
from ..release import (FORMAT, INCONSISTENCY_SCALES, ReleaseBase, StatisticRecord, record_cost, flag_large_delta,
                       require_noise_at_least)
from . import EngineSpec, Family, SimulatedRelease
from ._curate import curator, curator_options

#: the mechanisms a measurement may name; any other registered integer noise law is accepted too
MARGINAL_MECHANISMS = ("discrete-gaussian", "discrete-laplace", "skellam", "laplace", "gaussian")
#: the replace-one sensitivity of one marginal count table, by the norm a mechanism measures it in
SENSITIVITY = {"L1": 2.0, "L2": math.sqrt(2.0), "Linf": 1.0}
#: the most attributes and the most categories of one attribute a release may declare
MAX_ATTRIBUTES = 64
MAX_CATEGORIES = 100_000
#: the default prior's weight against the records: A is at most this share of n (and at least one pseudo-record)
DEFAULT_PRIOR_SHARE = 0.02
#: the log-linear prior's default sd of each log-potential cell (NAPSU-MQ's ``prior_sigma``)
DEFAULT_LOG_LINEAR_SCALE = 10.0
PRIOR_KINDS = ("hyper-dirichlet", "log-linear")


def default_concentration(tree, n) -> float:
    """A = min(cells of the largest clique, max(1, n / 50)): every clique cell gets alpha >= 1 (a uniform
    Dirichlet on the largest clique, no pull towards sparse tables) unless that would weigh more than 2% of the
    n records; then the prior is the 2% (at least one pseudo-record) spread over the table."""
    largest = max(math.prod(tree.shape(c)) for c in tree.cliques)
    cap = max(1.0, DEFAULT_PRIOR_SHARE * float(n)) if n else float(largest)
    return float(min(float(largest), cap))

PositiveInt = Annotated[int, Field(strict=True, ge=1)]


def accepts_mechanism(name) -> bool:
    return name in MARGINAL_MECHANISMS or is_integer_noise(name)


class MarginalMeasurement(StatisticRecord):
    """One noisy marginal: ``clique`` (attribute names) and its noisy count table ``value``."""

    clique: list[str]

    @field_validator("clique")
    @classmethod
    def _clique(cls, v):
        if not v:
            raise ValueError("must name at least one attribute")
        if any(not isinstance(a, str) or not a for a in v):
            raise ValueError("attribute names must be non-empty strings")
        if len(set(v)) != len(v):
            raise ValueError(f"lists an attribute twice ({', '.join(v)})")
        return v


class MarginalsRelease(ReleaseBase):
    family: Literal["marginals"]
    #: the number of records (public under replace-one); absent: not published
    n: PositiveInt | None = None
    #: attribute -> number of categories (codes 0 .. size-1), in the table's order
    domain: dict[str, PositiveInt]
    #: optional attribute -> one label per code
    labels: dict[str, list[str]] | None = None
    measurements: list[MarginalMeasurement] = Field(min_length=1)
    #: the private selection of the cliques, when the curator chose them (its privacy cost is composed)
    selection: dict[str, Any] | None = None

    @field_validator("domain")
    @classmethod
    def _domain(cls, v):
        if not v:
            raise ValueError("must declare at least one attribute")
        if len(v) > MAX_ATTRIBUTES:
            raise ValueError(f"declares {len(v)} attributes; at most {MAX_ATTRIBUTES}")
        for name, size in v.items():
            if not name or not name.strip():
                raise ValueError("attribute names must be non-empty")
            if size > MAX_CATEGORIES:
                raise ValueError(f"{name}: {size} categories; at most {MAX_CATEGORIES}")
        return v

    @model_validator(mode="after")
    def _check(self):
        if self.labels is not None:
            for name, labels in self.labels.items():
                if name not in self.domain:
                    raise ValueError(f"labels.{name}: not an attribute of domain")
                if len(labels) != self.domain[name]:
                    raise ValueError(f"labels.{name}: has {len(labels)} labels, domain says {self.domain[name]}")
                if len(set(labels)) != len(labels):
                    raise ValueError(f"labels.{name}: must be distinct")
        for j, rec in enumerate(self.measurements):
            where = f"measurements.{j}"
            for a in rec.clique:
                if a not in self.domain:
                    raise ValueError(f"{where}.clique: {a!r} is not an attribute of domain "
                                     f"({', '.join(self.domain)})")
            if not accepts_mechanism(rec.mechanism):
                raise ValueError(f"{where}.mechanism: {rec.mechanism!r} is not a mechanism of this family (one of "
                                 f"{', '.join(MARGINAL_MECHANISMS)} or a registered integer noise law)")
            shape = tuple(self.domain[a] for a in rec.clique)
            try:
                arr = np.asarray(rec.value, dtype=float)
            except ValueError:
                raise ValueError(f"{where}.value: ragged nesting; must be a table of shape {shape}") from None
            if arr.shape != shape:
                raise ValueError(f"{where}.value: has shape {arr.shape}, the clique ({', '.join(rec.clique)}) has "
                                 f"shape {shape}")
            kind = get_mechanism(rec.mechanism)
            derived = SENSITIVITY[kind.sensitivity_norm]
            if rec.sensitivity is not None:
                try:
                    require_noise_at_least(f"{where}.sensitivity", float(rec.sensitivity), derived, release=self)
                except InputError as exc:
                    raise ValueError(f"{exc.field}: {exc.reason}") from None
            else:
                rec.sensitivity = derived
            try:
                mech = from_record(rec, rec.sensitivity)
                scale = float(mech.noise_scale)
            except (InputError, ValueError) as exc:
                raise ValueError(f"{where}: {getattr(exc, 'reason', exc)}") from None
            if self.n is not None:
                lo, hi = -INCONSISTENCY_SCALES * scale, self.n + INCONSISTENCY_SCALES * scale
                bad = (arr < lo) | (arr > hi)
                if bad.any():
                    v = arr[bad].ravel()[0]
                    raise ValueError(f"{where}.value: {v:g} is more than {INCONSISTENCY_SCALES:g} noise scales "
                                     f"({scale:g}) outside [0, n = {self.n}]: the release is inconsistent with n")
        if self.selection is not None:
            from .marginals_select import Selection

            try:
                Selection.check_record(self.selection)
            except InputError as exc:
                raise ValueError(f"selection.{exc.field}: {exc.reason}") from None
        return self

    # ------------------------------------------------------------------ what the engines read
    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(self.domain)

    def label_list(self, attr: str) -> list:
        if self.labels is not None and attr in self.labels:
            return list(self.labels[attr])
        return list(range(self.domain[attr]))

    def mechanism(self, j: int):
        rec = self.measurements[j]
        return from_record(rec, rec.sensitivity)

    def released_tables(self):
        """Each measurement, named by its clique ("age,income"; a clique measured twice gets "#2"), axes the
        clique's attributes."""
        out, seen = [], {}
        for j, rec in enumerate(self.measurements):
            name = ",".join(rec.clique)
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = f"{name}#{seen[name]}"
            out.append((name, self.values(j), [self.mechanism(j)], None, tuple(rec.clique)))
        return out

    def values(self, j: int) -> np.ndarray:
        return np.asarray(self.measurements[j].value, float)

    def privacy(self):
        from ..mechanisms.accounting import PrivacyCost, compose

        delta = self.reporting_delta()
        parts = [record_cost(rec, delta, rec.sensitivity) for rec in self.measurements]
        if self.selection is not None:
            from .marginals_select import Selection

            rho = Selection.privacy_rho(self.selection)
            eps = float(self.selection["rounds"]) * float(self.selection["epsilon_per_round"])
            parts.append(PrivacyCost(eps, 0.0, rho, "zcdp", "private selection of the cliques (exponential "
                                     "mechanism, bounded range: epsilon^2/8-zCDP per round)"))
        return flag_large_delta(compose(parts, delta), self.n)


# --------------------------------------------------------------------------- prior and model
class MarginalsPrior:
    """The hyper-Dirichlet prior (``kind`` "hyper-dirichlet"): total concentration ``concentration`` (A), or the
    log-linear prior (``kind`` "log-linear"): normal log-potentials of sd ``scale`` on the measured cliques; and the
    model's cliques beyond the measured ones (``cliques``).  For ``dpposterior calibrate``: ``domain`` and
    ``measure`` (the cliques a simulated release measures)."""

    def __init__(self, concentration: float | None = None, cliques=(), domain=None, measure=None, n_range=None,
                 kind: str = "hyper-dirichlet", scale: float | None = None):
        self.kind = kind
        #: the log-linear prior's sd of each log-potential cell (None for the hyper-Dirichlet)
        self.scale = (float(scale) if scale is not None else DEFAULT_LOG_LINEAR_SCALE) if kind == "log-linear" \
            else None
        #: None: :func:`default_concentration` of the model's junction tree and n (:meth:`resolved`)
        self.concentration = None if concentration is None else float(concentration)
        self.cliques = tuple(tuple(c) for c in cliques)
        self.domain = dict(domain) if domain is not None else None
        self.measure = [tuple(c) for c in measure] if measure is not None else None
        #: (lo, hi): n uniform on the integers lo..hi, for a release without n (None: flat on n >= 1); for
        #: ``calibrate``, the simulator draws n from it and releases no n
        self.n_range = None if n_range is None else (int(n_range[0]), int(n_range[1]))

    def resolved(self, tree, n) -> "MarginalsPrior":
        """This prior with its concentration fixed for a model (the default's value where none was given)."""
        if self.concentration is not None or self.kind == "log-linear":
            return self
        return MarginalsPrior(default_concentration(tree, n), self.cliques, self.domain, self.measure, self.n_range)

    def potentials(self, measured) -> list[tuple[str, ...]]:
        """The log-linear model's cliques: the measured ones and the prior's, each once (as a set of
        attributes), in that order, less those inside another (a potential on a subset adds no law the larger
        one lacks, only a redundant direction)."""
        out, seen = [], set()
        for c in list(measured) + list(self.cliques):
            if frozenset(c) not in seen:
                seen.add(frozenset(c))
                out.append(tuple(c))
        return [c for c in out if not any(set(c) < set(d) for d in out)]

    def draw_tables(self, tree, measured, rng) -> list[np.ndarray]:
        """One draw of the junction tree's clique tables from this prior."""
        if self.kind == "hyper-dirichlet":
            return tree.prior_draw(self.concentration, rng)
        potentials = self.potentials(measured)
        return log_linear_tables(tree, potentials, [rng.normal(0.0, self.scale, tree.shape(c)) for c in potentials])

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind}
        if self.scale is not None:
            out["scale"] = self.scale
        if self.concentration is not None:
            out["concentration"] = self.concentration
        if self.cliques:
            out["cliques"] = [list(c) for c in self.cliques]
        if self.n_range is not None:
            out["n_range"] = list(self.n_range)
        return out


#: the small table ``dpposterior calibrate --family marginals`` simulates unless the prior says otherwise
SIMULATION_DOMAIN = {"a": 2, "b": 3, "c": 2}
SIMULATION_MEASURE = [("a", "b"), ("b", "c")]


def parse_prior(prior, release=None) -> MarginalsPrior:
    if prior is None:
        out = MarginalsPrior()
    elif isinstance(prior, MarginalsPrior):
        out = prior
    elif isinstance(prior, dict):
        allowed = {"kind", "concentration", "scale", "cliques", "domain", "measure", "n_range"}
        for key in prior:
            if key not in allowed:
                raise InputError(f"prior.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
        kind = prior.get("kind", "hyper-dirichlet")
        if kind not in PRIOR_KINDS:
            raise InputError("prior.kind", f"must be one of {', '.join(repr(k) for k in PRIOR_KINDS)} (got {kind!r})")
        conc = prior.get("concentration")
        if conc is not None and (isinstance(conc, bool) or not isinstance(conc, (int, float)) or not math.isfinite(conc)
                                 or conc <= 0):
            raise InputError("prior.concentration", f"must be a finite number > 0 (got {conc!r})")
        scale = prior.get("scale")
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                                  or not math.isfinite(scale) or scale <= 0):
            raise InputError("prior.scale", f"must be a finite number > 0 (got {scale!r})")
        if kind == "log-linear" and conc is not None:
            raise InputError("prior.concentration", "the log-linear prior has no concentration (its log-potentials "
                                                    "are normal with sd 'scale'); drop it or use kind "
                                                    "'hyper-dirichlet'")
        if kind == "hyper-dirichlet" and scale is not None:
            raise InputError("prior.scale", "the hyper-Dirichlet prior has no scale (its weight is 'concentration'); "
                                            "drop it or use kind 'log-linear'")
        if kind == "log-linear" and prior.get("n_range") is not None:
            raise InputError("prior.n_range", "the log-linear prior is sampled by clt, which needs the release's n; "
                                              "a prior on n needs kind 'hyper-dirichlet' (method da)")
        cliques = prior.get("cliques", [])
        if not isinstance(cliques, list) or not all(isinstance(c, list) and c and all(isinstance(a, str) for a in c)
                                                     for c in cliques):
            raise InputError("prior.cliques", "must be a list of lists of attribute names")
        domain = prior.get("domain")
        if domain is not None and (not isinstance(domain, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in domain.values())):
            raise InputError("prior.domain", "must map attribute names to category counts >= 1")
        measure = prior.get("measure")
        if measure is not None and (not isinstance(measure, list) or not all(isinstance(c, list) and c
                                                                              for c in measure)):
            raise InputError("prior.measure", "must be a list of cliques (lists of attribute names)")
        out = MarginalsPrior(conc, cliques, domain, measure, _parse_n_range(prior.get("n_range")), kind, scale)
    else:
        raise InputError("prior", f"must be a table of prior settings (kind, concentration or scale, cliques; "
                                  f"got {type(prior).__name__})")
    if release is not None:
        if out.n_range is not None and release.n is not None:
            raise InputError("prior.n_range", f"the release states n = {release.n}: a prior on n applies only to a "
                             "release without n; drop n_range")
        for c in out.cliques:
            for a in c:
                if a not in release.domain:
                    raise InputError("prior.cliques", f"{a!r} is not an attribute of the release's domain")
    return out


def _parse_n_range(value):
    """The prior's ``n_range``: [lo, hi], integers with 1 <= lo <= hi (None: not given)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        raise InputError("prior.n_range", f"must be two integers [lo, hi] (got {value!r})")
    lo, hi = int(value[0]), int(value[1])
    if lo < 1 or hi < lo:
        raise InputError("prior.n_range", f"must have 1 <= lo <= hi (got [{lo}, {hi}])")
    return lo, hi


class MarginalQuery:
    """The marginal count table of ``clique`` from records (n, k) of codes in ``attributes`` order."""

    def __init__(self, clique, attributes, sizes):
        self.clique = tuple(clique)
        self.columns = tuple(list(attributes).index(a) for a in self.clique)
        self.shape = tuple(int(sizes[a]) for a in self.clique)

    def __call__(self, records: np.ndarray) -> np.ndarray:
        flat = np.ravel_multi_index(tuple(records[:, c] for c in self.columns), self.shape)
        return np.bincount(flat, minlength=math.prod(self.shape)).reshape(self.shape).astype(float)


def log_linear_tables(tree: JunctionTree, potentials, log_tables) -> list[np.ndarray]:
    """The junction tree's clique tables of p(x) proportional to exp(sum_m log_tables[m](x_m)), ``potentials[m]``
    the attributes of ``log_tables[m]`` (each inside a clique of the tree)."""
    from scipy.special import logsumexp

    phi = tree.log_potentials_on_cliques(potentials, [np.asarray(t, float) for t in log_tables], np)
    return tree.tables_of_conditionals([np.exp(lc) for lc in tree.potential_log_conditionals(phi, np, logsumexp)])


def variable_name(clique) -> str:
    """The posterior variable holding a junction-tree clique's joint table: ``p[age,income]``."""
    return "p[" + ",".join(clique) + "]"


def junction_tree(release: MarginalsRelease, prior: MarginalsPrior) -> JunctionTree:
    cliques = [tuple(m.clique) for m in release.measurements] + list(prior.cliques)
    return JunctionTree.build(release.attributes, cliques, release.domain)


def observation_model(release: MarginalsRelease, prior=None) -> ObservationModel:
    """The release as measurements of the confidential records' marginals under the hyper-Dirichlet model."""
    prior = parse_prior(prior, release)
    tree = junction_tree(release, prior)
    prior = prior.resolved(tree, release.n)
    coords = {a: release.label_list(a) for a in release.attributes}
    variables = tuple(Variable(variable_name(c), tuple(c), {a: coords[a] for a in c}, "simplex")
                      for c in tree.cliques)
    if release.n is None:  # the total is a parameter (its prior: prior.n_range, else flat on n >= 1)
        variables += (Variable("n", (), {}, "positive"),)
    measurements = tuple(Measurement(f"measurements.{j}", release.values(j),
                                     MarginalQuery(m.clique, release.attributes, release.domain), release.mechanism(j))
                         for j, m in enumerate(release.measurements))

    measured = [tuple(m.clique) for m in release.measurements]

    def sample(rng):
        tables = prior.draw_tables(tree, measured, rng)
        out = {variable_name(c): t for c, t in zip(tree.cliques, tables)}
        if release.n is None and prior.n_range is not None:  # the flat prior on n has no draws
            out["n"] = int(rng.integers(prior.n_range[0], prior.n_range[1] + 1))
        return out

    latent = LatentStatistic(f"the {release.n if release.n is not None else 'unknown number of'} records of "
                             f"{len(release.domain)} categorical attributes",
                             frozenset({RECORDS, MOMENTS, SIMULATE}), tree)
    attrs = {"junction_tree": json.dumps(tree.to_record()), "prior": json.dumps(prior.to_dict())}
    if release.n is not None:
        attrs["n"] = int(release.n)
    else:
        attrs["n_prior"] = ("flat on n >= 1" if prior.n_range is None else
                            f"uniform on {prior.n_range[0]}..{prior.n_range[1]}")
    describe = ("hyper-Dirichlet" if prior.kind == "hyper-dirichlet" else
                f"log-linear over the measured cliques, normal(0, {prior.scale:g}) log-potentials")
    return ObservationModel("marginals", variables, Prior(sample, prior.to_dict(), describe=describe),
                            latent, measurements, release.n, attrs)


# --------------------------------------------------------------------------- simulation (calibrate)
def simulate(prior, n, epsilon, rng, mechanism=None, rho=None) -> SimulatedRelease:
    """theta from the prior (hyper-Dirichlet or log-linear) over the simulation domain, n records, and each
    measured marginal released through ``mechanism`` at an equal share of the budget (default: discrete-gaussian
    given ``rho``, discrete-laplace given ``epsilon``).  A prior with ``n_range``: n is drawn uniformly from it
    instead (the given n is not used), is part of theta, and the release states no n."""
    prior = parse_prior(prior)
    unknown = prior.n_range is not None
    if unknown:
        n = int(rng.integers(prior.n_range[0], prior.n_range[1] + 1))
    domain = prior.domain or SIMULATION_DOMAIN
    measure = prior.measure or SIMULATION_MEASURE
    name = mechanism or ("discrete-gaussian" if rho is not None else "discrete-laplace")
    kind = get_mechanism(name)
    attrs = tuple(domain)
    tree = JunctionTree.build(attrs, list(measure) + list(prior.cliques), domain)
    prior = prior.resolved(tree, None if unknown else n)  # the concentration the inference will use
    tables = prior.draw_tables(tree, measure, rng)
    records = tree.sample_records(tables, int(n), rng)
    sens = SENSITIVITY[kind.sensitivity_norm]
    share_eps = None if epsilon is None else float(epsilon) / len(measure)
    share_rho = None if rho is None else float(rho) / len(measure)
    measurements = []
    for clique in measure:
        counts = MarginalQuery(clique, attrs, domain)(records)
        scale, fields = kind.noise_for_budget(sens, epsilon=share_eps, rho=share_rho)
        value = counts + kind.numpy_noise(scale, counts.shape, rng)
        if kind.integer_valued:
            value = np.round(value).astype(int)
        measurements.append({"clique": list(clique), "value": value.tolist(), "mechanism": name, **fields,
                             "sensitivity": sens})
    release = {"format": FORMAT, "family": "marginals", "n": int(n), "domain": dict(domain),
               "measurements": measurements}
    theta = {variable_name(c): t for c, t in zip(tree.cliques, tables)}
    if unknown:
        del release["n"]
        theta["n"] = int(n)
    return SimulatedRelease(theta=theta, release=release, confidential={"records": records})


# --------------------------------------------------------------------------- curator
MarginalsCuratorOptions = curator_options("marginals", "rho", "cliques", "mechanism", "domain", "max_cells",
                                          module=__name__)


def _parse_cliques(text, columns) -> list[tuple[str, ...]]:
    if isinstance(text, (list, tuple)):
        cliques = [tuple(c) if not isinstance(c, str) else tuple(x.strip() for x in c.split(",")) for c in text]
    elif isinstance(text, str) and text.strip():
        cliques = [tuple(a.strip() for a in part.split(",") if a.strip()) for part in text.split(";") if part.strip()]
    else:
        raise InputError("cliques", "is required: the marginals to release, e.g. --cliques \"age,income;sex\"")
    for c in cliques:
        if not c:
            raise InputError("cliques", "an empty clique (two ';' in a row?)")
        if len(set(c)) != len(c):
            raise InputError("cliques", f"({', '.join(c)}) lists an attribute twice")
        for a in c:
            if a not in columns:
                raise InputError("cliques", f"no column {a!r} in the data (columns: {', '.join(map(str, columns))})")
    return cliques


def _columns_read(options) -> list[str]:
    if not isinstance(options.cliques, str) or options.cliques.strip().lower() == "mst":
        return []
    return sorted({a.strip() for part in options.cliques.split(";") for a in part.split(",") if a.strip()})


@curator(MarginalsCuratorOptions, reads=_columns_read)
def curate(frame, options) -> dict:
    """Noisy marginals of the CSV's columns: each clique's count table plus noise of ``mechanism`` (default
    discrete-gaussian) at an equal share of the budget (rho for zCDP mechanisms, epsilon otherwise)."""
    from ..mechanisms import draw_noise

    columns = list(frame.columns)
    select = isinstance(options.cliques, str) and options.cliques.strip().lower() == "mst"
    if options.max_cells is not None and not select:
        raise InputError("max-cells", "caps the pairs that --cliques mst may choose; it is not used with cliques "
                         "named by hand")
    cliques = [(c,) for c in columns] if select else _parse_cliques(options.cliques, columns)
    attrs = []
    for c in cliques:
        attrs.extend(a for a in c if a not in attrs)
    if options.domain is not None:
        if not isinstance(options.domain, dict):
            raise InputError("domain", "must map each attribute to its public list of levels")
        for a in options.domain:
            if a not in columns:
                raise InputError("domain", f"no column {a!r} in the data")
        attrs.extend(a for a in options.domain if a not in attrs)
    if len(frame) == 0:
        raise InputError("data", "the CSV has no rows")
    codes, labels, notes = [], {}, []
    for a in attrs:
        col = frame[a]
        as_text = col.map(lambda v: str(v).strip())
        if options.domain is not None and a in options.domain:
            levels = [str(v) for v in options.domain[a]]
            if len(set(levels)) != len(levels):
                raise InputError(f"domain.{a}", "levels must be distinct")
            unknown = sorted(set(as_text) - set(levels))
            if unknown:
                raise InputError(f"data.{a}", f"level {unknown[0]!r} is not among the public levels of domain.{a}")
        else:
            levels = sorted(set(as_text), key=lambda v: (0, float(v), v) if _is_number(v) else (1, 0.0, v))
            notes.append(a)
        index = {v: i for i, v in enumerate(levels)}
        codes.append(as_text.map(index).to_numpy(dtype=np.int64))
        labels[a] = levels
    records = np.stack(codes, axis=1)
    domain = {a: len(labels[a]) for a in attrs}
    if select and options.max_cells is not None:  # refused before any noise is drawn
        from .marginals_select import check_cap

        try:
            check_cap(options.max_cells, list(domain.values()))
        except InputError as err:
            raise InputError("max-cells", err.reason) from None
    name = options.mechanism or "discrete-gaussian"
    if not accepts_mechanism(name):
        raise InputError("mechanism", f"must be one of {', '.join(MARGINAL_MECHANISMS)} or a registered integer "
                         f"noise law for the marginals curator (got {name!r})")
    kind = get_mechanism(name)
    sens = SENSITIVITY[kind.sensitivity_norm]

    def measure(group, share_eps, share_rho):
        out = []
        for c in group:
            counts = MarginalQuery(c, attrs, domain)(records)
            scale, budget = kind.noise_for_budget(sens, epsilon=share_eps, rho=share_rho)
            noisy, sampler = draw_noise(name, counts.ravel(), scale, options.seed)
            noisy = np.asarray(noisy).reshape(counts.shape)
            value = np.round(noisy).astype(np.int64).tolist() if kind.integer_valued else noisy.tolist()
            out.append({"clique": list(c), "value": value, "mechanism": name, **budget, "sensitivity": sens,
                        "sampler": sampler})
        return out

    selection = None
    if select:
        # MST (McKenna, Miklau & Sheldon 2021): a third of the budget to the one-way marginals, a third to choosing
        # a spanning tree of pairs privately, a third to the chosen two-way marginals
        if not kind.accounts_rho or getattr(options, "rho", None) is None:
            raise InputError("cliques", "mst selects the pairs by zCDP exponential mechanisms: give a zCDP "
                             "mechanism and its budget (--mechanism discrete-gaussian --rho R, or --target-epsilon)")
        if len(attrs) < 2:
            raise InputError("cliques", "mst needs at least two columns")
        third = float(options.rho) / 3.0
        measurements = measure(cliques, None, third / len(cliques))
        from .marginals_select import select_mst

        one_way = {m["clique"][0]: np.asarray(m["value"], float) for m in measurements}
        selection = select_mst(records, domain, rho_select=third, one_way=one_way, rng=options.seed,
                               publication=options.seed is None, max_cells=options.max_cells)
        measurements += measure(selection.cliques, None, third / len(selection.cliques))
    else:
        k = len(cliques)
        measurements = measure(cliques, None if options.epsilon is None else float(options.epsilon) / k,
                               None if getattr(options, "rho", None) is None else float(options.rho) / k)
    out = {"format": FORMAT, "family": "marginals", "n": int(len(frame)), "domain": domain, "labels": labels,
           "measurements": measurements}
    if selection is not None:
        out["selection"] = selection.to_record()
    if notes:
        out["description"] = (f"the levels of {', '.join(notes)} were read from the data; declare them publicly "
                              "(Python: extra={'domain': {attr: [levels]}})")
    return out


def _is_number(v: str) -> bool:
    try:
        return math.isfinite(float(v))
    except ValueError:
        return False


FAMILY = Family(
    name="marginals",
    release_model=MarginalsRelease,
    methods={
        "da": EngineSpec.of("dpposterior.inference.marginals_da", "marginals_da", "MarginalsDAOptions"),
        "naive": EngineSpec.of("dpposterior.inference.marginals_da", "marginals_naive", "MarginalsNaiveOptions"),
        "clt": EngineSpec.of("dpposterior.inference.marginals_clt", "marginals_clt", "MarginalsCLTOptions"),
    },
    auto_method="da",
    parse_prior=parse_prior,
    curate=curate,
    naive_method="naive",
    description="noisy marginal tables of one categorical table (MST/AIM, Private-PGM, OpenDP contingency tables)",
    simulate=simulate,
    mechanisms=MARGINAL_MECHANISMS,
    simulate_mechanisms=("discrete-laplace", "discrete-gaussian", "laplace"),
    simulates_integer_noise=True,
    hooks={"observation_model": observation_model},
)


#: Monte Carlo draws (and their seed) for the log-linear prior's moments: a cell's sd is then within about 2%
PRIOR_MOMENT_DRAWS = 2000
PRIOR_MOMENT_SEED = 20230


def prior_moments(prior, release) -> dict:
    """Each clique table's cells (the log-linear prior's by Monte Carlo).  The hyper-Dirichlet's clique marginal is
    Dirichlet(alpha_C) (Dawid & Lauritzen 1993, Sec. 7), so a cell has mean alpha / A and sd
    sqrt(alpha (A - alpha) / (A^2 (A + 1)))."""
    prior = parse_prior(prior, release)
    tree = junction_tree(release, prior)
    prior = prior.resolved(tree, release.n)
    out = {}
    if prior.kind == "log-linear":  # no closed form: Monte Carlo, a fixed stream (the same moments every call)
        rng = np.random.default_rng(PRIOR_MOMENT_SEED)
        measured = [tuple(m.clique) for m in release.measurements]
        draws = [prior.draw_tables(tree, measured, rng) for _ in range(PRIOR_MOMENT_DRAWS)]
        for k, c in enumerate(tree.cliques):
            t = np.stack([d[k] for d in draws])
            out[variable_name(c)] = (t.mean(axis=0), t.std(axis=0, ddof=1))
        return out
    total = prior.concentration
    for c, alpha in zip(tree.cliques, tree.prior_alpha(total)):
        out[variable_name(c)] = (alpha / total, np.sqrt(alpha * (total - alpha) / (total ** 2 * (total + 1.0))))
    if release.n is None and prior.n_range is not None:  # discrete uniform on lo..hi
        lo, hi = prior.n_range
        out["n"] = ((lo + hi) / 2.0, math.sqrt(((hi - lo + 1) ** 2 - 1) / 12.0))
    return out


FAMILY.hooks["prior_moments"] = prior_moments
