"""Small file-system layer over local paths and Hadoop URIs.

Plain paths use ``os``/``shutil`` (fast, no JVM round trips).  Anything with a scheme
(``hdfs://``, ``s3a://``, ``abfs://``, and ``file://``) goes through Hadoop's ``FileSystem`` in the
active Spark JVM, so every store Spark can read is also one we can list, rename and delete on.  With
no active Spark session a ``file://`` URI falls back to ``os``.

Listings skip hidden names (``_SUCCESS``, ``_temporary``, ``.crc`` files, ``.hidden``), as Spark does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from portal.pipeline.spark import gateway


@dataclass(frozen=True)
class FileInfo:
    """A file found by :func:`list_files`; ``relative`` is relative to the listed root."""

    path: str
    relative: str
    size: int
    mtime_ms: int


def _scheme(uri: str) -> str:
    parsed = urlparse(uri)
    # A Windows drive letter or a plain path has no (or a one-letter) scheme.
    return parsed.scheme if len(parsed.scheme) > 1 else ""


def _jvm_fs(uri: str) -> tuple[Any, Any] | None:
    """(hadoop FileSystem, Path) for a URI with a scheme, or None to use ``os``."""
    if not _scheme(uri):
        return None
    from pyspark.sql import SparkSession  # imported lazily: the commit side may have no Spark

    spark = SparkSession.getActiveSession()
    if spark is None:
        if _scheme(uri) == "file":
            return None
        raise RuntimeError(f"a SparkSession is needed to access '{uri}'")
    path = gateway.jvm(spark).org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs, path


def _local(uri: str) -> str:
    return urlparse(uri).path if _scheme(uri) == "file" else uri


def is_local(uri: str) -> bool:
    """Whether ``uri`` is on this machine's disk (a plain path or ``file://``)."""
    return _scheme(uri) in ("", "file")


def local_path(uri: str) -> str:
    """The plain path of a local ``uri`` (what Python's own file functions take)."""
    assert is_local(uri), uri
    return _local(uri)


def join(base: str, *parts: str) -> str:
    """Join path segments with ``/`` for URIs and ``os.path.join`` for plain paths."""
    clean = [p.strip("/") for p in parts if p and p.strip("/")]
    if _scheme(base):
        return "/".join([base.rstrip("/"), *clean])
    return os.path.join(base, *clean)


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


def list_files(root: str) -> list[FileInfo]:
    """All non-hidden files under ``root`` (recursive), sorted by relative path."""
    found: list[FileInfo] = []
    handle = _jvm_fs(root)
    if handle is None:
        base = _local(root)
        if not os.path.isdir(base):
            return []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
            for name in filenames:
                if _hidden(name):
                    continue
                full = os.path.join(dirpath, name)
                st = os.stat(full)
                rel = os.path.relpath(full, base).replace(os.sep, "/")
                shown = join(root, rel) if _scheme(root) else full
                found.append(FileInfo(shown, rel, st.st_size, st.st_mtime_ns // 1_000_000))
    else:
        fs, path = handle
        if not fs.exists(path):
            return []
        qualified = str(fs.makeQualified(path).toString()).rstrip("/")
        iterator = fs.listFiles(path, True)
        while iterator.hasNext():
            status = iterator.next()
            full = str(status.getPath().toString())
            rel = full[len(qualified) :].lstrip("/")
            if any(_hidden(part) for part in rel.split("/")):
                continue
            found.append(FileInfo(full, rel, int(status.getLen()), int(status.getModificationTime())))
    return sorted(found, key=lambda f: f.relative)


def list_dirs(root: str) -> list[str]:
    """Names of the non-hidden sub-folders directly under ``root``."""
    handle = _jvm_fs(root)
    if handle is None:
        base = _local(root)
        if not os.path.isdir(base):
            return []
        return sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)) and not _hidden(d))
    fs, path = handle
    if not fs.exists(path):
        return []
    names = [str(s.getPath().getName()) for s in fs.listStatus(path) if s.isDirectory()]
    return sorted(n for n in names if not _hidden(n))


def exists(uri: str) -> bool:
    handle = _jvm_fs(uri)
    if handle is None:
        return os.path.exists(_local(uri))
    fs, path = handle
    return bool(fs.exists(path))


def size(uri: str) -> int:
    handle = _jvm_fs(uri)
    if handle is None:
        return os.path.getsize(_local(uri))
    fs, path = handle
    return int(fs.getFileStatus(path).getLen())


def digest(uri: str) -> str:
    """SHA-256 of a file's content (used to tell 'already renamed' from 'a different file')."""
    sha = hashlib.sha256()
    handle = _jvm_fs(uri)
    if handle is None:
        with open(_local(uri), "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                sha.update(chunk)
        return sha.hexdigest()
    fs, path = handle
    stream = fs.open(path)
    try:
        data = gateway.active_jvm().org.apache.commons.io.IOUtils.toByteArray(stream)
        sha.update(bytes(data))
    finally:
        stream.close()
    return sha.hexdigest()


def rename(src: str, dst: str) -> None:
    """Move one file, creating the destination's parent folders; never overwrites."""
    handle = _jvm_fs(src)
    if handle is None:
        target = _local(dst)
        if os.path.exists(target):
            raise FileExistsError(target)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        try:
            os.rename(_local(src), target)
        except OSError:
            shutil.move(_local(src), target)
        return
    fs, src_path = handle
    dst_handle = _jvm_fs(dst)
    assert dst_handle is not None
    _, dst_path = dst_handle
    if fs.exists(dst_path):
        raise FileExistsError(dst)
    fs.mkdirs(dst_path.getParent())
    if not fs.rename(src_path, dst_path):
        raise OSError(f"rename {src} -> {dst} failed")


def write_text(uri: str, text: str) -> None:
    """Write a small UTF-8 file (replacing it), locally or through Hadoop's FileSystem."""
    handle = _jvm_fs(uri)
    if handle is None:
        target = _local(uri)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    fs, path = handle
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


def read_text(uri: str) -> str:
    """Read a small UTF-8 file, locally or through Hadoop's FileSystem."""
    handle = _jvm_fs(uri)
    if handle is None:
        with open(_local(uri), encoding="utf-8") as fh:
            return fh.read()
    fs, path = handle
    stream = fs.open(path)
    try:
        return bytes(stream.readAllBytes()).decode("utf-8")
    finally:
        stream.close()


def head(uri: str, size: int) -> bytes:
    """The first ``size`` bytes of a file (fewer when it is shorter), locally or through Hadoop."""
    handle = _jvm_fs(uri)
    if handle is None:
        with open(_local(uri), "rb") as fh:
            return fh.read(size)
    fs, path = handle
    stream = fs.open(path)
    try:
        return bytes(stream.readNBytes(size))
    finally:
        stream.close()


def delete(uri: str) -> None:
    """Delete a file or folder tree if it exists."""
    handle = _jvm_fs(uri)
    if handle is None:
        local = _local(uri)
        if os.path.isdir(local):
            shutil.rmtree(local, ignore_errors=True)
        elif os.path.exists(local):
            os.remove(local)
        return
    fs, path = handle
    if fs.exists(path):
        fs.delete(path, True)
