"""Atomic, fault-tolerant writers for every file dpposterior produces: a crash never leaves a half-written file.

A reader, a concurrent writer or a run killed at any instant sees either the old file or the
complete new one, never a part.  Each write goes to a temporary file with a unique name in the
target's own folder (``.NAME.PID.RANDOM.dpposterior-tmp``: same filesystem, so the rename is
atomic), is flushed with ``fsync``, renamed over the target with ``os.replace`` and the folder is
fsynced so the rename survives a power cut -- the recipe of POSIX ``rename(2)`` as used by
e.g. ``git`` and ``atomicwrites``.  Two runs writing the same target never touch each other's
temporary file: the last complete file wins.

Every failure path (``OSError`` such as a full disk, ``KeyboardInterrupt``, any exception)
removes the temporary file; an ``OSError`` becomes one :class:`~dpposterior.errors.InputError`
line naming the field, the path and the reason.  Only SIGKILL or a power cut can leave a
temporary file behind; the next write to the same target removes those whose process is gone.
"""

from __future__ import annotations

import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .errors import InputError

#: suffix of every temporary file (docs/reliability.md): safe to delete when no run is active
TEMP_SUFFIX = ".dpposterior-tmp"


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def remove_stale_temps(path) -> None:
    """Delete temporary files of ``path`` left by processes that no longer exist (SIGKILL)."""
    path = Path(path)
    try:
        candidates = list(path.parent.glob(f".{_glob_escape(path.name)}.*{TEMP_SUFFIX}"))
    except OSError:  # pragma: no cover - unreadable folder: nothing to tidy
        return
    for tmp in candidates:
        pid = tmp.name[len(path.name) + 2:].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            tmp.unlink()
        except OSError:  # pragma: no cover - raced with another cleaner, or not ours to remove
            pass


def _glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - folders not openable on this platform
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on a folder
        pass
    finally:
        os.close(fd)


def _write_error(field: str, path: Path, exc: OSError, hint: str) -> InputError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return InputError(field, f"cannot write {path} ({reason}); nothing was written" + (f"; {hint}" if hint else ""))


@contextmanager
def atomic_path(path, *, field: str = "out", hint: str = "") -> Iterator[Path]:
    """Yield a unique temporary path beside ``path``; on a clean exit it becomes ``path`` atomically.

    For writers that want a file name (matplotlib's ``savefig``).  Whatever happens inside the
    block, the temporary file is gone afterwards; an ``OSError`` is re-raised as one
    :class:`InputError` line naming ``field``, with ``hint`` (how to get the work back) appended.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    remove_stale_temps(path)
    tmp = _temp_name(path)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _write_error(field, path, exc, hint) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(folder)


def write_bytes(path, data: bytes | memoryview | str, *, field: str = "out", hint: str = "") -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring).

    When the folder's filesystem reports less free space than ``data`` needs, nothing is written
    and the refusal says so (a full disk is found before a byte is written where it can be).
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        stats = os.statvfs(folder)
        free = stats.f_bavail * stats.f_frsize
    except (OSError, AttributeError):  # pragma: no cover - not POSIX, or folder gone: the write will say
        free = None
    if free is not None and len(data) > free:
        raise InputError(field, f"cannot write {path}: it needs {len(data):,} bytes and its filesystem has "
                         f"{free:,} free; nothing was written" + (f"; {hint}" if hint else ""))
    with atomic_path(path, field=field, hint=hint) as tmp:
        with open(tmp, "xb") as fh:
            fh.write(data)


def _json_default(obj):
    """numpy scalars and arrays as plain JSON (float64 round-trips exactly through repr)."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def json_text(obj, indent: int | None = None) -> str:
    """``obj`` as JSON text (numpy values as plain numbers; NaN allowed, as Python's json writes it)."""
    return json.dumps(obj, default=_json_default, indent=indent, allow_nan=True)


def write_json(path, obj, *, indent: int | None = None, field: str = "out", hint: str = "") -> None:
    """Write ``obj`` as JSON to ``path`` atomically."""
    write_bytes(path, json_text(obj, indent), field=field, hint=hint)


@contextmanager
def exclusive_run(path, field: str = "out") -> Iterator[None]:
    """Hold an exclusive lock on output ``path`` for the block, or refuse in one line.

    For runs that keep state beside their output (``calibrate``'s checkpoint): two of them on one
    ``--out`` would share it.  The lock is ``flock`` on ``.NAME.lock`` beside ``path``; the kernel
    drops it when the process ends however it ends, so a lock file left by a killed run never
    blocks the next one (it is not a probe: its existence means nothing, only the lock does).
    """
    import fcntl

    path = Path(path)
    lock_path = path.with_name(f".{path.name}.lock")
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(field, f"cannot create the lock {lock_path} ({exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise InputError(field, f"another dpposterior run is writing {path} (it holds {lock_path}); wait "
                                    "for it to finish or choose another --out") from None
        try:  # the holder before us may have removed the file: then our lock is on a dead inode
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            lock_path.unlink()
        except OSError:  # pragma: no cover - already gone
            pass
        os.close(fd)
