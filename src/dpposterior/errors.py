"""Errors that reach the user as one line: ``field: reason``.

Every bad input (release file, analysis file, command-line option, Python
argument) raises :class:`InputError` naming the offending field; the CLI turns it
into a single line on stderr and exit code 2.  Requests that are well-formed but
impossible (an improper posterior, an infeasible constraint, an overspent budget)
raise :class:`RefusedError`, a subclass, so callers can tell them apart.
"""

from __future__ import annotations


class InputError(ValueError):
    """A user-supplied value is malformed; ``field`` names it (dotted path)."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class RefusedError(InputError):
    """The request is well-formed but impossible (improper posterior, infeasible, ...)."""


def require(condition: bool, field: str, reason: str, cls: type[InputError] = InputError) -> None:
    """Raise ``cls(field, reason)`` unless ``condition`` holds."""
    if not condition:
        raise cls(field, reason)


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
    if err.get("type") == "missing":
        msg = "missing"
    elif err.get("type") == "extra_forbidden":
        msg = "unknown field"
    return InputError(field, msg)


def check_output_path(path, field: str = "out") -> None:
    """Refuse an output file whose folder does not exist (or is not a folder), before any work."""
    from pathlib import Path

    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.exists() and p.is_dir():
        raise InputError(field, f"{p} is a folder, not a file")
    if not parent.exists():
        raise InputError(field, f"folder {parent} does not exist")
    if not parent.is_dir():
        raise InputError(field, f"{parent} is not a folder")
