"""Errors that reach the user as one line: ``field: reason``.

Every bad input (release file, analysis file, command-line option, Python
argument) raises :class:`InputError` naming the offending field; the CLI turns it
into a single line on stderr and exit code 2.  Requests that are well-formed but
impossible (an improper posterior, an infeasible constraint, an overspent budget)
raise :class:`RefusedError`, a subclass, so callers can tell them apart.
"""

from __future__ import annotations

from contextlib import contextmanager


class InputError(ValueError):
    """A user-supplied value is malformed; ``field`` names it (dotted path)."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")

    def __reduce__(self):
        # rebuilt from its two fields, so that it crosses a process pool or a Dask worker whole (the default
        # rebuilds an exception from its message alone, which __init__ does not take)
        return self.__class__, (self.field, self.reason)


class RefusedError(InputError):
    """The request is well-formed but impossible (improper posterior, infeasible, ...)."""


class MemoryRefusedError(RefusedError):
    """The work would not fit in the memory available (``dpposterior.memory.check_fits``): refused before anything
    is allocated.  A study of many runs (``calibrate``) stops on it, since every trial of that size would refuse
    alike, instead of recording it as one trial's failure."""


class PosteriorWarning(UserWarning):
    """A posterior that ``dpposterior.infer`` returned flagged (``dpposterior.checks``: R-hat, ESS, a flow
    that did not train, a posterior equal to its prior, ...).  Emitted with :func:`warnings.warn` once per
    flag, besides ``Posterior.warnings``; filter it like any warning category, e.g.
    ``warnings.simplefilter("error", dpposterior.PosteriorWarning)`` to make flagged posteriors fail."""


class CuratorWarning(UserWarning):
    """What a curator tells the person running it and does not release: rows left out by ``drop_missing``,
    a public list (areas, cells) read from the confidential data.  ``dpposterior release`` prints each as
    ``warning: ...`` on stderr."""


@contextmanager
def posterior_warnings_ignored():
    """A context in which no :class:`PosteriorWarning` is shown: for callers that report the flags
    themselves (the CLI prints ``warning: ...``) or study many posteriors (calibration)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PosteriorWarning)
        yield


def require(condition: bool, field: str, reason: str, cls: type[InputError] = InputError) -> None:
    """Raise ``cls(field, reason)`` unless ``condition`` holds."""
    if not condition:
        raise cls(field, reason)


#: the fields of a release's statistic record (``release.StatisticRecord``)
RECORD_FIELDS = ["value", "mechanism", "epsilon", "delta", "sensitivity", "sigma", "rho", "sampler", "scale", "trials",
                 "m", "note"]


def add_record_fields(fields) -> None:
    """A registered mechanism's own record fields: its validator's messages name them like the schema's."""
    RECORD_FIELDS.extend(f for f in fields if f not in RECORD_FIELDS)


def shown(value) -> str:
    """A value as a message shows it: numpy scalars as plain numbers (``0``, not ``np.int64(0)``), floats with
    every digit they have (``1.4142135623730951``; ``5``, not ``5.0``), anything else as ``repr``."""
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return repr(value)


def check_number(value, field: str, low: float, high: float, why: str = "") -> float:
    """``value`` as a float: a real number (not a bool, not a string) in [low, high]; otherwise one line naming
    ``field`` (``why`` says where the range comes from)."""
    import math

    import numpy as np

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(field, f"must be a number (got {type(value).__name__} {value!r})")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise InputError(field, f"must be a finite number > 0 (got {v:g})")
    if not low <= v <= high:
        raise InputError(field, f"{v:g} is outside [{low:g}, {high:g}]{why}")
    return v


def from_pydantic(exc, prefix: str) -> InputError:
    """Turn the first error of a pydantic ``ValidationError`` into an :class:`InputError`."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    field = f"{prefix}.{loc}" if loc else prefix
    msg = err.get("msg", "invalid value")
    # pydantic prefixes messages of custom validators with "Value error, "
    for noise in ("Value error, ", "Assertion failed, "):
        if msg.startswith(noise):
            msg = msg[len(noise):]
    # a record's validator names the record's own field first ("sigma: ..."): join it to the path
    head, sep, rest = msg.partition(": ")
    if sep and loc and (head in RECORD_FIELDS or rest == "unknown field"):
        field, msg = f"{field}.{head}", rest
    if err.get("type") == "missing":
        msg = "missing"
    elif err.get("type") == "extra_forbidden":
        msg = "unknown field"
    return InputError(field, msg)


def check_output_path(path, field: str = "out") -> None:
    """Refuse an output file that cannot be written, before any work (never lose a computed result).

    The folder must exist and be a folder, the path must not be a folder, and a file must be
    creatable there: a trial file with no name (or a unique one, removed at once) catches read-only
    places such as ``/proc`` that permission bits do not show, and never collides with another run.
    """
    import os
    from pathlib import Path

    p = Path(path)
    if not str(path).strip():
        raise InputError(field, "is empty")
    parent = p.parent if str(p.parent) else Path(".")
    if p.exists() and p.is_dir():
        raise InputError(field, f"{p} is a folder, not a file")
    if not parent.exists():
        raise InputError(field, f"folder {parent} does not exist")
    if not parent.is_dir():
        raise InputError(field, f"{parent} is not a folder")
    if p.exists():
        if not p.is_file():
            raise InputError(field, f"{p} is not a regular file")
        if not os.access(p, os.W_OK):
            raise InputError(field, f"{p} is not writable")
        return
    try:  # a nameless trial file (O_TMPFILE where the OS has it): nothing to collide with or leave behind
        import tempfile

        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise InputError(field, f"cannot write in folder {parent} ({exc.strerror or exc})") from None


def check_input_file(path, field: str) -> None:
    """Refuse an input path that is missing, a folder or unreadable, with one line naming the field."""
    import os
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise InputError(field, f"file not found: {p}")
    if p.is_dir():
        raise InputError(field, f"{p} is a folder, not a file")
    if not os.access(p, os.R_OK):
        raise InputError(field, f"{p} is not readable")


def check_seed(seed, field: str = "seed") -> None:
    """A seed must be an integer in [0, 2^63) (numpy's SeedSequence refuses negatives)."""
    import numpy as np

    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**63:
        raise InputError(field, f"must be an integer between 0 and 2^63 - 1 (got {shown(seed)})")
