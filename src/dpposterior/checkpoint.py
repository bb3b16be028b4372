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
from .execution import executor


def atomic_write_json(path, obj) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def run_units(fn: Callable[[Any], Any], units: Sequence[Any], *, scheduler: str = "serial",
              checkpoint: str | os.PathLike | None = None, resume: bool = False,
              fingerprint: dict | None = None, quiet: bool = True, description: str = "units") -> list:
    """Results of ``fn(unit)`` for every unit, in order.

    ``fingerprint`` (JSON-serialisable) describes the run; resuming a checkpoint
    written with another fingerprint is refused, so a resumed run cannot silently
    mix two different studies.
    """
    results: dict[int, Any] = {}
    fingerprint = fingerprint or {}
    if checkpoint is not None and resume and Path(checkpoint).exists():
        try:
            state = json.loads(Path(checkpoint).read_text())
        except json.JSONDecodeError as exc:
            raise InputError("resume", f"checkpoint {checkpoint} is unreadable ({exc})") from None
        if state.get("fingerprint") != json.loads(json.dumps(fingerprint)):
            raise InputError("resume", f"checkpoint {checkpoint} belongs to a different run")
        results = {int(k): v for k, v in state.get("results", {}).items()}
    todo = [i for i in range(len(units)) if i not in results]

    def save():
        if checkpoint is not None:
            atomic_write_json(checkpoint, {"fingerprint": fingerprint, "total": len(units),
                                           "results": {str(k): v for k, v in sorted(results.items())}})

    progress = _progress(quiet, description, len(units), len(results))
    try:
        if todo:
            with executor(scheduler) as ex:
                for j, result in ex.imap_unordered(fn, [units[i] for i in todo]):
                    results[todo[j]] = result
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
