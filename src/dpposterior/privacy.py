"""Privacy audit of the curators: ``dpposterior audit`` and :func:`audit`.

Every release is (epsilon, delta)-DP under ``neighbouring = "replace-one"``: data sets of the
same n that differ in one replaced record.  For each family's curator this module checks that
promise two ways, on a small synthetic configuration (:data:`SPECS`):

1. **Sensitivity search.**  The worst case of ||s(D) - s(D')|| (L1 for Laplace, L2 for Gaussian,
   L-infinity for the binomial trajectory) over neighbouring D, D' in the public record domain,
   *computed by the curator's own code* (clamping, truncation, statistics) with the noise switched
   off (:func:`dpposterior.mechanisms.noise.exact_statistics`).  Candidates: every pair of the
   domain's vertices (box corners, sphere directions, category levels, records outside the bounds
   to exercise the clamping) on several base data sets, then random restarts polished by a
   stochastic hill climb.  It is printed beside the *recorded* sensitivity -- the one the noise
   actually supports: b * epsilon for Laplace, sigma / sigma_analytic(epsilon, delta, 1) for Gaussian.
   The search is a lower bound on the true worst case; the recorded value must be at least it.
2. **Empirical DP test** (in the style of StatDP, Ding et al. 2018, and DP-Sniper, Bichsel et al.
   2021).  At the worst pair found, many releases are drawn from D and from D' through the real
   curator path -- the seeded numpy sampler and the default OpenDP sampler -- and scored by the
   claimed mechanism's log-likelihood ratio (the most powerful test statistic, Neyman-Pearson).
   The threshold of the event {score > t} (and {score < t}, roles swapped) is chosen on half the
   draws and evaluated on the other half, so the bound
       epsilon_lb = log((p0_lower - delta) / p1_upper)
   with Clopper-Pearson bounds holds at the stated confidence (Bonferroni over the two
   directions and the two bounds).  A correct curator gives epsilon_lb <= claimed epsilon except
   with probability 1 - confidence; an under-noised one is caught when its true epsilon is far
   enough above the claim for the draws to resolve (Laplace mechanisms at moderate epsilon; the
   (epsilon, delta) of a Gaussian mechanism lives in tails no sample of practical size reaches,
   which is why the table also gives the *analytic* epsilon implied by the searched sensitivity
   and the actual noise).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
from scipy import stats

from .errors import InputError
from .mechanisms.base import NoiseShape
from .mechanisms.registry import get_mechanism

#: relative slack for "recorded >= searched" (float round-off in the curators' arithmetic)
SENSITIVITY_SLACK = 1e-9


# ----------------------------------------------------------------------------- specs


@dataclass
class AuditSpec:
    """A family's curator on a small synthetic configuration, with its public record domain."""

    name: str
    family: str
    options: dict
    #: records (dicts column -> value) that span the domain's extremes, beyond the bounds included
    vertices: list
    #: one random record of the domain
    random_record: Callable[[np.random.Generator], dict]
    n: int = 12
    #: a record -> the same record moved a little (hill climb); None: discrete domain
    perturb: Callable[[dict, np.random.Generator], dict] | None = None
    #: base rows forced at the start of every data set (e.g. every category level present)
    fixed_rows: list = field(default_factory=list)
    #: records -> the curator's input frame (default: one row per record)
    to_frame: Callable[[list], Any] | None = None
    description: str = ""
    #: the curator's input frame -> its exact statistics, for a curator whose noise is not added to a statistic
    #: (``exact_statistics`` cannot switch it off: sir draws a binomial trajectory); None: the curator's own
    exact_statistics: Callable[[Any], dict] | None = None
    #: whether the curator can draw through OpenDP (sir's binomial sampler is numpy's only)
    opendp_sampler: bool = True


def _clip_box(lo, hi):
    def perturb(rec, rng):
        out = dict(rec)
        key = rng.choice(list(out))
        out[key] = float(np.clip(out[key] + rng.normal(0.0, 0.1 * (hi - lo)), lo, hi))
        return out
    return perturb


def _ball_records(radius, y_abs, directions=12, extra_radius=1.5):
    recs = [{"x1": 0.0, "x2": 0.0, "y": 0.0}]
    for k in range(directions):
        a = 2 * math.pi * k / directions
        for r in (radius, extra_radius * radius):
            for y in (-y_abs, 0.0, y_abs, 1.5 * y_abs):
                recs.append({"x1": r * math.cos(a), "x2": r * math.sin(a), "y": y})
    return recs


def _ball_random(radius, y_abs):
    def draw(rng):
        a = rng.uniform(0, 2 * math.pi)
        r = radius * math.sqrt(rng.uniform(0, 1.2))
        return {"x1": r * math.cos(a), "x2": r * math.sin(a), "y": float(rng.uniform(-1.2, 1.2) * y_abs)}
    return draw


def _ball_perturb(radius, y_abs):
    def perturb(rec, rng):
        out = dict(rec)
        out["x1"] += rng.normal(0, 0.05 * radius)
        out["x2"] += rng.normal(0, 0.05 * radius)
        out["y"] = float(np.clip(out["y"] + rng.normal(0, 0.05 * y_abs), -1.2 * y_abs, 1.2 * y_abs))
        return out
    return perturb


def _categorical(columns: dict[str, list]):
    names = list(columns)
    vertices = [dict(zip(names, combo)) for combo in itertools.product(*columns.values())]

    def draw(rng):
        return {c: columns[c][int(rng.integers(len(columns[c])))] for c in names}
    # every level of every column appears among the base rows: level sets are public (a codebook)
    width = max(len(v) for v in columns.values())
    fixed = [{c: columns[c][i % len(columns[c])] for c in names} for i in range(width)]
    return vertices, draw, fixed


def _sir_frame(times):
    import pandas as pd

    def to_frame(records):
        status = np.array([[r[f"t{i}"] for i in range(len(times))] for r in records], dtype=float)
        return pd.DataFrame({"time": times, "infected": status.sum(axis=0), "population": len(records)})
    return to_frame


def _specs() -> dict[str, list[AuditSpec]]:
    specs: dict[str, list[AuditSpec]] = {}
    box = [{"x": v} for v in (-0.5, 0.0, 0.25, 0.5, 1.0, 1.5)]
    specs["gaussian"] = [AuditSpec(
        "gaussian", "gaussian", {"column": "x", "bounds": (0.0, 1.0)}, box,
        lambda rng: {"x": float(rng.uniform(-0.5, 1.5))}, perturb=_clip_box(-0.5, 1.5),
        description="mean and variance of x clamped to [0, 1]")]
    specs["binomial"] = [AuditSpec("binomial", "binomial", {"column": "x"}, [{"x": 0}, {"x": 1}],
                                   lambda rng: {"x": int(rng.integers(2))}, description="count of x = 1")]
    cats = ["a", "b", "c"]
    specs["multinomial"] = [AuditSpec(
        "multinomial", "multinomial", {"column": "x", "extra": {"categories": cats}}, [{"x": c} for c in cats],
        lambda rng: {"x": cats[int(rng.integers(3))]}, description="counts of 3 declared categories")]
    specs["exponential"] = [AuditSpec(
        "exponential", "exponential", {"column": "x", "bounds": (0.5, 3.0)},
        [{"x": v} for v in (0.01, 0.5, 1.0, 3.0, 3.01, 10.0)],
        lambda rng: {"x": float(rng.uniform(0.01, 10.0))}, perturb=_clip_box(0.01, 10.0),
        description="sum of x in [0.5, 3] (records outside are dropped)")]
    specs["poisson"] = [AuditSpec(
        "poisson", "poisson", {"column": "x", "bounds": (0.0, 5.0)}, [{"x": v} for v in range(0, 9)],
        lambda rng: {"x": int(rng.integers(0, 9))}, description="sum of x in [0, 5] (records outside dropped)")]
    v, draw, fixed = _categorical({"Y": ["0", "1"], "X1": ["p", "q", "r"], "X2": ["u", "v"]})
    specs["naive-bayes"] = [
        AuditSpec(f"naive-bayes {scale}", "naive-bayes", {"columns": ["Y", "X1", "X2"], "scale": scale},
                  v, draw, fixed_rows=fixed, description=f"class x feature tables ({scale})")
        for scale in ("counts", "proportions")]
    specs["loglinear"] = [AuditSpec("loglinear", "loglinear", {"columns": ["Y", "X1", "X2"]}, v, draw,
                                    fixed_rows=fixed, description="class x feature proportion tables")]
    lr_v, lr_r, lr_p = _ball_records(1.0, 1.0), _ball_random(1.0, 1.0), _ball_perturb(1.0, 1.0)
    base = {"features": ["x1", "x2"], "response": "y", "x_norm": 1.0, "y_abs": 1.0}
    variants = [("gaussian xtx,xty", {}), ("gaussian xtx,xty,yty", {"epsilon_split": "xtx,xty,yty"}),
                ("gaussian halves", {"epsilon_split": "halves"}), ("gaussian adassp", {"epsilon_split": "adassp"}),
                ("gaussian intercept", {"intercept": True}), ("laplace xtx,xty,yty", {"mechanism": "laplace"}),
                ("laplace intercept", {"mechanism": "laplace", "intercept": True})]
    specs["linear-regression"] = [
        AuditSpec(f"linear-regression {label}", "linear-regression", {**base, **extra}, lr_v, lr_r, perturb=lr_p,
                  description="||x|| <= 1, |y| <= 1, d = 2")
        for label, extra in variants]
    ju_vertices = [{"x1": a, "x2": b, "y": c} for a, b, c in itertools.product((-15.0, -10.0, 0.0, 10.0, 15.0),
                                                                                   repeat=3)]
    specs["linreg-ju"] = [AuditSpec(
        "linreg-ju", "linreg-ju", {"features": ["x1", "x2"], "response": "y"}, ju_vertices,
        lambda rng: {k: float(rng.uniform(-12, 12)) for k in ("x1", "x2", "y")}, perturb=_clip_box(-12.0, 12.0),
        description="x, y clamped to [-10, 10]")]
    times = [1.0, 2.0, 3.0, 4.0, 5.0]
    sir_v = [{f"t{i}": int(b) for i, b in enumerate(bits)} for bits in itertools.product((0, 1), repeat=len(times))]
    specs["sir"] = [AuditSpec(
        "sir", "sir", {"extra": {"trials": 100}}, sir_v,
        lambda rng: {f"t{i}": int(rng.integers(2)) for i in range(len(times))}, n=30, to_frame=_sir_frame(times),
        description="one person's infection status at 5 times; K = 30, N = 100",
        exact_statistics=lambda frame: {"statistics": {"infected": {"value": frame["infected"].tolist(),
                                                                    "mechanism": "binomial-trajectory"}}},
        opendp_sampler=False)]
    # small-area: one person's (area, cell) among declared public lists; replace-one moves one count
    # down and another up (L1 2, L2 sqrt 2); its default mechanism first
    areas, cells = ["a1", "a2"], ["c1", "c2"]
    sa_v = [{"area": a, "cell": c} for a in areas for c in cells]
    sa_extra = {"area_column": "area", "cell_column": "cell", "areas": areas, "cells": cells}
    specs["small-area"] = [
        AuditSpec("small-area" + ("" if i == 0 else f" {mech}"), "small-area",
                  {"mechanism": mech, "extra": sa_extra}, sa_v, lambda rng: sa_v[int(rng.integers(len(sa_v)))],
                  description=f"2 areas x 2 cells counts; {mech} noise")
        for i, mech in enumerate(("discrete-gaussian", "discrete-laplace", "laplace"))]
    # marginals: one person's (a, b, c) among declared public levels; replace-one moves one count of every
    # marginal down and another up (L1 2, L2 sqrt 2), every measurement at once
    mg_levels = {"a": ["0", "1"], "b": ["x", "y", "z"], "c": ["u", "v"]}
    mg_v, mg_draw, _ = _categorical(mg_levels)
    specs["marginals"] = [
        AuditSpec("marginals" + ("" if i == 0 else f" {mech}"), "marginals",
                  {"cliques": "a,b;b,c;a", "mechanism": mech, "extra": {"domain": mg_levels}}, mg_v, mg_draw,
                  description=f"(a, b), (b, c) and (a) count tables of a 2 x 3 x 2 table; {mech} noise")
        for i, mech in enumerate(("discrete-gaussian", "discrete-laplace", "laplace"))]
    # the count families again, released with integer noise
    for fam in ("binomial", "multinomial", "poisson", "naive-bayes"):
        base_spec = specs[fam][0]
        for mech in ("discrete-laplace", "discrete-gaussian", "skellam"):
            specs[fam].append(dataclasses.replace(
                base_spec, name=f"{fam} {mech}", options={**base_spec.options, "mechanism": mech},
                description=f"{base_spec.description}; {mech} noise"))
    return specs


SPECS = _specs()


def families() -> list[str]:
    return list(SPECS)


# ----------------------------------------------------------------------------- the curator probe


def _options(spec: AuditSpec, epsilon: float, seed):
    """The curator's typed options (``Family.curator_options``) for the spec at ``epsilon``."""
    from .curator import CurateOptions
    from .families import get_family

    opts = dict(spec.options)
    extra = opts.pop("extra", {})
    if opts.get("mechanism") and get_mechanism(opts["mechanism"]).accounts_rho:
        # a zCDP curator runs at rho = epsilon^2 / 2, the zCDP that epsilon-DP implies (Bun & Steinke 2016)
        given = CurateOptions(spec.family, rho=0.5 * epsilon ** 2, seed=seed, extra=dict(extra), **opts)
    else:
        given = CurateOptions(spec.family, epsilon=epsilon, seed=seed, extra=dict(extra), **opts)
    return get_family(spec.family).curator_options.from_curate(given)


def _frame(spec: AuditSpec, records):
    import pandas as pd

    return spec.to_frame(records) if spec.to_frame else pd.DataFrame(records)


def _flatten(value):
    if isinstance(value, list):
        return [x for v in value for x in _flatten(v)]
    return [float(value)]


@dataclass
class _Group:
    """Records released by ONE mechanism (linear regression's joint (xtx, xty[, yty]); else one record)."""

    name: str
    paths: list
    mechanism: str


def _statistic_records(release: dict):
    """(path, record) of every statistic record of a release dict, in file order."""
    out = []

    def walk(obj, path):
        if isinstance(obj, dict):
            if "mechanism" in obj and "value" in obj:
                out.append((path, obj))
                return
            for k, v in obj.items():
                walk(v, path + (k,))
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, path + (i,))

    # where a format keeps its statistics: per party, by name, or a list of measurements (marginals)
    key = next((k for k in ("parties", "statistics", "measurements") if k in release), "statistics")
    walk(release.get(key), (key,))
    return out


def _groups(release: dict) -> list[_Group]:
    groups: dict[str, _Group] = {}
    for path, rec in _statistic_records(release):
        key = ".".join(map(str, path))
        if path[0] == "parties":
            party = release["parties"][path[1]]
            if party.get("composition", "joint") == "joint" and path[-1] in ("xtx", "xty", "yty"):
                key = f"parties.{path[1]}.statistics.(" + ",".join(
                    k for k in ("xtx", "xty", "yty") if k in party["statistics"]) + ")"
        groups.setdefault(key, _Group(key, [], rec["mechanism"])).paths.append(path)
    return list(groups.values())


def _get(release: dict, path):
    obj = release
    for p in path:
        obj = obj[p]
    return obj


def _vector(release: dict, group: _Group) -> np.ndarray:
    parts = []
    for path in group.paths:
        value = _get(release, path)["value"]
        if path[-1] == "xtx":  # the mechanism acts on the upper triangle
            a = np.asarray(value, float)
            parts.append(a[np.triu_indices(a.shape[0])])
        else:
            parts.append(np.asarray(_flatten(value)))
    return np.concatenate(parts)


def _norm(mechanism: str, diff: np.ndarray) -> float:
    return get_mechanism(mechanism).norm(diff)


def _exact(spec: AuditSpec, records, epsilon, curate=None):
    """The release's exact statistics (noise switched off), or None where the curator refuses."""
    from .families import get_family
    from .mechanisms.noise import exact_statistics

    curate = curate or get_family(spec.family).curate
    if spec.exact_statistics is not None:
        return spec.exact_statistics(_frame(spec, records))
    try:
        with exact_statistics():
            return curate(_frame(spec, records), _options(spec, epsilon, 0))
    except InputError:
        return None


# ----------------------------------------------------------------------------- search


@dataclass
class GroupResult:
    group: str
    mechanism: str
    norm: str
    recorded_sensitivity: float
    searched_sensitivity: float
    epsilon: float
    delta: float
    #: epsilon implied by the searched sensitivity and the noise actually added
    analytic_epsilon: float
    ok: bool


@dataclass
class SamplerResult:
    sampler: str
    draws: int
    epsilon_lower_bound: float
    ok: bool
    #: the claimed (epsilon, delta) the lower bound was tested against (the release's, or a point of a
    #: discrete Gaussian's privacy profile: ``_test_point``)
    tested_epsilon: float | None = None
    tested_delta: float | None = None


@dataclass
class AuditResult:
    name: str
    family: str
    description: str
    neighbouring: str
    claimed_epsilon: float
    claimed_delta: float
    analytic_epsilon: float
    groups: list
    samplers: list
    confidence: float
    worst_pair: dict
    evaluations: int
    #: the loader's refusal of the curator's release, if any (e.g. an under-stated sensitivity)
    refused_by_loader: str | None = None
    #: dp-accounting's optimistic (lower-bound) epsilon of the found pair under the recorded noise, composed
    #: over every statistic, at the claimed delta: the claim must not be below it (None: no loss distribution)
    pld_epsilon: float | None = None

    @property
    def ok(self) -> bool:
        return (self.refused_by_loader is None and all(g.ok for g in self.groups)
                and all(s.ok for s in self.samplers)
                and (self.pld_epsilon is None or self.claimed_epsilon >= self.pld_epsilon * (1 - 1e-6)))

    def to_dict(self) -> dict:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def _search(spec: AuditSpec, epsilon: float, rng, restarts: int, steps: int, curate=None, n_bases: int = 6):
    """Worst neighbouring pair per group; returns (groups, {group: (value, (D, D'))}, evaluations)."""
    n = spec.n
    evals = 0
    ref = _exact(spec, spec.fixed_rows + [spec.vertices[0]] * (n - len(spec.fixed_rows)), epsilon, curate)
    if ref is None:
        raise InputError("audit", f"the {spec.family} curator refused the audit's base data set")
    groups = _groups(ref)
    best: dict[str, tuple[float, tuple]] = {g.name: (-1.0, ()) for g in groups}

    def consider(base, a_stat, b_stat, a_rec, b_rec):
        for g in groups:
            try:
                diff = _vector(a_stat, g) - _vector(b_stat, g)
            except (KeyError, ValueError):
                continue  # the two data sets released differently shaped statistics
            val = _norm(g.mechanism, diff)
            if val > best[g.name][0]:
                best[g.name] = (val, (base, a_rec, b_rec))

    # bases: the fixed rows, then all-equal rows at each vertex, then random rows
    free = n - 1 - len(spec.fixed_rows)
    constant = [[v] * free for v in spec.vertices[: min(len(spec.vertices), 6)]]
    randoms = [[spec.random_record(rng) for _ in range(free)] for _ in range(3)]
    # interleaved, so a small ``n_bases`` still mixes a constant and a random base
    mixed = [b for pair in itertools.zip_longest(constant, randoms) for b in pair if b is not None]
    bases = mixed[:n_bases]
    for rest in bases:
        base = spec.fixed_rows + rest
        stats_by_vertex = []
        for v in spec.vertices:
            s = _exact(spec, base + [v], epsilon, curate)
            evals += 1
            stats_by_vertex.append(s)
        for i, j in itertools.combinations(range(len(spec.vertices)), 2):
            if stats_by_vertex[i] is not None and stats_by_vertex[j] is not None:
                consider(base, stats_by_vertex[i], stats_by_vertex[j], spec.vertices[i], spec.vertices[j])
    # random restarts, polished by a stochastic hill climb on the replaced pair
    for g in groups:
        for r in range(restarts):
            if r == 0 and best[g.name][1]:
                base, a, b = best[g.name][1]
            else:
                base = spec.fixed_rows + [spec.random_record(rng) for _ in range(free)]
                a, b = spec.random_record(rng), spec.random_record(rng)
            sa, sb = _exact(spec, base + [a], epsilon, curate), _exact(spec, base + [b], epsilon, curate)
            evals += 2
            if sa is None or sb is None:
                continue
            cur = _norm(g.mechanism, _vector(sa, g) - _vector(sb, g))
            for _ in range(steps):
                if spec.perturb is not None:
                    a2, b2 = (spec.perturb(a, rng), b) if rng.random() < 0.5 else (a, spec.perturb(b, rng))
                else:
                    a2, b2 = (spec.random_record(rng), b) if rng.random() < 0.5 else (a, spec.random_record(rng))
                sa2, sb2 = _exact(spec, base + [a2], epsilon, curate), _exact(spec, base + [b2], epsilon, curate)
                evals += 2
                if sa2 is None or sb2 is None:
                    continue
                try:
                    val = _norm(g.mechanism, _vector(sa2, g) - _vector(sb2, g))
                except ValueError:
                    continue
                if val > cur:
                    a, b, cur = a2, b2, val
                    if val > best[g.name][0]:
                        best[g.name] = (val, (base, a, b))
    return groups, best, evals


# ----------------------------------------------------------------------------- noise of a group


def _group_noise(release: dict, group: _Group):
    """(epsilon, delta, scale, recorded sensitivity) of a group as released (the mechanism's own audit view)."""
    return get_mechanism(group.mechanism, field="audit").audit_noise(release, _get(release, group.paths[0]))


def _analytic_epsilon(group: _Group, noise, searched: float) -> float:
    return get_mechanism(group.mechanism).audit_epsilon(noise, searched)


def _log_density(group: _Group, noise, out: np.ndarray, s: np.ndarray) -> np.ndarray:
    return get_mechanism(group.mechanism).audit_log_density(noise, out, s)


# ----------------------------------------------------------------------------- the empirical test


def _test_point(groups, noise, claimed_eps: float, claimed_delta: float) -> tuple[float, float]:
    """(epsilon, delta) the empirical test checks.  A mechanism with a whole privacy profile (the discrete
    Gaussian) claims epsilon(delta) at every delta; the test takes the point its class names
    (``audit_test_delta``, one a few thousand draws resolve), the others their stated (epsilon, delta)."""
    if len(groups) == 1:
        cls = get_mechanism(groups[0].mechanism)
        test_delta = getattr(cls, "audit_test_delta", None)
        if test_delta is not None and test_delta > claimed_delta:
            return float(cls.audit_claim_at(noise[groups[0].name], test_delta)), float(test_delta)
    return claimed_eps, claimed_delta


def _pld_reference(groups, noise, s_d: dict, s_dp: dict, delta: float) -> float | None:
    """The found pair's epsilon at ``delta`` by Google's dp-accounting (optimistic estimate: a lower bound on
    the pair's tight epsilon), every statistic's coordinates composed; None where a mechanism has no loss
    distribution (the binomial trajectory)."""
    from .mechanisms.accounting import pld_epsilon

    losses = []
    for g in groups:
        part = get_mechanism(g.mechanism).audit_losses(noise[g.name], np.asarray(s_d[g.name]) - np.asarray(s_dp[g.name]))
        if part is None:
            return None
        losses.extend(part)
    # a pure claim (delta 0) is checked at delta 1e-12: the optimistic estimate of a continuous law truncates its
    # tails, so its epsilon at delta 0 is unbounded, and epsilon(1e-12) <= epsilon(0) keeps the check a lower bound
    return pld_epsilon(losses, max(delta, 1e-12), pessimistic=False, interval=1e-4)


def _clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided (lower at alpha, upper at alpha) Clopper-Pearson bounds of a binomial proportion."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


#: scores are rounded to this grid before the events are formed (see epsilon_lower_bound)
SCORE_RESOLUTION = 1e-6


def epsilon_lower_bound(score_d: np.ndarray, score_dp: np.ndarray, delta: float, confidence: float,
                        resolution: float = SCORE_RESOLUTION) -> float:
    """Lower confidence bound on epsilon from scores of releases of D and of D' (module docstring).

    Both arrays are split in halves: thresholds chosen on the first, the bound computed on the second.
    Scores are rounded to ``resolution`` first (a post-processing, so the events stay valid): without
    it the events can pick up the low-order bits of floating-point noise -- on numpy's textbook
    Laplace sampler they then "see" epsilon 1.5 where 1 is claimed, which is Mironov's (2012) attack,
    not a calibration error.  The audit tests the calibration; OpenDP's samplers close the float leak.
    """
    alpha = 1.0 - confidence
    if resolution > 0:
        score_d = np.round(np.asarray(score_d) / resolution) * resolution
        score_dp = np.round(np.asarray(score_dp) / resolution) * resolution
    h0, h1 = len(score_d) // 2, len(score_dp) // 2
    sel_d, ev_d, sel_p, ev_p = score_d[:h0], score_d[h0:], score_dp[:h1], score_dp[h1:]
    pooled = np.concatenate([sel_d, sel_p])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, 101)))
    best = 0.0
    for sign in (1.0, -1.0):  # {score > t}: D more likely;  {score < t}: D' more likely (roles swap)
        a_sel, b_sel = (sel_d, sel_p) if sign > 0 else (sel_p, sel_d)
        a_ev, b_ev = (ev_d, ev_p) if sign > 0 else (ev_p, ev_d)
        # choose t on the selection half by a plug-in estimate (with one pseudo-count)
        def est(t):
            p_a = (np.sum(sign * a_sel > sign * t) + 0.5) / (len(a_sel) + 1)
            p_b = (np.sum(sign * b_sel > sign * t) + 0.5) / (len(b_sel) + 1)
            return math.log(max(p_a - delta, 1e-300) / p_b)
        t = max(thresholds, key=est)
        k_a, k_b = int(np.sum(sign * a_ev > sign * t)), int(np.sum(sign * b_ev > sign * t))
        pa_lo, _ = _clopper_pearson(k_a, len(a_ev), alpha / 4)
        _, pb_hi = _clopper_pearson(k_b, len(b_ev), alpha / 4)
        if pa_lo - delta > 0 and pb_hi > 0:
            best = max(best, math.log((pa_lo - delta) / pb_hi))
    return best


def _draw_scores(spec, records_d, records_dp, epsilon, groups, noise, s_d, s_dp, draws, seed, curate):
    """Scores of ``draws`` releases of each data set through the curator (seed None: OpenDP)."""
    from .families import get_family

    curate = curate or get_family(spec.family).curate
    seeds = (np.random.SeedSequence(seed).generate_state(2 * draws).tolist() if seed is not None
             else [None] * (2 * draws))
    frames = (_frame(spec, records_d), _frame(spec, records_dp))
    scores = []
    for which, frame in enumerate(frames):
        out = np.empty(draws)
        for i in range(draws):
            rel = curate(frame, _options(spec, epsilon, seeds[which * draws + i]))
            total = 0.0
            for g in groups:
                o = _vector(rel, g)
                total += float(_log_density(g, noise[g.name], o, s_d[g.name])
                               - _log_density(g, noise[g.name], o, s_dp[g.name]))
            out[i] = total
        scores.append(out)
    return scores


# ----------------------------------------------------------------------------- audit


def audit(family: str, *, epsilon: float = 1.0, draws: int = 2000, confidence: float = 0.95, seed: int = 0,
          samplers=("numpy", "opendp"), restarts: int = 4, steps: int = 60, bases: int = 6, variants=None,
          curate: Callable | None = None) -> list[AuditResult]:
    """Audit the curator of ``family`` (every variant, e.g. both naive-bayes scales); one result each.

    ``draws`` releases of each of D, D' per sampler; ``restarts`` x ``steps`` hill-climb moves per statistic;
    ``bases`` data sets around the replaced record (constant at a vertex, random; matters for statistics that
    are not sums over records, e.g. the variance).  ``curate`` replaces the family's curator (to audit a
    modified one, e.g. in the tests).
    """
    from .errors import check_seed
    from .families import get_family
    from .release import load_release

    if family not in SPECS:
        raise InputError("family", f"no audit for {family!r} (one of: {', '.join(SPECS)})")
    get_family(family)
    if not (isinstance(draws, int) and draws >= 20):
        raise InputError("draws", f"must be an integer >= 20 (got {draws!r})")
    if not (isinstance(bases, int) and bases >= 1):
        raise InputError("bases", f"must be an integer >= 1 (got {bases!r})")
    if not (0.5 <= confidence < 1):
        raise InputError("confidence", f"must lie in [0.5, 1) (got {confidence!r})")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InputError("epsilon", f"must be a finite number > 0 (got {epsilon!r})")
    bad = set(samplers) - {"numpy", "opendp"}
    if bad:
        raise InputError("samplers", f"unknown sampler {sorted(bad)[0]!r} (numpy, opendp)")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise InputError("restarts", f"must be an integer >= 0 (got {restarts!r})")
    check_seed(seed, "seed")
    specs = SPECS[family]
    if variants is not None:
        specs = [s for s in specs if s.name in variants]
    results = []
    for k, spec in enumerate(specs):
        rng = np.random.default_rng([seed, k])
        groups, best, evals = _search(spec, epsilon, rng, restarts, steps, curate, bases)
        release = (curate or get_family(spec.family).curate)(
            _frame(spec, spec.fixed_rows + [spec.vertices[0]] * (spec.n - len(spec.fixed_rows))),
            _options(spec, epsilon, 1))
        refused = None
        try:
            loaded = load_release(release)
            claimed_eps, claimed_delta = loaded.total_privacy_cost()
            neighbouring = loaded.neighbouring
        except InputError as exc:  # e.g. a stated sensitivity below the replace-one value
            refused = str(exc)
            recs = [r for _, r in _statistic_records(release)]
            claimed_eps = float(sum(r.get("epsilon") or 0.0 for r in recs))
            claimed_delta = float(sum(r.get("delta") or 0.0 for r in recs))
            neighbouring = release.get("neighbouring", "replace-one")
        noise = {g.name: _group_noise(release, g) for g in groups}
        single = len(groups) == 1
        rows = []
        for g in groups:
            eps_g, delta_g, scale, recorded = noise[g.name][:4]
            if single and get_mechanism(g.mechanism).noise_shape is NoiseShape.LAPLACE:
                # a record may state a per-part budget (naive-bayes counts: epsilon per table): the
                # sensitivity the noise supports at the release's total epsilon
                recorded = scale * claimed_eps
                eps_g = claimed_eps
            searched = best[g.name][0]
            rows.append(GroupResult(g.name, g.mechanism, get_mechanism(g.mechanism).sensitivity_norm,
                                    float(recorded), float(searched), float(eps_g), float(delta_g),
                                    float(_analytic_epsilon(g, noise[g.name], searched)),
                                    bool(recorded >= searched * (1 - SENSITIVITY_SLACK))))
        analytic = sum(r.analytic_epsilon for r in rows)
        # the empirical test at the pair that is worst relative to its noise
        worst = max(rows, key=lambda r: r.analytic_epsilon)
        base, a, b = best[worst.group][1]
        records_d, records_dp = base + [a], base + [b]
        s_d, s_dp = _exact(spec, records_d, epsilon, curate), _exact(spec, records_dp, epsilon, curate)
        s_d = {g.name: _vector(s_d, g) for g in groups}
        s_dp = {g.name: _vector(s_dp, g) for g in groups}
        pld_eps = _pld_reference(groups, noise, s_d, s_dp, claimed_delta)
        if len(rows) > 1 and pld_eps is not None:
            # several statistics released at once: their epsilons at one delta each add (basic composition), an
            # upper bound; the composed privacy loss of the found pair is the tighter value the release states
            analytic = min(analytic, pld_eps)
        sampler_rows = []
        for sampler in samplers:
            sd = int(np.random.SeedSequence([seed, k, 7]).generate_state(1)[0]) if sampler == "numpy" else None
            if sampler == "opendp" and not spec.opendp_sampler:
                continue  # e.g. OpenDP has no binomial sampler: the sir curator always uses numpy
            sc_d, sc_dp = _draw_scores(spec, records_d, records_dp, epsilon, groups, noise, s_d, s_dp, draws, sd,
                                       curate)
            test_eps, test_delta = _test_point(groups, noise, claimed_eps, claimed_delta)
            lb = epsilon_lower_bound(sc_d, sc_dp, test_delta, confidence)
            sampler_rows.append(SamplerResult(sampler, draws, lb, bool(lb <= test_eps * (1 + 1e-9)), test_eps,
                                              test_delta))
        results.append(AuditResult(spec.name, spec.family, spec.description, neighbouring, claimed_eps,
                                   claimed_delta, analytic, rows, sampler_rows, confidence,
                                   {"D": records_d, "D_prime": records_dp, "replaced": {"from": a, "to": b}}, evals,
                                   refused, pld_eps))
    return results


def write_json(results: list[AuditResult], path) -> None:
    from pathlib import Path

    from .files import write_bytes

    write_bytes(path, json.dumps([r.to_dict() for r in results], indent=2, default=float) + "\n", field="out")


def print_table(results: list[AuditResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dpposterior audit (neighbouring: replace-one)")
    for col in ("curator", "statistic", "norm", "recorded Δ", "searched Δ", "claimed ε (δ)", "ε at searched Δ",
                "ε of found pair (PLD)", "empirical ε lower bound (sampler, draws)", "ok"):
        table.add_column(col)
    for r in results:
        emp = ", ".join(f"{s.epsilon_lower_bound:.3f} ({s.sampler}, {s.draws})" for s in r.samplers) or "-"
        for i, g in enumerate(r.groups):
            table.add_row(r.name if i == 0 else "", g.group.replace("statistics.", ""), g.norm,
                          f"{g.recorded_sensitivity:.4g}", f"{g.searched_sensitivity:.4g}",
                          f"{r.claimed_epsilon:g} ({r.claimed_delta:.3g})" if i == 0 else "",
                          f"{r.analytic_epsilon:.3f}" if i == 0 else "",
                          (f"{r.pld_epsilon:.3f}" if r.pld_epsilon is not None else "-") if i == 0 else "",
                          emp if i == 0 else "",
                          ("yes" if r.ok else "NO") if i == 0 else "")
    console = Console(width=150)
    console.print(table)
    for r in results:
        if r.refused_by_loader:
            console.print(f"{r.name}: load_release refuses the curator's release: {r.refused_by_loader}")


def audit_command(family, epsilon, draws, confidence, seed, out, samplers, restarts, quiet=False, bases=6) -> int:
    names = families() if family == "all" else [family]
    if not samplers:  # the command's verdict needs the empirical test (Python's audit(samplers=()) only searches)
        raise InputError("samplers", "is empty; name at least one of numpy, opendp (an audit without a sampler "
                         "skips the empirical epsilon test, so it cannot report ok)")
    if out is not None:
        from .errors import check_output_path

        check_output_path(out, "--out")
    results = []
    for name in names:
        results.extend(audit(name, epsilon=epsilon, draws=draws, confidence=confidence, seed=seed,
                             samplers=samplers, restarts=restarts, bases=bases))
    if not quiet:
        print_table(results)
    if out is not None:
        write_json(results, out)
        print(f"wrote {out}")
    return 0 if all(r.ok for r in results) else 1
