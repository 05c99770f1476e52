"""File helpers shared by every stage: atomic writes, append-only JSON Lines with resume.

Long stages append one JSON object per finished item and flush it, so a run killed at any moment
keeps everything it finished; on rerun they read back the ids already present and skip them. A torn
last line (killed mid-write) is ignored on read and truncated away before appending.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


class DataFileError(ValueError):
    """A data file that is missing or malformed; the message names the file and the problem."""


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (changing it races other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that readers see either the old file or the whole new one.

    The file gets the permissions a plain ``open(path, "w")`` would give (0666 less the umask), not the
    0600 of the temporary file it is written through."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), 0o666 & ~_umask())
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | os.PathLike[str], data: Any, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(data, indent=indent, ensure_ascii=False, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    # numpy scalars/arrays show up in metrics and simulator records.
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def require_file(path: str | os.PathLike[str], what: str = "file") -> Path:
    """``path`` as a Path when it is a file; otherwise a DataFileError that says whether it is missing or
    a folder."""
    path = Path(path)
    if path.is_dir():
        raise DataFileError(f"{path}: is a folder; give the {what} inside it")
    if not path.is_file():
        raise DataFileError(f"{path}: {what} not found")
    return path


_NOT_UTF8 = "save it as UTF-8, or check that it is the right file"


def read_json(path: str | os.PathLike[str]) -> Any:
    path = require_file(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataFileError(f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); {_NOT_UTF8}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: not valid JSON ({exc})") from exc


# ---------------------------------------------------------------------------------------------------
# JSON Lines reading: every bad line is a DataFileError naming the file and the line
# ---------------------------------------------------------------------------------------------------

# Bytes that are not UTF-8 are kept by the "surrogateescape" decoder as the lone surrogates U+DC80-U+DCFF,
# which a valid UTF-8 file can never hold; so a bad byte is found on its line, with its line number.
_UNDECODABLE_RE = re.compile("[\udc80-\udcff]")
# A kill mid-write can cut a multi-byte character: at most its first three bytes end the torn line.
_CUT_CHARACTER_RE = re.compile("[\udc80-\udcff]{1,3}\\Z")


def _parse_jsonl_line(path: Path, number: int, line: str) -> Any:
    """The JSON value of one (non-blank) line, or a one-line DataFileError that names the line."""
    where = f"{path}:{number}"
    bad = _UNDECODABLE_RE.search(line)
    if bad:
        raise DataFileError(f"{where}: not UTF-8 text (byte 0x{ord(bad.group()) - 0xDC00:02x} at character "
                            f"{bad.start() + 1}); {_NOT_UTF8}")
    nul = line.find("\x00")
    if nul >= 0:  # JSON text never holds a raw NUL (json.dumps writes \u0000): a binary file
        raise DataFileError(f"{where}: a NUL byte at character {nul + 1}: a binary file, not JSON Lines text; "
                            "check that it is the right file")
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:  # one line: its column, not the decoder's "line 1"
        raise DataFileError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); expected one JSON "
                            "object per line") from None


def _is_torn_tail(line: str) -> bool:
    """Whether an unterminated last line can be a write cut short: the start of an object (what every
    writer here appends), bad bytes only where a multi-byte character was cut, no NUL."""
    text = _CUT_CHARACTER_RE.sub("", line.strip())
    return text.startswith("{") and not _UNDECODABLE_RE.search(text) and "\x00" not in text


def iter_jsonl_values(path: str | os.PathLike[str], *,
                      tolerate_torn_tail: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, JSON value)`` for each non-blank line of a JSON Lines file.

    A line that is not UTF-8, holds a NUL byte (a binary file) or is not JSON raises a one-line
    ``DataFileError`` naming the file and the line, except a malformed *last* line without a newline
    that starts like an object (a write cut short by a kill), which is skipped when
    ``tolerate_torn_tail``. A UTF-8 byte order mark at the start is allowed.

    >>> import tempfile
    >>> bad = Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> _ = bad.write_bytes(b'{"id": 1}\\n\\xff\\xfe{"id": 2}\\n')
    >>> list(iter_jsonl_values(bad))
    Traceback (most recent call last):
    ...
    embodied_r.core.io.DataFileError: ...rows.jsonl:2: not UTF-8 text (byte 0xff at character 1); save it as UTF-8, ...
    """
    path = require_file(path)
    with path.open("r", encoding="utf-8-sig", errors="surrogateescape") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = _parse_jsonl_line(path, number, line)
        except DataFileError:
            is_last_unterminated = number == len(lines) and not line.endswith("\n")
            if tolerate_torn_tail and is_last_unterminated and _is_torn_tail(line):
                return
            raise
        yield number, value


def iter_jsonl(path: str | os.PathLike[str], *, tolerate_torn_tail: bool = True) -> Iterator[dict[str, Any]]:
    """Yield the objects of a JSON Lines file. A malformed line (not UTF-8, binary, not JSON, not an
    object) raises a DataFileError with its line number, except a torn last line (``iter_jsonl_values``)."""
    for number, obj in iter_jsonl_values(path, tolerate_torn_tail=tolerate_torn_tail):
        if not isinstance(obj, dict):
            raise DataFileError(f"{Path(path)}:{number}: expected a JSON object per line")
        yield obj


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return list(iter_jsonl(path))


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write a whole JSON Lines file atomically."""
    text = "".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in rows)
    atomic_write_text(path, text)


class JsonlAppender:
    """Append-only JSON Lines writer for resumable stages: a rerun reads which keys are done and appends
    the rest.

    >>> import tempfile
    >>> appender = JsonlAppender(Path(tempfile.mkdtemp()) / "predictions.jsonl")
    >>> appender.extend([{"id": "q1", "score": 1.0}, {"id": "q2", "score": 0.0}])
    >>> sorted(appender.done_keys("id"))
    ['q1', 'q2']
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()

    def _repair_torn_tail(self) -> None:
        # A kill mid-write leaves a partial last line; cut it so the next append starts on a clean line.
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            with self.path.open("r+b") as handle:
                handle.truncate(cut)

    def existing(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path) if self.path.exists() else []

    def done_keys(self, key: str = "id") -> set[str]:
        return {str(row[key]) for row in self.existing() if key in row}

    def append(self, row: dict[str, Any]) -> None:
        self.extend([row])

    def extend(self, rows: Iterable[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in rows)
        if not text:
            return
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())


# ---------------------------------------------------------------------------------------------------
# One writer per output
# ---------------------------------------------------------------------------------------------------

LOCK_NAME = ".embodied-r.lock"


class OutputLockedError(DataFileError):
    """Another process is writing the same output."""


def lock_path_for(output: str | os.PathLike[str]) -> Path:
    """The lock file of an output: ``DIR/.embodied-r.lock`` for a folder, ``FILE.lock`` beside a file."""
    output = Path(output)
    return output / LOCK_NAME if output.is_dir() or not output.suffix else output.with_name(output.name + ".lock")


@contextlib.contextmanager
def exclusive_output(output: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold an exclusive lock on ``output`` (a folder or a file) while the body writes it.

    A second process asking for the same output fails at once with ``OutputLockedError`` naming the
    holder's pid. The lock is the kernel's (``flock``), so a holder that dies, even by kill -9, releases
    it and the next run takes it over; the lock file itself stays (removing it would race a waiter).
    """
    import fcntl

    path = lock_path_for(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise OutputLockedError(
                f"{output} is being written by another embodied-r process (pid {holder}); wait for it to "
                "finish, stop it, or use another output"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield path
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def claimed_folder(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Create ``folder`` if needed and hold its lock (``exclusive_output``) while the body writes it.

    When the body fails and the folder was created here and holds nothing but the lock, it is removed,
    so a failed first run (a typo in a model name) leaves nothing behind that a rerun would trip over.
    """
    folder = Path(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    lock = lock_path_for(folder)
    try:
        with exclusive_output(folder):
            yield folder
    except BaseException:
        if created and {p.name for p in folder.iterdir()} <= {lock.name}:
            lock.unlink(missing_ok=True)
            folder.rmdir()
        raise
