"""Checkpointed, resumable runs of independent units of work.

:func:`run_units` maps ``fn`` over ``units`` through an executor
(``execution.py``), writing every completed unit's (JSON-serialisable) result to
``checkpoint`` atomically (write a temporary file, then ``os.replace``).  With
``resume=True`` units already in the checkpoint are not run again, so a run killed
by SIGKILL loses at most the units in flight, and -- because each unit carries its
own seed -- the resumed run's final result equals an uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from .errors import InputError
from .execution import check_scheduler, executor


def _json_default(obj):
    """numpy scalars and arrays as plain JSON (float64 round-trips exactly through repr)."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def to_json_value(obj):
    """``obj`` as it will read back from a checkpoint (tuples -> lists, numpy -> Python)."""
    return json.loads(json.dumps(obj, default=_json_default, allow_nan=True))


def atomic_write_json(path, obj, indent: int | None = None) -> None:
    """Write ``obj`` as JSON to ``path`` atomically: a reader (or a run killed at any
    instant, even by SIGKILL) sees either the old file or the complete new one."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    try:
        with open(tmp, "w") as fh:
            json.dump(obj, fh, default=_json_default, indent=indent)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable (a power cut after replace keeps the new file)
        dir_fd = os.open(path.parent if str(path.parent) else ".", os.O_RDONLY)
    except OSError:  # pragma: no cover - directories not openable on this platform
        return
    try:
        os.fsync(dir_fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dir_fd)


def run_units(fn: Callable[[Any], Any], units: Sequence[Any], *, scheduler: str = "serial",
              checkpoint: str | os.PathLike | None = None, resume: bool = False,
              fingerprint: dict | None = None, quiet: bool = True, description: str = "units",
              workers: int | None = None) -> list:
    """Results of ``fn(unit)`` for every unit, in order.

    With a ``checkpoint`` every result must be JSON-serialisable (numpy scalars and
    arrays are converted to Python numbers and lists) and is returned as JSON would
    read it back, whether it was computed now or loaded on ``resume``.

    ``fingerprint`` (JSON-serialisable) describes the run; resuming a checkpoint
    written with another fingerprint is refused, so a resumed run cannot silently
    mix two different studies.  ``workers`` caps the local worker processes
    (``processes``/``local``; default: one per CPU).
    """
    check_scheduler(scheduler)  # a bad --scheduler fails before any work, even when resuming a finished run
    results: dict[int, Any] = {}
    fingerprint = to_json_value(fingerprint or {})
    units = list(units)
    if checkpoint is not None and resume and Path(checkpoint).exists():
        try:
            state = json.loads(Path(checkpoint).read_text())
            if not isinstance(state, dict) or not isinstance(state.get("results", {}), dict):
                raise ValueError("not a dpposterior checkpoint")
            results = {int(k): v for k, v in state.get("results", {}).items()}
        except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise InputError("resume", f"checkpoint {checkpoint} is unreadable ({exc})") from None
        if state.get("fingerprint") != fingerprint or state.get("total", len(units)) != len(units) \
                or any(not 0 <= k < len(units) for k in results):
            raise InputError("resume", f"checkpoint {checkpoint} belongs to a different run "
                                       "(other options or seed); rerun without --resume to start afresh")
        if results and not quiet:
            print(f"resuming from {checkpoint}: {len(results)} of {len(units)} {description} already done",
                  file=sys.stderr)
    todo = [i for i in range(len(units)) if i not in results]

    def save():
        if checkpoint is not None:
            atomic_write_json(checkpoint, {"fingerprint": fingerprint, "total": len(units),
                                           "results": {str(k): v for k, v in sorted(results.items())}})

    progress = _progress(quiet, description, len(units), len(results))
    try:
        if todo:
            with executor(scheduler, workers=workers) as ex:
                for j, result in ex.imap_unordered(fn, [units[i] for i in todo]):
                    # with a checkpoint, keep the result exactly as a resumed run will read it
                    # back, so fresh and resumed runs return identical values
                    results[todo[j]] = to_json_value(result) if checkpoint is not None else result
                    save()
                    if progress is not None:
                        progress[0].advance(progress[1])
        else:
            save()
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
