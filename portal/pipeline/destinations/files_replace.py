"""Publishing a files dataset by replacing its folder: ``overwrite``, ``merge`` and ``history``.

An appending files destination moves each task file into the dataset's folder (``fs_rename``). The
replacing modes (:mod:`portal.pipeline.destinations.write_modes`) publish through one ``fs_replace`` step per
dataset folder (:class:`FsReplaceCommitStep`) instead:

1. the new content is built in a hidden sibling folder ``.<name>.fp-<execution>`` (readers skip
   names starting with ``.`` or ``_``): for ``overwrite`` the run's files are moved there; for
   ``merge``/``history`` the stored rows and the run's are merged in Arrow
   (:mod:`portal.pipeline.destinations.tablemerge`) and written there as one file;
2. earlier runs' set-aside bad records (``_errors/``) are linked into it, and a marker file
   ``_FLOWPORT_PUBLISH`` naming the run;
3. the folders are exchanged: on Linux with one ``renameat2(RENAME_EXCHANGE)``, so a reader sees the
   old dataset or the new one, never half; elsewhere (Hadoop URIs) the old folder is renamed aside
   and the new one into place (a reader may find no folder for that instant, never a mix);
4. the old content is deleted.

``verify`` is "the dataset's folder carries this run's marker" (and tidies what a crash after the
exchange left); every part of ``execute`` can run again after a crash at any point: moved files are
found at their destination, an aside folder is put back, a merge is computed again from the same
inputs. ``swap`` (a backfill re-reading part of an appending dataset without partitions) builds the
new content from hard links to the dataset's files, less those the re-read loads published
(``retire``, named by :mod:`portal.orchestration.control.replays`), and the run's files. With
``partitions`` (a backfill of a partitioned dataset) each partition folder the run
wrote is replaced on its own, the others are left as they are.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import hashlib
import os
import shutil
from collections.abc import Mapping
from typing import Any

from portal.pipeline import badrows, fs
from portal.pipeline.destinations import tablemerge
from portal.pipeline.destinations.base import CommitStep, register_step_type
from portal.pipeline.errors import CommitConflictError, ConfigError

MARKER = "_FLOWPORT_PUBLISH"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Swap two local paths in one system call; False where the kernel or libc cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(done == 0)


def _sibling(folder: str, what: str, token: str) -> str:
    parent, _, name = folder.rstrip("/").rpartition("/")
    if not parent and os.sep != "/":  # pragma: no cover - POSIX only in practice
        parent, name = os.path.split(folder)
    tag = hashlib.sha1(token.encode()).hexdigest()[:12]  # noqa: S324 - a name, not a secret
    return f"{parent}/.{name}.fp-{what}-{tag}"


def _link_tree(base: str, into: str, skip: set[str]) -> None:
    """Every file under local folder ``base`` but the ``skip`` ones (paths relative to it), hard-
    linked at the same place under ``into`` (copied where a link cannot be made); a file already
    there was linked by an earlier attempt."""
    for dirpath, _, names in os.walk(base):
        for name in names:
            full = os.path.join(dirpath, name)
            relative = os.path.relpath(full, base).replace(os.sep, "/")
            target = os.path.join(into, relative)
            if relative in skip or os.path.exists(target):
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                os.link(full, target)
            except OSError:
                shutil.copy2(full, target)


def _read(path: str, fmt: str) -> Any:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    local = fs.local_path(path)
    return pcsv.read_csv(local) if fmt == "CSV" else pq.read_table(local)


def _write(table: Any, folder: str, fmt: str, token: str) -> None:
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    local = fs.local_path(folder)
    os.makedirs(local, exist_ok=True)
    stem = f"part-00000-fp{hashlib.sha1(token.encode()).hexdigest()[:12]}"  # noqa: S324
    if fmt == "CSV":
        pcsv.write_csv(table, os.path.join(local, f"{stem}.csv"))
    else:
        pq.write_table(table, os.path.join(local, f"{stem}.snappy.parquet"), compression="snappy")


@register_step_type
class FsReplaceCommitStep(CommitStep):
    """One dataset folder replaced; see the module docstring."""

    type = "fs_replace"
    FIELDS = (
        "dataset_urn",
        "branch",
        "final",
        "mode",
        "format",
        "files",
        "token",
        "partitions",
        "merge_keys",
        "merge_order",
        "delete_column",
        "retire",
    )

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data: dict[str, Any] = {k: data.get(k) for k in self.FIELDS}
        self.data["files"] = list(self.data["files"] or [])
        self.data["retire"] = list(self.data["retire"] or [])
        if not self.data["final"] or not self.data["token"]:
            raise ConfigError("fs_replace step is missing final or token")

    @classmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        return cls(data)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.data}

    # -- which folders ------------------------------------------------------------------------------

    def _folders(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """(dataset or partition folder, the run's files in it with paths relative to it)."""
        final = self.data["final"]
        if not self.data["partitions"]:
            return [(final, self.data["files"])]
        grouped: dict[str, list[dict[str, Any]]] = {}
        for f in self.data["files"]:
            folder, _, name = f["relative"].rpartition("/")
            grouped.setdefault(folder, []).append({**f, "relative": name})
        return [
            (fs.join(final, folder) if folder else final, files) for folder, files in sorted(grouped.items())
        ]

    def _landed(self, folder: str) -> bool:
        marker = fs.join(folder, MARKER)
        return fs.exists(marker) and fs.read_text(marker) == self.data["token"]

    def _tidy(self, folder: str) -> None:
        for what in ("new", "old"):
            fs.delete(_sibling(folder, what, self.data["token"]))

    def verify(self) -> bool:
        folders = self._folders()
        if not all(self._landed(folder) for folder, _ in folders):
            return False
        for folder, _ in folders:  # what a crash after the exchange left
            self._tidy(folder)
        return True

    # -- the publish --------------------------------------------------------------------------------

    def execute(self) -> None:
        for folder, files in self._folders():
            if self._landed(folder):
                self._tidy(folder)
                continue
            new, old = (_sibling(folder, what, self.data["token"]) for what in ("new", "old"))
            if not fs.exists(folder) and fs.exists(old):
                fs.rename(old, folder)  # a crash between the two renames: the old content back first
            if self.data["mode"] == "swap" and not fs.is_local(folder):
                self._swap_in_place(folder, files)
                continue
            if self.data["mode"] == "overwrite":
                self._move(files, new)
            elif self.data["mode"] == "swap":
                self._keep(folder, new)
                self._move(files, new)
            else:
                self._rewrite(folder, files, new)
            if self.data["mode"] != "swap":  # swap's _keep links everything kept, these included
                self._keep_set_aside(folder, new)
            fs.write_text(fs.join(new, MARKER), self.data["token"])
            self._swap(new, folder, old)

    def _move(self, files: list[dict[str, Any]], new: str) -> None:
        for f in files:
            dst = fs.join(new, f["relative"])
            if fs.exists(f["src"]):
                if fs.exists(dst):
                    fs.delete(dst)  # an earlier attempt's partial copy
                fs.rename(f["src"], dst)
            elif not fs.exists(dst):
                raise CommitConflictError(
                    f"cannot publish {f['src']}: it does not exist and {dst} was not written"
                )

    def _keep(self, folder: str, new: str) -> None:
        """The dataset's files but the retired ones, linked into ``new``: the swap's new content
        costs no rewrite of the kept data."""
        _link_tree(fs.local_path(folder), fs.local_path(new), {*self.data["retire"], MARKER})

    @staticmethod
    def _keep_set_aside(folder: str, new: str) -> None:
        """Earlier runs' bad records (``_errors/``) linked into ``new``: replacing the data does
        not take away what their execution pages link to. Hard links, so a crash before the
        exchange leaves the old folder whole; on a Hadoop URI they go with the old content."""
        errors = fs.join(folder, badrows.FOLDER)
        if fs.is_local(folder) and fs.exists(errors):
            _link_tree(fs.local_path(errors), fs.local_path(fs.join(new, badrows.FOLDER)), set())

    def _swap_in_place(self, folder: str, files: list[dict[str, Any]]) -> None:
        """Where folders cannot be exchanged (Hadoop URIs): the run's files moved in, the retired
        ones deleted, then the marker. Each part runs again after a crash; a reader may see both
        for that moment, never neither."""
        for f in files:
            dst = fs.join(folder, f["relative"])
            if fs.exists(f["src"]):
                fs.rename(f["src"], dst)
        for relative in self.data["retire"]:
            fs.delete(fs.join(folder, relative))
        fs.write_text(fs.join(folder, MARKER), self.data["token"])

    def _rewrite(self, folder: str, files: list[dict[str, Any]], new: str) -> None:
        d = self.data
        fmt = (d["format"] or "PARQUET").upper()
        if not fs.is_local(folder):
            raise CommitConflictError(
                f"{d['mode']} of dataset {d['dataset_urn']}: {folder} is not on a local disk; a "
                "merge or history of a files destination rewrites local folders only"
            )
        missing = [f["src"] for f in files if not fs.exists(f["src"])]
        if missing:
            raise CommitConflictError(
                f"cannot publish {missing[0]}: it does not exist and {folder} was not replaced"
            )
        import pyarrow as pa

        tables = [_read(f["src"], fmt) for f in files]
        run = pa.concat_tables(tables, promote_options="permissive")
        stored = [_read(info.path, fmt) for info in fs.list_files(folder)]
        existing = pa.concat_tables(stored, promote_options="permissive") if stored else None
        keys, order, delete = list(d["merge_keys"] or []), d["merge_order"], d["delete_column"]
        if d["mode"] == "history":
            now = dt.datetime.now(dt.UTC)
            result = tablemerge.history(existing, run, keys, order, delete, now)
        else:
            result = tablemerge.merge(existing, run, keys, order, delete)
        fs.delete(new)
        _write(result, new, fmt, d["token"])

    @staticmethod
    def _swap(new: str, folder: str, old: str) -> None:
        if not fs.exists(folder):
            fs.rename(new, folder)
            return
        if fs.is_local(folder) and _exchange(fs.local_path(new), fs.local_path(folder)):
            fs.delete(new)  # it holds the old content now
            return
        fs.rename(folder, old)
        fs.rename(new, folder)
        with contextlib.suppress(OSError):
            fs.delete(old)
