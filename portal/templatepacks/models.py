"""Template packs: named, ACL-controlled collections of Gobblin job templates.

Every change makes a new immutable PackVersion holding the full set of
JobTemplates, so a flow can pin the version it compiled with and owners can
roll back. PackAuditEvent is append-only.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from portal.accounts import access
from portal.accounts.models import PrincipalGrant

validate_pack_name = RegexValidator(
    r"^[A-Za-z0-9_.-]{1,128}\Z", "Use 1-128 letters, digits, '_', '.' or '-'."
)


class ImmutableRow(Exception):
    """Raised on any attempt to change or remove a row that is history."""


class TemplatePack(models.Model):
    name = models.CharField(max_length=128, unique=True, validators=[validate_pack_name])
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    current_version = models.ForeignKey(
        "PackVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = access.AccessQuerySet.as_manager()  # restrict(user, action): templatepacks.rules

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ImmutableQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ImmutableRow(f"{self.model.__name__} rows are immutable; make a new one.")


class PackVersion(models.Model):
    class Kind(models.TextChoices):
        UPLOAD = "upload", "archive upload"
        EDIT = "edit", "template edit"
        ROLLBACK = "rollback", "rollback"

    pack = models.ForeignKey(TemplatePack, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    message = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")

    objects = ImmutableQuerySet.as_manager()

    class Meta:
        ordering = ["pack", "-number"]
        constraints = [models.UniqueConstraint(fields=["pack", "number"], name="packversion_unique_number")]

    def __str__(self) -> str:
        return f"{self.pack.name} v{self.number}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ImmutableRow("A pack version never changes; save a new version instead.")
        super().save(*args, **kwargs)


class JobTemplate(models.Model):
    version = models.ForeignKey(PackVersion, on_delete=models.CASCADE, related_name="templates")
    path = models.CharField(max_length=500)
    text = models.TextField()

    objects = ImmutableQuerySet.as_manager()

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["version", "path"], name="jobtemplate_unique_path")]

    def __str__(self) -> str:
        return f"pack://{self.version.pack.name}/{self.path}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ImmutableRow("A stored template never changes; edit it to make a new pack version.")
        super().save(*args, **kwargs)


class PackAcl(PrincipalGrant):
    """A template pack's access list: owners edit the pack and its ACL,
    readers use its templates (templatepacks.rules)."""

    class Role(models.TextChoices):
        OWNER = "owner", "owner"
        READER = "reader", "reader"

    pack = models.ForeignKey(TemplatePack, on_delete=models.CASCADE, related_name="acl")
    role = models.CharField(max_length=8, choices=Role.choices)

    class Meta(PrincipalGrant.Meta):
        constraints = [
            *PrincipalGrant.Meta.constraints,
            models.UniqueConstraint(fields=["pack", "role", "user"], name="packacl_unique_user"),
            models.UniqueConstraint(fields=["pack", "role", "group"], name="packacl_unique_group"),
        ]

    def __str__(self) -> str:
        return f"{self.pack.name}: {self.principal} {self.role}"


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise ImmutableRow("Audit history is append-only.")

    def delete(self):
        raise ImmutableRow("Audit history is append-only.")

    def bulk_update(self, *args, **kwargs):
        raise ImmutableRow("Audit history is append-only.")


class PackAuditEvent(models.Model):
    """Who (and for whom, when proxied) did what to which pack, with a diff.

    Keyed by the pack's *name*, not a foreign key, so a deleted pack's
    history survives it and nothing cascades into this table."""

    class Action(models.TextChoices):
        CREATE = "create", "created"
        UPLOAD = "upload", "archive uploaded"
        EDIT = "edit", "template edited"
        ACL = "acl", "ACL changed"
        ROLLBACK = "rollback", "rolled back"
        DELETE = "delete", "deleted"

    pack_name = models.CharField(max_length=128, db_index=True)
    action = models.CharField(max_length=16, choices=Action.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now, db_index=True)
    version_number = models.PositiveIntegerField(null=True, blank=True)
    summary = models.CharField(max_length=1000)
    diff = models.TextField(blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.pack_name} {self.action} by {self.actor}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None or kwargs.get("force_update"):
            raise ImmutableRow("Audit history is append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ImmutableRow("Audit history is append-only.")


class PackAccessRequest(models.Model):
    """A user's request to read a pack, answered by one of its owners.

    Granting adds the user as a reader through the audited ACL change; the
    request row only remembers who asked, why, and how it was answered."""

    pack = models.ForeignKey(TemplatePack, on_delete=models.CASCADE, related_name="access_requests")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    message = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pack", "requested_by"],
                condition=models.Q(decided_at__isnull=True),
                name="packaccessrequest_one_open_per_user",
            )
        ]

    def __str__(self) -> str:
        return f"{self.requested_by} asks to read {self.pack.name}"
