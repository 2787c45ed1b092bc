"""Uploading pack archives: good ones become versions; malformed ones are
refused with a clear reason and nothing is stored."""

from __future__ import annotations

import io
import secrets
import zipfile

import pytest

from portal.templatepacks.models import JobTemplate, PackAuditEvent, PackVersion, TemplatePack
from tests.builders.api import api_client_for
from tests.unit.templatepacks.factories import SALES_TEMPLATES, tar_gz_bytes, upload, zip_bytes


def _zip_with_symlink() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("link.template")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def _zip_bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("big.template", "a = 1\n" + "#" * (2 * 1024 * 1024))
    return buffer.getvalue()


BAD_ARCHIVES = [
    pytest.param(b"just some text, not an archive", "not a .zip or .tar.gz archive", id="not-an-archive"),
    pytest.param(b"PK\x03\x04broken", "damaged archive", id="truncated-zip"),
    pytest.param(zip_bytes({"../x.template": "a = 1"}), "path traversal", id="zip-traversal"),
    pytest.param(tar_gz_bytes({"jobs/../../x.template": "a = 1"}), "path traversal", id="tar-traversal"),
    pytest.param(zip_bytes({"/etc/x.template": "a = 1"}), "absolute paths", id="zip-absolute"),
    pytest.param(tar_gz_bytes({"/abs/x.template": "a = 1"}), "absolute paths", id="tar-absolute"),
    pytest.param(
        tar_gz_bytes({"a.template": "a = 1"}, symlinks={"l.template": "/etc/passwd"}),
        "links",
        id="tar-symlink",
    ),
    pytest.param(_zip_with_symlink(), "symbolic links", id="zip-symlink"),
    pytest.param(_zip_bomb(), "unpacks to more than", id="zip-bomb-size"),
    pytest.param(
        zip_bytes({f"t{i}.template": "a = 1" for i in range(30)}), "more than 20 files", id="too-many-files"
    ),
    pytest.param(
        zip_bytes({"bad.template": "a = 1\nb = {\n  c = [1, 2\n"}), "line 4, column 1", id="invalid-hocon"
    ),
    pytest.param(
        zip_bytes({"a.template": 'gobblin.template.inherit = "pack://nowhere/x.template"'}),
        "unknown parent",
        id="unknown-parent",
    ),
    pytest.param(zip_bytes({"readme.txt": "hello"}), "no .template files", id="no-templates"),
    pytest.param(zip_bytes({"a.template": b"\xff\xfe bad"}), "not UTF-8", id="not-utf8"),
    pytest.param(
        zip_bytes({"a.template": 'include "/etc/passwd"'}), "'include' is not allowed", id="hocon-include"
    ),
]


@pytest.mark.parametrize(("data", "reason"), BAD_ARCHIVES)
def test_a_malformed_new_pack_is_refused_and_nothing_is_stored(owner, settings, data, reason):
    settings.TEMPLATEPACK_MAX_FILES = 20
    settings.TEMPLATEPACK_MAX_UNCOMPRESSED_BYTES = 1024 * 1024

    response = api_client_for(owner).post(
        "/api/templatepacks", {"name": "bad", "archive": upload(data)}, format="multipart"
    )

    assert response.status_code == 400, response.content
    assert reason in " ".join(response.json()["archive"])
    assert not TemplatePack.objects.exists()
    assert not PackVersion.objects.exists()
    assert not PackAuditEvent.objects.exists()


@pytest.mark.parametrize(("data", "reason"), BAD_ARCHIVES)
def test_a_malformed_upload_leaves_the_pack_as_it_was(pack, owner, settings, data, reason):
    settings.TEMPLATEPACK_MAX_FILES = 20
    settings.TEMPLATEPACK_MAX_UNCOMPRESSED_BYTES = 1024 * 1024
    events = PackAuditEvent.objects.count()

    response = api_client_for(owner).post(
        f"/api/templatepacks/{pack.name}/versions", {"archive": upload(data)}, format="multipart"
    )

    assert response.status_code == 400
    assert reason in " ".join(response.json()["archive"])
    pack.refresh_from_db()
    assert pack.current_version.number == 1
    assert PackVersion.objects.count() == 1
    assert PackAuditEvent.objects.count() == events


def test_owner_uploads_a_tar_gz_as_a_new_version_and_rolls_back(pack, owner):
    client = api_client_for(owner)
    changed = {**SALES_TEMPLATES, "base.template": "job.commit.policy = partial\n"}

    response = client.post(
        f"/api/templatepacks/{pack.name}/versions",
        {"archive": upload(tar_gz_bytes(changed), "p.tar.gz")},
        format="multipart",
    )
    assert response.status_code == 201
    assert response.json()["number"] == 2
    assert (
        client.get(f"/api/templatepacks/{pack.name}/templates/base.template")
        .json()["text"]
        .startswith("job.commit.policy = partial")
    )

    response = client.post(f"/api/templatepacks/{pack.name}/versions/1/rollback")
    assert response.status_code == 201
    assert response.json()["number"] == 3
    assert (
        client.get(f"/api/templatepacks/{pack.name}/templates/base.template").json()["text"]
        == SALES_TEMPLATES["base.template"]
    )
    assert [v["number"] for v in client.get(f"/api/templatepacks/{pack.name}/versions").json()] == [3, 2, 1]
    # versions are immutable: v2 still has what was uploaded
    assert JobTemplate.objects.get(version__number=2, path="base.template").text.startswith(
        "job.commit.policy = partial"
    )


def test_pack_created_through_the_page_with_an_archive(client, owner):
    client.force_login(owner)
    response = client.post(
        "/packs/new/",
        {"name": "sales-pack", "description": "d", "archive": upload(zip_bytes(SALES_TEMPLATES), "w.zip")},
    )
    assert response.status_code == 302
    pack = TemplatePack.objects.get(name="sales-pack")
    assert set(
        JobTemplate.objects.filter(version=pack.current_version).values_list("path", flat=True)
    ) == set(SALES_TEMPLATES)


def test_bad_archive_on_the_page_shows_the_reason(client, owner):
    client.force_login(owner)
    response = client.post("/packs/new/", {"name": "web-pack", "archive": upload(b"nope", "x.zip")})
    assert response.status_code == 400
    assert "is not a .zip or .tar.gz archive" in response.content.decode()
    assert not TemplatePack.objects.exists()


def test_template_edited_in_the_ui_makes_a_version_with_a_diff(client, pack, owner):
    client.force_login(owner)
    response = client.post(
        f"/packs/{pack.name}/edit/base.template",
        {"text": SALES_TEMPLATES["base.template"].replace("full", "partial")},
    )
    assert response.status_code == 302
    event = PackAuditEvent.objects.filter(action="edit").get()
    assert "-job.commit.policy = full" in event.diff and "+job.commit.policy = partial" in event.diff
    assert event.version_number == 2


def test_invalid_hocon_in_the_editor_is_a_field_error_with_line_and_column(client, pack, owner):
    client.force_login(owner)
    response = client.post(
        f"/packs/{pack.name}/new-template/", {"path": "x.template", "text": "a = {\n b = 1\n"}
    )
    assert response.status_code == 400
    assert "line 3, column 1" in response.content.decode()
    assert PackVersion.objects.count() == 1


def test_duplicate_pack_name_is_a_409(pack, owner):
    response = api_client_for(owner).post("/api/templatepacks", {"name": pack.name}, format="multipart")
    assert response.status_code == 409


def test_resolve_preview_lists_missing_required_attributes(pack, reader):
    client = api_client_for(reader)
    uri = "pack://sales-pack/ingest/jdbc.template"
    body = client.post(
        "/api/templates/resolve",
        {"templateUri": uri, "properties": {"source.jdbc.schema": "u"}},
        format="json",
    ).json()
    assert body["complete"] is False
    assert body["missingRequiredAttributes"] == ["source.jdbc.tables"]
    body = client.post(
        "/api/templates/resolve",
        {"templateUri": uri, "properties": {"source.jdbc.schema": "u", "source.jdbc.tables": "t"}},
        format="json",
    ).json()
    assert body["complete"] is True
    assert body["properties"]["extract.table"] == "t"
    assert body["pinnedVersions"][uri] == 1
    bad = client.post("/api/templates/resolve", {"templateUri": "pack://x/../y.template"}, format="json")
    assert bad.status_code == 400 and "templateUri" in bad.json()


def test_an_archive_over_the_upload_limit_is_refused_before_it_is_read(pack, owner, settings):
    settings.MAX_UPLOAD_BYTES = 64 * 1024
    archive = zip_bytes({"big.template": "a = 1\n# " + secrets.token_hex(100_000)})  # ~100 KB deflated
    assert len(archive) > settings.MAX_UPLOAD_BYTES

    response = api_client_for(owner).post(
        f"/api/templatepacks/{pack.name}/versions", {"archive": upload(archive)}, format="multipart"
    )

    assert response.status_code == 413
    assert "65536-byte limit" in response.json()["detail"]
    pack.refresh_from_db()
    assert pack.current_version.number == 1


def test_a_form_under_packs_is_not_an_upload_and_keeps_the_request_limit(client, pack, owner, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024  # MAX_REQUEST_BYTES
    client.force_login(owner)

    # as a browser sends the ACL form (no enctype: url-encoded)
    response = client.post(
        f"/packs/{pack.name}/acl/", "entries=" + "x" * 4096, content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 413
    assert "over the 1024-byte limit. Nothing was saved." in response.content.decode()
