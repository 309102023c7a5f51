"""The files of one release: checked before anything is charged, written all together or not at all.

A release writes a group of files — the table, its public report and, for graph and range
domains, a plot.  :class:`OutputGroup` owns them:

* :meth:`OutputGroup.check` runs at *plan* time, before the ledger is touched, every check
  that a later write could fail on: the directory exists and is writable (a file is
  actually created there and thrown away), no output path is a symbolic link (dangling or
  not: dpgauss never writes through a link), an existing output is a regular file and is
  replaced only with ``overwrite``, no two outputs are the same file, and no output is one
  of the *protected* files — the release's own source, the ledger, the spec — so that
  ``overwrite = true`` can never replace the private data with its release.
* :meth:`OutputGroup.stage` writes each file's content into an **unnamed** file in the
  destination directory (Linux ``O_TMPFILE``): it has no name until it is committed, so a
  process killed at any moment — even by SIGKILL — leaves no temporary file behind.
* :meth:`OutputGroup.check` also takes an exclusive lock (``flock``) on every destination
  directory, held until :meth:`release`: two releases never write into one directory at
  the same time (the second is refused at plan time), so a group is never mixed with
  another's.  The lock dies with the process.
* :meth:`OutputGroup.commit` fsyncs every staged file, then gives each its name
  (``linkat`` through ``/proc/self/fd``; with ``overwrite``, ``linkat`` to a hidden name and
  ``rename`` over the old file) and fsyncs the directory.  Without ``overwrite``, if one name
  cannot be given the names already given are taken back, so the group appears entirely or
  not at all.  With ``overwrite`` each file is replaced atomically, but a failure between
  two replacements leaves new and old files side by side (the ledger entry says
  ``writing``).

Where ``O_TMPFILE`` is not available (another OS, a filesystem without it), staged files are
hidden named files (``.<name>.<random>.tmp``) beside their destination, removed on every
error and on :meth:`discard`; only a SIGKILL between staging and commit can leave one
behind there.

What is *not* atomic: the names of one group are given a few system calls apart, so a SIGKILL
(or a power cut) in the microseconds between two of them can leave part of the group (and,
with ``overwrite``, a hidden ``.<name>.<random>.tmp`` for the microseconds between its
``linkat`` and its ``rename``).  The pipeline records on the ledger entry, before
committing, the files it is about to create, so the entry says which release was not
delivered completely.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import math
import numbers
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OutputError, OutputExistsError

__all__ = [
    "OutputError",
    "OutputExistsError",
    "OutputGroup",
    "cell_text",
    "probe_directory",
    "write_csv",
]


def cell_text(v: object) -> str:
    """The text of one value in a CSV table of :func:`write_csv`: floats as their shortest
    round-trip text, integers as digits, non-finite floats and ``None`` as empty fields."""
    if v is None:
        return ""
    if isinstance(v, float):  # numpy float64 included
        return repr(float(v)) if math.isfinite(v) else ""
    if isinstance(v, numbers.Integral):
        return str(int(v))
    return str(v)


def write_csv(path: str, columns: Mapping[str, Sequence[object]]) -> None:
    """Write ``columns`` (name → values, equal lengths) as a UTF-8 CSV table: floats as
    their shortest round-trip text, non-finite floats and ``None`` as empty fields."""
    text = cell_text
    names = list(columns)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        for row in zip(*(columns[n] for n in names), strict=True):
            w.writerow([text(v) for v in row])


def _proc_fd(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def _unnamed_supported(directory: Path) -> bool:
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        fd = os.open(directory, flag | os.O_WRONLY, 0o666)
    except OSError:
        return False
    os.close(fd)
    return True


def _link_unnamed(fd: int, path: Path) -> None:
    """Give the unnamed file ``fd`` the name ``path`` (fails if ``path`` exists).

    ``linkat(AT_FDCWD, "/proc/self/fd/N", dirfd, name, AT_SYMLINK_FOLLOW)``: passing
    ``dst_dir_fd`` makes Python call ``linkat`` (plain ``link`` would try to link the
    ``/proc`` symlink itself and fail with EXDEV).
    """
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.link(_proc_fd(fd), path.name, dst_dir_fd=dfd, follow_symlinks=True)
    finally:
        os.close(dfd)


def probe_directory(directory: Path) -> None:
    """Create (and throw away) a file in ``directory``: the proof it can be written; raises
    :class:`OutputError` naming the directory otherwise."""
    if _unnamed_supported(directory):
        return
    probe = directory / f".dpgauss-probe.{secrets.token_hex(6)}.tmp"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except OSError as exc:
        raise OutputError(
            f"cannot write in the output directory {str(directory)!r}: {exc.strerror or exc}"
        ) from None
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@dataclass
class _Staged:
    path: Path
    fd: int | None = None  # the unnamed file (O_TMPFILE)
    tmp: Path | None = None  # or a hidden named file


@dataclass
class OutputGroup:
    """The files of one release, written together or not at all (module docstring).

    ``paths`` are the destinations (distinct); ``overwrite`` allows replacing existing
    regular files; ``protected`` are files an output may never be (the source, the ledger).
    """

    paths: Sequence[Path]
    overwrite: bool = False
    protected: Sequence[Path] = ()
    forbidden_dirs: Sequence[Path] = ()
    #: how the caller sets ``overwrite`` (the refusal of an existing output says it)
    overwrite_how: str = "overwrite=True"
    _staged: dict[Path, _Staged] = field(default_factory=dict, repr=False)
    _unnamed: dict[Path, bool] = field(default_factory=dict, repr=False)
    _locks: dict[Path, int] = field(default_factory=dict, repr=False)
    named: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self.paths = [Path(os.path.abspath(os.fspath(p))) for p in self.paths]

    # ------------------------------------------------------------------------ check

    def check(self) -> None:
        """Every check a later write could fail on (module docstring), and the directory
        locks; raises OutputError (and then holds no lock)."""
        try:
            self._check()
        except BaseException:
            self.release()
            raise

    def _check(self) -> None:
        seen: dict[str, Path] = {}
        protected = {os.path.realpath(p): Path(p) for p in self.protected}
        forbidden = [os.path.realpath(d) for d in self.forbidden_dirs]
        for p in self.paths:
            real = os.path.realpath(p)
            if real in seen:
                raise OutputError(f"two outputs are the same file: {seen[real]} and {p}")
            seen[real] = p
            if real in protected:
                raise OutputError(
                    f"the output {p} is the release's own input or ledger "
                    f"{protected[real]}; refusing to write over it"
                )
            for q in self.protected:
                if os.path.exists(q) and os.path.exists(p) and os.path.samefile(p, q):
                    raise OutputError(f"the output {p} is the same file as {q}; refusing")
            for d in forbidden:
                if os.path.commonpath([real, d]) == d:
                    raise OutputError(
                        f"the output {p} is inside {d}, which holds confidential "
                        "diagnostics; choose another directory"
                    )
            directory = p.parent
            if not directory.is_dir():
                raise OutputError(f"the output directory {str(directory)!r} does not exist")
            longest = len(os.fsencode(p.name)) + 19  # ".<name>.<12 hex>.tmp"
            try:
                name_max = os.pathconf(directory, "PC_NAME_MAX")
            except (OSError, ValueError):
                name_max = 255
            if longest > name_max:
                raise OutputError(
                    f"the output name {p.name!r} is too long for {directory} (at most "
                    f"{name_max - 19} bytes, for the temporary names beside it)"
                )
            if os.path.islink(p):
                raise OutputError(
                    f"the output {p} is a symbolic link"
                    + ("" if os.path.exists(p) else " (dangling)")
                    + "; dpgauss never writes through links: remove it or choose another path"
                )
            if os.path.lexists(p):
                if not p.is_file():
                    raise OutputError(f"the output {p} exists and is not a regular file")
                if not self.overwrite:
                    raise OutputExistsError(p, self.overwrite_how)
            probe_directory(directory)
            self._lock(directory)

    def _lock(self, directory: Path) -> None:
        if directory in self._locks:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OutputError(
                f"another dpgauss release is writing into {directory}; wait for it to end"
            ) from None
        self._locks[directory] = fd

    def release(self) -> None:
        """Drop the staged files and the directory locks (idempotent)."""
        self.discard()
        for fd in self._locks.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._locks.clear()

    # ------------------------------------------------------------------------ stage

    def stage(self, path: Path, write: Callable[[str], object]) -> None:
        """Write ``path``'s content by ``write(p)``, ``p`` a path that opens the staged file."""
        path = Path(os.path.abspath(os.fspath(path)))
        if path not in self.paths:
            raise ValueError(f"{path} is not one of this group's outputs")
        if path in self._staged:
            raise ValueError(f"{path} is already staged")
        directory = path.parent
        st = _Staged(path)
        try:
            if self._unnamed.setdefault(directory, _unnamed_supported(directory)):
                st.fd = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o666)
                self._staged[path] = st
                write(_proc_fd(st.fd))
            else:
                st.tmp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
                os.close(os.open(st.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                self._staged[path] = st
                write(str(st.tmp))
        except OSError as exc:
            self.discard()
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        except BaseException:
            self.discard()
            raise

    @property
    def staged(self) -> list[Path]:
        """The destinations staged so far, in order."""
        return list(self._staged)

    # ----------------------------------------------------------------------- commit

    def commit(self) -> None:
        """Give every staged file its name (module docstring); sets :attr:`named`."""
        done: list[Path] = []
        try:
            for st in self._staged.values():
                src = _proc_fd(st.fd) if st.fd is not None else str(st.tmp)
                with open(src, "rb") as fh:
                    os.fsync(fh.fileno())
            for st in self._staged.values():
                self._name(st)
                done.append(st.path)
            self.named = True
            for directory in {p.parent for p in self._staged}:
                _fsync_dir(directory)
        except BaseException as exc:
            if not self.named and not self.overwrite:
                for path in reversed(done):  # ours, created just now
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            self.discard()
            if isinstance(exc, OSError) and not self.named:
                raise OutputError(
                    f"cannot write the release's files: {exc.strerror or exc}"
                ) from None
            if not isinstance(exc, OSError):
                raise
        self.discard()

    def _name(self, st: _Staged) -> None:
        """Give the staged file its path (never replacing a file unless ``overwrite``)."""
        path = st.path
        if not self.overwrite and os.path.lexists(path):
            raise FileExistsError(17, "the file appeared meanwhile", str(path))
        if st.fd is not None:
            if not self.overwrite:
                _link_unnamed(st.fd, path)  # never replaces an existing file
            else:
                tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
                _link_unnamed(st.fd, tmp)
                os.replace(tmp, path)
        else:
            assert st.tmp is not None
            if not self.overwrite:
                os.link(st.tmp, path)
                os.unlink(st.tmp)
            else:
                os.replace(st.tmp, path)
            st.tmp = None

    def discard(self) -> None:
        """Drop every staged file (idempotent); committed files are not touched."""
        for st in self._staged.values():
            if st.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(st.fd)
                st.fd = None
            if st.tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(st.tmp)
                st.tmp = None
        self._staged.clear()
