"""Reading an uploaded template pack archive (.zip or .tar.gz) safely.

Nothing is extracted to disk. Every member is checked before it is read:
no absolute paths, no `..`, no links or devices; and the bytes actually
read (not the sizes the headers claim) are counted against the limits, so
a bomb stops at the limit.
"""

from __future__ import annotations

import io
import posixpath
import stat
import tarfile
import zipfile
from typing import IO

from django.conf import settings

TEMPLATE_SUFFIX = ".template"
MAX_PATH_LENGTH = 500
CHUNK = 64 * 1024


class ArchiveError(Exception):
    """The archive is refused; the message says why."""


def _safe_path(name: str) -> str:
    if "\\" in name or "\x00" in name:
        raise ArchiveError(f"{name!r}: backslashes and NUL are not allowed in member names.")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(f"{name!r}: absolute paths are not allowed.")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"{name!r}: '..' (path traversal) is not allowed.")
    path = posixpath.join(*parts) if parts else ""
    if len(path) > MAX_PATH_LENGTH:
        raise ArchiveError(f"{name[:60]!r}…: paths are limited to {MAX_PATH_LENGTH} characters.")
    return path


class _Budget:
    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0
        self.max_files = settings.TEMPLATEPACK_MAX_FILES
        self.max_bytes = settings.TEMPLATEPACK_MAX_UNCOMPRESSED_BYTES

    def count_file(self) -> None:
        self.files += 1
        if self.files > self.max_files:
            raise ArchiveError(f"more than {self.max_files} files and folders in the archive.")

    def read(self, stream: IO[bytes]) -> bytes:
        out = io.BytesIO()
        while chunk := stream.read(CHUNK):
            self.bytes += len(chunk)
            if self.bytes > self.max_bytes:
                raise ArchiveError(f"the archive unpacks to more than {self.max_bytes} bytes.")
            out.write(chunk)
        return out.getvalue()


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ArchiveError(f"{path}: not UTF-8 text (byte {error.start}).") from None


def _read_zip(data: bytes, budget: _Budget) -> dict[str, str]:
    templates: dict[str, str] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            path = _safe_path(info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise ArchiveError(f"{info.filename!r}: symbolic links are not allowed.")
            budget.count_file()
            if info.is_dir():
                continue
            if info.flag_bits & 0x1:
                raise ArchiveError(f"{info.filename!r}: encrypted members are not supported.")
            with archive.open(info) as member:
                content = budget.read(member)
            if path.endswith(TEMPLATE_SUFFIX):
                if path in templates:
                    raise ArchiveError(f"{path}: appears twice in the archive.")
                templates[path] = _decode(path, content)
    return templates


def _read_tar(data: bytes, budget: _Budget) -> dict[str, str]:
    templates: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive:
            path = _safe_path(member.name)
            if member.issym() or member.islnk():
                raise ArchiveError(f"{member.name!r}: symbolic and hard links are not allowed.")
            budget.count_file()
            if member.isdir():
                continue
            if not member.isfile():
                raise ArchiveError(f"{member.name!r}: only regular files and directories are allowed.")
            stream = archive.extractfile(member)
            content = budget.read(stream) if stream else b""
            if path.endswith(TEMPLATE_SUFFIX):
                if path in templates:
                    raise ArchiveError(f"{path}: appears twice in the archive.")
                templates[path] = _decode(path, content)
    return templates


def read_archive(upload: IO[bytes], filename: str = "") -> dict[str, str]:
    """path → text of every `.template` file in a .zip or .tar(.gz) archive."""
    data = upload.read()
    try:
        if data[:4] == b"PK\x03\x04" or (data[:4] == b"PK\x05\x06"):
            templates = _read_zip(data, _Budget())
        elif data[:2] == b"\x1f\x8b" or _looks_like_tar(data):
            templates = _read_tar(data, _Budget())
        else:
            raise ArchiveError(f"{filename or 'the upload'} is not a .zip or .tar.gz archive.")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as error:
        raise ArchiveError(f"{filename or 'the upload'} is a damaged archive: {error}") from None
    if not templates:
        raise ArchiveError(f"no {TEMPLATE_SUFFIX} files in the archive.")
    return templates


def _looks_like_tar(data: bytes) -> bool:
    return len(data) > 262 and data[257:262] == b"ustar"
