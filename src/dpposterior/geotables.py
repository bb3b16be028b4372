"""Tables over a geographic hierarchy of blocks: the sums of block histograms to any union of blocks and any
marginal of the histogram (numpy only).  What ``Posterior.counts`` and ``dpposterior tabulate`` compute from the
draws of the ``census`` family, and what its release structure (``families/census_table``) uses to index its
queries."""

from __future__ import annotations

import itertools

import numpy as np

from .errors import InputError

#: GEOID digits of a geounit at each level (state 2, county 5, tract 11, block group 12, block 15), top first
LEVEL_DIGITS = {"us": 0, "state": 2, "county": 5, "tract": 11, "block_group": 12, "block": 15}


def query_cell_map(attributes: dict[str, list[str]], queries: dict[str, list[str]]) -> tuple[np.ndarray, np.ndarray]:
    """``(query_cell[q, c], query_sizes[q])``: the cell of query q (C order over its attributes) that histogram
    cell c (C order over ``attributes``) falls in, and each query's number of cells."""
    names = list(attributes)
    shape = tuple(len(attributes[a]) for a in names)
    C = int(np.prod(shape))
    coords = np.unravel_index(np.arange(C), shape)
    qc = np.zeros((len(queries), C), dtype=np.int64)
    sizes = np.zeros(len(queries), dtype=np.int64)
    for q, attrs in enumerate(queries.values()):
        if attrs:
            sub = tuple(len(attributes[a]) for a in attrs)
            qc[q] = np.ravel_multi_index(tuple(coords[names.index(a)] for a in attrs), sub)
            sizes[q] = int(np.prod(sub))
        else:
            sizes[q] = 1
    return qc, sizes


def cell_labels(attributes: dict[str, list[str]], attrs: list[str]) -> list[str]:
    """Labels of the cells of the marginal over ``attrs``: categories joined by ``|`` (``""`` for the total)."""
    if not attrs:
        return [""]
    return ["|".join(c) for c in itertools.product(*(attributes[a] for a in attrs))]


def to_query(x: np.ndarray, cell_map: np.ndarray, size: int) -> np.ndarray:
    """``x[..., C]`` summed into the ``size`` cells of a query (``cell_map[c]``: the query cell of cell c)."""
    out = np.zeros(x.shape[:-1] + (size,), dtype=np.int64 if x.dtype.kind in "iu" else x.dtype)
    for k in range(size):
        out[..., k] = x[..., cell_map == k].sum(axis=-1)
    return out


def group_sum(x: np.ndarray, group: np.ndarray, n_groups: int, axis: int) -> np.ndarray:
    """Sums of ``x`` along ``axis`` within groups (``group[i]``: the group of index i; -1: left out), in one
    pass: integers by differences of a cumulative sum over the indices sorted by group (exact), floats by
    ``np.add.at``."""
    x = np.moveaxis(x, axis, -1)
    group = np.asarray(group)
    kept = np.flatnonzero(group >= 0)
    if x.dtype.kind == "f":
        out = np.zeros(x.shape[:-1] + (n_groups,), dtype=x.dtype)
        np.add.at(np.moveaxis(out, -1, 0), group[kept], np.moveaxis(x[..., kept], -1, 0))
        return np.moveaxis(out, -1, axis)
    order = kept[np.argsort(group[kept], kind="stable")]
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    csum = np.zeros(x.shape[:-1] + (order.size + 1,), dtype=np.int64)
    np.cumsum(x[..., order], axis=-1, out=csum[..., 1:])
    return np.moveaxis(csum[..., bounds[1:]] - csum[..., bounds[:-1]], -1, axis)


def prefix_members(blocks: np.ndarray, geocodes, field_name: str = "geocodes") -> np.ndarray:
    """The blocks (a boolean mask over ``blocks``) whose GEOID starts with any of ``geocodes``; a geocode that
    holds none of them is refused (a typo would otherwise give a union short of its blocks)."""
    if isinstance(geocodes, str):
        geocodes = [geocodes]
    mask = np.zeros(len(blocks), dtype=bool)
    blocks = np.asarray(blocks).astype(str)
    for g in geocodes:
        g = str(g).strip()
        if not g.isdigit():
            raise InputError(field_name, f"{g!r} is not a GEOID (digits only)")
        hit = np.char.startswith(blocks, g)
        if not hit.any():
            raise InputError(field_name, f"{g!r} holds none of the posterior's blocks")
        mask |= hit
    return mask
