"""The curator's side: a CSV of confidential records -> a release file.

The CLI's ``dpposterior release`` collects the options it was given into :class:`CurateOptions`
(defined with the families' shared curator helpers in ``families/_curate.py``);
:func:`build_release` builds the family's typed curator options from them (``Family.curator_options``,
the class the curator is declared with, which refuses in one line an option that curator does not take), checks the budget, and hands the data
frame to the family's ``curate`` function, which clamps, computes the statistics, draws the noise
(``mechanisms.draw_noise``) and returns the release dict.  The dict is validated like any release
before it is written, and it never contains a data row.
"""

from __future__ import annotations

from pathlib import Path

from .errors import InputError, shown
from .families._curate import CurateOptions, CuratorOptions  # noqa: F401  (re-exported: the CLI's options)


def read_csv(path):
    import pandas as pd

    from .errors import check_input_file

    path = Path(path)
    check_input_file(path, "data")
    refuse_duplicate_columns(path)
    try:
        # a blank line is a row of empty cells (refused, or left out with --drop-missing), never skipped
        # silently: a one-column CSV writes a missing value as a blank line
        frame = pd.read_csv(path, skip_blank_lines=False)
    except Exception as exc:  # pandas raises many parser error types
        raise InputError("data", f"cannot read CSV ({exc})") from None
    # ' age' in a header is the column 'age' (spaces after the commas of a hand-written header)
    frame.columns = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    return frame


def read_exposure(path) -> dict:
    """A public exposure file (CSV with columns ``area``, ``exposure``) -> {area id: exposure > 0}."""
    import numpy as np
    import pandas as pd

    frame = read_csv(path)
    for col in ("area", "exposure"):
        if col not in frame.columns:
            raise InputError("exposure", f"no column {col!r} in {path} (columns: area, exposure)")
    values = frame["exposure"].to_numpy()
    for row, (area, value) in enumerate(zip(frame["area"].astype(str), values), start=1):
        if pd.isna(frame["area"].iloc[row - 1]) or not area.strip():
            raise InputError("exposure", f"row {row}: the area is empty")
        try:
            ok = float(value) > 0 and np.isfinite(float(value))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise InputError("exposure", f"row {row}: exposure of area {area!r} must be a finite number > 0 "
                             f"(got {shown(value)})")
    areas = frame["area"].astype(str).str.strip()
    if areas.duplicated().any():
        raise InputError("exposure", f"area {areas[areas.duplicated()].iloc[0]!r} appears twice")
    return {a: float(v) for a, v in zip(areas, values)}


def read_public_list(path, kind: str) -> list[str]:
    """A public list of ``kind`` (area, cell) ids: one per line, or a CSV whose header names a column ``kind``
    (e.g. the exposure file).  Blank lines are refused; ids must be distinct."""
    import csv

    from .errors import check_input_file

    field = f"{kind}s"
    check_input_file(path, field)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(field, f"cannot read {path} ({exc})") from None
    header = [h.strip() for h in rows[0]] if rows else []
    if kind in header and len(header) > 1:  # a CSV with a column named after the kind
        col = header.index(kind)
        ids = [row[col].strip() if col < len(row) else "" for row in rows[1:]]
        first = 1
    else:  # one id per line (a header line named after the kind is skipped)
        ids = [",".join(row).strip() for row in rows]
        first = 0
        if ids and ids[0] == kind:
            ids, first = ids[1:], 1
    while ids and not ids[-1]:  # the file's final newline(s)
        ids.pop()
    if not ids:
        raise InputError(field, f"{path} lists no {kind}")
    seen: dict[str, int] = {}
    for line, value in enumerate(ids, start=first + 1):
        if not value:
            raise InputError(field, f"line {line} of {path} is empty (one {kind} per line)")
        if value in seen:
            raise InputError(field, f"{kind} {value!r} appears twice in {path} (lines {seen[value]} and {line})")
        seen[value] = line
    return ids


def check_budget(options: CuratorOptions) -> None:
    """Exactly one budget: ``--rho`` for the discrete Gaussian (zCDP), ``--epsilon`` for everything else."""
    from .release import check_epsilon_range

    rho = getattr(options, "rho", None)  # a curator with no discrete Gaussian takes no rho
    if getattr(options, "mechanism", None) == "discrete-gaussian":
        if options.epsilon is not None:
            raise InputError("epsilon", "not a budget of --mechanism discrete-gaussian (give its zCDP budget --rho)")
        if rho is None:
            raise InputError("rho", "is required with --mechanism discrete-gaussian (its zCDP budget)")
        if not (isinstance(rho, (int, float)) and 1e-12 <= rho <= 1e6):
            raise InputError("rho", f"must be a number in [1e-12, 1e6] (got {shown(rho)})")
        return
    if rho is not None:
        raise InputError("rho", "is the budget of --mechanism discrete-gaussian only (give --epsilon)")
    if options.epsilon is None:
        raise InputError("epsilon", "is required (the privacy budget)")
    if not (isinstance(options.epsilon, (int, float)) and options.epsilon > 0 and options.epsilon < float("inf")):
        raise InputError("epsilon", f"must be a finite number > 0 (got {options.epsilon})")
    check_epsilon_range(options.epsilon, "epsilon")


def refuse_duplicate_columns(path) -> None:
    """Refuse a header that names a column twice: pandas would silently rename the second 'x' to
    'x.1', and ``--column x`` would then read only one of the two."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, csv.Error) as exc:
        raise InputError("data", f"cannot read CSV header ({exc})") from None
    seen: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        name = name.strip()
        if name in seen:
            raise InputError("data", f"column {name!r} appears twice in the header (columns {seen[name]} and "
                             f"{position}); give every column its own name")
        seen[name] = position


def build_release(data_path, options: CurateOptions):
    """Read the CSV, let the family build the release, validate it; returns the release."""
    from .errors import check_seed
    from .families import get_family
    from .release import load_release

    family = get_family(options.family)
    if family.curate is None:
        raise InputError("family", f"the curator cannot build {options.family!r} releases")
    options = family.curator_options.from_curate(options)  # refuses an option this curator does not take
    mechanism = getattr(options, "mechanism", None)
    from .mechanisms.registry import MECHANISMS

    if mechanism is not None and mechanism not in MECHANISMS:  # a typo: blamed before the budget it decides
        raise InputError("mechanism", f"{mechanism!r} is not a mechanism of the {family.name} curator "
                         f"(one of: {', '.join(family.mechanisms)})")
    check_budget(options)
    check_seed(options.seed, "seed")  # --delta is the linear-regression curator's: checked there
    frame = read_csv(data_path)
    release_dict = family.curate(frame, options)
    return load_release(release_dict)
