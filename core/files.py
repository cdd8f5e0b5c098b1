"""Every file or folder the project writes appears whole or not at all: written under a temporary name beside
its final one, then renamed over it in one step (a rename within a folder is atomic on POSIX and Windows).

    with atomic_path(out) as tmp:            # any writer that takes a path (a folder too: tmp.mkdir())
        with open(tmp, "wb") as handle:
            np.savez_compressed(handle, ...)
    write_bytes_atomic(path, data) / write_text_atomic(path, text) / write_json_atomic(path, data)

A temporary name is `.<final name>.<writer pid>.<8 hex>.tmp`, so a cleaner can tell whose it is: a writer that
was killed (SIGKILL, power cut) leaves one behind, and `remove_stale_temporaries` (through
core.training.runs.clean_leftovers, called when the app and the command line start) removes those whose writer
process is gone. A reader never sees a temporary name as a result:
every listing here skips dotted names.

A folder written over an existing one (`--overwrite`, a tuned lens fitted again) cannot be renamed onto it (a
rename never replaces a non-empty folder), so the old folder is first renamed aside to `.<name>.<pid>.<8 hex>.old`,
the new one renamed in, and the old one deleted: a writer killed between the two renames leaves the old folder
aside, and the start-up cleaning puts it back when nothing took its name, so a kill never loses both.

A write that fails because the disk is full raises DiskFull, whose message says "disk full" and which file.

BERTLENS_TEST_PAUSE_BEFORE_RENAME (tests only): a writer whose final name matches this glob pattern sleeps with
its temporary name complete on disk, just before the rename, so a test can SIGKILL it at the worst moment;
BERTLENS_TEST_PAUSE_WITH_OLD_ASIDE the same, between renaming an old folder aside and renaming the new one in.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import json
import os
import re
import secrets
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PAUSE_ENV = "BERTLENS_TEST_PAUSE_BEFORE_RENAME"
PAUSE_ASIDE_ENV = "BERTLENS_TEST_PAUSE_WITH_OLD_ASIDE"
PAUSE_SECONDS = 600.0
# .NAME.PID.TOKEN.tmp, and the two shapes written before this module named every temporary file the same way
# (write_json_atomic's .NAME.PID.tmp and the nearest-contexts index's .KEY.PID.NANOSECONDS folder).
TEMP_NAMES = (
    re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp$"),
    re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$"),
    re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.\d{16,}$"),
)
# An old folder renamed aside while a new one of its name is renamed in (finish_rename).
ASIDE_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.old$")
# How a full disk (or quota) shows: an OSError's errno, or the text of an error raised by Rust (safetensors) or
# C++ (torch) code that wrapped it.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
DISK_FULL_TEXTS = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")
# A process that started this long after a temporary name was last touched cannot be the one writing it (its
# pid was reused); /proc's boot time is in whole seconds, hence the margin.
PID_REUSE_MARGIN_SECONDS = 2.0


class DiskFull(OSError):
    """A write failed because the disk is full: the message says so and names what was being written."""

    def __init__(self, path):
        self.message = f"disk full: could not write {path}; free some space on that disk and run it again"
        super().__init__(errno.ENOSPC, self.message, str(path))

    def __str__(self) -> str:  # OSError's own would read "[Errno 28] disk full: ...: 'PATH'"
        return self.message


def disk_full(err: BaseException, path) -> DiskFull | None:
    """`err` as a DiskFull naming `path` (or the file the error names) when a full disk caused it, else None."""
    if isinstance(err, DiskFull):
        return err
    full = (isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS) or any(t in str(err) for t in DISK_FULL_TEXTS)
    if not full:
        return None
    return DiskFull(path or getattr(err, "filename", None) or "a file")


def temp_name(path: Path) -> Path:
    """A fresh temporary name beside `path`, carrying this process's pid."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def writer_pid(path: Path) -> int | None:
    """The pid in a temporary name; None when `path` is not one."""
    for pattern in (*TEMP_NAMES, ASIDE_NAME):
        match = pattern.match(Path(path).name)
        if match:
            return int(match["pid"])
    return None


def _pause_if_asked(path: Path, variable: str = PAUSE_ENV) -> None:
    pattern = os.environ.get(variable)
    if pattern and fnmatch.fnmatch(Path(path).name, pattern):
        time.sleep(PAUSE_SECONDS)


def finish_rename(tmp: Path, path: Path, *, replace: bool = True) -> None:
    """The one step that makes a write visible. replace=False never replaces an existing `path`: a folder is
    renamed (which fails onto a non-empty folder), a file hard-linked (which fails onto any name), each an OSError.
    replace=True over an existing folder: the old one renamed aside, the new one in, then the old one deleted
    (see the module docstring: a kill in between leaves the old one to be put back)."""
    _pause_if_asked(path)
    path = Path(path)
    if replace and Path(tmp).is_dir() and path.is_dir() and not path.is_symlink():
        aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.old")
        os.rename(path, aside)
        os.utime(aside)  # its mtime tells a cleaner that this live writer, not an older one, put it there
        _pause_if_asked(path, PAUSE_ASIDE_ENV)
        try:
            os.rename(tmp, path)
        except BaseException:
            os.rename(aside, path)
            raise
        remove(aside)
    elif replace:
        os.replace(tmp, path)
    elif Path(tmp).is_dir():
        os.rename(tmp, path)
    else:
        os.link(tmp, path)
        os.unlink(tmp)


def remove(path: Path) -> None:
    """Delete a file or a folder tree, if there."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_path(path: Path, *, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path` for the caller to write (a file, or a folder it creates); on a clean
    exit rename it to `path`, on an error remove it and leave `path` as it was. replace=False: fail with an OSError
    (and remove the temporary) when `path` exists, e.g. a folder another process finished first."""
    path = Path(path)
    _remove_stale_siblings(path)
    tmp = temp_name(path)
    try:
        yield tmp
        finish_rename(tmp, path, replace=replace)
    except BaseException as err:
        remove(tmp)
        full = disk_full(err, path)
        if full is not None and full is not err:
            raise full from err
        raise


def _remove_stale_siblings(path: Path) -> None:
    """A killed writer of this very name left its temporary here (perhaps outside the models cache, where the
    start-up cleaning does not look, e.g. an `encode --out` folder): the next writer of the name removes it."""
    for sibling in path.parent.glob(f".{glob.escape(path.name)}.*"):
        if writer_pid(sibling) is not None and not writer_alive(sibling) and not _put_back(sibling):
            remove(sibling)


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        Path(tmp).write_bytes(data)
    return Path(path)


def write_text_atomic(path: Path, text: str, encoding: str = "utf-8") -> Path:
    return write_bytes_atomic(path, text.encode(encoding))


def write_json_atomic(path: Path, data) -> None:
    """Readers (a page polling a status file) never see half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str))


def read_json(path: Path):
    """The file's JSON, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    try:  # an exited child nobody has waited for yet is a zombie: it still answers kill(pid, 0)
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), from /proc; None where that cannot be read."""
    try:
        fields = Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def writer_alive(path: Path) -> bool:
    """Whether the process named in a temporary name may still be writing it: alive, and not a newer process
    that merely got the same pid (containers restart with the same small pids)."""
    pid = writer_pid(path)
    if pid is None or not pid_alive(pid):
        return False
    started = process_start_time(pid)
    try:
        touched = Path(path).lstat().st_mtime
    except OSError:
        return False
    return started is None or started <= touched + PID_REUSE_MARGIN_SECONDS


def remove_stale_temporaries(root: Path) -> list[Path]:
    """Remove the temporary files and folders under `root` whose writer process is gone; a live writer's are left
    alone. Returns what was removed."""
    root = Path(root)
    removed = []
    for folder, subfolders, files in os.walk(root):
        for name in list(subfolders) + files:
            path = Path(folder) / name
            if writer_pid(path) is not None and not writer_alive(path):
                try:
                    if not _put_back(path):
                        remove(path)
                except OSError:  # not ours to remove (permissions): left for its owner
                    continue
                removed.append(path)
        subfolders[:] = [s for s in subfolders if writer_pid(Path(folder) / s) is None]  # never look inside one
    return removed


def _put_back(path: Path) -> bool:
    """An old folder a killed writer renamed aside (ASIDE_NAME) goes back to its name when nothing took it: the
    new one never arrived. True when it was put back."""
    match = ASIDE_NAME.match(path.name)
    if match is None:
        return False
    final = path.with_name(match["name"])
    if final.exists():
        return False
    os.rename(path, final)
    return True
