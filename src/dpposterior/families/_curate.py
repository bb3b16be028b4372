"""What every family's curator shares: the options of ``dpposterior release`` and the checks on them.

``CurateOptions`` is filled by the CLI (``dpposterior.curator``) and read by each family's
``curate(frame, options)``; the helpers refuse a missing column or an option the family's curator
would silently ignore.  It sits inside ``families/`` so that a family never imports the command
layer above it (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError


@dataclass
class CurateOptions:
    family: str
    epsilon: float | None = None
    #: zCDP budget of the discrete Gaussian (``--rho``), instead of ``epsilon``
    rho: float | None = None
    column: str | None = None
    columns: list[str] | None = None
    features: list[str] | None = None
    response: str | None = None
    bounds: tuple[float, float] | None = None
    x_norm: float | None = None
    y_abs: float | None = None
    epsilon_split: str | None = None
    delta: float | None = None
    mechanism: str | None = None
    scale: str | None = None
    parties: int = 1
    intercept: bool = False
    seed: int | None = None
    population: Any = None   # sir: the public population K (--population)
    trials: Any = None       # sir: binomial trials N (--trials)
    times: Any = None        # sir: the time grid (--times, comma-separated or a list)
    design: Any = None       # linreg-ju: the public design, a JSON file (--design)
    extra: dict[str, Any] = field(default_factory=dict)


#: CurateOptions fields that are command-line options, with their "not given" values
_OPTION_DEFAULTS = {"column": None, "columns": None, "features": None, "response": None, "bounds": None,
                    "x_norm": None, "y_abs": None, "epsilon_split": None, "delta": None, "mechanism": None,
                    "scale": None, "parties": 1, "intercept": False, "population": None, "trials": None,
                    "times": None, "design": None}


def reject_unused(options: CurateOptions, used: set[str], family: str) -> None:
    """Refuse an option the family's curator would silently ignore (e.g. ``--bounds`` for ``sir``)."""
    for name, default in _OPTION_DEFAULTS.items():
        if name not in used and getattr(options, name) != default:
            raise InputError(name.replace("_", "-"), f"not an option of the {family} curator")


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


def numeric_values(raw, name: str):
    """A CSV column (pandas Series) as finite floats; the first bad cell -- empty, not a number,
    infinite -- is refused in one line naming the column and its data row (1 = the first row after
    the header), e.g. ``data.x: row 7: 'abc' is not a finite number (column 'x')``."""
    import numpy as np
    import pandas as pd

    if raw.dtype == bool:
        return raw.to_numpy(dtype=float)
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        cell = raw.iloc[row]
        if pd.isna(cell) or (isinstance(cell, str) and not cell.strip()):
            raise InputError(f"data.{name}", f"row {row + 1} is empty (column {name!r})")
        cell = cell.item() if isinstance(cell, np.generic) else cell
        raise InputError(f"data.{name}", f"row {row + 1}: {cell!r} is not a finite number (column {name!r})")
    return values
