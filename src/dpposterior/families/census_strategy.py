"""The 2020 Census production privacy-loss allocation (P.L. 94-171 persons), mapped onto the census family's
reduced 2 x 8 (age x ethnicity-race) histogram; the Hawaii 2020 block table as a truth; and a simulator of
noisy-measurement releases from a truth under that allocation.

Source of the allocation: the Census Bureau's DAS production code release,
github.com/uscensusbureau/DAS_2020_Redistricting_Production_Code, commit
289ee463936a6f0efcf2e378abe410ec01d0e140 (2021-10-27):

- ``source/configs/production/pl94/person_US.ini``, section ``[budget]``: ``geolevel_budget_prop = 104/4099,
  1440/4099, 447/4099, 687/4099, 1256/4099, 165/4099`` (US, State, County, Tract, Block_Group, Block -- the
  order is top-down: ``budget.py`` zips it with the reversed ``geolevel_names``) and ``strategy =
  ProductionCandidate20210527US_mult8_add02_dsepJune3``;
- ``source/configs/production/pl94/person_default.ini``, ``[budget]``: ``global_scale = 339/542``,
  ``dp_mechanism = discrete_gaussian_mechanism``; ``source/configs/production/prod_default.ini``:
  ``privacy_framework = zcdp``, ``approx_dp_delta = 1e-10``;
- ``source/programs/strategies/strategies.py``, class ``ProductionCandidate20210527US_mult8_add02_dsepJune3``:
  the per-geolevel query proportions (``PL94_QUERY_PROPS`` below);
- ``source/programs/engine/budget.py``: the global rho is ``1 / global_scale**2`` = 293764/114921 (~2.56);
  ``source/programs/engine/engine_utils.py`` (``getAdjustedInverseScalePerQuery``): a query's
  ``inverse_scale = query_prop * geolevel_prop / global_scale**2``, i.e. its own rho;
  ``source/programs/engine/primitives.py`` (``RationalDiscreteGaussianMechanism``): ``sigma_sq = 1 /
  inverse_scale`` and the published ``variance = computeDiscreteGaussianVariance(sigma_sq)``, the discrete
  Gaussian's exact variance (equal to ``sigma_sq`` above 100); ``source/programs/engine/curve.py``
  (``BaseCurve.get_rho``, ``bounded=True``): each marginal query costs rho = 1 / sigma^2, the replace-one
  (bounded) neighbour relation doubling the squared L2 sensitivity of a marginal to 2, so rho = 2 / (2 sigma^2).
  So a (level, query) with budget rho_lq is measured with the discrete Gaussian of sigma^2 = 1 / rho_lq.

The same numbers are printed in the production run's certificate in that repository,
``docs/certificates/DAS-PL94171-PRODUCTION-RUN1A-202106241420-US-Persons.certificate.pdf`` (pages 5-6: rho =
293764/114921, zCDP-implied epsilon = 17849145/1041158 ~ 17.14 at delta = 1e-10, the geolevel allocations and
the within-geolevel query table; its configuration section repeats the .ini files above, run from
das_decennial commit fa92d2fd3ca5dc194efce4f4176fe64a0eec474a), and in the Bureau's published "Privacy-loss
Budget Allocation 2021-06-08" (www2.census.gov/.../ppmf20210608/2021-06-08-privacy-loss_budgetallocation.pdf,
linked from that repository's README).  Puerto Rico was a separate run with its own budget; these are the US
(50 states + DC) persons numbers.

Mapping onto the reduced queries (``REDUCED_QUERY_OF``).  The production histogram is hhgq (8) x votingage (2) x
hispanic (2) x cenrace (63); ours is age (2, = votingage) x ethrace (8: Hispanic, and the six races alone and
two-or-more races, each not Hispanic -- a coarsening of hispanic x cenrace).  Each production query's share of
its level's rho goes to the reduced query over the person attributes it involves:

- ``total`` -> ``total``; ``votingage`` -> ``age``;
- ``hispanic``, ``cenrace``, ``hispanic * cenrace`` (ethnicity and/or race only) -> ``ethrace``;
- ``votingage * hispanic``, ``votingage * cenrace``, ``votingage * hispanic * cenrace`` and ``detailed`` ->
  ``detailed`` (= age x ethrace);
- ``hhgq`` and ``hhinstlevels`` (group-quarters type only, no information on age x ethrace): the remaining
  budget, given to ``detailed``.

So each level keeps its production rho, and the reduced (level, query) budget is the sum of the rho of the
production queries mapped to it (zCDP composes by adding rho).  The production's ``US`` level (104/4099 of the
global rho) measures the nation, not a state: a single-state release has no such geounit, so it is **dropped**
(not folded into ``state``), which keeps every state-and-below budget, and so every variance of a query that
maps one-to-one (``total``, ``age``), exactly the production's.  The mapped strategy's total rho is therefore
293764/114921 x 3995/4099 = 1173587180/471061179 (~2.491).

What the reduction does not reproduce: production measured the geounits of its optimized spine
(``spine = opt_spine``, ``target_das_aian_areas = True`` in ``prod_default.ini`` / ``person_US.ini``: AIAN
areas, Hawaiian Home Lands included, split the tabulation hierarchy below the state), while this measures the
tabulation state, county, tract, block group and block; and production's ``ethrace`` and ``detailed`` budgets
were spread over finer cells (126 and 2,016 cells) than ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..geotables import cell_labels, query_cell_map, to_query
from .census_table import LEVEL_DIGITS, check_levels, check_structural_zeros, sigma_of_variance

# --------------------------------------------------------------------------- the production allocation
#: ``global_scale`` of person_default.ini; the global rho is 1 / global_scale**2
PL94_GLOBAL_SCALE = Fr(339, 542)
PL94_GLOBAL_RHO = 1 / PL94_GLOBAL_SCALE ** 2  # 293764/114921
#: person_US.ini ``geolevel_budget_prop``, top-down
PL94_GEOLEVEL_PROPS = {
    "US": Fr(104, 4099), "State": Fr(1440, 4099), "County": Fr(447, 4099), "Tract": Fr(687, 4099),
    "Block_Group": Fr(1256, 4099), "Block": Fr(165, 4099),
}
#: the production queries, in strategies.py's order
PL94_QUERIES = ("total", "cenrace", "hispanic", "votingage", "hhinstlevels", "hhgq", "hispanic * cenrace",
                "votingage * cenrace", "votingage * hispanic", "votingage * hispanic * cenrace", "detailed")


def _props(*values) -> dict[str, Fr]:
    return dict(zip(PL94_QUERIES, values))


#: strategies.py, ProductionCandidate20210527US_mult8_add02_dsepJune3.make: each level's query proportions
#: (the US level measures no ``total``)
PL94_QUERY_PROPS = {
    "US": {q: p for q, p in _props(
        None, Fr(52, 4097), Fr(26, 4097), Fr(26, 4097), Fr(26, 4097), Fr(26, 4097), Fr(130, 4097), Fr(130, 4097),
        Fr(26, 4097), Fr(26, 241), Fr(189, 241)).items() if p is not None},
    "State": _props(Fr(3773, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(6, 4097), Fr(12, 4097),
                    Fr(12, 4097), Fr(6, 4097), Fr(2, 241), Fr(230, 4097)),
    "County": _props(Fr(3126, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097), Fr(10, 4097),
                     Fr(28, 4097), Fr(28, 4097), Fr(10, 4097), Fr(101, 4097), Fr(754, 4097)),
    "Tract": _props(Fr(1567, 4102), Fr(4, 2051), Fr(5, 4102), Fr(5, 4102), Fr(5, 4102), Fr(5, 4102),
                    Fr(1933, 4102), Fr(10, 2051), Fr(5, 4102), Fr(67, 4102), Fr(241, 2051)),
    "Block_Group": _props(Fr(1705, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099), Fr(3, 4099),
                          Fr(1055, 4099), Fr(9, 4099), Fr(3, 4099), Fr(24, 4099), Fr(1288, 4099)),
    "Block": _props(Fr(5, 4097), Fr(9, 4097), Fr(5, 4097), Fr(5, 4097), Fr(5, 4097), Fr(5, 4097), Fr(21, 4097),
                    Fr(21, 4097), Fr(5, 4097), Fr(71, 4097), Fr(3945, 4097)),
}

# --------------------------------------------------------------------------- the reduced form
#: the census family's histogram this allocation is mapped onto
ATTRIBUTES = {"age": ["under 18", "18+"],
              "ethrace": ["hisp", "white", "black", "aian", "asian", "nhpi", "other", "two"]}
QUERIES = {"total": [], "age": ["age"], "ethrace": ["ethrace"], "detailed": ["age", "ethrace"]}
LEVELS = ("state", "county", "tract", "block_group", "block")
#: production geolevel -> ours (None: not measured in a single-state release)
LEVEL_OF = {"US": None, "State": "state", "County": "county", "Tract": "tract", "Block_Group": "block_group",
            "Block": "block"}
#: production query -> the reduced query its budget goes to (module docstring)
REDUCED_QUERY_OF = {
    "total": "total", "votingage": "age",
    "hispanic": "ethrace", "cenrace": "ethrace", "hispanic * cenrace": "ethrace",
    "votingage * hispanic": "detailed", "votingage * cenrace": "detailed",
    "votingage * hispanic * cenrace": "detailed", "detailed": "detailed",
    "hhgq": "detailed", "hhinstlevels": "detailed",
}


@dataclass(frozen=True)
class Strategy:
    """A privacy-loss allocation over the reduced (level, query) pairs.

    ``global_rho``: the production run's rho; ``share[(level, query)]``: each pair's fraction of it (exact);
    ``rho``: the total this strategy spends (the shares' sum times ``global_rho``)."""

    name: str
    global_rho: Fr
    share: dict

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lv for lv, _ in self.share))

    @property
    def queries(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(q for _, q in self.share))

    @property
    def rho(self) -> Fr:
        return self.global_rho * sum(self.share.values(), Fr(0))

    def rho_of(self, level: str, query: str) -> Fr:
        return self.global_rho * self.share[(level, query)]

    def sigma_sq(self, level: str, query: str) -> Fr:
        """The discrete Gaussian's sigma^2 = 1 / rho_lq (primitives.py: sigma_sq = 1 / inverse_scale)."""
        return 1 / self.rho_of(level, query)


def _reduce_pl94() -> Strategy:
    share: dict[tuple[str, str], Fr] = {}
    for glevel, gprop in PL94_GEOLEVEL_PROPS.items():
        level = LEVEL_OF[glevel]
        if level is None:
            continue
        for q in QUERIES:
            share[(level, q)] = Fr(0)
        for pq, qprop in PL94_QUERY_PROPS[glevel].items():
            share[(level, REDUCED_QUERY_OF[pq])] += gprop * qprop
    return Strategy(name="pl94-2020", global_rho=PL94_GLOBAL_RHO, share=share)


STRATEGIES = {"pl94-2020": _reduce_pl94()}


def strategy_of(strategy) -> Strategy:
    if isinstance(strategy, Strategy):
        return strategy
    if strategy not in STRATEGIES:
        raise InputError("strategy", f"unknown strategy {strategy!r} (one of: {', '.join(STRATEGIES)})")
    return STRATEGIES[strategy]


def dg_variance(sigma_sq: float) -> float:
    """The discrete Gaussian's variance at parameter sigma^2 (computeDiscreteGaussianVariance of
    primitives.py: sigma^2 itself above 100, else the sum over +-50 sigma)."""
    s2 = float(sigma_sq)
    if s2 > 100:
        return s2
    bound = math.floor(50.0 * math.sqrt(s2))
    n = np.arange(-bound, 0, dtype=float)
    p = np.exp(-n * n / (2.0 * s2))
    return float(2 * np.sum(n * n * p) / (2 * np.sum(p) + 1))


def _names(values, known, field_name: str, what: str) -> list[str]:
    """``values`` checked as a list of distinct names of ``known``; ``what``: the singular noun."""
    if isinstance(values, str) or not isinstance(values, (list, tuple)) or not values:
        raise InputError(field_name, f"must be a non-empty list of {what} names (of: {', '.join(known)})")
    for i, v in enumerate(values):
        if v not in known:
            raise InputError(f"{field_name}[{i}]", f"{v!r} is not a {what} of the strategy (one of: "
                             f"{', '.join(known)})")
    if len(set(values)) != len(values):
        raise InputError(field_name, f"lists a {what} twice")
    return [str(v) for v in values]


def noise_variances(strategy: str, levels=LEVELS, queries=tuple(QUERIES)) -> dict[tuple[str, str], float]:
    """``{(level, query): the discrete-Gaussian noise variance of each of its cells}`` under ``strategy``.

    The variance is the one production published per measurement: the exact variance of the discrete Gaussian
    with sigma^2 = 1 / rho_lq (equal to sigma^2 for all but the state ``total`` here)."""
    s = strategy_of(strategy)
    levels = _names(levels, s.levels, "levels", "level")
    queries = _names(queries, s.queries, "queries", "query")
    return {(lv, q): dg_variance(s.sigma_sq(lv, q)) for lv in levels for q in queries}


# --------------------------------------------------------------------------- the Hawaii truth
TRUTH_FILE = "hi_2020_block_2x8.csv.gz"


def read_truth(path=None) -> tuple[np.ndarray, np.ndarray, dict[str, list[str]]]:
    """The block truth table: (15-digit block geocodes as str, counts (B, 2, 8) int64 as
    ``[block, age, ethrace]``, the attributes).  Default: the shipped Hawaii 2020 table
    (``dpposterior/data/census/README.md``); ``path``: a CSV (gzipped when it ends in .gz) of the same columns."""
    import gzip
    import io

    if path is None:
        from importlib import resources

        raw = (resources.files("dpposterior") / "data" / "census" / TRUTH_FILE).read_bytes()
        name = TRUTH_FILE
    else:
        p = Path(path)
        if not p.is_file():
            raise InputError("truth", f"no file {str(p)!r}")
        raw, name = p.read_bytes(), p.name
    text = gzip.decompress(raw).decode() if name.endswith(".gz") else raw.decode()
    cats = ATTRIBUTES["ethrace"]
    cols = ["GEOID20"] + [f"u18_{c}" for c in cats] + [f"vap_{c}" for c in cats]
    header, _, body = text.partition("\n")
    got = header.strip().split(",")
    if got != cols:
        raise InputError("truth", f"{name}: the columns must be {', '.join(cols)} (got {', '.join(got)})")
    table = np.loadtxt(io.StringIO(body), delimiter=",", dtype=str, ndmin=2)
    if table.shape[0] == 0:
        raise InputError("truth", f"{name}: has no rows")
    geocodes = table[:, 0].astype(str)
    bad = [g for g in geocodes if len(g) != 15 or not g.isdigit()]
    if bad:
        raise InputError("truth", f"{name}: {bad[0]!r} is not a 15-digit block GEOID")
    try:
        counts = table[:, 1:].astype(np.int64).reshape(-1, 2, len(cats))
    except ValueError:
        raise InputError("truth", f"{name}: the counts must be integers") from None
    if (counts < 0).any():
        raise InputError("truth", f"{name}: has a negative count")
    return geocodes, counts, {k: list(v) for k, v in ATTRIBUTES.items()}


# --------------------------------------------------------------------------- the simulator
def _truth(truth) -> tuple[np.ndarray, np.ndarray]:
    if truth is None or isinstance(truth, (str, Path)):
        geocodes, counts, _ = read_truth(truth)
    elif isinstance(truth, (tuple, list)) and len(truth) in (2, 3):
        geocodes, counts = truth[0], truth[1]
        if len(truth) == 3 and truth[2] is not None:
            if {k: list(v) for k, v in dict(truth[2]).items()} != ATTRIBUTES:
                raise InputError("truth", f"the attributes must be {ATTRIBUTES} (the strategies are mapped onto "
                                 "that histogram)")
    else:
        raise InputError("truth", "must be (geocodes, counts), (geocodes, counts, attributes) or a CSV path")
    geocodes = np.asarray([str(g) for g in np.asarray(geocodes).ravel()])
    counts = np.asarray(counts)
    C = int(np.prod([len(v) for v in ATTRIBUTES.values()]))
    if counts.ndim < 2 or counts.shape[0] != geocodes.size or int(np.prod(counts.shape[1:])) != C:
        raise InputError("truth", f"counts must have shape (blocks, 2, 8) or (blocks, 16) with one row per geocode "
                         f"(got {counts.shape} for {geocodes.size} geocodes)")
    if counts.dtype.kind not in "iu":
        if not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts)):
            raise InputError("truth", "counts must be integers")
    counts = counts.astype(np.int64).reshape(geocodes.size, C)
    if (counts < 0).any():
        raise InputError("truth", "counts must be >= 0")
    bad = [g for g in geocodes if len(g) != 15 or not g.isdigit()]
    if bad:
        raise InputError("truth", f"{bad[0]!r} is not a 15-digit block GEOID")
    if np.unique(geocodes).size != geocodes.size:
        raise InputError("truth", "lists a block twice")
    return geocodes, counts


def _query_answers(x: np.ndarray, query: str) -> np.ndarray:
    """Units' histograms ``(U, 16)`` -> the query's cells ``(U, K)``, in the C order of its attributes."""
    qc, sizes = query_cell_map(ATTRIBUTES, QUERIES)
    q = list(QUERIES).index(query)
    return to_query(x, qc[q], int(sizes[q]))


def simulate(truth=None, strategy: str = "pl94-2020", seed=None, levels=LEVELS, queries=None, structural_zeros=None):
    """A noisy-measurement release of ``truth`` under ``strategy``: (manifest dict, measurement rows).

    ``truth``: (geocodes, counts (B, 2, 8) or (B, 16)) [, attributes], a CSV path as :func:`read_truth` reads,
    or None for the shipped Hawaii table.  Every geounit of every level (GEOID prefixes of the blocks) and
    every cell of every query is measured once with exact discrete-Gaussian noise of the strategy's variance
    (``DiscreteGaussian(sigma).draw`` with ``numpy.random.default_rng(seed)``; the same seed gives the same
    rows).  The rows are columns ``level``, ``geocode``, ``query``, ``cell``, ``noisy_value`` (int64),
    ``variance`` (float), ordered by level, query, geounit, cell.  The manifest's invariants hold each
    state's exact total, as production kept it (``theInvariants.State = tot``); its ``strategy`` the strategy's
    name and the zCDP rho the measured (level, query) pairs spend.  ``structural_zeros`` (partial cells of the
    2 x 8 histogram, as the manifest's field) are written into the manifest; a truth with persons in one of those
    cells is refused."""
    from ..mechanisms.discrete_gaussian import DiscreteGaussian

    s = strategy_of(strategy)
    levels = _names(check_levels(levels), s.levels, "levels", "level")
    qnames = list(s.queries) if queries is None else _names(queries, s.queries, "queries", "query")
    geocodes, counts = _truth(truth)
    zero = check_structural_zeros(structural_zeros, ATTRIBUTES)
    if zero is not None and counts[:, zero].any():
        b, c = (int(v[0]) for v in np.nonzero(counts[:, zero]))
        cell = cell_labels(ATTRIBUTES, list(ATTRIBUTES))[int(np.flatnonzero(zero)[c])]
        raise InputError("truth", f"block {geocodes[b]} has {int(counts[b, zero][c])} persons in cell {cell!r}, "
                         "a structural zero")
    order = np.argsort(geocodes, kind="stable")
    geocodes, counts = geocodes[order], counts[order]
    variances = {(lv, q): dg_variance(s.sigma_sq(lv, q)) for lv in levels for q in qnames}
    rng = np.random.default_rng(seed)

    cols = {k: [] for k in ("level", "geocode", "query", "cell", "noisy_value", "variance")}
    state_totals = {}
    for lv in levels:
        prefixes = np.asarray([g[:LEVEL_DIGITS[lv]] for g in geocodes])
        # geocodes are sorted, so each geounit's blocks are one run
        units, starts = np.unique(prefixes, return_index=True)
        x = np.add.reduceat(counts, starts, axis=0) if lv != "block" else counts
        if lv == "state":
            state_totals = {str(u): int(t) for u, t in zip(units, x.sum(axis=1))}
        for q in qnames:
            answers = _query_answers(x, q)
            U, K = answers.shape
            var = variances[(lv, q)]
            sigma = float(sigma_of_variance(np.asarray([var]))[0])
            noise = DiscreteGaussian(sigma).draw((U, K), rng)
            cols["level"].append(np.full(U * K, lv, dtype=object))
            cols["geocode"].append(np.repeat(units.astype(object), K))
            cols["query"].append(np.full(U * K, q, dtype=object))
            cols["cell"].append(np.tile(np.asarray(cell_labels(ATTRIBUTES, QUERIES[q]), dtype=object), U))
            cols["noisy_value"].append((answers + noise).ravel().astype(np.int64))
            cols["variance"].append(np.full(U * K, var, dtype=float))
    rows = {k: np.concatenate(v) for k, v in cols.items()}
    if not state_totals:
        # the release's states are known from the blocks even where the state level is not measured
        states = np.asarray([g[:2] for g in geocodes])
        u, starts = np.unique(states, return_index=True)
        state_totals = {str(st): int(t) for st, t in zip(u, np.add.reduceat(counts.sum(axis=1), starts))}
    manifest = {
        "format": "dpposterior-release/1", "family": "census",
        "attributes": {k: list(v) for k, v in ATTRIBUTES.items()},
        "queries": {q: list(QUERIES[q]) for q in qnames},
        "levels": list(levels),
        "invariants": {"state_total": state_totals},
        # the rho this release spends: the strategy's total when every level and query is measured
        "strategy": {"name": s.name, "rho": float(sum((s.rho_of(lv, q) for lv in levels for q in qnames), Fr(0)))},
    }
    if zero is not None:
        manifest["structural_zeros"] = structural_zeros
    return manifest, rows
