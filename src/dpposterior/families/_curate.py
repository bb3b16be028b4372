"""What every family's curator shares: the options of ``dpposterior release``, checked per family.

The curator's options flow as the engines' do (docs/architecture.md, "How an option flows"; the
pattern of :mod:`dpposterior.options`):

* :class:`CurateOptions` is what the caller gave -- the family and every option by name (the CLI's
  flags, Python keywords, and ``extra`` for options with no flag, e.g. multinomial ``categories``);
  None means not given;
* each family's curator has one typed options class, a frozen dataclass subclass of
  :class:`CuratorOptions` made by :func:`curator_options` whose fields are all the options that curator
  takes (rows of :data:`CURATOR_OPTION_TABLE`: name, kind -- type and default -- and doc), named by
  the curator's declaration, ``@curator(XCuratorOptions) def curate(frame, options)``
  (``Family.curator_options``); ``XCuratorOptions.from_curate(options)`` builds it and refuses, in one
  line naming the option and the family, every option the curator does not take.
  ``dpposterior.curator.build_release`` builds it before reading the data; the decorated curator builds
  it again when called (cheap; the same check when a curator is called directly) and reads only its
  fields.

It sits inside ``families/`` so that a family never imports the command layer above it.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import InputError
from ..options import option


class CurateOptions:
    """The options a curator was given: ``CurateOptions("gaussian", epsilon=1.0, column="x", bounds=(0, 1))``.

    Keywords and ``extra`` (options by name that have no command-line flag) are merged; None means not
    given; an option given in both with different values is refused.  The family's
    :class:`CuratorOptions` class checks them (:meth:`CuratorOptions.from_curate`).
    """

    def __init__(self, family: str, extra: dict[str, Any] | None = None, **given):
        self.family = family
        merged = {k: v for k, v in given.items() if v is not None}
        for key, value in (extra or {}).items():
            if value is None:
                continue
            if key in merged and merged[key] != value:
                raise InputError(flag(key), f"given twice with different values ({merged[key]!r} and {value!r})")
            merged[key] = value
        self.given: dict[str, Any] = merged

    def __repr__(self) -> str:
        return f"CurateOptions({self.family!r}, {self.given!r})"


def flag(name: str) -> str:
    """An option's name as the command line spells it (``x_norm`` -> ``x-norm``)."""
    return name.replace("_", "-")


@dataclass(frozen=True)
class CuratorOptions:
    """Base of every family's curator options class: the budget and the noise sampler's seed.

    Each family's class is made by :func:`curator_options` from the rows of :data:`CURATOR_OPTION_TABLE`
    it takes; a curator that may release through the discrete Gaussian takes ``rho``.  Which budget a
    release needs (``epsilon``, or ``rho`` for the discrete Gaussian) is checked by
    ``dpposterior.curator.check_budget``.
    """

    family: ClassVar[str] = "family"

    epsilon: float | None = option(None, "any", "total privacy budget (--epsilon)")
    seed: Any = option(None, "any", "seed of numpy's noise sampler (--seed; not given: OpenDP's samplers)")
    drop_missing: bool = option(False, "bool", "leave out rows with a missing value in a column the curator "
                                "reads (--drop-missing; default: refuse them, naming the row)")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def refuse(cls, key: str) -> InputError:
        """The one-line refusal of an option this curator does not take."""
        return InputError(flag(key), f"not an option of the {cls.family} curator "
                                     f"(options: {', '.join(flag(n) for n in cls.names())})")

    @classmethod
    def from_curate(cls, options: "CurateOptions | CuratorOptions"):
        """The curator's typed options from what was given; refuses (one line) any option it does not take."""
        if isinstance(options, cls):
            return options
        own = {f.name: f.metadata.get("spec") for f in dataclasses.fields(cls)}
        values = {}
        for key, value in options.given.items():
            if key not in own:
                raise cls.refuse(key)
            if key == "mechanism" and isinstance(value, str):
                value = value.strip().lower()  # DISCRETE-GAUSSIAN is discrete-gaussian
            values[key] = own[key].check(flag(key), value) if own[key] is not None else value
        return cls(**values)


#: every option a family's curator may take: name, kind (any: None when not given; bool; int>=1: default 1)
#: and what it is; each family's class names the rows it takes (:func:`curator_options`)
CURATOR_OPTION_TABLE = """
rho               any     zCDP budget of --mechanism discrete-gaussian (--rho; curators that may release through it)
column            any     the data column (--column; sir: the infected counts, default infected)
columns           any     the class column, then the feature columns (--columns Y,X1,...)
features          any     the feature columns (--features A,B; linreg-ju: two)
response          any     the response column (--response)
bounds            any     clamping (gaussian, linear-regression) or truncation bounds LO HI (--bounds)
x_norm            any     public bound on the row norm of x (--x-norm)
y_abs             any     public bound on |y| (--y-abs)
epsilon_split     any     how epsilon is split between the statistics (--epsilon-split)
delta             any     delta of the gaussian mechanism (--delta)
mechanism         any     the noise mechanism, one of the family's (--mechanism)
scale             any     counts or proportions (--scale)
parties           int>=1  split the rows into J data holders, in order (--parties)
intercept         bool    add an intercept column (--intercept)
population        any     the public population size K (--population, or a population column)
trials            any     binomial trials N (--trials; default 1000)
times             any     the time grid, one per data row (--times, or a time column)
initial_infected  any     the analyst's simulator: people infected at t = 0 (Python extra; default 1)
event_cap         any     the analyst's simulator: most events per run (Python extra; default 2,000,000)
design            any     the public design, a JSON file (--design; default Xiong et al.'s)
categories        any     the public category labels (Python extra; default: read from the data)
area_column       any     the area id column (--area-column)
cell_column       any     the cell (category) column (--cell-column)
exposure          any     public exposure per area (--exposure: a CSV of area, exposure)
postprocessing    any     none (default) or nonnegative (--postprocessing)
areas             any     the public area list (Python extra; default: read from the data)
cells             any     the public cell list (Python extra; default: read from the data)
cliques           any     the marginals to release, attributes by commas, cliques by semicolons (--cliques "a,b;c")
max_cells         any     with --cliques mst: choose only pairs whose table has at most this many cells (--max-cells)
domain            any     the public levels of each attribute, {attr: [levels]} (Python extra; default: read from the data)
"""
_OPTION_ROWS = {name: (kind, doc) for name, kind, doc in
                (line.split(None, 2) for line in CURATOR_OPTION_TABLE.strip().splitlines())}


def _option_field(kind: str, doc: str):
    if kind == "bool":
        return option(False, "bool", doc)
    if kind == "int>=1":
        return option(1, "int", doc, low=1)
    return option(None, "any", doc)


def curator_options(family: str, *names: str, module: str) -> type:
    """The typed options class of ``family``'s curator: :class:`CuratorOptions` (epsilon, seed) and the rows
    ``names`` of :data:`CURATOR_OPTION_TABLE`, a frozen dataclass ``<Family>CuratorOptions`` of ``module``."""
    fields = [(name, Any, _option_field(*_OPTION_ROWS[name])) for name in names]
    title = "".join(part.capitalize() for part in family.replace("_", "-").split("-"))
    cls = dataclasses.make_dataclass(f"{title}CuratorOptions", fields, bases=(CuratorOptions,), frozen=True,
                                     namespace={"family": family})
    cls.__module__ = module
    cls.__doc__ = (f"Options of the {family} curator: {', '.join(flag(n) for n in cls.names())} "
                   "(families/_curate.py, CURATOR_OPTION_TABLE).")
    return cls


def curator(options_class: type, reads=None):
    """Declares a family's curator: ``@curator(XCuratorOptions) def curate(frame, options)``.

    The curator receives ``options_class.from_curate(options)`` -- its typed options, any option it does
    not take refused in one line -- and names the class as ``curate.curator_options`` (what
    ``Family.curator_options`` returns).  Before it runs, the rows with a missing value in a column it
    reads (``reads(options)``, default :func:`columns_read`) are refused, naming the first one, or left
    out with ``drop_missing`` (:func:`complete_rows`)."""
    def declare(fn):
        @functools.wraps(fn)
        def curate(frame, options):
            options = options_class.from_curate(options)
            frame, dropped = complete_rows(frame, (reads or columns_read)(options), options.drop_missing)
            release = fn(frame, options)
            if dropped:
                note_dropped_rows(release, dropped)
            return release

        curate.curator_options = options_class
        return curate
    return declare


def columns_read(options) -> list[str]:
    """The data columns a curator's options name (column, columns, features, response, area and cell)."""
    names: list[str] = []
    for key in ("column", "columns", "features", "response", "area_column", "cell_column"):
        value = getattr(options, key, None)
        if isinstance(value, str):
            value = value.split(",") if key in ("columns", "features") else [value]
        for name in value or ():
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return names


def missing_cells(frame, columns):
    """(row mask of rows with a missing value in ``columns``, per row the first such column); a missing value
    is an empty cell (NaN, a cell of spaces, a blank line of the CSV)."""
    import numpy as np
    import pandas as pd

    mask = np.zeros(len(frame), dtype=bool)
    first = np.full(len(frame), None, dtype=object)
    for name in columns:
        if name not in frame.columns:
            continue  # the curator refuses an absent column itself, naming its option
        col = frame[name]
        bad = np.array(col.isna().to_numpy(), dtype=bool)  # a copy: pandas may hand out a read-only view
        if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):  # text: a cell of spaces
            bad |= col.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
        first[bad & ~mask] = name
        mask |= bad
    return mask, first


def complete_rows(frame, columns, drop: bool):
    """``frame`` without rows missing a value in ``columns``, and how many were left out.

    Without ``drop`` the first such row is refused, naming its data row (1 = the first row after the
    header) and column: a silently shortened data set would release a wrong ``n``."""
    import numpy as np

    mask, first = missing_cells(frame, columns)
    if not mask.any():
        return frame, 0
    if not drop:
        row = int(np.flatnonzero(mask)[0])
        name = first[row]
        raise InputError(f"data.{name}", f"row {row + 1} is empty (column {name!r}); fill it, or give "
                         "--drop-missing (Python: drop_missing=True) to leave out rows with missing values")
    kept = frame.loc[~mask].reset_index(drop=True)
    if len(kept) == 0:
        raise InputError("data", f"every row has a missing value in {', '.join(map(repr, columns))}: "
                         "nothing is left to release")
    return kept, int(mask.sum())


def note_dropped_rows(release: dict, dropped: int) -> None:
    """Say that ``dropped`` rows were left out: a :class:`~dpposterior.errors.CuratorWarning` (the CLI prints
    it on stderr) with the count, and the release's description without it (the count of missing rows is
    not released; n counts the rows kept)."""
    import warnings

    from ..errors import CuratorWarning

    kept = f"; n = {release['n']} counts the rows kept" if "n" in release else ""
    warnings.warn(CuratorWarning(f"--drop-missing: {dropped} row{'s' if dropped != 1 else ''} with a missing "
                                 f"value left out{kept}"), stacklevel=3)
    text = "rows with a missing value in a column read were left out (--drop-missing); n counts the rows kept"
    release["description"] = f"{release['description']}; {text}" if release.get("description") else text


def class_feature_tables(frame, columns, family: str):
    """Records -> class-by-feature contingency tables (naive Bayes releases: Karwa et al., Xiong et al.).

    ``columns`` = the class column then K categorical feature columns.  Level sets are read from
    the data (numbers first, then strings, sorted) and treated as public (a codebook).
    Returns (tables: list of (I, J_k) count arrays, labels: per column its level names, n).
    """
    import numpy as np

    cols = list(columns or [])
    if len(cols) < 2:
        raise InputError("columns", f"{family} needs the class column then at least one feature column "
                         "(--columns Y,X1,...)")
    if len(set(cols)) != len(cols):
        raise InputError("columns", "a column is listed twice")
    for c in cols:
        require_column(frame, c, "columns")
    n = len(frame)
    if n == 0:
        raise InputError("data", "the CSV has no rows")
    codes, labels = [], []
    for c in cols:
        col = frame[c]
        if col.isna().any():
            row = int(np.flatnonzero(col.isna().to_numpy())[0])
            raise InputError(f"data.{c}", f"row {row + 1} is missing (recode missing values as a level first)")
        levels = sorted(col.unique(), key=lambda v: (not isinstance(v, (int, float, np.number)), v))
        if len(levels) < 2:
            raise InputError(f"data.{c}", f"a single level ({levels[0]!r}): the column carries no information")
        index = {v: i for i, v in enumerate(levels)}
        codes.append(col.map(index).to_numpy(int))
        labels.append([str(v) for v in levels])
    tables = []
    for xk, lab in zip(codes[1:], labels[1:]):
        table = np.zeros((len(labels[0]), len(lab)))
        np.add.at(table, (codes[0], xk), 1.0)
        tables.append(table)
    return tables, labels, n


def require_column(frame, name: str | None, field: str):
    if not name:
        raise InputError(field, "is required for this family")
    if name not in frame.columns:
        raise InputError(field, f"no column {name!r} in the data (columns: {', '.join(map(str, frame.columns))})")
    return frame[name]


def numeric_column(frame, name: str | None, field: str):
    """Column ``name`` of ``frame`` as finite floats (:func:`numeric_values`)."""
    return numeric_values(require_column(frame, name, field), name)


def numeric_values(raw, name: str, source: str = "data"):
    """A CSV column (pandas Series) as finite floats; the first bad cell -- empty, not a number,
    infinite -- is refused in one line naming the column and its data row (1 = the first row after
    the header), e.g. ``data.x: row 7: 'abc' is not a finite number (column 'x')``; ``source`` names the
    table in the field (``measurements.x: ...``)."""
    import numpy as np
    import pandas as pd

    if raw.dtype == bool:
        return raw.to_numpy(dtype=float)
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        cell = raw.iloc[row]
        where = f" (column {name!r})" if source == "data" else ""
        if pd.isna(cell) or (isinstance(cell, str) and not cell.strip()):
            raise InputError(f"{source}.{name}", f"row {row + 1} is empty{where}")
        cell = cell.item() if isinstance(cell, np.generic) else cell
        raise InputError(f"{source}.{name}", f"row {row + 1}: {cell!r} is not a finite number{where}")
    return values
