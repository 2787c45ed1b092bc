"""Asking for read access to a template pack, and answering.

A new user sees every pack on the list, with its owners; one they cannot
read has a "Request access" button. The pack's owners see the open requests
on the pack's page and grant (the user becomes a reader, through the audited
ACL change) or decline."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts import access
from portal.templatepacks import services
from portal.templatepacks.acl import acl_entries
from portal.templatepacks.models import PackAccessRequest, PackAcl, TemplatePack


def owners(pack: TemplatePack) -> list[str]:
    """Whom to ask: the pack's owners, users and groups, as the ACL names them."""
    return [
        entry.get("user") or f"group {entry['group']}"
        for entry in acl_entries(pack)
        if entry["role"] == "owner"
    ]


def request_access(pack: TemplatePack, *, user, message: str = "") -> PackAccessRequest:
    if access.can(user, access.VIEW, pack):
        raise ValidationError({"pack": [f"You can already read {pack.name}."]})
    try:
        with transaction.atomic():
            return PackAccessRequest.objects.create(pack=pack, requested_by=user, message=message.strip())
    except IntegrityError:
        raise ValidationError(
            {"pack": [f"You already asked for access to {pack.name}; its owners have not answered yet."]}
        ) from None


def open_requests(pack: TemplatePack):
    return pack.access_requests.filter(decided_at__isnull=True).select_related("requested_by")


def pending_for(user) -> set[int]:
    """Ids of the packs `user` has asked to read and is still waiting for."""
    return set(
        PackAccessRequest.objects.filter(requested_by=user, decided_at__isnull=True).values_list(
            "pack_id", flat=True
        )
    )


def decide(pack: TemplatePack, request_id: int, *, user, grant: bool, request=None) -> PackAccessRequest:
    """An owner answers one open request; granting adds a reader entry."""
    if not access.can(user, access.CHANGE, pack):
        raise PermissionDenied(f"Only owners of {pack.name} may answer access requests.")
    with transaction.atomic():
        asked = (
            PackAccessRequest.objects.select_for_update()
            .filter(pack=pack, pk=request_id, decided_at__isnull=True)
            .select_related("requested_by")
            .first()
        )
        if asked is None:
            raise ValidationError({"request": ["That request was already answered or withdrawn."]})
        if grant:
            reader = {"role": PackAcl.Role.READER.value, "user": asked.requested_by.username}
            entries = acl_entries(pack)
            if reader not in entries:
                services.set_acl(pack, user=user, entries=[*entries, reader], request=request)
        asked.granted, asked.decided_by, asked.decided_at = grant, user, timezone.now()
        asked.save(update_fields=["granted", "decided_by", "decided_at"])
    return asked
