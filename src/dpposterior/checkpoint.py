"""Checkpointed, resumable runs of independent units of work, with integrity checks.

:func:`run_units` maps ``fn`` over ``units`` through an executor (``execution.py``), writing
every completed unit's (JSON-serialisable) result to ``checkpoint`` atomically
(``files.write_json``).  With ``resume=True`` units already in the checkpoint are not run again,
so a run killed by SIGKILL loses at most the units in flight, and -- because each unit carries
its own seed -- the resumed run's final result equals an uninterrupted run's.

Integrity: the checkpoint records the run's fingerprint and its ``run_id`` (the SHA-256 of the
fingerprint's canonical JSON), and beside every unit's result a SHA-256 of the run id, the
unit's index and the result's canonical JSON.  On resume every unit is verified -- its hash,
and the caller's own consistency check (``check``: e.g. ranks in [0, 1], one per trial) -- and a
unit that fails is refused in one line naming it, or recomputed with ``repair=True``.  So an
edited number, a NaN, a deleted trial or a unit copied over another is never resumed silently.
A unit missing altogether is simply not done yet and is computed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from .errors import InputError
from .execution import ClusterError, check_scheduler, executor
from .files import json_text, write_json

#: the checkpoint format written by this version (1: no unit hashes, an older version)
FORMAT = 2


def to_json_value(obj):
    """``obj`` as it will read back from a checkpoint (tuples -> lists, numpy -> Python)."""
    return json.loads(json_text(obj))


def atomic_write_json(path, obj, indent: int | None = None, field: str = "checkpoint") -> None:
    """Write ``obj`` as JSON to ``path`` atomically: a reader (or a run killed at any
    instant, even by SIGKILL) sees either the old file or the complete new one."""
    write_json(path, obj, indent=indent, field=field)


def canonical_json(obj) -> str:
    """One text per JSON value (sorted keys, no spaces): what the content hashes are taken of."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=True)


def run_id(fingerprint) -> str:
    """The SHA-256 of a run's fingerprint: two runs with any option different have different ids."""
    return hashlib.sha256(canonical_json(to_json_value(fingerprint or {})).encode()).hexdigest()


def unit_hash(rid: str, index: int, result) -> str:
    """The content hash of unit ``index``'s (JSON) result in run ``rid``: a copy of another unit's
    result, or of this unit's from another run, does not match."""
    return hashlib.sha256(f"{rid}\n{int(index)}\n{canonical_json(result)}".encode()).hexdigest()


def content_hash(obj: dict, key: str = "sha256") -> str:
    """The SHA-256 of a result dict's canonical JSON without its own ``key`` (a result file's seal)."""
    return hashlib.sha256(canonical_json({k: v for k, v in obj.items() if k != key}).encode()).hexdigest()


def read_checkpoint(path, *, total: int, fingerprint=None,
                    check: Callable[[int, Any], None] | None = None, repair: bool = False,
                    label: Callable[[int], str] | None = None, field: str = "resume") -> dict[int, Any]:
    """The verified unit results of checkpoint ``path`` (index -> result).

    Refused in one line (:class:`InputError` on ``field``): an unreadable file; another run's
    checkpoint (``fingerprint`` differs, or another number of units); and,
    unless ``repair``, a unit that fails its hash or ``check(index, result)`` (which raises
    ``ValueError(reason)``), or a checkpoint without unit hashes.  With ``repair`` such units are
    left out -- so they are recomputed -- and each is named on stderr.
    """
    label = label or (lambda i: f"unit {i}")
    try:
        state = json.loads(Path(path).read_text())
        if not isinstance(state, dict) or not isinstance(state.get("results", {}), dict):
            raise ValueError("not a dpposterior checkpoint")
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        if repair:
            _say(f"repair: checkpoint {path} is unreadable ({exc}); starting afresh")
            return {}
        raise InputError(field, f"checkpoint {path} is unreadable ({exc}); rerun with --resume --repair to "
                                "start afresh") from None
    other = (fingerprint is not None and state.get("fingerprint") != to_json_value(fingerprint)) \
        or state.get("total", total) != total
    if other:
        raise InputError(field, f"checkpoint {path} belongs to a different run (other options or seed); rerun "
                                "without --resume to start afresh")
    rid = run_id(state.get("fingerprint"))
    hashes = state.get("sha256")
    if state.get("format") != FORMAT or not isinstance(hashes, dict) or state.get("run_id") != rid:
        if not repair:
            raise InputError(field, f"checkpoint {path} carries no valid unit hashes (written by an older "
                                    "dpposterior, or edited); rerun with --resume --repair to recompute its units")
        _say(f"repair: checkpoint {path} carries no valid unit hashes; recomputing every unit")
        return {}
    results: dict[int, Any] = {}
    for key, value in state["results"].items():
        index = int(key) if isinstance(key, str) and key.isdigit() else None
        name = label(index) if index is not None and 0 <= index < total else f"unit {key!r}"
        try:
            if index is None or not 0 <= index < total:
                raise ValueError(f"is not one of the run's {total} units")
            if hashes.get(key) != unit_hash(rid, index, value):
                raise ValueError("does not match its content hash (edited, corrupted or copied from another "
                                 "unit or run)")
            if check is not None:
                check(index, value)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            reason = str(exc) if isinstance(exc, ValueError) else f"is malformed ({type(exc).__name__}: {exc})"
            if not repair:
                raise InputError(field, f"checkpoint {path}: {name} {reason}; rerun with --resume --repair to "
                                        "recompute it") from None
            _say(f"repair: recomputing {name} of {path} (it {reason})")
            continue
        results[index] = value
    return results


def _say(message: str) -> None:
    """A repair notice: printed even with --quiet (the run differs from a plain resume)."""
    print(message, file=sys.stderr)


def run_units(fn: Callable[[Any], Any], units: Sequence[Any], *, scheduler: str = "serial",
              checkpoint: str | os.PathLike | None = None, resume: bool = False,
              fingerprint: dict | None = None, quiet: bool = True, description: str = "units",
              workers: int | None = None, repair: bool = False,
              check: Callable[[int, Any], None] | None = None,
              label: Callable[[int], str] | None = None,
              worker_timeout: float | None = None) -> list:
    """Results of ``fn(unit)`` for every unit, in order.

    With a ``checkpoint`` every result must be JSON-serialisable (numpy scalars and
    arrays are converted to Python numbers and lists) and is returned as JSON would
    read it back, whether it was computed now or loaded on ``resume``.

    ``fingerprint`` (JSON-serialisable) describes the run; resuming a checkpoint
    written with another fingerprint is refused, so a resumed run cannot silently
    mix two different studies.  On resume every unit is verified (:func:`read_checkpoint`;
    ``check(index, result)`` raises ``ValueError`` for an inconsistent result, ``label(index)``
    names a unit in messages); ``repair`` recomputes the units that fail instead of refusing.
    ``workers`` caps the local worker processes (``processes``/``local``; default: one per CPU).
    ``worker_timeout`` (``tcp://``): seconds without any connected worker before the run stops
    with one line saying how many units the checkpoint holds (:class:`execution.ClusterError`).
    """
    check_scheduler(scheduler)  # a bad --scheduler fails before any work, even when resuming a finished run
    results: dict[int, Any] = {}
    fingerprint = to_json_value(fingerprint or {})
    rid = run_id(fingerprint)
    units = list(units)
    if checkpoint is not None and resume and Path(checkpoint).exists():
        results = read_checkpoint(checkpoint, total=len(units), fingerprint=fingerprint, check=check,
                                  repair=repair, label=label)
        if results and not quiet:
            print(f"resuming from {checkpoint}: {len(results)} of {len(units)} {description} already done "
                  "(each verified)", file=sys.stderr)
    todo = [i for i in range(len(units)) if i not in results]

    def save():
        if checkpoint is not None:
            ordered = sorted(results.items())
            atomic_write_json(checkpoint, {
                "format": FORMAT, "run_id": rid, "fingerprint": fingerprint, "total": len(units),
                "results": {str(k): v for k, v in ordered},
                "sha256": {str(k): unit_hash(rid, k, v) for k, v in ordered}},
                field="checkpoint")

    progress = _progress(quiet, description, len(units), len(results))
    try:
        if todo:
            with executor(scheduler, workers=workers, worker_timeout=worker_timeout) as ex:
                if progress is not None:  # a Dask cluster's connected workers, as they come and go
                    ex.on_workers = lambda n: progress[0].update(progress[1], description=f"{description} "
                                                                 f"({n} worker{'s' if n != 1 else ''})")
                elif not quiet:
                    ex.on_workers = lambda n: print(f"{description}: {n} Dask worker{'s' if n != 1 else ''} "
                                                    f"connected to {ex.address}", file=sys.stderr, flush=True)
                for j, result in ex.imap_unordered(fn, [units[i] for i in todo]):
                    # with a checkpoint, keep the result exactly as a resumed run will read it
                    # back, so fresh and resumed runs return identical values
                    results[todo[j]] = to_json_value(result) if checkpoint is not None else result
                    save()
                    if progress is not None:
                        progress[0].advance(progress[1])
        else:
            save()
    except ClusterError as exc:
        held = f"the checkpoint {checkpoint} holds {len(results)} of {len(units)} units" \
            if checkpoint is not None else f"{len(results)} of {len(units)} units were done (no checkpoint)"
        advice = "; rerun with --resume to continue" if checkpoint is not None else ""
        raise InputError(exc.field, f"{exc.reason}; {held}{advice}") from None
    finally:
        if progress is not None:
            progress[0].stop()
    return [results[i] for i in range(len(units))]


def _progress(quiet: bool, description: str, total: int, done: int):
    """A rich progress bar on a terminal; None when quiet or not on a TTY."""
    if quiet or not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    progress = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                        TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    task = progress.add_task(description, total=total, completed=done)
    progress.start()
    return progress, task
