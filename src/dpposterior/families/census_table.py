"""The shape of a census noisy-measurement release: a geographic hierarchy of noisy marginals of one latent
block-level histogram (the 2020 Census noisy measurement files, Abowd et al., Harvard Data Science Review 2022,
"The 2020 Census Disclosure Avoidance System TopDown Algorithm", Sec. 3-5).

The latent statistic is x[b, c]: the number of persons of histogram cell c in block b.  The histogram's cells
are the product of the attributes' categories in C order (the manifest's attribute order).  A query is the
marginal over a subset of the attributes; its cells are the product of those attributes' categories in the
query's attribute order (C order), labelled by the categories joined by ``|`` (``""`` for the zero-way
``total``).  A geounit at level L is identified by its GEOID prefix (``LEVEL_DIGITS``); a measurement is one
noisy cell of one query at one geounit, the sum of x over the geounit's blocks and the query cell's histogram
cells plus discrete-Gaussian noise of stated variance.

Exact facts published beside the noisy cells, outside the DP guarantee: invariants (totals), structural zeros (cells
that hold no one in any block) and bounds (:class:`CensusBounds`, lower and upper limits on the persons of a query
cell of a geounit: the DAS's ``hhgq_total_lb`` / ``hhgq_total_ub`` constraints, ``Constraints_PL94.py``).

:class:`CensusStructure` holds all of it as arrays: what the family, its engines, the GLS baseline and the
simulator share.  It is built (and every field checked) by :func:`build_structure`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..geotables import LEVEL_DIGITS, cell_labels, group_sum, query_cell_map, to_query

#: the levels in their hierarchical order, top first
LEVEL_ORDER = tuple(LEVEL_DIGITS)


@dataclass
class CensusStructure:
    """A census release as arrays (module docstring).

    Geounits: ``units[l]`` the sorted geocodes at ``levels[l]``; ``block_unit[l, b]`` the index of block b's
    geounit at level l (the last level is ``block``, so ``block_unit[-1] == arange(B)``).

    Queries: ``query_names[q]`` with attributes ``queries[name]``; ``query_cell[q, c]`` the cell of query q
    that histogram cell c falls in; ``query_sizes[q]`` its number of cells.

    Measurements (M rows): ``level``, ``unit``, ``query``, ``cell`` (indices as above), ``noisy`` (int64),
    ``variance`` (the discrete Gaussian's noise variance, as published) and ``sigma`` (its parameter).

    Invariants: ``invariants[level_name] = (unit indices, exact totals)`` -- persons in those geounits, published
    without noise.

    Structural zeros: ``structural_zero[c]`` is True where histogram cell c can hold no one in any block (a schema
    fact, e.g. no minors in nursing facilities); None when every cell is allowed.

    Bounds: ``bounds``, exact lower and upper bounds on query cells of geounits (:class:`CensusBounds`); None when
    the release has none.
    """

    attributes: dict[str, list[str]]
    queries: dict[str, list[str]]
    levels: list[str]
    units: list[np.ndarray]
    block_unit: np.ndarray
    query_cell: np.ndarray
    query_sizes: np.ndarray
    level: np.ndarray
    unit: np.ndarray
    query: np.ndarray
    cell: np.ndarray
    noisy: np.ndarray
    variance: np.ndarray
    sigma: np.ndarray
    invariants: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    structural_zero: np.ndarray | None = None
    bounds: "CensusBounds | None" = None

    @property
    def query_names(self) -> list[str]:
        return list(self.queries)

    @property
    def B(self) -> int:
        """Number of blocks."""
        return int(self.block_unit.shape[1])

    @property
    def C(self) -> int:
        """Number of histogram cells."""
        return int(self.query_cell.shape[1])

    @property
    def L(self) -> int:
        return len(self.levels)

    @property
    def Q(self) -> int:
        return len(self.queries)

    @property
    def M(self) -> int:
        """Number of noisy measurements."""
        return int(self.noisy.shape[0])

    @property
    def blocks(self) -> np.ndarray:
        return self.units[-1]

    @property
    def shape(self) -> tuple[int, ...]:
        """The histogram's shape (one axis per attribute)."""
        return tuple(len(v) for v in self.attributes.values())

    @property
    def allowed_cells(self) -> np.ndarray:
        """The histogram cells that may hold persons (every cell but the structural zeros), in order."""
        if self.structural_zero is None:
            return np.arange(self.C)
        return np.flatnonzero(~self.structural_zero)

    def zero_query_cells(self, query: str | int) -> np.ndarray:
        """For each cell of ``query``: True when every histogram cell in it is a structural zero (its true value is
        0 in every geounit)."""
        qi = query if isinstance(query, (int, np.integer)) else self.query_index(query)
        K = int(self.query_sizes[qi])
        if self.structural_zero is None:
            return np.zeros(K, dtype=bool)
        allowed = np.bincount(self.query_cell[qi], weights=~self.structural_zero, minlength=K)
        return allowed == 0

    def cell_labels(self, query: str | None = None) -> list[str]:
        """Labels of the cells of ``query`` (the histogram's cells when None): categories joined by ``|``."""
        return cell_labels(self.attributes, list(self.attributes) if query is None else self.queries[query])

    def detailed_query(self) -> int | None:
        """The index of a query whose cells are the histogram's own (all attributes), or None."""
        for q in range(self.Q):
            if self.query_sizes[q] == self.C and np.array_equal(np.sort(self.query_cell[q]), np.arange(self.C)):
                return q
        return None

    def level_index(self, level: str, field_name: str = "level") -> int:
        if level not in self.levels:
            raise InputError(field_name, f"unknown level {level!r} (one of: {', '.join(self.levels)})")
        return self.levels.index(level)

    def query_index(self, query: str, field_name: str = "query") -> int:
        if query not in self.queries:
            raise InputError(field_name, f"unknown query {query!r} (one of: {', '.join(self.queries)})")
        return self.query_names.index(query)

    def aggregate(self, x: np.ndarray, level: str | int, query: str | int) -> np.ndarray:
        """Sums of block histograms ``x[..., B, C]`` to the geounits of ``level`` and the cells of ``query``:
        an array ``[..., units, query cells]`` (integer input gives int64)."""
        li = level if isinstance(level, (int, np.integer)) else self.level_index(level)
        qi = query if isinstance(query, (int, np.integer)) else self.query_index(query)
        qc = to_query(np.asarray(x), self.query_cell[qi], int(self.query_sizes[qi]))
        return group_sum(qc, self.block_unit[li], len(self.units[li]), axis=-2)

    def measured(self, level: str | int, query: str | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The measurement rows of one (level, query): (row indices, unit indices, cell indices)."""
        li = level if isinstance(level, (int, np.integer)) else self.level_index(level)
        qi = query if isinstance(query, (int, np.integer)) else self.query_index(query)
        rows = np.flatnonzero((self.level == li) & (self.query == qi))
        return rows, self.unit[rows], self.cell[rows]

    def measurement_table(self) -> np.ndarray:
        """A dense index ``(L, Q, max units, max query cells)`` -> measurement row, -1 where not measured
        (refused when it would exceed 2**31 entries)."""
        U = max(len(u) for u in self.units)
        K = int(self.query_sizes.max())
        size = self.L * self.Q * U * K
        if size > 2 ** 31:
            raise InputError("measurements", f"the measurement index would hold {size:.3g} entries")
        table = np.full((self.L, self.Q, U, K), -1, dtype=np.int64)
        table[self.level, self.query, self.unit, self.cell] = np.arange(self.M)
        return table


def _labels(value, field_name: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or not value:
        raise InputError(field_name, "must be a non-empty list of category labels")
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, str) or not v or "|" in v:
            raise InputError(f"{field_name}[{i}]", f"must be a non-empty label without '|' (got {v!r})")
        out.append(v)
    if len(set(out)) != len(out):
        raise InputError(field_name, "labels must be distinct")
    return out


def check_attributes(attributes) -> dict[str, list[str]]:
    if not isinstance(attributes, dict) or not attributes:
        raise InputError("attributes", "must map each attribute to its list of category labels")
    return {str(k): _labels(v, f"attributes.{k}") for k, v in attributes.items()}


def check_queries(queries, attributes: dict[str, list[str]]) -> dict[str, list[str]]:
    if not isinstance(queries, dict) or not queries:
        raise InputError("queries", "must map each query name to its list of attributes")
    out = {}
    for name, attrs in queries.items():
        f = f"queries.{name}"
        if not isinstance(name, str) or not name:
            raise InputError("queries", f"query names must be non-empty strings (got {name!r})")
        if not isinstance(attrs, (list, tuple)):
            raise InputError(f, "must be a list of attributes ([] for the total)")
        for a in attrs:
            if a not in attributes:
                raise InputError(f, f"unknown attribute {a!r} (one of: {', '.join(attributes)})")
        if len(set(attrs)) != len(attrs):
            raise InputError(f, "lists an attribute twice")
        out[name] = list(attrs)
    return out


def check_levels(levels) -> list[str]:
    if not isinstance(levels, (list, tuple)) or not levels:
        raise InputError("levels", f"must be a list of levels, top first (of: {', '.join(LEVEL_ORDER)})")
    for i, lv in enumerate(levels):
        if lv not in LEVEL_DIGITS:
            raise InputError(f"levels[{i}]", f"unknown level {lv!r} (one of: {', '.join(LEVEL_ORDER)})")
    if len(set(levels)) != len(levels):
        raise InputError("levels", "lists a level twice")
    if [LEVEL_ORDER.index(lv) for lv in levels] != sorted(LEVEL_ORDER.index(lv) for lv in levels):
        raise InputError("levels", f"must be in hierarchical order, top first ({', '.join(LEVEL_ORDER)})")
    if levels[-1] != "block":
        raise InputError("levels", "must end with block (the latent histograms are per block)")
    return list(levels)


def sigma_of_variance(var: np.ndarray) -> np.ndarray:
    """The discrete-Gaussian sigma whose noise variance is ``var`` (as ``small-area``'s reader solves it)."""
    from .small_area import sigma_of_variance as solve

    return solve(np.asarray(var, float))


def check_structural_zeros(spec, attributes: dict[str, list[str]]) -> np.ndarray | None:
    """The structural-zero mask over the histogram's cells (C order) of ``spec``: a list of partial cells, each
    ``{attribute: label or [labels]}``; every cell matching all the attributes given is zero.  None when ``spec``
    is None or empty."""
    if spec is None:
        return None
    if not isinstance(spec, (list, tuple)):
        raise InputError("structural_zeros", "must be a list of partial cells, each {attribute: label or [labels]}")
    shape = tuple(len(v) for v in attributes.values())
    mask = np.zeros(shape, dtype=bool)
    for i, item in enumerate(spec):
        f = f"structural_zeros[{i}]"
        if not isinstance(item, dict):
            raise InputError(f, f"must be a partial cell {{attribute: label or [labels]}} (got {item!r})")
        if not item:
            raise InputError(f, "names no attribute (an empty partial cell would zero every cell)")
        sel = np.ones(shape, dtype=bool)
        for attr, value in item.items():
            if attr not in attributes:
                raise InputError(f"{f}.{attr}", f"unknown attribute (one of: {', '.join(attributes)})")
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, (list, tuple)) or not values:
                raise InputError(f"{f}.{attr}", f"must be a label of {attr} or a non-empty list of them (got "
                                 f"{value!r})")
            axis = list(attributes).index(attr)
            hit = np.zeros(shape[axis], dtype=bool)
            for v in values:
                if not isinstance(v, str) or v not in attributes[attr]:
                    raise InputError(f"{f}.{attr}", f"{v!r} is not a label of {attr}")
                hit[attributes[attr].index(v)] = True
            sel &= hit.reshape([-1 if a == axis else 1 for a in range(len(shape))])
        if sel.all():
            raise InputError(f, "zeroes every cell (it lists every label of each attribute it names)")
        mask |= sel
    return mask.ravel() if mask.any() else None


def build_structure(attributes, queries, levels, rows: dict, invariants=None, blocks=None,
                    structural_zeros=None, bounds=None) -> CensusStructure:
    """Check a release's parts and index them.

    ``rows``: the measurement table's columns ``level``, ``geocode``, ``query``, ``cell``, ``noisy_value``,
    ``variance`` (equal-length sequences).  ``blocks``: the block geocodes, when given (else every 15-digit
    geocode of the table, at any level, and the blocks its upper-level geocodes imply are not invented).
    ``invariants``: ``{"<level>_total": {geocode: persons}}``.  ``structural_zeros``: the partial cells that are
    zero in every block (:func:`check_structural_zeros`).  ``bounds``: rows of exact bounds (:func:`check_bounds`).
    """
    attributes = check_attributes(attributes)
    zero = check_structural_zeros(structural_zeros, attributes)
    queries = check_queries(queries, attributes)
    levels = check_levels(levels)
    need = ("level", "geocode", "query", "cell", "noisy_value", "variance")
    for col in need:
        if col not in rows:
            raise InputError("measurements", f"has no column {col!r} (needs: {', '.join(need)})")
    n = len(rows["level"])
    for col in need:
        if len(rows[col]) != n:
            raise InputError(f"measurements.{col}", f"has {len(rows[col])} rows, not {n}")
    if n == 0:
        raise InputError("measurements", "has no rows")
    level_names = np.asarray(rows["level"], dtype=object).astype(str)
    geocode = np.asarray(rows["geocode"], dtype=object)
    geocode = np.array(["" if g is None else str(g) for g in geocode], dtype=object)
    qname = np.asarray(rows["query"], dtype=object).astype(str)
    cell_text = np.array(["" if c is None or (isinstance(c, float) and math.isnan(c)) else str(c)
                          for c in rows["cell"]], dtype=object)
    noisy_raw = np.asarray(rows["noisy_value"])
    variance = np.asarray(rows["variance"], dtype=float) if np.asarray(rows["variance"]).dtype.kind in "fiu" \
        else _floats(rows["variance"], "measurements.variance")
    noisy = _integers(noisy_raw, "measurements.noisy_value")

    bad = ~np.isin(level_names, levels)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"measurements.level[{i}]", f"{level_names[i]!r} is not one of the manifest's levels "
                         f"({', '.join(levels)})")
    lidx = _index_of(level_names, levels)
    digits = np.array([LEVEL_DIGITS[v] for v in levels])
    lengths = np.fromiter((len(g) for g in geocode), dtype=np.int64, count=n)
    wrong = lengths != digits[lidx]
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise InputError(f"measurements.geocode[{i}]", f"{geocode[i]!r} at level {level_names[i]} must have "
                         f"{digits[lidx[i]]} digits")
    notdigit = np.fromiter((not (g.isdigit() or g == "") for g in geocode), dtype=bool, count=n)
    if notdigit.any():
        i = int(np.flatnonzero(notdigit)[0])
        raise InputError(f"measurements.geocode[{i}]", f"{geocode[i]!r} is not a GEOID (digits only)")
    bad = ~np.isin(qname, list(queries))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"measurements.query[{i}]", f"{qname[i]!r} is not a key of queries ({', '.join(queries)})")
    qnames = list(queries)
    qidx = _index_of(qname, qnames)
    # the cell's index within its query, from its labels
    cidx = np.full(n, -1, dtype=np.int64)
    for q, name in enumerate(qnames):
        attrs = queries[name]
        labels = {lab: k for k, lab in enumerate(cell_labels(attributes, attrs))}
        rows_q = np.flatnonzero(qidx == q)
        got = [labels.get(t, -1) for t in cell_text[rows_q]]
        cidx[rows_q] = got
        missing = rows_q[np.asarray(got, dtype=np.int64) < 0]
        if missing.size:
            i = int(missing[0])
            sample = next(iter(labels))
            raise InputError(f"measurements.cell[{i}]", f"{cell_text[i]!r} is not a cell of query {name} (cells are "
                             f"its attributes' labels joined by '|' in the order {attrs}, e.g. {sample!r})")
    if not np.all(np.isfinite(variance)) or np.any(variance <= 0):
        i = int(np.flatnonzero(~(np.isfinite(variance) & (variance > 0)))[0])
        raise InputError(f"measurements.variance[{i}]", f"must be a positive finite number (got {variance[i]!r}); "
                         "exact values go in the manifest's invariants")
    # geounits per level, and the blocks
    if blocks is None:
        blocks_arr = np.unique(geocode[lidx == len(levels) - 1].astype(str))
    else:
        blocks_arr = np.asarray([str(b) for b in blocks])
        if len(np.unique(blocks_arr)) != len(blocks_arr):
            raise InputError("blocks", "lists a block twice")
        blocks_arr = np.sort(blocks_arr)
        badlen = [b for b in blocks_arr if len(b) != 15 or not b.isdigit()]
        if badlen:
            raise InputError("blocks", f"{badlen[0]!r} is not a 15-digit block GEOID")
    if blocks_arr.size == 0:
        raise InputError("measurements", "has no block-level rows: the blocks are not known (give them in "
                         "the manifest's blocks list)")
    units, block_unit = [], np.zeros((len(levels), blocks_arr.size), dtype=np.int64)
    for li, lv in enumerate(levels):
        prefixes = np.array([b[:LEVEL_DIGITS[lv]] for b in blocks_arr], dtype=object)
        u, inv = np.unique(prefixes.astype(str), return_inverse=True)
        units.append(u)
        block_unit[li] = inv
    uidx = np.zeros(n, dtype=np.int64)
    for li in range(len(levels)):
        rows_l = np.flatnonzero(lidx == li)
        g = geocode[rows_l].astype(str)
        pos = np.searchsorted(units[li], g)
        pos_c = np.minimum(pos, len(units[li]) - 1)
        unknown = units[li][pos_c] != g
        if unknown.any():
            i = int(rows_l[np.flatnonzero(unknown)[0]])
            raise InputError(f"measurements.geocode[{i}]", f"{geocode[i]!r} ({levels[li]}) contains none of the "
                             "release's blocks")
        uidx[rows_l] = pos_c
    key = ((lidx * len(qnames) + qidx) * (max(len(u) for u in units) + 1) + uidx) * 4096 + cidx
    uniq, first = np.unique(key, return_index=True)
    if uniq.size != n:
        dup = np.setdiff1d(np.arange(n), first)[0]
        raise InputError(f"measurements[{int(dup)}]", f"measures {level_names[dup]} {geocode[dup]} {qname[dup]} "
                         f"cell {cell_text[dup]!r} a second time")
    qc, sizes = query_cell_map(attributes, queries)
    inv = _check_invariants(invariants, levels, units)
    if zero is not None and zero.all():
        # no cell may hold a person: a positive exact total is a contradiction, and an all-zero histogram has
        # nothing to infer
        for lv, (idx, tot) in inv.items():
            if (tot > 0).any():
                k = int(np.flatnonzero(tot > 0)[0])
                raise InputError(f"invariants.{lv}_total.{units[levels.index(lv)][idx[k]]}", f"{int(tot[k])} "
                                 "persons, but structural_zeros leave no cell that may hold a person")
        raise InputError("structural_zeros", "together they zero every cell: no cell may hold a person")
    # (a measured query cell made only of structural zeros has true value 0; its noisy value is noise, so it
    # is kept, not refused)
    out = CensusStructure(attributes=attributes, queries=queries, levels=levels, units=units, block_unit=block_unit,
                          query_cell=qc, query_sizes=sizes, level=lidx, unit=uidx, query=qidx, cell=cidx,
                          noisy=noisy, variance=variance, sigma=sigma_of_variance(variance), invariants=inv,
                          structural_zero=zero)
    out.bounds = check_bounds(bounds, out)
    return out


def _index_of(values: np.ndarray, names: list[str]) -> np.ndarray:
    lookup = {v: i for i, v in enumerate(names)}
    return np.fromiter((lookup[v] for v in values), dtype=np.int64, count=len(values))


def _integers(values: np.ndarray, field_name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    out = np.empty(arr.shape[0], dtype=np.int64)
    for i, v in enumerate(arr):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{field_name}[{i}]", f"must be an integer (got {v!r})") from None
        if not math.isfinite(f) or f != int(f) or abs(f) > 2 ** 53:
            raise InputError(f"{field_name}[{i}]", f"must be an integer (got {v!r})")
        out[i] = int(f)
    return out


def _floats(values, field_name: str) -> np.ndarray:
    out = np.empty(len(values), dtype=float)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{field_name}[{i}]", f"must be a number (got {v!r})") from None
    return out


def _check_invariants(invariants, levels, units) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    if invariants is None:
        return {}
    if not isinstance(invariants, dict):
        raise InputError("invariants", "must map '<level>_total' to {geocode: persons}")
    out = {}
    for key, table in invariants.items():
        f = f"invariants.{key}"
        if not isinstance(key, str) or not key.endswith("_total") or key[:-6] not in levels:
            raise InputError(f, f"must be '<level>_total' for a level of the release ({', '.join(levels)})")
        li = levels.index(key[:-6])
        if not isinstance(table, dict) or not table:
            raise InputError(f, "must map geocodes to exact person counts")
        idx, vals = [], []
        for g, v in table.items():
            pos = np.searchsorted(units[li], str(g))
            if pos >= len(units[li]) or units[li][pos] != str(g):
                raise InputError(f"{f}.{g}", "is not a geounit of the release at that level")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
                raise InputError(f"{f}.{g}", f"must be a whole number of persons (got {v!r})")
            idx.append(int(pos))
            vals.append(int(v))
        out[key[:-6]] = (np.asarray(idx, dtype=np.int64), np.asarray(vals, dtype=np.int64))
    return out


#: the columns of a bounds table (``lower`` and ``upper`` may be empty)
BOUND_COLUMNS = ("level", "geocode", "query", "cell", "lower", "upper")
#: the stored ``upper`` of a bound without one (no count comes near it)
NO_UPPER = 2 ** 62


@dataclass
class CensusBounds:
    """Exact bounds ``lower[k] <= (sum of x over geounit unit[k] at level[k] and cell cell[k] of query query[k])
    <= upper[k]`` (``NO_UPPER`` where there is no upper bound), published outside the DP guarantee like the
    invariants (the DAS's ``hhgq_total_lb`` / ``hhgq_total_ub`` constraints; a structural zero of some blocks only
    is an upper bound of 0 on their cells).  One row per (level, geounit, query, cell): rows naming the same one
    are merged (the largest lower, the smallest upper)."""

    level: np.ndarray
    unit: np.ndarray
    query: np.ndarray
    cell: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def size(self) -> int:
        return int(self.level.shape[0])

    def sums(self, structure: "CensusStructure", x: np.ndarray) -> np.ndarray:
        """Each bound's sum under block histograms ``x[B, C]`` (over the histogram's cells)."""
        out = np.zeros(self.size, dtype=np.int64)
        for li in np.unique(self.level):
            for qi in np.unique(self.query[self.level == li]):
                rows = np.flatnonzero((self.level == li) & (self.query == qi))
                out[rows] = structure.aggregate(x, int(li), int(qi))[self.unit[rows], self.cell[rows]]
        return out

    def violated(self, structure: "CensusStructure", x: np.ndarray) -> np.ndarray:
        """The indices of the bounds ``x`` breaks."""
        got = self.sums(structure, x)
        return np.flatnonzero((got < self.lower) | (got > self.upper))

    def rows(self, structure: "CensusStructure") -> list[dict]:
        """The bounds as the manifest's rows (``upper`` left out where there is none)."""
        out = []
        for k in range(self.size):
            li, qi = int(self.level[k]), int(self.query[k])
            q = structure.query_names[qi]
            row = {"level": structure.levels[li], "geocode": str(structure.units[li][self.unit[k]]), "query": q,
                   "cell": structure.cell_labels(q)[int(self.cell[k])], "lower": int(self.lower[k])}
            if self.upper[k] < NO_UPPER:
                row["upper"] = int(self.upper[k])
            out.append(row)
        return out


def _bound_value(v, name: str, default: int) -> int:
    """A bound's ``lower`` or ``upper``: a whole number >= 0, or ``default`` where empty."""
    if v is None or (isinstance(v, str) and v.strip() == "") or (isinstance(v, float) and math.isnan(v)):
        return default
    if isinstance(v, (bool, np.bool_)):
        raise InputError(name, f"must be a whole number of persons (got {v!r})")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InputError(name, f"must be a whole number of persons (got {v!r})") from None
    if not math.isfinite(f) or f != int(f):
        raise InputError(name, f"must be a whole number of persons (got {v!r})")
    if f < 0:
        raise InputError(name, f"must be >= 0 (got {v!r}): counts are not negative")
    if f >= NO_UPPER:
        raise InputError(name, f"{v!r} is too large")
    return int(f)


def check_bounds(spec, s: CensusStructure) -> CensusBounds | None:
    """The bounds of ``spec`` -- rows (a list of ``{level, geocode, query, cell, lower, upper}``, or a dict of
    those columns as a bounds table is read) -- checked against the release ``s``: known level, geounit, query and
    cell; ``lower`` and ``upper`` whole numbers >= 0 (``lower`` empty = 0, ``upper`` empty = none), lower <=
    upper; none contradicting a structural zero (a positive lower bound on a cell that holds only zeros) or an
    invariant (a lower bound above the exact total of a geounit holding the bound's, an upper bound on a total
    below the exact totals inside it).  None when ``spec`` is None or has no rows."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        missing = [c for c in ("level", "geocode", "query", "cell") if c not in spec]
        if missing:
            raise InputError("bounds", f"has no column {missing[0]!r} (needs: {', '.join(BOUND_COLUMNS)})")
        n = len(spec["level"])
        cols = {c: list(spec[c]) if c in spec else [None] * n for c in BOUND_COLUMNS}
        for c in BOUND_COLUMNS:
            if len(cols[c]) != n:
                raise InputError(f"bounds.{c}", f"has {len(cols[c])} rows, not {n}")
        rows = [{c: cols[c][i] for c in BOUND_COLUMNS} for i in range(n)]

        def name(i, c):
            return f"bounds.{c}[{i}]"
    elif isinstance(spec, (list, tuple)):
        rows = list(spec)

        def name(i, c):
            return f"bounds[{i}].{c}" if c else f"bounds[{i}]"
    else:
        raise InputError("bounds", "must be a table file's name or a list of rows {level, geocode, query, cell, "
                         "lower, upper}")
    if not rows:
        return None
    labels = {q: {lab: k for k, lab in enumerate(s.cell_labels(q))} for q in s.queries}
    zero_cells = {q: s.zero_query_cells(q) for q in s.queries}
    merged: dict[tuple, list] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(name(i, ""), f"must be a row {{level, geocode, query, cell, lower, upper}} (got {row!r})")
        unknown = [k for k in row if k not in BOUND_COLUMNS]
        if unknown:
            raise InputError(name(i, unknown[0]), f"unknown field (the fields: {', '.join(BOUND_COLUMNS)})")
        lv = row.get("level")
        if lv not in s.levels:
            raise InputError(name(i, "level"), f"{lv!r} is not one of the manifest's levels ({', '.join(s.levels)})")
        li = s.levels.index(lv)
        g = row.get("geocode")
        g = "" if g is None else str(g)
        pos = int(np.searchsorted(s.units[li], g))
        if pos >= len(s.units[li]) or s.units[li][pos] != g:
            raise InputError(name(i, "geocode"), f"{g!r} is not a geounit of the release at level {lv}")
        q = row.get("query")
        if q not in s.queries:
            raise InputError(name(i, "query"), f"{q!r} is not a key of queries ({', '.join(s.queries)})")
        c = row.get("cell")
        c = "" if c is None or (isinstance(c, float) and math.isnan(c)) else str(c)
        if c not in labels[q]:
            raise InputError(name(i, "cell"), f"{c!r} is not a cell of query {q} (its attributes' labels joined "
                             f"by '|' in the order {s.queries[q]})")
        k = labels[q][c]
        lower = _bound_value(row.get("lower"), name(i, "lower"), 0)
        upper = _bound_value(row.get("upper"), name(i, "upper"), NO_UPPER)
        if lower > upper:
            raise InputError(name(i, "lower"), f"{lower} is above its upper bound {upper}")
        if lower > 0 and zero_cells[q][k]:
            raise InputError(name(i, "lower"), f"{lower} persons in {lv} {g} {q} cell {c!r}, but structural_zeros "
                             "leave that cell empty everywhere")
        key = (li, pos, s.query_names.index(q), k)
        have = merged.get(key)
        if have is None:
            merged[key] = [lower, upper, i]
        else:
            have[0], have[1] = max(have[0], lower), min(have[1], upper)
            if have[0] > have[1]:
                raise InputError(name(i, "lower"), f"{lv} {g} {q} cell {c!r} is bounded again: together its rows "
                                 f"ask for at least {have[0]} and at most {have[1]} persons")
    keys = np.array(list(merged), dtype=np.int64).reshape(-1, 4)
    vals = np.array([v for v in merged.values()], dtype=np.int64).reshape(-1, 3)
    bounds = CensusBounds(level=keys[:, 0].copy(), unit=keys[:, 1].copy(), query=keys[:, 2].copy(),
                          cell=keys[:, 3].copy(), lower=vals[:, 0].copy(), upper=vals[:, 1].copy())
    _check_bounds_against_invariants(bounds, vals[:, 2], s, name)
    return bounds


def _check_bounds_against_invariants(bounds: CensusBounds, row_of: np.ndarray, s: CensusStructure, name) -> None:
    """A lower bound above the exact total of a geounit that holds the bound's geounit, or an upper bound on a
    total below the sum of the exact totals of geounits inside it, contradicts the invariants: refused."""
    first = [np.searchsorted(s.block_unit[li], np.arange(len(s.units[li]))) for li in range(s.L)]
    total_query = s.query_sizes[bounds.query] == 1
    for lv, (units, totals) in s.invariants.items():
        li = s.levels.index(lv)
        exact = np.full(len(s.units[li]), -1, dtype=np.int64)
        exact[units] = totals
        for k in range(bounds.size):
            bl = int(bounds.level[k])
            if bl >= li:  # the invariant's geounit holds the bound's
                v = s.block_unit[li, first[bl][bounds.unit[k]]]
                if exact[v] >= 0 and bounds.lower[k] > exact[v]:
                    raise InputError(name(int(row_of[k]), "lower"), f"{int(bounds.lower[k])} persons, but "
                                     f"invariants.{lv}_total gives {s.units[li][v]} exactly {int(exact[v])}")
        # the exact totals inside each bound's geounit, for bounds on a total
        for k in np.flatnonzero(total_query & (bounds.level <= li)):
            bl = int(bounds.level[k])
            inside = s.block_unit[bl, first[li][units]] == bounds.unit[k]
            held = int(totals[inside].sum())
            if held > bounds.upper[k]:
                raise InputError(name(int(row_of[k]), "upper"), f"{int(bounds.upper[k])} persons, but "
                                 f"invariants.{lv}_total puts {held} in {s.levels[bl]} "
                                 f"{s.units[bl][bounds.unit[k]]}")
