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
    """The confidential records: a CSV file (with a header row), or a pandas DataFrame already in memory
    (``dpposterior.release_from_csv``; read as a CSV's columns would be: names stripped, each once)."""
    import pandas as pd

    from .errors import check_input_file

    if isinstance(path, pd.DataFrame):
        return _records_frame(path)
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


def _records_frame(frame):
    """A copy of a caller's DataFrame, as :func:`read_csv` would give its CSV: string column names stripped
    of spaces, a name given twice refused, a fresh row index."""
    out = frame.reset_index(drop=True)  # a copy: the curator never changes the caller's frame
    out.columns = [c.strip() if isinstance(c, str) else c for c in out.columns]
    seen: dict = {}
    for position, name in enumerate(out.columns, start=1):
        if name in seen:
            raise InputError("data", f"column {name!r} appears twice in the data frame (columns {seen[name]} and "
                             f"{position}); give every column its own name")
        seen[name] = position
    return out


def _read_area_file(path, column: str, field: str, value) -> dict:
    """A public per-area CSV (columns ``area`` and ``column``) -> {area id: ``value(row, area, cell)``}: each row's
    area non-empty, each area once; ``value`` checks and converts the row's cell (raising a one-line error)."""
    import pandas as pd

    frame = read_csv(path)
    for col in ("area", column):
        if col not in frame.columns:
            raise InputError(field, f"no column {col!r} in {path} (columns: area, {column})")
    out = {}
    for row in range(1, len(frame) + 1):
        raw = frame["area"].iloc[row - 1]
        if pd.isna(raw) or not str(raw).strip():
            raise InputError(field, f"row {row}: the area is empty")
        area = str(raw).strip()
        converted = value(row, area, frame[column].iloc[row - 1])
        if area in out:
            raise InputError(field, f"area {area!r} appears twice")
        out[area] = converted
    return out


def read_exposure(path) -> dict:
    """A public exposure file (CSV with columns ``area``, ``exposure``) -> {area id: exposure > 0}."""
    import numpy as np

    def exposure(row, area, value):
        try:
            ok = float(value) > 0 and np.isfinite(float(value))
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise InputError("exposure", f"row {row}: exposure of area {area!r} must be a finite number > 0 "
                             f"(got {shown(value)})")
        return float(value)

    return _read_area_file(path, "exposure", "exposure", exposure)


def read_parents(path) -> dict:
    """A public parents file (CSV with columns ``area``, ``parent``) -> {area id: parent id} (small-area's
    two-level hierarchy, e.g. tract -> county)."""
    import pandas as pd

    def parent(row, area, value):
        if pd.isna(value) or not str(value).strip():
            raise InputError("parents", f"row {row}: the parent is empty")
        return str(value).strip()

    out = _read_area_file(path, "parent", "parents", parent)
    if not out:
        raise InputError("parents", f"{path} has no rows")
    return out


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

    from .mechanisms.registry import accounts_rho, rho_mechanisms

    rho = getattr(options, "rho", None)  # a curator with no discrete Gaussian takes no rho
    if accounts_rho(getattr(options, "mechanism", None)):
        if options.epsilon is not None:
            raise InputError("epsilon", f"not a budget of --mechanism {options.mechanism} (give its zCDP budget --rho)")
        if rho is None:
            raise InputError("rho", f"is required with --mechanism {options.mechanism} (its zCDP budget)")
        if not (isinstance(rho, (int, float)) and 1e-12 <= rho <= 1e6):
            raise InputError("rho", f"must be a number in [1e-12, 1e6] (got {shown(rho)})")
        return
    if rho is not None:
        raise InputError("rho", f"is the budget of --mechanism {' or '.join(rho_mechanisms())} only (give --epsilon)")
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


#: the options that ask for a privacy target instead of a noise level (``--target-epsilon``, ``--target-rho``)
TARGET_OPTIONS = ("target_epsilon", "target_rho")


def build_release(data_path, options: CurateOptions):
    """Read the CSV, let the family build the release, validate it; returns the release.

    ``target_epsilon`` (with ``delta``, where the family's curator does not take a delta of its own: the
    release's report_delta) or ``target_rho`` among the options: the smallest noise whose accounting of the
    whole release meets the target is found first (:func:`solve_budget`), and the release records the target
    beside its accounting.
    """
    import dataclasses

    from .errors import check_seed
    from .families import get_family
    from .release import accounting_record, load_release

    family = get_family(options.family)
    if family.curate is None:
        raise InputError("family", f"the curator cannot build {options.family!r} releases")
    given = dict(options.given)
    target = {k: given.pop(k) for k in TARGET_OPTIONS if k in given}
    report_delta = None
    if target and "delta" in given and "delta" not in family.curator_options.names():
        report_delta = given.pop("delta")
    typed = family.curator_options.from_curate(_with(options, given))  # refuses an option this curator does not take
    if "mechanism" in typed.names() and typed.mechanism is None:  # the curator's default, named for the budget
        typed = dataclasses.replace(typed, mechanism=family.mechanisms[0])
    mechanism = getattr(typed, "mechanism", None)
    from .mechanisms.registry import MECHANISMS

    if mechanism is not None and mechanism not in MECHANISMS:  # a typo: blamed before the budget it decides
        raise InputError("mechanism", f"{mechanism!r} is not a mechanism of the {family.name} curator "
                         f"(one of: {', '.join(family.mechanisms)})")
    check_seed(typed.seed, "seed")  # --delta is the linear-regression curator's: checked there
    if target:
        budget = _target_budget(typed, target)
        frame = read_csv(data_path)
        value = solve_budget(family, frame, typed, budget, target, report_delta)
        typed = dataclasses.replace(typed, **{budget: value})
    else:
        frame = None
    check_budget(typed)
    if frame is None:
        frame = read_csv(data_path)
    release_dict = family.curate(frame, typed)
    if report_delta is not None:
        release_dict["report_delta"] = report_delta
    release = load_release(release_dict)
    record = {("epsilon" if k == "target_epsilon" else "rho"): float(v) for k, v in target.items()}
    if "epsilon" in record:
        record["delta"] = float(release.privacy().delta)
    release.accounting = accounting_record(release, record or None)
    if target:
        _require_target_met(release, target)
    return release


def _with(options: CurateOptions, given: dict) -> CurateOptions:
    out = CurateOptions(options.family)
    out.given = given
    return out


def _target_budget(typed, target: dict) -> str:
    """Which budget option the target sets (rho for the discrete Gaussian, epsilon otherwise); one line for a
    target given beside a budget, two targets, or a target that is not a finite number > 0."""
    import math

    if len(target) > 1:
        raise InputError("target-rho", "give one target: --target-epsilon or --target-rho")
    (key, value), = target.items()
    field = key.replace("_", "-")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(field, f"must be a finite number > 0 (got {value!r})")
    for budget in ("epsilon", "rho"):
        if getattr(typed, budget, None) is not None:
            raise InputError(budget, f"give either --{budget} or --{field}, not both (the target sets the noise)")
    from .mechanisms.registry import accounts_rho

    zcdp = accounts_rho(getattr(typed, "mechanism", None))
    if key == "target_rho" and not zcdp:
        raise InputError(field, "is the target of --mechanism discrete-gaussian (zCDP); give --target-epsilon")
    return "rho" if zcdp else "epsilon"


def solve_budget(family, frame, typed, budget: str, target: dict, report_delta=None) -> float:
    """The largest budget (epsilon or rho: the least noise) whose release meets ``target`` by the release's own
    accounting (``release.privacy()``, all statistics together), by bisection in log space.

    The releases tried here are built with seeded numpy noise and thrown away: only their accounting, which
    depends on the noise levels and the release's shape and not on the data's values, is read.
    """
    import dataclasses
    import math

    from .release import check_epsilon_range, load_release

    (key, goal), = target.items()
    lo_limit, hi_limit = (1e-12, 1e6) if budget == "rho" else (1e-6, 1e9)

    def spent(b: float) -> float:
        trial = dataclasses.replace(typed, **{budget: b, "seed": 0})
        rel_dict = family.curate(frame, trial)
        if report_delta is not None:
            rel_dict["report_delta"] = report_delta
        cost = load_release(rel_dict).privacy()
        if key == "target_rho":
            return cost.rho
        return cost.epsilon

    b = min(max(goal, lo_limit), hi_limit)
    if budget == "epsilon":
        check_epsilon_range(b, key.replace("_", "-"))
    lo = hi = None
    for _ in range(200):
        if spent(b) <= goal:
            lo = b
            if hi is not None or b >= hi_limit:
                break
            b = min(b * 4.0, hi_limit)
        else:
            hi = b
            if lo is not None:
                break
            if b <= lo_limit:
                raise InputError(key.replace("_", "-"), f"{goal:g} cannot be met: even {budget} {lo_limit:g} spends "
                                 "more (the release's shape sets a floor)")
            b = max(b / 4.0, lo_limit)
    if lo is None:
        raise InputError(key.replace("_", "-"), f"{goal:g} cannot be met within the {budget} range")
    while hi is not None and hi / lo > 1.0 + 1e-7:
        mid = math.sqrt(lo * hi)
        if spent(mid) <= goal:
            lo = mid
        else:
            hi = mid
    return lo


def _require_target_met(release, target: dict) -> None:
    (key, goal), = target.items()
    cost = release.privacy()
    got = cost.rho if key == "target_rho" else cost.epsilon
    if got is None or got > goal * (1.0 + 1e-12):
        raise InputError(key.replace("_", "-"), f"the release spends {got} where {goal:g} was asked")
