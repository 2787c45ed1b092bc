"""Template packs for tests: archives built in memory, packs made through the
real services (so versions, ACLs and audit rows are what production makes)."""

from __future__ import annotations

import io
import tarfile
import zipfile

from django.core.files.uploadedfile import SimpleUploadedFile

from portal.templatepacks import services

BASE_TEMPLATE = """\
# The parent every job template of the sales pack inherits from.
job.commit.policy = full
writer.output.format = parquet
extract.namespace = ${data.root}"/lake"
data.root = /var/flowport
"""
JDBC_TEMPLATE = """\
gobblin.template.inherit = "pack://sales-pack/base.template"
gobblin.template.required_attributes = "source.jdbc.schema,source.jdbc.tables"
source.class = portal.pipeline.sources.jdbc.JdbcSource
converter.classes = [portal.pipeline.converters.Identity]
extract.table = ${source.jdbc.tables}
"""
SALES_TEMPLATES = {"base.template": BASE_TEMPLATE, "ingest/jdbc.template": JDBC_TEMPLATE}


def zip_bytes(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def tar_gz_bytes(files: dict[str, str | bytes], *, symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
    return buffer.getvalue()


def upload(data: bytes, name: str = "pack.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def make_pack(owner, name: str = "sales-pack", templates: dict[str, str] | None = None, readers=(), **kwargs):
    """A pack owned by `owner`; `readers` (users or groups) may use it."""
    templates = SALES_TEMPLATES if templates is None else templates
    pack = services.create_pack(
        user=owner, name=name, archive=upload(zip_bytes(templates)) if templates else None, **kwargs
    )
    if readers:
        entries = [{"role": "owner", "user": owner.username}]
        for reader in readers:
            key = "user" if hasattr(reader, "username") else "group"
            entries.append({"role": "reader", key: getattr(reader, "username", None) or reader.name})
        services.set_acl(pack, user=owner, entries=entries)
    pack.refresh_from_db()
    return pack


def stored_pack(owner, name: str, templates: dict[str, str]):
    """A pack whose templates are stored as they are, without the upload checks: as a pack
    uploaded before those checks existed is stored. For tests of resolution itself; the checks
    refuse Gobblin's own templates (Java classes, node-owned keys: tests/security)."""
    from portal.templatepacks.models import JobTemplate, PackVersion, TemplatePack

    pack = TemplatePack.objects.create(name=name, created_by=owner)
    pack.acl.create(role="owner", user=owner)
    version = PackVersion.objects.create(pack=pack, number=1, kind=PackVersion.Kind.UPLOAD, created_by=owner)
    JobTemplate.objects.bulk_create(
        JobTemplate(version=version, path=p, text=t) for p, t in templates.items()
    )
    TemplatePack.objects.filter(pk=pack.pk).update(current_version=version)
    pack.refresh_from_db()
    return pack
