"""Template pack services: the only code that changes packs, for pages and
API alike. Every change is one transaction that validates everything first,
makes a new immutable version where templates change, and writes an audit row.

The flow compiler's seam is re-exported here: `resolve_templates`,
`ResolvedTemplates`, `TemplateResolutionError`, `validate_template_uris_for`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.http import HttpRequest

from portal.accounts import access
from portal.accounts.access import Principal, account
from portal.templatepacks import audit, hocon, safety
from portal.templatepacks.acl import apply_acl
from portal.templatepacks.archives import ArchiveError, read_archive
from portal.templatepacks.models import (
    JobTemplate,
    PackAuditEvent,
    PackVersion,
    TemplatePack,
    validate_pack_name,
)
from portal.templatepacks.resolution import (
    PendingPack,
    ResolvedTemplates,
    TemplateLoader,
    TemplateResolutionError,
    resolve_templates,
    resolve_with,
    validate_template_uris_for,
)
from portal.templatepacks.signals import template_pack_changed

__all__ = [
    "PackExists",
    "ResolvedTemplates",
    "TemplateResolutionError",
    "create_pack",
    "delete_pack",
    "delete_template",
    "preview",
    "resolve_templates",
    "rollback",
    "save_template",
    "set_acl",
    "template_paths",
    "upload_version",
    "validate_template_uris_for",
]

logger = logging.getLogger(__name__)
Action = PackAuditEvent.Action


class PackExists(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(f"A template pack named {name!r} already exists.")


def template_paths(pack: TemplatePack) -> set[str]:
    """Every template path any version of the pack holds (flows may name one
    as FS:///<path>)."""
    return set(JobTemplate.objects.filter(version__pack=pack).values_list("path", flat=True))


def _announce(pack_name: str, paths: set[str]) -> None:
    # The flows using the pack re-check their access (flows.packflows).
    template_pack_changed.send(sender=TemplatePack, pack_name=pack_name, paths=paths)


def _require_edit(user: Principal, pack: TemplatePack) -> None:
    if not access.can(user, access.CHANGE, pack):
        raise PermissionDenied(f"Only owners of {pack.name} may change it.")


def validate_template_path(path: str) -> str:
    path = (path or "").strip().lstrip("/")
    parts = path.split("/")
    if not path.endswith(".template") or any(p in ("", ".", "..") for p in parts) or "\\" in path:
        raise ValidationError(
            {"path": [f"{path!r} must be a relative path ending in .template, without '..'."]}
        )
    if len(path) > 500:
        raise ValidationError({"path": ["At most 500 characters."]})
    return path


def check_templates(
    pack_name: str, templates: dict[str, str], user: Principal, number: int, field: str
) -> None:
    """Every template parses, and its parents exist, are readable and not cyclic."""
    pending = PendingPack(pack_name, templates, number)
    loader = TemplateLoader(user, pending)
    problems = []
    for path in sorted(templates):
        try:
            chain = loader.chain(f"pack://{pack_name}/{path}")
        except TemplateResolutionError as error:
            problems.append(error.message if error.message.startswith("pack://") else str(error))
            continue
        # Templates are shared: no node keys, no secrets, no classes from elsewhere.
        problems.extend(f"{path}: {problem}" for problem in safety.tree_problems(chain[0].tree))
    if problems:
        raise ValidationError({field: problems})


def _current_templates(pack: TemplatePack) -> dict[str, str]:
    if pack.current_version_id is None:
        return {}
    return dict(JobTemplate.objects.filter(version_id=pack.current_version_id).values_list("path", "text"))


def _new_version(
    pack: TemplatePack, user: Principal, templates: dict[str, str], kind: str, message: str
) -> PackVersion:
    number = (pack.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    version = PackVersion.objects.create(
        pack=pack, number=number, kind=kind, message=message[:500], created_by=account(user)
    )
    JobTemplate.objects.bulk_create(
        JobTemplate(version=version, path=p, text=t) for p, t in templates.items()
    )
    TemplatePack.objects.filter(pk=pack.pk).update(current_version=version)
    pack.current_version = version
    return version


def _change_templates(
    pack: TemplatePack,
    user: Principal,
    change: Callable[[dict[str, str]], tuple[dict[str, str], str]],
    *,
    kind: str,
    action: str,
    request: HttpRequest | None,
    field: str,
) -> PackVersion:
    """`change` turns the current templates into the new ones (and a summary),
    read under the pack's row lock: an edit made from a stale pack object, or
    beside another edit, never drops a template that edit did not touch."""
    _require_edit(user, pack)
    with transaction.atomic():
        pack = TemplatePack.objects.select_for_update().get(pk=pack.pk)
        before = _current_templates(pack)
        templates, summary = change(dict(before))
        number = (pack.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        check_templates(pack.name, templates, user, number, field)
        version = _new_version(pack, user, templates, kind, summary)
        audit.record(
            pack_name=pack.name,
            action=action,
            user=user,
            request=request,
            summary=summary,
            diff=audit.templates_diff(before, templates),
            version_number=version.number,
        )
    _announce(pack.name, template_paths(pack))
    return version


def _lf(text: str) -> str:
    """Browsers send a textarea's text with CRLF and archives may hold either;
    stored templates have LF only, so a diff shows what changed, not every line."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_upload(upload: UploadedFile[bytes], field: str = "archive") -> dict[str, str]:
    try:
        templates = read_archive(upload, getattr(upload, "name", ""))
    except ArchiveError as error:
        raise ValidationError({field: [str(error)]}) from None
    return {path: _lf(text) for path, text in templates.items()}


def create_pack(
    *,
    user: Principal,
    name: str,
    description: str = "",
    archive: UploadedFile[bytes] | None = None,
    request: HttpRequest | None = None,
) -> TemplatePack:
    """A new pack owned by its creator; from an archive, or empty (templates
    are then added in the UI)."""
    try:
        validate_pack_name(name)
    except ValidationError as error:
        raise ValidationError({"name": error.messages}) from None
    templates = read_upload(archive) if archive is not None else {}
    try:
        with transaction.atomic():
            if TemplatePack.objects.filter(name=name).exists():
                raise PackExists(name)
            pack = TemplatePack.objects.create(name=name, description=description, created_by=account(user))
            pack.acl.create(role="owner", user=account(user))
            check_templates(name, templates, user, 1, "archive")
            audit.record(
                pack_name=name, action=Action.CREATE, user=user, request=request, summary=f"created {name}"
            )
            if templates:
                version = _new_version(pack, user, templates, PackVersion.Kind.UPLOAD, "initial upload")
                audit.record(
                    pack_name=name,
                    action=Action.UPLOAD,
                    user=user,
                    request=request,
                    summary=f"uploaded {len(templates)} templates",
                    diff=audit.templates_diff({}, templates),
                    version_number=version.number,
                )
    except IntegrityError:
        raise PackExists(name) from None
    logger.info("template pack %s created by %s", name, user)
    return pack


def upload_version(
    pack: TemplatePack, *, user: Principal, upload: UploadedFile[bytes], request: HttpRequest | None = None
) -> PackVersion:
    """An archive replaces the pack's whole template set, as a new version."""
    templates = read_upload(upload)
    return _change_templates(
        pack, user, lambda _current: (templates, f"uploaded {len(templates)} templates"),
        kind=PackVersion.Kind.UPLOAD, action=Action.UPLOAD, request=request, field="archive",
    )  # fmt: skip


def save_template(
    pack: TemplatePack, *, user: Principal, path: str, text: str, request: HttpRequest | None = None
) -> PackVersion:
    """Create or edit one template (a new version with everything else kept)."""
    path, text = validate_template_path(path), _lf(text)
    try:
        hocon.parse_template(text, path)
    except hocon.HoconError as error:
        raise ValidationError({"text": [str(error)]}) from None

    def edit(templates: dict[str, str]) -> tuple[dict[str, str], str]:
        verb = "edited" if path in templates else "added"
        return {**templates, path: text}, f"{verb} {path}"

    return _change_templates(
        pack, user, edit, kind=PackVersion.Kind.EDIT, action=Action.EDIT, request=request, field="text"
    )


def delete_template(
    pack: TemplatePack, *, user: Principal, path: str, request: HttpRequest | None = None
) -> PackVersion:
    def remove(templates: dict[str, str]) -> tuple[dict[str, str], str]:
        if path not in templates:
            raise ValidationError({"path": [f"{pack.name} has no template {path!r}."]})
        return {p: t for p, t in templates.items() if p != path}, f"removed {path}"

    return _change_templates(
        pack, user, remove, kind=PackVersion.Kind.EDIT, action=Action.EDIT, request=request, field="path"
    )


def rollback(
    pack: TemplatePack, *, user: Principal, number: int, request: HttpRequest | None = None
) -> PackVersion:
    """A new version whose templates are those of version `number`."""
    old = pack.versions.filter(number=number).first()
    if old is None:
        raise ValidationError({"version": [f"{pack.name} has no version {number}."]})
    templates = dict(old.templates.values_list("path", "text"))
    return _change_templates(
        pack, user, lambda _current: (templates, f"rolled back to version {number}"),
        kind=PackVersion.Kind.ROLLBACK, action=Action.ROLLBACK, request=request, field="version",
    )  # fmt: skip


def delete_pack(pack: TemplatePack, *, user: Principal, request: HttpRequest | None = None) -> None:
    _require_edit(user, pack)
    name = pack.name
    paths = template_paths(pack)
    with transaction.atomic():
        audit.record(
            pack_name=name,
            action=Action.DELETE,
            user=user,
            request=request,
            summary=f"deleted {name}",
            diff=audit.templates_diff(_current_templates(pack), {}),
        )
        TemplatePack.objects.filter(pk=pack.pk).update(current_version=None)
        pack.delete()
    _announce(name, paths)
    logger.info("template pack %s deleted by %s", name, user)


def set_acl(
    pack: TemplatePack, *, user: Principal, entries: list[dict[str, str]], request: HttpRequest | None = None
) -> None:
    """Replace the ACL. entries: [{"role": "owner"|"reader", "user"|"group": name}]."""

    _require_edit(user, pack)
    before, after = apply_acl(pack, entries, user=user, request=request)
    _announce(pack.name, template_paths(pack))
    logger.info("ACL of %s changed by %s: %s → %s", pack.name, user, before, after)


def preview(*, user: Principal, template_uri: str, properties: dict[str, str]) -> ResolvedTemplates:
    """`POST /api/templates/resolve`: what a flow with these properties gets."""
    return resolve_with(TemplateLoader(user), [template_uri], properties)
