"""Readers that write a ``marginals`` release (dict) from noisy marginal tables made elsewhere, adding no noise.

* :func:`release_from_contingency_table` -- an OpenDP ``ContingencyTable`` (``opendp.extras.mbi``,
  ``make_contingency_table`` or ``query.contingency_table(...).release()``);
* :func:`release_from_linear_measurements` -- a list of Private-PGM (``mbi``) ``LinearMeasurement``\\ s and a domain;
* :func:`release_from_cliques_file` -- a JSON list of measurement records, or a long-format CSV (one row per cell).

What OpenDP 0.16 does (read from ``opendp/extras/mbi``; docs/marginals.md):

* each marginal is the integer count table of a clique, flattened in C order over the clique's attributes as
  listed (``make_stable_marginals`` pivots into ``shape(clique)``, ``make_noise_marginal`` flattens it;
  ``mbi.Factor.datavector`` is ``values.flatten()``); the code of a category is its position in
  ``table.keys[attr]``, which always holds a null category (appended last unless the given keys hold one);
* the noise is ``make_noise`` over ``vector_domain(atom_domain(T="i32"))``: under
  ``zero_concentrated_divergence()`` the discrete Gaussian N_Z(0, scale^2), under ``max_divergence()`` the
  discrete Laplace with P(k) ~ exp(-|k| / scale); the one-way marginals of the MST/AIM first step are
  ``dp_len`` counts with the same laws;
* ``LinearMeasurement.stddev`` is ``get_std(measure, scale)``: ``scale`` (the discrete Gaussian's sigma) under
  zCDP, ``scale * sqrt(2)`` (the continuous Laplace's standard deviation for scale b) under max-divergence.
  The table does not record which measure made it, so the caller names the mechanism.

The records: ``discrete-gaussian`` with ``sigma`` = stddev (the replace-one L2 sensitivity of a marginal,
sqrt(2), is the family's); ``discrete-laplace`` with b = stddev / sqrt(2), ``sensitivity`` 2 (the replace-one L1
sensitivity of a marginal) and ``epsilon`` = 2 / b.  Every bad input is refused in one line
(:class:`~dpposterior.errors.InputError`, field first).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .errors import InputError

#: the release format and family these readers write
FORMAT = "dpposterior-release/1"
FAMILY = "marginals"
#: the replace-one sensitivities of one marginal (count table): one cell -1, another +1
MARGINAL_L1 = 2.0
MARGINAL_L2 = math.sqrt(2.0)
#: the largest count the engines represent exactly
MAX_COUNT = 2.0 ** 53
#: top-level keys a cliques JSON object may hold
FILE_KEYS = ("format", "family", "n", "domain", "labels", "measurements", "description", "not_dp", "report_delta",
             "neighbouring")
#: the columns of a long-format cliques CSV besides the attributes and the mechanism's fields
CSV_COLUMNS = ("clique", "value", "mechanism")
#: an optional CSV column telling apart two measurements of the same clique
CSV_MEASUREMENT = "measurement"

_WHICH = ('pass mechanism="discrete-gaussian" for a table released under zCDP '
          '(dp.zero_concentrated_divergence(), loss_of(rho=...)) or mechanism="discrete-laplace" under pure DP '
          '(dp.max_divergence(), loss_of(epsilon=...))')


# --------------------------------------------------------------------------- public readers
def release_from_contingency_table(table, *, mechanism: str | None = None, n: int | None = None,
                                   description: str | None = None) -> dict:
    """A ``marginals`` release dict from an OpenDP ``ContingencyTable`` (adds no noise).

    ``table``: what ``make_contingency_table`` (or ``query.contingency_table(...).release()``) released; its
    ``keys`` give the domain (one code per key, in order, the null key included, labelled ``"null"``) and
    ``marginals.flatten()`` the measurements, each an identity (``Factor.datavector``) query over a clique.
    ``mechanism``: ``"discrete-gaussian"`` if the table was released under zCDP, ``"discrete-laplace"`` under
    pure DP (max-divergence) -- the table does not record its measure, so it must be given.  ``n``: the public
    number of records (an int > 0), or None (absent: unknown).  ``description``: the file's text.
    """
    keys = getattr(table, "keys", None)
    marginals = getattr(table, "marginals", None)
    if not isinstance(keys, dict) or not hasattr(marginals, "flatten"):
        raise InputError("table", f"must be an OpenDP ContingencyTable with keys and marginals "
                                  f"(got {type(table).__name__})")
    mechanism = _mechanism(mechanism, integer_only=True)
    domain, labels = {}, {}
    for attr, keyset in keys.items():
        if not isinstance(attr, str) or not attr:
            raise InputError("table.keys", f"attribute names must be non-empty strings (got {attr!r})")
        values = keyset.to_list() if hasattr(keyset, "to_list") else list(keyset)
        if not values:
            raise InputError(f"table.keys.{attr}", "has no categories")
        domain[attr] = len(values)
        labels[attr] = ["null" if v is None else str(v) for v in values]
    for attr, lab in labels.items():
        if len(set(lab)) != len(lab):
            dup = next(x for x in lab if lab.count(x) > 1)
            raise InputError(f"table.keys.{attr}", f"two categories read as the label {dup!r}")
    if description is None:
        description = ("noisy marginals read from an OpenDP ContingencyTable: no noise was added when this file "
                       "was written; the privacy statement rests on the noise the measurements state")
    measurements = _from_linear(marginals.flatten(), domain, mechanism, "table.marginals", None)
    return _release(domain, measurements, n=n, labels=labels, description=description)


def release_from_linear_measurements(measurements, domain, *, mechanism: str, n: int | None = None,
                                     labels: dict | None = None, description: str | None = None,
                                     delta: float | None = None) -> dict:
    """A ``marginals`` release dict from Private-PGM ``LinearMeasurement``\\ s (adds no noise).

    ``measurements``: a list of ``mbi.LinearMeasurement`` (``noisy_measurement``, ``clique``, ``stddev``,
    ``query``), each an identity query (``Factor.datavector``: the clique's table flattened in C order).
    ``domain``: a dict attribute -> size or an ``mbi.Domain``.  ``mechanism``: the noise law of every
    measurement (``discrete-gaussian``, ``discrete-laplace``, or ``gaussian`` / ``laplace`` for continuous noise;
    ``stddev`` read as sigma, or as the Laplace standard deviation b sqrt(2)).  ``delta``: for ``gaussian`` only,
    the delta at which its epsilon is stated (analytic Gaussian at L2 sensitivity sqrt(2)).  ``n``, ``labels``
    (attribute -> one string per code), ``description``: copied into the file.
    """
    dom = _domain(domain, "domain")
    mechanism = _mechanism(mechanism, integer_only=False)
    from .mechanisms.base import NoiseShape

    shape, integer = _laws(False)[mechanism]
    if shape is NoiseShape.GAUSSIAN and not integer:  # continuous Gaussian: (epsilon, delta)
        delta = _delta(delta)
    elif delta is not None:
        raise InputError("delta", f"is for continuous Gaussian noise only (got mechanism {mechanism})")
    if isinstance(measurements, (str, bytes, dict)) or not hasattr(measurements, "__iter__"):
        raise InputError("measurements", f"must be a list of mbi LinearMeasurements "
                                         f"(got {type(measurements).__name__})")
    lab = None if labels is None else _labels(labels, dom, "labels")
    out = _from_linear(list(measurements), dom, mechanism, "measurements", delta)
    return _release(dom, out, n=n, labels=lab, description=description)


def release_from_cliques_file(path, *, domain=None, n: int | None = None) -> dict:
    """A ``marginals`` release dict from a file of noisy clique tables (adds no noise).

    ``path``: ``.json`` -- a list of measurement records (``clique``, ``value`` nested in the clique's order,
    ``mechanism`` and its fields), or an object with ``measurements`` (and optionally ``domain``, ``labels``,
    ``n``, ``description``, ``not_dp``, ``report_delta``); ``.csv`` -- long form, one row per cell: ``clique``
    (attributes joined by ``;``), one column per attribute with the cell's code (empty for attributes not in the
    clique), ``value``, ``mechanism`` and the mechanism's fields (``sigma``, ``epsilon``, ``sensitivity``, ...);
    an optional ``measurement`` column tells apart two measurements of one clique.  Every cell of every
    clique must appear exactly once.  ``domain``: dict attribute -> size (or an ``mbi.Domain``); without it the
    file's ``domain``, else each size is read from the tables (JSON: their shapes; CSV: the largest code + 1).
    ``n``: the public number of records (overrides the file's).
    """
    from .errors import check_input_file

    check_input_file(path, "path")
    suffix = Path(path).suffix.lower()
    dom = None if domain is None else _domain(domain, "domain")
    if suffix == ".json":
        return _from_json(Path(path), dom, n)
    if suffix == ".csv":
        return _from_csv(Path(path), dom, n)
    raise InputError("path", f"{Path(path).name}: a cliques file is .json or .csv (got {suffix or 'no suffix'!r})")


# --------------------------------------------------------------------------- shared pieces
def _laws(integer_only: bool) -> dict:
    """The registered mechanisms whose scale a marginal's ``stddev`` gives: Gaussian- or Laplace-shaped noise
    (integer only for OpenDP's tables, whose counts get integer noise) -> (shape, integer-valued)."""
    from .mechanisms.base import NoiseShape
    from .mechanisms.registry import MECHANISMS as REGISTERED

    shapes = (NoiseShape.GAUSSIAN, NoiseShape.LAPLACE)
    return {name: (kind.noise_shape, bool(kind.integer_valued)) for name, kind in REGISTERED.items()
            if getattr(kind, "noise_shape", None) in shapes and (kind.integer_valued or not integer_only)}


def _mechanism(mechanism, integer_only: bool) -> str:
    if mechanism is None:
        raise InputError("mechanism", "the ContingencyTable does not record its measure: " + _WHICH)
    laws = _laws(integer_only)
    name = mechanism.strip().lower() if isinstance(mechanism, str) else mechanism
    if name not in laws:
        why = " (OpenDP adds integer noise to its counts)" if integer_only else ""
        raise InputError("mechanism", f"must be one of {', '.join(laws)}{why} (got {mechanism!r})")
    return name


def _delta(delta) -> float:
    if delta is None:
        raise InputError("delta", "mechanism gaussian states (epsilon, delta): give the delta")
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)) \
            or not 0.0 < float(delta) < 1.0:
        raise InputError("delta", f"must be a number in (0, 1) (got {delta!r})")
    return float(delta)


def _domain(domain, field: str) -> dict:
    """A dict attribute -> size from a dict or an mbi Domain (duck-typed: ``attributes`` and ``shape``)."""
    if not isinstance(domain, dict):
        attrs, shape = getattr(domain, "attributes", None), getattr(domain, "shape", None)
        if attrs is None or shape is None:
            raise InputError(field, f"must be a dict attribute -> size or an mbi Domain "
                                    f"(got {type(domain).__name__})")
        domain = dict(zip(attrs, shape))
    if not domain:
        raise InputError(field, "has no attributes")
    out = {}
    for attr, size in domain.items():
        if not isinstance(attr, str) or not attr.strip() or attr != attr.strip() or ";" in attr:
            raise InputError(field, f"attribute names must be non-empty strings without ';' or edge spaces "
                                    f"(got {attr!r})")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or int(size) < 1:
            raise InputError(f"{field}.{attr}", f"must be an integer size >= 1 (got {size!r})")
        out[attr] = int(size)
    return out


def _labels(labels, domain: dict, field: str) -> dict:
    if not isinstance(labels, dict):
        raise InputError(field, f"must be a dict attribute -> list of strings (got {type(labels).__name__})")
    out = {}
    for attr, lab in labels.items():
        if attr not in domain:
            raise InputError(f"{field}.{attr}", "is not an attribute of the domain")
        if not isinstance(lab, (list, tuple)) or not all(isinstance(x, str) for x in lab):
            raise InputError(f"{field}.{attr}", "must be a list of strings, one per code")
        if len(lab) != domain[attr]:
            raise InputError(f"{field}.{attr}", f"has {len(lab)} labels for {domain[attr]} codes")
        if len(set(lab)) != len(lab):
            raise InputError(f"{field}.{attr}", "has a label twice")
        out[attr] = list(lab)
    return out


def _check_n(n):
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise InputError("n", f"must be an integer > 0 (got {n!r})")
    return int(n)


def _clique(clique, domain: dict, field: str) -> list[str]:
    if isinstance(clique, str) or not isinstance(clique, (list, tuple)):
        raise InputError(field, f"must be a list of attribute names (got {clique!r})")
    names = list(clique)
    for a in names:
        if not isinstance(a, str) or a not in domain:
            raise InputError(field, f"{a!r} is not an attribute of the domain ({', '.join(domain)})")
    if len(set(names)) != len(names):
        raise InputError(field, f"names an attribute twice ({names})")
    return names


def _laplace_scale(stddev: float) -> float:
    """OpenDP's Laplace scale b from its ``stddev = b * sqrt(2)`` (the neighbouring float if division rounds)."""
    b = stddev / math.sqrt(2.0)
    for cand in (b, float(np.nextafter(b, np.inf)), float(np.nextafter(b, 0.0))):
        if cand * math.sqrt(2.0) == stddev:
            return cand
    return b


def _noise_fields(mechanism: str, stddev, field: str, delta: float | None) -> dict:
    """The record fields of ``mechanism`` for a marginal with OpenDP / mbi ``stddev``: sigma = stddev for
    Gaussian-shaped integer noise; b = stddev / sqrt(2), sensitivity 2, epsilon = 2 / b for Laplace-shaped noise;
    sigma, and epsilon at ``delta`` (analytic Gaussian, L2 sensitivity sqrt(2)) for continuous Gaussian noise."""
    from .mechanisms.base import NoiseShape

    if isinstance(stddev, bool) or not isinstance(stddev, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(stddev)) or float(stddev) <= 0:
        raise InputError(field, f"must be a finite number > 0 (got {stddev!r})")
    stddev = float(stddev)
    shape, integer = _laws(False)[mechanism]
    if shape is NoiseShape.LAPLACE:
        b = _laplace_scale(stddev)
        return {"epsilon": MARGINAL_L1 / b, "sensitivity": int(MARGINAL_L1)}
    if integer:
        return {"sigma": stddev}
    from .mechanisms.gaussian import _delta_of_sigma, epsilon_of_sigma  # continuous Gaussian

    eps = epsilon_of_sigma(stddev, delta, MARGINAL_L2)
    while _delta_of_sigma(stddev, eps, MARGINAL_L2) > delta:  # brentq may land a hair low
        eps *= 1.0 + 1e-12
    return {"sigma": stddev, "epsilon": eps, "delta": delta, "sensitivity": MARGINAL_L2}


def _cells(values, shape: tuple, integer: bool, mechanism: str, field: str):
    """``values`` (flat or shaped) as nested lists of the clique's ``shape``: ints for integer noise."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError(field, "must be numbers (a regular table)") from None
    size = int(np.prod(shape, dtype=np.int64))
    if arr.size != size or (arr.ndim > 1 and arr.shape != shape):
        want = "x".join(map(str, shape)) or "1 (a scalar)"
        raise InputError(field, f"has {arr.size} cells in shape {arr.shape}; the clique's table is {want}")
    flat = arr.ravel()
    bad = ~np.isfinite(flat)
    if bad.any():
        raise InputError(field, f"cell {int(np.flatnonzero(bad)[0])} is {flat[bad][0]:g}, not a finite number")
    if integer:
        bad = flat != np.round(flat)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InputError(field, f"cell {k} is {flat[k]:g}, not an integer (mechanism {mechanism} releases "
                                    "integers)")
        bad = np.abs(flat) > MAX_COUNT
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InputError(field, f"cell {k} is {flat[k]:g}, beyond 2^53, the largest count represented exactly")
        return flat.astype(np.int64).reshape(shape).tolist()
    return flat.reshape(shape).tolist()


def _is_identity(query) -> bool:
    """Whether ``query`` is ``mbi.Factor.datavector`` (duck-typed: mbi is not imported)."""
    return (getattr(query, "__qualname__", None) == "Factor.datavector"
            and str(getattr(query, "__module__", "")).split(".")[0] == "mbi")


def _from_linear(measurements, domain: dict, mechanism: str, field: str, delta: float | None) -> list[dict]:
    if not measurements:
        raise InputError(field, "holds no measurements")
    integer = _laws(False)[mechanism][1]
    out = []
    for i, m in enumerate(measurements):
        where = f"{field}.{i}"
        if not all(hasattr(m, a) for a in ("noisy_measurement", "clique", "stddev")):
            raise InputError(where, f"must be an mbi LinearMeasurement (got {type(m).__name__})")
        query = getattr(m, "query", None)
        if query is not None and not _is_identity(query):
            name = getattr(query, "__qualname__", None) or type(query).__name__
            raise InputError(where, f"measurement {i} (clique {tuple(m.clique)}) is the query {name}, not the "
                                    "identity Factor.datavector: only whole marginal tables can be read")
        clique = _clique(m.clique, domain, f"{where}.clique")
        shape = tuple(domain[a] for a in clique)
        record = {"clique": clique,
                  "value": _cells(m.noisy_measurement, shape, integer, mechanism, f"{where}.value"),
                  "mechanism": mechanism}
        record.update(_noise_fields(mechanism, m.stddev, f"{where}.stddev", delta))
        out.append(record)
    return out


def _validate_record(record: dict, field: str) -> None:
    """The mechanism's own check of a measurement record (``release.StatisticRecord``), as one line."""
    from pydantic import ValidationError

    from .errors import RECORD_FIELDS, from_pydantic
    from .release import StatisticRecord

    fields = {k: v for k, v in record.items() if k != "clique"}
    try:
        StatisticRecord.model_validate(fields)
    except ValidationError as exc:
        err = from_pydantic(exc, field)
        head, sep, rest = err.reason.partition(": ")
        if err.field == field and sep and (head in RECORD_FIELDS or rest == "unknown field"):
            raise InputError(f"{field}.{head}", rest) from None  # the record's own check names its field first
        raise err from None
    except InputError as exc:
        raise InputError(f"{field}.{exc.field}", exc.reason) from None


def _release(domain: dict, measurements: list[dict], *, n=None, labels=None, description=None,
             extra: dict | None = None) -> dict:
    n = _check_n(n)
    if description is not None and not isinstance(description, str):
        raise InputError("description", f"must be a string (got {type(description).__name__})")
    out = {"format": FORMAT, "family": FAMILY}
    if n is not None:
        out["n"] = n
    out["domain"] = dict(domain)
    if labels:
        out["labels"] = labels
    out["measurements"] = measurements
    if description is not None:
        out["description"] = description
    out.update(extra or {})
    return out


# --------------------------------------------------------------------------- cliques files
def _from_json(path: Path, domain: dict | None, n) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError("path", f"cannot read JSON {path.name} ({exc})") from None
    top: dict = {}
    if isinstance(data, dict):
        for key in data:
            if key not in FILE_KEYS:
                raise InputError(key, f"unknown field of a cliques file (fields: {', '.join(FILE_KEYS)})")
        if data.get("format", FORMAT) != FORMAT:
            raise InputError("format", f"must be {FORMAT!r} (got {data['format']!r})")
        if data.get("family", FAMILY) != FAMILY:
            raise InputError("family", f"must be {FAMILY!r} (got {data['family']!r})")
        if "measurements" not in data:
            raise InputError("measurements", "missing (the list of measurement records)")
        top, records = data, data["measurements"]
        if "domain" in data:
            file_dom = _domain(data["domain"], "domain")
            if domain is not None and file_dom != domain:
                diff = next(a for a in {**file_dom, **domain} if file_dom.get(a) != domain.get(a))
                raise InputError(f"domain.{diff}", f"the file says {file_dom.get(diff)}, the argument "
                                                   f"{domain.get(diff)}")
            domain = file_dom
    elif isinstance(data, list):
        records = data
    else:
        raise InputError("path", f"{path.name}: must hold a list of measurements or an object with measurements")
    if not isinstance(records, list) or not records:
        raise InputError("measurements", "must be a non-empty list of measurement records")
    parsed = []
    for i, rec in enumerate(records):
        where = f"measurements.{i}"
        if not isinstance(rec, dict):
            raise InputError(where, f"must be an object (got {type(rec).__name__})")
        for key in ("clique", "value", "mechanism"):
            if key not in rec:
                raise InputError(f"{where}.{key}", "missing")
        clique = rec["clique"]
        if isinstance(clique, str) or not isinstance(clique, list) or not all(isinstance(a, str) for a in clique):
            raise InputError(f"{where}.clique", f"must be a list of attribute names (got {clique!r})")
        if len(set(clique)) != len(clique):
            raise InputError(f"{where}.clique", f"names an attribute twice ({clique})")
        try:
            arr = np.asarray(rec["value"], dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"{where}.value", "must be a regular nested list of numbers, one level per "
                                               "attribute of the clique") from None
        if arr.ndim != len(clique):
            raise InputError(f"{where}.value", f"has {arr.ndim} levels of nesting for a clique of "
                                               f"{len(clique)} attributes")
        parsed.append((rec, clique, arr.shape))
    if domain is None:  # sizes from the tables' shapes, which must agree
        domain = {}
        for i, (_, clique, shape) in enumerate(parsed):
            for a, s in zip(clique, shape):
                if domain.setdefault(a, int(s)) != s:
                    raise InputError(f"measurements.{i}.value", f"gives {a} {s} categories; an earlier "
                                                                f"measurement {domain[a]}")
        domain = _domain(domain, "domain")
    measurements = []
    for i, (rec, clique, shape) in enumerate(parsed):
        where = f"measurements.{i}"
        clique = _clique(clique, domain, f"{where}.clique")
        want = tuple(domain[a] for a in clique)
        if tuple(shape) != want:
            raise InputError(f"{where}.value", f"has shape {tuple(shape)}; the domain gives {want}")
        mech = rec["mechanism"]
        integer = isinstance(mech, str) and _integer_noise(mech)
        out = {"clique": clique,
               "value": _cells(rec["value"], want, integer, mech, f"{where}.value"),
               "mechanism": mech}
        out.update({k: v for k, v in rec.items() if k not in out})
        _validate_record(out, where)
        measurements.append(out)
    labels = _labels(top["labels"], domain, "labels") if "labels" in top else None
    extra = {k: top[k] for k in ("not_dp", "report_delta", "neighbouring") if k in top}
    return _release(domain, measurements, n=n if n is not None else top.get("n"), labels=labels,
                    description=top.get("description"), extra=extra)


def _integer_noise(name: str) -> bool:
    from .mechanisms.registry import is_integer_noise

    return is_integer_noise(name)


def _from_csv(path: Path, domain: dict | None, n) -> dict:
    import csv

    from .errors import RECORD_FIELDS

    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError("path", f"cannot read CSV {path.name} ({exc})") from None
    if not rows or not any(c.strip() for c in rows[0]):
        raise InputError("path", f"{path.name} is empty (a header row: clique, the attributes, value, mechanism, "
                                 "the mechanism's fields)")
    header = [c.strip() for c in rows[0]]
    if len(set(header)) != len(header):
        raise InputError("path", f"column {next(c for c in header if header.count(c) > 1)!r} appears twice")
    for col in CSV_COLUMNS:
        if col not in header:
            raise InputError("path", f"no column {col!r} (columns: clique, one per attribute, value, mechanism "
                                     "and the mechanism's fields)")
    body = [(i + 1, r) for i, r in enumerate(rows[1:]) if any(c.strip() for c in r)]  # data row numbers, 1-based
    if not body:
        raise InputError("path", f"{path.name} has no data rows")
    fields = [c for c in header if c in RECORD_FIELDS and c not in CSV_COLUMNS]
    attrs = [c for c in header if c not in CSV_COLUMNS and c not in fields and c != CSV_MEASUREMENT]
    if domain is not None:
        for a in attrs:
            if a not in domain:
                raise InputError("path", f"column {a!r} is neither an attribute of the domain nor a field of a "
                                         f"mechanism ({', '.join(RECORD_FIELDS)})")
    col = {c: k for k, c in enumerate(header)}
    groups: dict = {}  # (clique, measurement id) -> {"rows": [...], "fields": {...}, "first": row}
    for row_no, raw in body:
        if len(raw) != len(header):
            raise InputError("path", f"row {row_no} has {len(raw)} cells for {len(header)} columns")
        cell = {c: raw[k].strip() for c, k in col.items()}
        text = cell["clique"]
        clique = [a.strip() for a in text.split(";")] if text else []
        if any(not a for a in clique) or len(set(clique)) != len(clique):
            raise InputError("clique", f"row {row_no}: {text!r} is not a list of distinct attributes joined by ';'")
        for a in clique:
            if a not in attrs:
                raise InputError("clique", f"row {row_no}: {a!r} has no column")
        codes = []
        for a in attrs:
            v = cell[a]
            if a not in clique:
                if v:
                    raise InputError(a, f"row {row_no}: {v!r} given for an attribute not in the clique {text!r} "
                                        "(leave it empty)")
                continue
            try:
                code = int(v)
            except ValueError:
                raise InputError(a, f"row {row_no}: {v!r} is not an integer code") from None
            if code < 0 or (domain is not None and code >= domain[a]):
                top = "" if domain is None else f" .. {domain[a] - 1}"
                raise InputError(a, f"row {row_no}: code {code} is outside 0{top}")
            codes.append(code)
        code_of = dict(zip([a for a in attrs if a in clique], codes))
        index = tuple(code_of[a] for a in clique)
        try:
            value = float(cell["value"])
        except ValueError:
            raise InputError("value", f"row {row_no}: {cell['value']!r} is not a number") from None
        if not math.isfinite(value):
            raise InputError("value", f"row {row_no}: {cell['value']!r} is not a finite number")
        if not cell["mechanism"]:
            raise InputError("mechanism", f"row {row_no} is empty")
        rec = {"mechanism": cell["mechanism"]}
        for f in fields:
            if cell[f]:
                try:
                    rec[f] = float(cell[f])
                except ValueError:
                    raise InputError(f, f"row {row_no}: {cell[f]!r} is not a number") from None
        key = (tuple(clique), cell.get(CSV_MEASUREMENT, ""))
        g = groups.setdefault(key, {"cells": {}, "fields": rec, "first": row_no})
        if rec != g["fields"]:
            diff = next(f for f in ("mechanism", *fields) if rec.get(f) != g["fields"].get(f))
            raise InputError(diff, f"row {row_no}: differs from row {g['first']} of the same measurement of "
                                   f"clique {text!r} (one mechanism and noise per measurement)")
        if index in g["cells"]:
            raise InputError("path", f"row {row_no}: clique {text!r} cell {index} already given in row "
                                     f"{g['cells'][index][0]}")
        g["cells"][index] = (row_no, value)
    if domain is None:  # sizes from the largest code seen
        sizes: dict = {}
        for (clique, _), g in groups.items():
            for index in g["cells"]:
                for a, c in zip(clique, index):
                    sizes[a] = max(sizes.get(a, 0), c + 1)
        domain = _domain({a: sizes[a] for a in attrs if a in sizes}, "domain")
    measurements = []
    for (clique, _), g in groups.items():
        shape = tuple(domain[a] for a in clique)
        table = np.full(shape, np.nan)
        for index, (_, value) in g["cells"].items():
            table[index] = value
        missing = np.argwhere(np.isnan(table))
        if missing.size:
            where = tuple(int(x) for x in missing[0])
            raise InputError("path", f"clique {';'.join(clique)!r} (first in row {g['first']}): cell {where} is "
                                     f"missing ({len(missing)} of {table.size} cells missing; every cell must "
                                     "appear once)")
        mech = g["fields"]["mechanism"]
        where = f"measurements.{len(measurements)}"
        rec = {"clique": list(clique),
               "value": _cells(table, shape, _integer_noise(mech), mech, f"{where}.value"),
               **g["fields"]}
        try:
            _validate_record(rec, where)
        except InputError as exc:
            raise InputError(exc.field, f"{exc.reason} (rows from {g['first']})") from None
        measurements.append(rec)
    return _release(domain, measurements, n=n)
