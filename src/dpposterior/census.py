"""``dpposterior.census``: the Census noisy measurement files in Python (docs/census.md).

- :func:`simulate` -- a noisy-measurement release of a block-level truth (the shipped Hawaii 2020 table by default)
  under the 2020 production privacy-loss allocation (``families/census_strategy``), exact discrete-Gaussian noise;
- :func:`release_from` / :func:`save` -- a release from a manifest and its measurement columns, and its files (the
  JSON manifest and a parquet table beside it);
- :func:`read_nmf` -- the Census Bureau's own NMF parquet layout read into a manifest and rows
  (``families/census_nmf``);
- :func:`tabulate` and :func:`union` -- posterior medians, intervals and threshold probabilities of any level and
  query, or of any union of blocks (districts), from a posterior of the ``census`` family;
- :func:`peers` -- the GLS estimate (the Bureau's own baseline), the naive reading and per-cell flat-prior
  intervals of the same cells, for comparison.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputError


def release_from(manifest: dict, rows: dict):
    """A validated :class:`~dpposterior.families.census.CensusRelease` from a manifest (as the JSON file holds it,
    ``measurements`` aside) and its measurement columns (``level, geocode, query, cell, noisy_value, variance``)."""
    from .families.census import release_from as build

    return build(manifest, rows)


def simulate(truth=None, strategy: str = "pl94-2020", seed=None, **kwargs):
    """A simulated noisy-measurement release (a :class:`~dpposterior.families.census.CensusRelease`) of ``truth``
    (geocodes and a block x cell count table, a CSV path, or None: Hawaii 2020) under ``strategy``; ``kwargs``:
    ``levels``, ``queries``, ``structural_zeros`` (``families.census_strategy.simulate``)."""
    from .families.census_strategy import simulate as draw

    manifest, rows = draw(truth, strategy=strategy, seed=seed, **kwargs)
    return release_from(manifest, rows)


def save(release, path) -> Path:
    """Write ``release`` as ``path`` (the JSON manifest) and the parquet table beside it (same name, ``.parquet``);
    returns the manifest's path.  ``dpposterior infer path`` reads the two back."""
    from .families.census import write_release

    return write_release(release, path)


def read_nmf(path, **kwargs):
    """The Bureau's NMF parquet layout read into (manifest, rows) (``families.census_nmf.read_nmf``)."""
    from .families.census_nmf import read_nmf as read

    return read(path, **kwargs)


def _quantiles(draws: np.ndarray, interval: float, kind: str):
    from .intervals import interval as credible

    lo, hi = credible(draws, interval, kind)
    return np.quantile(draws, 0.5, axis=0, method="inverted_cdf"), lo, hi


def _check_interval(interval) -> float:
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0.0 < interval < 1.0:
        raise InputError("interval", f"must be a probability in (0, 1) (got {interval!r})")
    return float(interval)


def _check_kind(kind) -> str:
    from .intervals import KINDS

    if kind not in KINDS:
        raise InputError("interval_kind", f"must be one of {', '.join(KINDS)} (got {kind!r})")
    return kind


def tabulate(post, level: str, query: str = "total", interval: float = 0.9, interval_kind: str = "hpd"):
    """Median and ``interval`` of persons in every geounit of ``level`` by the cells of ``query``: a data frame
    with columns geocode, cell, mean, median, lower, upper.  ``interval_kind``: "hpd" (the shortest interval
    holding at least ``interval`` of the posterior; one-sided where the mass piles at zero) or "equal-tailed"
    (``dpposterior.intervals``)."""
    import pandas as pd

    interval, interval_kind = _check_interval(interval), _check_kind(interval_kind)
    arr = post.counts(query=query, level=level)
    draws = arr.values.reshape(-1, *arr.shape[2:])
    med, lo, hi = _quantiles(draws, interval, interval_kind)
    units, cells = arr.coords[level].values, arr.coords["cell"].values
    return pd.DataFrame({"geocode": np.repeat(units.astype(str), len(cells)),
                         "cell": np.tile(cells.astype(str), len(units)),
                         "mean": draws.mean(axis=0).ravel(), "median": med.ravel().astype(np.int64),
                         "lower": lo.ravel().astype(np.int64), "upper": hi.ravel().astype(np.int64)})


def union(post, members: dict, query: str = "total", interval: float = 0.9, at_least=(), interval_kind: str = "hpd"):
    """Persons in each union of geounits (``members``: name -> GEOID prefixes, e.g. a district's blocks) by the
    cells of ``query``: mean, median, ``interval`` (of ``interval_kind``, as :func:`tabulate`) and P(count >= k)
    for every k in ``at_least``."""
    import pandas as pd

    interval, interval_kind = _check_interval(interval), _check_kind(interval_kind)
    at_least = [int(k) for k in at_least]
    if not isinstance(members, dict) or not members:
        raise InputError("union", "must map each union's name to its GEOIDs")
    from .geotables import prefix_members

    out = []
    blocks = np.asarray(post.coords.get("block", []))
    for name, codes in members.items():
        prefix_members(blocks, list(codes), f"union.{name}")
        arr = post.counts(geocodes=list(codes), query=query)
        draws = arr.values.reshape(-1, arr.shape[-1])
        med, lo, hi = _quantiles(draws, interval, interval_kind)
        for k, cell in enumerate(arr.coords["cell"].values):
            row = {"union": str(name), "cell": str(cell), "mean": float(draws[:, k].mean()), "median": int(med[k]),
                   "lower": int(lo[k]), "upper": int(hi[k])}
            for t in at_least:
                row[f"p_at_least_{t}"] = float(np.mean(draws[:, k] >= t))
            out.append(row)
    return pd.DataFrame(out)


def read_union_file(path) -> dict[str, list[str]]:
    """A CSV of union members: columns ``union`` and ``geocode`` (one row per member: a block or any GEOID
    prefix), read as text."""
    import pandas as pd

    from .errors import check_input_file

    check_input_file(path, "union")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as exc:  # pandas' parser errors: one line naming the file
        raise InputError("union", f"{Path(path).name} could not be read as CSV ({str(exc).splitlines()[0]})") from None
    for col in ("union", "geocode"):
        if col not in frame.columns:
            raise InputError("union", f"{Path(path).name} has no column {col!r} (needs: union, geocode)")
    empty = frame.index[(frame["union"].str.strip() == "") | (frame["geocode"].str.strip() == "")]
    if len(empty):
        raise InputError("union", f"{Path(path).name} row {int(empty[0]) + 2} has an empty union or geocode")
    members: dict[str, list[str]] = {}
    for u, g in zip(frame["union"], frame["geocode"]):
        members.setdefault(u.strip(), []).append(g.strip())
    return members


def tabulate_command(posterior, out, level, query, union_file, at_least, interval, interval_kind="hpd") -> Path:
    """``dpposterior tabulate``: exactly one of ``level`` and ``union_file``."""
    from .errors import check_output_path
    from .files import write_bytes
    from .posterior import Posterior

    if (level is None) == (union_file is None):
        raise InputError("--level", "give either --level or --union")
    if at_least and union_file is None:
        raise InputError("--at-least", "threshold probabilities are given for unions (--union)")
    check_output_path(out, "--out")
    post = Posterior.read(posterior)
    if union_file is not None:
        frame = union(post, read_union_file(union_file), query=query, interval=interval, at_least=at_least,
                      interval_kind=interval_kind)
    else:
        frame = tabulate(post, level, query=query, interval=interval, interval_kind=interval_kind)
    write_bytes(out, frame.to_csv(index=False), field="out")
    return Path(out)
