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
                    structural_zeros=None) -> CensusStructure:
    """Check a release's parts and index them.

    ``rows``: the measurement table's columns ``level``, ``geocode``, ``query``, ``cell``, ``noisy_value``,
    ``variance`` (equal-length sequences).  ``blocks``: the block geocodes, when given (else every 15-digit
    geocode of the table, at any level, and the blocks its upper-level geocodes imply are not invented).
    ``invariants``: ``{"<level>_total": {geocode: persons}}``.  ``structural_zeros``: the partial cells that are
    zero in every block (:func:`check_structural_zeros`).
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
    return CensusStructure(attributes=attributes, queries=queries, levels=levels, units=units, block_unit=block_unit,
                           query_cell=qc, query_sizes=sizes, level=lidx, unit=uidx, query=qidx, cell=cidx,
                           noisy=noisy, variance=variance, sigma=sigma_of_variance(variance), invariants=inv,
                           structural_zero=zero)


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
