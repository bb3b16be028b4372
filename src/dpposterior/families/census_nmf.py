"""A reader for the Census Bureau's own noisy measurement file (NMF) parquet layout, giving the ``census`` family's
manifest and measurement rows (:func:`read_nmf`).

Sources (the layout is not described by one document; each point below names where it comes from):

* DAS 2020 Redistricting Production Code, github ``uscensusbureau/DAS_2020_Redistricting_Production_Code`` at
  commit ``289ee463936a6f0efcf2e378abe410ec01d0e140`` (the commit the AWS registry entry for the PL 94-171 NMF
  links): the histogram ``hhgq votingage hispanic cenrace_das`` (``source/configs/production/pl94/
  person_default.ini``), the attributes' categories in index order (``source/programs/schema/attributes/
  hhgq_person_simple.py``, ``votingage.py``, ``hisp.py``, ``cenrace.py``, ``h1.py``), the production queries per
  geolevel (``source/programs/strategies/strategies.py``, class ``ProductionCandidate20210527US_mult8_add02_
  dsepJune3``), the geolevels ``Block,Block_Group,Tract,County,State,US`` with a 16-digit block geocode
  (``source/configs/production/pl94/person_US.ini``), the optimized geographic spine (``spine = opt_spine`` in
  ``source/configs/production/prod_default.ini``; ``source/programs/geographic_spines/define_spines.py``,
  ``call_opt_spine`` and ``geocode_mapping``), and the variance a measurement carries, the discrete Gaussian's
  own variance computed from ``sigma_sq`` (``source/programs/engine/primitives.py``,
  ``computeDiscreteGaussianVariance``).
* DAS 2020 DHC Production Code (``uscensusbureau/DAS_2020_DHC_Production_Code`` at ``38ea5f2a70c3ce8e3d683833f687
  cdde6fa1fd25``): noisy measurements are saved per geolevel as pickled geounit nodes holding ``dp_queries``
  (``das_decennial/programs/engine/engine_utils.py``, ``saveNoisyAnswers``); the released parquet files were made
  from those, by code that is not in either repository.
* The AWS Open Data registry entries ``census-2020-pl94-nmf`` and ``census-2020-dhc-nmf`` (bucket
  ``uscb-2020-product-releases``, prefix ``decennial/redistricting/2020/nmf/2020-pl94-nmf-state-partitioned``) and
  the README they cite, "2020 Census Redistricting Data (P.L. 94-171) Noisy Measurement File README File"
  (2023-06-15; not read here, only cited by the registry).
* Google Research's ``census-bluedown`` (github ``google-research/census-bluedown`` at ``718f04515977e1556e97abc0
  ca3a430492446a7e``), a reader of the released files: ``census_bluedown/constants.py`` and ``io.py`` (the
  directories ``<Level>.parquet/DPQuery/State=<code>/`` and ``<Level>.parquet/Constraint/State=<code>/``, the state
  codes ``0SS``/``1SS`` for a state's non-AIAN and AIAN branches, the columns ``geocode``, ``query_name``,
  ``value``, ``variance``, ``query_shape``), ``ground_truth.py`` (the cell index of the 2,016-cell histogram,
  ``((hhgq * 2 + votingage) * 2 + hispanic) * 63 + cenrace``, and block geocodes ending in the 16-digit
  ``geocode16``), ``compute_errors.py`` (queries reshaped to ``(8, 2, 2, 63)``).

The layout (what :func:`read_nmf` reads)::

    <product>/                        e.g. US_Person_PL_PROD (also US_Unit_PL_PROD, PR_Person_PL_PROD)
      US.parquet/DPQuery/part-*.parquet             the root geounit: no State partition
      <Level>.parquet/DPQuery/State=<code>/part-*.parquet
      <Level>.parquet/Constraint/State=<code>/part-*.parquet

``<Level>`` is one of the Bureau's geolevels ``US State County Tract Block_Group Block`` (our ``us state county
tract block_group block``); ``<code>`` is a 3-digit spine state code, ``0`` + FIPS for the state's non-AIAN branch
and ``1`` + FIPS for its AIAN branch.  A DPQuery row is one query at one geounit: ``geocode`` (string),
``query_name`` (the DAS query name + ``_dpq``), ``value`` (the flattened answer, a list of integers in C order over
the query's shape), ``variance`` (one number for all its cells), and, where present, ``query_shape`` (the answer's
shape on the histogram's axes, 1 on an axis summed out, e.g. ``[1, 2, 2, 1]`` for ``votingage * hispanic``).  A
Constraint row has ``geocode``, ``query_name`` (``total_con``, ``hhgq_total_lb_con``, ``hhgq_total_ub_con``,
``nurse_nva_0_con``) and ``value``.

The manifest keeps the Bureau's query names (``_dpq`` removed) and the schema's own category labels.  NMF
``query_name`` -> manifest query: attributes (cells):

* ``total_dpq`` -> ``total``: [] (1)
* ``hhgq_dpq``, ``votingage_dpq``, ``hispanic_dpq``, ``cenrace_dpq`` -> the one attribute (8, 2, 2, 63)
* ``hispanic * cenrace_dpq`` -> [hispanic, cenrace] (126); ``votingage * cenrace_dpq`` -> [votingage, cenrace]
  (126); ``votingage * hispanic_dpq`` -> [votingage, hispanic] (4); ``votingage * hispanic * cenrace_dpq`` ->
  [votingage, hispanic, cenrace] (252)
* ``detailed_dpq`` -> ``detailed``: [hhgq, votingage, hispanic, cenrace] (2016)
* ``hhinstlevels_dpq`` (3 cells: household, institutional = hhgq 1-4, non-institutional = hhgq 5-7) is a recode of
  hhgq, not a marginal of the histogram: left out, with a warning
* Constraint ``total_con`` -> the invariant ``<level>_total``; ``nurse_nva_0_con`` -> the manifest's
  ``structural_zeros`` ``[{hhgq: Nursing facilities/Skilled-nursing facilities, votingage: 17 and under}]`` (the
  PL94 schema's structural zero: ``ConstraintsCreatorPL94Generic.nurse_nva_0`` in the same repository's
  ``DAS_PL94.release/programs/constraints/Constraints_PL94.py``, as read at commit ``b51272816ef2``: "no minors in
  nursing facilities (GQ code 301)", the cross of ``HHGQ_NURSING_TOTAL`` and ``NONVOTING_TOTAL`` set "=" 0; a row
  whose value is not 0 is refused; the row's layout is not verified against a real file); ``hhgq_total_lb_con``
  and ``hhgq_total_ub_con`` -> the manifest's ``bounds`` on the ``hhgq`` query (added to ``queries`` if no
  ``hhgq_dpq`` was read), one row per hhgq category, ``lower`` from element k of the ``_lb`` row's ``value`` and
  ``upper`` from the ``_ub`` row's.  The DAS defines them in ``source/programs/constraints/Constraints_PL94.py``
  (``ConstraintsCreatorPL94Generic.hhgq_total_lb``: ``addToConstraintsDict(name, self.attr_hhgq, rhs, "ge")``,
  ``hhgq_total_ub`` the same with ``"le"``) at commit ``289ee463936a``, the right-hand side from
  ``source/programs/constraints/querybase_constraints.py``, ``ConstraintsCreatorwHHGQ.
  calculateRightHandSideHhgqTotal``: a vector of ``gqt_dim`` = 8 entries, one per hhgq category in the schema's
  index order, computed from the invariant counts of housing units and facilities of each type (``gqhh_vect``,
  ``gqhh_tot``) -- lower: the facilities of the type (0 for households, ``Constraints_PL94_2020.py``), or everyone
  where it is the only type; upper: 0 where the block has no unit of the type, else the state total less the
  minimum in the other types, or 99999 per unit; ``person_default.ini`` imposes them at Block
  (``theConstraints.Block = hhgq_total_lb, hhgq_total_ub, nurse_nva_0``) and ``person_US.ini`` at State.  Not
  verified without the real files: that the released Constraint rows hold that vector as ``value``, flattened
  in that order (the test files write it so), and which levels carry them

Cell k of a query is element k of ``value``: the query's attributes are in the histogram's order, and its cells in
C order over them, as the census family's labels are (``census_table``).

Geography.  Production ran on the *optimized spine*, not on tabulation geography: a geounit's geocode is a DAS
geocode (state ``[AIAN flag][FIPS]``, 3 digits; county that + ``10`` + county FIPS, 8 digits; tract, block group and
block each adding their own optimizer-chosen number of digits, the block's last 16 being its ``geocode16``).  The
census family places a geounit by the GEOID prefix of its blocks, so a level is read only where each DAS geounit
holds exactly the release's blocks of one tabulation geounit; the reader checks this from the blocks' geocodes,
maps such geocodes to tabulation GEOIDs (blocks: ``geocode16`` without its block-group digit), and refuses a level
where it fails, in one line naming it.  It fails for the production's *optimized block groups* (groupings of blocks
chosen by the spine optimizer, not tabulation block groups), and at every level above block when both branches of
a state are read (the AIAN and non-AIAN parts of a state are two geounits); read one branch (``state="044"``) or
leave the level out (``levels=``).  The US geounit is read only with ``state=None``: it measures every state.
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
from pathlib import Path

import numpy as np

from ..errors import InputError
from .census_table import LEVEL_DIGITS, LEVEL_ORDER

#: the Bureau's geolevel names -> the census family's level names
BUREAU_LEVELS = {"US": "us", "State": "state", "County": "county", "Tract": "tract", "Block_Group": "block_group",
                 "Block": "block"}

_RACES = ("white", "black", "aian", "asian", "nhopi", "sor")

#: the PL94 person histogram (``PL94_2020_SCHEMA``): attributes and their categories in index order
PL94_PERSON = {
    "hhgq": ["Household", "Correctional facilities for adults", "Juvenile facilities",
             "Nursing facilities/Skilled-nursing facilities", "Other institutional facilities",
             "College/University student housing", "Military quarters", "Other noninstitutional facilities"],
    "votingage": ["17 and under", "18 and over"],
    "hispanic": ["Not Hispanic or Latino", "Hispanic or Latino"],
    "cenrace": ["-".join(c) for k in range(1, 7) for c in itertools.combinations(_RACES, k)],
}
#: the PL94 housing-unit histogram (occupancy status, ``h1.py``)
H1_UNIT = {"h1": ["Vacant", "Occupied"]}
_SCHEMAS = (PL94_PERSON, H1_UNIT)

_DPQ, _CON = "_dpq", "_con"
_KINDS = ("DPQuery", "Constraint")
_NEEDS = {"DPQuery": ("geocode", "query_name", "value", "variance"), "Constraint": ("geocode", "query_name", "value")}
_OPTIONAL = ("query_shape",)


def read_nmf(path, *, state=None, attributes_map=None, levels=None) -> tuple[dict, dict]:
    """Read a noisy measurement file in the Bureau's parquet layout (module docstring) as the census family's
    manifest and measurement rows.

    ``path``: a product folder (``US_Person_PL_PROD``), one ``<Level>.parquet`` folder in it, or one parquet file
    inside the layout (its level, kind and state are read from the folders above it).  ``state``: a FIPS code
    (``44`` or ``"44"``: both branches) or a 3-digit spine code (``"044"``, ``"144"``: one branch); None reads
    every partition.  ``levels``: the geolevels to read (the Bureau's or our names); None reads all.
    ``attributes_map``: ``{bureau_attribute: new_name | [labels] | {"name": ..., "labels": [...]}}`` renames
    attributes or relabels their categories; for a histogram other than PL94's, it gives the whole schema in
    histogram order (``{attribute: [labels], ...}``).

    Returns ``(manifest, rows)``: the manifest has ``format``, ``family``, ``attributes``, ``queries``, ``levels``
    and, when such constraints were read, ``invariants``, ``structural_zeros`` and ``bounds`` (with an ``hhgq``
    query added for them if none was measured; ``measurements`` is the caller's); ``rows`` has the
    columns ``level``, ``geocode``, ``query``, ``cell``, ``noisy_value``, ``variance``, as ``build_structure`` takes
    them.  Queries that are not marginals of the histogram (``hhinstlevels``) are left out with a warning.
    """
    root = Path(path)
    if not root.exists():
        raise InputError("path", f"not found: {root}")
    want = _wanted_levels(levels)
    files = _select_state(_layout_files(root, want), state)
    _check_memory(files, root)
    meas, cons = _read_files(files, root)
    if not meas["geocode"]:
        raise InputError("path", f"holds no DPQuery rows in {root} (after the state and level selection)")

    attributes = _schema(meas, attributes_map)
    bureau_attrs = list(attributes["_bureau"])
    names = attributes["names"]
    labels = attributes["labels"]
    queries, kept = _queries(meas, bureau_attrs, names, [len(v) for v in labels])

    # geography: blocks, then each level's DAS geounits checked against tabulation geography
    present = [lv for lv in BUREAU_LEVELS if lv in set(meas["level"]) | set(cons["level"])]
    if "Block" not in present:
        raise InputError("levels", "no Block level was read: the release's blocks are not known")
    das_blocks = np.unique(np.asarray(_level_codes(meas, cons, "Block"), dtype=str)).astype(object)
    _check_geocodes("Block", das_blocks)
    geoid15 = np.array([str(g[-16:-5] + g[-4:]) for g in das_blocks], dtype=object)
    to_geoid = {"Block": {str(d): str(t) for d, t in zip(das_blocks, geoid15)}}
    for lv in present:
        if lv != "Block":
            to_geoid[lv] = _level_map(lv, [str(c) for c in np.unique(np.asarray(_level_codes(meas, cons, lv),
                                                                                dtype=str))], das_blocks, geoid15)

    rows = _rows(meas, kept, to_geoid, labels)
    manifest = {"format": "dpposterior-release/1", "family": "census",
                "attributes": dict(zip(names, labels)), "queries": queries,
                "levels": [BUREAU_LEVELS[lv] for lv in present]}
    invariants = _invariants(cons, to_geoid)
    if invariants:
        manifest["invariants"] = invariants
    zeros = _structural_zeros(cons, attributes)
    if zeros:
        manifest["structural_zeros"] = zeros
    bounds = _bounds(cons, attributes, to_geoid)
    if bounds:
        hhgq = attributes["names"][attributes["_bureau"].index("hhgq")]
        if "hhgq" not in queries:
            # the bounds' query: the hhgq marginal, measured or not
            manifest["queries"] = {**queries, "hhgq": [hhgq]}
        elif queries["hhgq"] != [hhgq]:
            raise InputError("nmf.query_name", "a query named hhgq that is not the hhgq marginal: the "
                             "hhgq_total bounds need that name")
        manifest["bounds"] = bounds
    return manifest, rows


# -- files -----------------------------------------------------------------------------------------------------------

def _layout_files(root: Path, want) -> list[tuple[str, str, str | None, Path]]:
    """(Bureau level, kind, state partition or None, file) for every parquet file under ``root`` at the wanted
    geolevels (all when ``want`` is None: then a folder of another geolevel is refused)."""
    if root.is_file():
        candidates = [root]
    else:
        candidates = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))
                            and not p.name.endswith(".crc"))
    out = []
    for f in candidates:
        level = kind = part = None
        # the folders above the file, innermost first: a file or folder given alone is placed by its ancestors
        for d in (p.name for p in f.resolve().parents):
            if d.endswith(".parquet") and level is None:
                level = d[:-len(".parquet")]
            elif d in _KINDS and kind is None:
                kind = d
            elif d.startswith("State=") and part is None:
                part = d[len("State="):]
        rel = os.path.relpath(f, root.parent if root.is_file() else root)
        if level is None:
            raise InputError("nmf.geolevel", f"{rel} is not inside a '<Level>.parquet' folder, so its geolevel is "
                             "not known")
        if want is not None and level not in want:
            continue
        if level not in BUREAU_LEVELS:
            raise InputError("nmf.geolevel", f"{level!r} (folder of {rel}) is not one of "
                             f"{', '.join(BUREAU_LEVELS)}")
        if kind is None:
            raise InputError("nmf.kind", f"{rel} is not inside a DPQuery or Constraint folder")
        out.append((level, kind, part, f))
    if not out:
        raise InputError("path", f"holds no parquet files{'' if want is None else ' at those levels'}: {root}")
    return out


def _select_state(files, state):
    if state is None:
        return files
    text = str(state).strip()
    if isinstance(state, bool) or not text.isdigit() or len(text) > 3:
        raise InputError("state", f"must be a FIPS code (44, '44') or a spine state code ('044', '144'); got {state!r}")
    codes = {text} if len(text) == 3 else {"0" + text.zfill(2), "1" + text.zfill(2)}
    # the US geounit measures every state, so it is no measurement of one state's blocks
    out = [f for f in files if f[2] in codes]
    if not out:
        have = sorted({f[2] for f in files if f[2] is not None})
        raise InputError("state", f"no State={'/'.join(sorted(codes))} partition (have: {', '.join(have) or 'none'})")
    return out


def _wanted_levels(levels):
    if levels is None:
        return None
    ours = {v: k for k, v in BUREAU_LEVELS.items()}
    want = set()
    for i, lv in enumerate([levels] if isinstance(levels, str) else list(levels)):
        if lv in BUREAU_LEVELS:
            want.add(lv)
        elif lv in ours:
            want.add(ours[lv])
        else:
            raise InputError(f"levels[{i}]", f"unknown geolevel {lv!r} (one of: {', '.join(BUREAU_LEVELS)})")
    return want


def _check_memory(files, root: Path) -> None:
    """Refuse, before reading, files whose noisy cells (the ``value`` lists' elements, counted from the parquet
    metadata) would not fit in memory at ``census.BYTES_PER_ROW`` a cell."""
    import pyarrow.parquet as pq

    from ..memory import check_fits
    from .census import BYTES_PER_ROW

    cells = 0
    for *_, f in files:
        try:
            meta = pq.ParquetFile(f).metadata
        except Exception:  # not parquet: _read_files names the file
            continue
        leaves = [j for j in range(meta.num_columns) if meta.schema.column(j).path.split(".")[0] == "value"]
        cells += sum(meta.row_group(g).column(j).num_values for g in range(meta.num_row_groups) for j in leaves)
    check_fits(BYTES_PER_ROW * cells, "path", f"reading {root.name} ({cells:,} noisy cells)",
               "read one state (state=) or fewer levels (levels=)")


def _read_files(files, root: Path):
    import pyarrow.parquet as pq

    meas = {k: [] for k in ("level", "geocode", "query_name", "values", "variance", "query_shape")}
    cons = {k: [] for k in ("level", "geocode", "query_name", "values")}
    base = root.parent if root.is_file() else root
    for level, kind, _part, f in files:
        rel = os.path.relpath(f, base)
        try:
            pf = pq.ParquetFile(f)
        except Exception as exc:  # pyarrow raises several types for a file that is not parquet
            raise InputError("path", f"{rel} is not a parquet file ({exc})") from None
        have = set(pf.schema_arrow.names)
        for col in _NEEDS[kind]:
            if col not in have:
                raise InputError(f"nmf.{col}", f"column missing from {rel} (a {kind} file needs: "
                                 f"{', '.join(_NEEDS[kind])})")
        table = pf.read(columns=[c for c in _NEEDS[kind] + _OPTIONAL if c in have])
        n = table.num_rows
        geocode = [("" if g is None else str(g)) for g in table.column("geocode").to_pylist()]
        qname = [str(q) for q in table.column("query_name").to_pylist()]
        values = _lists(table.column("value"), "nmf.value", rel)
        if kind == "DPQuery":
            dest = meas
            dest["variance"].extend(_variances(table.column("variance"), rel))
            shapes = (table.column("query_shape").to_pylist() if "query_shape" in have else [None] * n)
            dest["query_shape"].extend(None if s is None else tuple(int(x) for x in s) for s in shapes)
        else:
            dest = cons
        dest["level"].extend([level] * n)
        dest["geocode"].extend(geocode)
        dest["query_name"].extend(qname)
        dest["values"].extend(values)
    return meas, cons


def _lists(column, field_name: str, rel: str) -> list[np.ndarray]:
    import pyarrow as pa

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        raise InputError(field_name, f"in {rel} must hold lists of integers (one per query cell), not {col.type}")
    if col.null_count:
        raise InputError(field_name, f"in {rel} has an empty (null) answer")
    flat = col.flatten()
    if flat.null_count or not (pa.types.is_integer(flat.type) or pa.types.is_floating(flat.type)):
        raise InputError(field_name, f"in {rel} must hold integers (got {flat.type})")
    arr = flat.to_numpy(zero_copy_only=False)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise InputError(field_name, f"in {rel} holds a non-integer noisy value")
    arr = arr.astype(np.int64)
    offsets = col.offsets.to_numpy() - col.offsets[0].as_py()
    return [arr[offsets[i]:offsets[i + 1]] for i in range(len(col))]


def _variances(column, rel: str) -> list[float]:
    out = []
    for v in column.to_pylist():
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise InputError("nmf.variance", f"in {rel} must be a number (got {v!r})") from None
        out.append(f)
    return out


# -- schema and queries ----------------------------------------------------------------------------------------------

def _histogram_size(meas) -> tuple[int, tuple[int, ...] | None]:
    """Cells of the histogram (from the detailed query) and its shape where ``query_shape`` gives it."""
    for name, vals, shape in zip(meas["query_name"], meas["values"], meas["query_shape"]):
        if name == "detailed" + _DPQ:
            return len(vals), shape
    # without a detailed query, the widest extent seen on each axis is the histogram's, where shapes are given
    shapes = [s for s in meas["query_shape"] if s is not None]
    if shapes and len({len(s) for s in shapes}) == 1:
        full = tuple(max(s[a] for s in shapes) for a in range(len(shapes[0])))
        return math.prod(full), full
    return -1, None


def _schema(meas, attributes_map) -> dict:
    size, shape = _histogram_size(meas)
    base = next((s for s in _SCHEMAS if math.prod(len(v) for v in s.values()) == size
                 and (shape is None or tuple(len(v) for v in s.values()) == shape)), None)
    amap = {} if attributes_map is None else attributes_map
    if not isinstance(amap, dict):
        raise InputError("attributes_map", "must map the Bureau's attribute names to a new name, labels, or both")
    if base is None or (amap and all(isinstance(v, (list, tuple)) for v in amap.values())
                        and set(amap) != set(base) and math.prod(len(v) for v in amap.values()) == size):
        if not amap or not all(isinstance(v, (list, tuple)) for v in amap.values()):
            got = f"query_shape {list(shape)}" if shape else f"{size} cells"
            raise InputError("attributes_map", f"the histogram ({got}) is not PL94's (8 x 2 x 2 x 63) or H1's (2): "
                             "give its attributes in histogram order as {name: [labels]}")
        base = {str(k): [str(x) for x in v] for k, v in amap.items()}
        if shape is not None and tuple(len(v) for v in base.values()) != shape:
            raise InputError("attributes_map", f"gives the shape {[len(v) for v in base.values()]}, but the "
                             f"histogram's query_shape is {list(shape)}")
        if math.prod(len(v) for v in base.values()) != size and size > 0:
            raise InputError("attributes_map", f"gives {math.prod(len(v) for v in base.values())} cells, but the "
                             f"detailed query has {size}")
        amap = {}
    names, labels = [], []
    for attr, cats in base.items():
        spec = amap.get(attr, attr)
        if isinstance(spec, str):
            name, labs = spec, list(cats)
        elif isinstance(spec, (list, tuple)):
            name, labs = attr, [str(x) for x in spec]
        elif isinstance(spec, dict):
            name, labs = str(spec.get("name", attr)), [str(x) for x in spec.get("labels", cats)]
        else:
            raise InputError(f"attributes_map.{attr}", "must be a new name, a list of labels, or "
                             "{'name': ..., 'labels': [...]}")
        if len(labs) != len(cats):
            raise InputError(f"attributes_map.{attr}", f"gives {len(labs)} labels for its {len(cats)} categories")
        names.append(name)
        labels.append(labs)
    unknown = set(amap) - set(base)
    if unknown:
        raise InputError(f"attributes_map.{sorted(unknown)[0]}", f"is not an attribute of the histogram "
                         f"({', '.join(base)})")
    if len(set(names)) != len(names):
        raise InputError("attributes_map", "gives two attributes the same name")
    return {"_bureau": list(base), "names": names, "labels": labels}


def _query_axes(qname: str, shape, bureau_attrs, sizes):
    """The histogram axes a query keeps, or None when it is not a marginal (a recode such as ``hhinstlevels``)."""
    base = qname[:-len(_DPQ)] if qname.endswith(_DPQ) else qname
    by_name = None
    if base == "detailed":
        by_name = list(range(len(bureau_attrs)))
    elif base == "total":
        by_name = []
    else:
        parts = [p.strip() for p in base.split("*")]
        if all(p in bureau_attrs for p in parts) and len(set(parts)) == len(parts):
            by_name = sorted(bureau_attrs.index(p) for p in parts)
    if shape is None:
        return by_name
    if len(shape) != len(sizes):
        raise InputError("nmf.query_shape", f"{list(shape)} of {qname!r} has {len(shape)} axes, the histogram "
                         f"{len(sizes)}")
    if any(s not in (1, n) for s, n in zip(shape, sizes)):
        return None
    by_shape = [a for a, (s, n) in enumerate(zip(shape, sizes)) if s == n and n > 1]
    if by_name is not None:
        # an axis of one category is kept by name though its extent is 1
        if [a for a in by_name if sizes[a] > 1] != by_shape:
            raise InputError("nmf.query_shape", f"{list(shape)} does not fit the query name {qname!r}")
        return by_name
    return by_shape


def _queries(meas, bureau_attrs, names, sizes):
    """The manifest's queries (Bureau names, ``_dpq`` removed) and, per NMF query name, its axes."""
    kept, queries, left_out = {}, {}, []
    for qname, shape in dict.fromkeys(zip(meas["query_name"], meas["query_shape"])):
        if qname.endswith(_CON):
            continue
        axes = _query_axes(qname, shape, bureau_attrs, sizes)
        if qname in kept and kept[qname] != axes:
            raise InputError("nmf.query_shape", f"{qname!r} has two different shapes")
        if axes is None:
            left_out.append(qname)
            kept[qname] = None
            continue
        kept[qname] = axes
    # total first, the detailed query last: by number of attributes, then in the histogram's order
    for qname in sorted((q for q, a in kept.items() if a is not None), key=lambda q: (len(kept[q]), kept[q], q)):
        queries[qname[:-len(_DPQ)] if qname.endswith(_DPQ) else qname] = [names[a] for a in kept[qname]]
    for q in dict.fromkeys(left_out):
        warnings.warn(f"census NMF: query {q!r} is left out: it is not a marginal of the histogram "
                      f"({' x '.join(names)}), which the census family's queries are", UserWarning, stacklevel=3)
    if not queries:
        raise InputError("nmf.query_name", "no query is a marginal of the histogram")
    return queries, kept


# -- geography -------------------------------------------------------------------------------------------------------

def _level_codes(meas, cons, level):
    return [g for lv, g in zip(meas["level"], meas["geocode"]) if lv == level] + \
        [g for lv, g in zip(cons["level"], cons["geocode"]) if lv == level]


def _check_geocodes(level, codes):
    """Digits only, one length per level, and the lengths the layout gives the levels with fixed widths."""
    for g in codes:
        if level == "US":
            continue
        if not g.isdigit():
            raise InputError("nmf.geocode", f"{g!r} at geolevel {level} is not a geocode (digits only)")
    lengths = sorted({len(g) for g in codes})
    fixed = {"State": (2, 3), "County": (5, 8)}
    if level in fixed and lengths and lengths[0] not in fixed[level]:
        bad = next(g for g in codes if len(g) == lengths[0])
        raise InputError("nmf.geocode", f"{bad!r} at geolevel {level} has {len(bad)} digits, not "
                         f"{' or '.join(map(str, fixed[level]))} (tabulation or DAS spine geocode)")
    if level == "Block":
        bad = next((g for g in codes if len(g) < 16 or g[-5] != g[-4]), None)
        if bad is not None:
            raise InputError("nmf.geocode", f"{bad!r} at geolevel Block does not end in a 16-digit geocode16 "
                             "(state, county, tract, block group digit, 4-digit block whose first digit is the "
                             "block group's)")
    if len(lengths) > 1:
        bad = next(g for g in codes if len(g) == lengths[-1])
        raise InputError("nmf.geocode", f"{bad!r} at geolevel {level} has {len(bad)} digits where the level's "
                         f"other geocodes have {lengths[0]}")


def _level_map(level, codes, das_blocks, geoid15) -> dict:
    """DAS geocode -> tabulation GEOID for one level, where every geounit of it holds exactly the release's blocks of
    one tabulation geounit (refused otherwise)."""
    ours = BUREAU_LEVELS[level]
    if level == "US":
        if len(codes) != 1:
            raise InputError("nmf.geocode", f"geolevel US has {len(codes)} geocodes, not 1")
        return {codes[0]: ""}
    _check_geocodes(level, codes)
    width = len(codes[0])
    digits = LEVEL_DIGITS[ours]
    # one pass over the blocks: each DAS geounit's tabulation prefixes and block count, each prefix's block count
    held, size, tab_count = {}, {}, {}
    for das, geoid in zip(das_blocks, geoid15):
        unit, t = das[:width], geoid[:digits]
        held.setdefault(unit, set()).add(t)
        size[unit] = size.get(unit, 0) + 1
        tab_count[t] = tab_count.get(t, 0) + 1
    out = {}
    for code in codes:
        n = size.get(code, 0)
        if n == 0:
            raise InputError("nmf.geocode", f"{code!r} ({level}) is the prefix of none of the release's block "
                             "geocodes")
        found = np.array(sorted(held[code]))
        if found.size != 1 or tab_count[found[0]] != n:
            what = (f"holds blocks of {', '.join(found[:3])}{'...' if found.size > 3 else ''}" if found.size > 1
                    else f"holds {n} of the release's {tab_count[found[0]]} blocks of {found[0]}")
            why = ("the spine's optimized block groups are not tabulation block groups" if level == "Block_Group"
                   else "a state's AIAN and non-AIAN branches are separate geounits; read one branch "
                   f"(state='0{found[0][:2]}' or '1{found[0][:2]}')")
            raise InputError(f"nmf.{level}", f"DAS geounit {code} {what}, so it is no tabulation "
                             f"{ours.replace('_', ' ')}: {why}, or leave {level} out (levels=)")
        out[code] = str(found[0])
    return out


# -- rows ------------------------------------------------------------------------------------------------------------

def _rows(meas, kept, to_geoid, labels_by_axis) -> dict:
    level, geocode, query, cell, noisy, variance = [], [], [], [], [], []
    label_cache = {}
    for lv, g, qname, vals, var in zip(meas["level"], meas["geocode"], meas["query_name"], meas["values"],
                                       meas["variance"]):
        axes = kept.get(qname)
        if axes is None or qname.endswith(_CON):
            continue
        if lv not in to_geoid:
            continue
        labels = label_cache.get(qname)
        if labels is None:
            labels = label_cache[qname] = _labels_for(axes, labels_by_axis)
        if len(vals) != len(labels):
            raise InputError("nmf.value", f"{qname!r} at {lv} {g} has {len(vals)} cells, not {len(labels)}")
        k = len(labels)
        name = qname[:-len(_DPQ)] if qname.endswith(_DPQ) else qname
        level.extend([BUREAU_LEVELS[lv]] * k)
        geocode.extend([to_geoid[lv][g]] * k)
        query.extend([name] * k)
        cell.extend(labels)
        noisy.append(vals)
        variance.append(np.full(k, var, dtype=float))
    return {"level": np.array(level, dtype=object), "geocode": np.array(geocode, dtype=object),
            "query": np.array(query, dtype=object), "cell": np.array(cell, dtype=object),
            "noisy_value": np.concatenate(noisy).astype(np.int64) if noisy else np.zeros(0, np.int64),
            "variance": np.concatenate(variance) if variance else np.zeros(0)}


def _labels_for(axes, labels_by_axis) -> list[str]:
    if not axes:
        return [""]
    return ["|".join(c) for c in itertools.product(*(labels_by_axis[a] for a in axes))]


#: the PL94 schema's structural-zero constraints: name -> {Bureau attribute: category index}
_STRUCTURAL_ZEROS = {"nurse_nva_0" + _CON: {"hhgq": 3, "votingage": 0}}


def _structural_zeros(cons, attributes) -> list[dict]:
    """The structural zeros the Constraint rows name, as partial cells of the manifest's (possibly renamed)
    attributes; only for the PL94 person histogram, whose schema defines them."""
    if attributes["_bureau"] != list(PL94_PERSON):
        return []
    found = {}
    for lv, g, qname, vals in zip(cons["level"], cons["geocode"], cons["query_name"], cons["values"]):
        if qname in _STRUCTURAL_ZEROS:
            if any(int(v) != 0 for v in vals):
                raise InputError("nmf.value", f"{qname} at {lv} {g} is {list(vals)}: a structural zero is 0")
            found[qname] = True
    out = []
    for qname in found:
        axes = {attributes["_bureau"].index(a): k for a, k in _STRUCTURAL_ZEROS[qname].items()}
        out.append({attributes["names"][i]: attributes["labels"][i][k] for i, k in sorted(axes.items())})
    return out


#: the PL94 schema's bounds on each group-quarters type's population: Constraint name -> the side it bounds
_HHGQ_BOUNDS = {"hhgq_total_lb" + _CON: "lower", "hhgq_total_ub" + _CON: "upper"}


def _bounds(cons, attributes, to_geoid) -> list[dict]:
    """The ``hhgq_total_lb_con`` / ``hhgq_total_ub_con`` Constraint rows as the manifest's bounds on the ``hhgq``
    query: one row per (level, geocode, hhgq category), its lower and upper bound from element k of the two rows'
    ``value`` (the DAS's right-hand side over the hhgq categories in index order, module docstring); only for the
    PL94 person histogram, whose schema defines them."""
    if attributes["_bureau"] != list(PL94_PERSON):
        return []
    axis = attributes["_bureau"].index("hhgq")
    labels = attributes["labels"][axis]
    found: dict[tuple, dict] = {}
    for lv, g, qname, vals in zip(cons["level"], cons["geocode"], cons["query_name"], cons["values"]):
        side = _HHGQ_BOUNDS.get(qname)
        if side is None or lv not in to_geoid:
            continue
        if len(vals) != len(labels):
            raise InputError("nmf.value", f"{qname} at {lv} {g} has {len(vals)} values, not one per hhgq category "
                             f"({len(labels)})")
        for k, v in enumerate(vals):
            row = found.setdefault((lv, g, k), {"level": BUREAU_LEVELS[lv], "geocode": to_geoid[lv][g],
                                                "query": "hhgq", "cell": labels[k]})
            if side in row:
                raise InputError("nmf.value", f"{qname} at {lv} {g} is given twice")
            row[side] = int(v)
    return list(found.values())


def _invariants(cons, to_geoid) -> dict:
    out = {}
    for lv, g, qname, vals in zip(cons["level"], cons["geocode"], cons["query_name"], cons["values"]):
        if qname != "total" + _CON or lv not in to_geoid:
            continue
        if len(vals) != 1:
            raise InputError("nmf.value", f"total_con at {lv} {g} has {len(vals)} values, not 1")
        out.setdefault(f"{BUREAU_LEVELS[lv]}_total", {})[to_geoid[lv][g]] = int(vals[0])
    return {k: out[k] for k in sorted(out, key=lambda k: LEVEL_ORDER.index(k[:-len("_total")]))}
