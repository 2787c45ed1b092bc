"""Personal API tokens, the audit of proxied API calls, and the shapes other apps' access
lists share: a grant to a user or a group (PrincipalGrant), a request for access
(AccessRequest) and an append-only audit row (AuditRecord)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone

from portal.accounts.access import AccessQuerySet

TOKEN_PREFIX_LENGTH = 8


class PrincipalGrant(models.Model):
    """A role granted to one principal, a user or a group (an LDAP group
    mirrored at login), never both: a row of an access list. Each app's list
    (a template pack's ACL, a data node's grants) adds the object granted on,
    its roles (`role` with choices) and its unique constraints, and its
    rules.py says what each role allows."""

    role = models.CharField(max_length=8)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE)

    class Meta:
        abstract = True
        ordering = ["role", "user__username", "group__name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="%(class)s_user_xor_group",
            ),
        ]

    @property
    def principal(self) -> str:
        """`user:<username>` or `group:<name>`, as the access lists are written."""
        if self.user is not None:
            return f"user:{self.user.username}"
        return f"group:{self.group.name}" if self.group is not None else "?"


class AccessRequest(models.Model):
    """A user's request for access to an object, answered by one of its owners: the shape a
    template pack's and a data node's requests share (each adds the object asked about and
    what is asked for). Granting goes through the object's audited access-list change; the row
    only remembers who asked, why, and how it was answered."""

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    message = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted = models.BooleanField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["created", "id"]

    @property
    def is_open(self) -> bool:
        return self.decided_at is None


class AppendOnly(Exception):
    """Raised on any attempt to change or remove an audit row."""


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnly("Audit history is append-only.")

    def delete(self):
        raise AppendOnly("Audit history is append-only.")

    def bulk_update(self, *args, **kwargs):
        raise AppendOnly("Audit history is append-only.")


class AuditRecord(models.Model):
    """One row of an append-only audit trail: who (and for whom, when the call was proxied,
    `proxy.actor_and_subject`) did what and when, with a diff. Each app's trail adds what the
    row is about, by name rather than by foreign key, so a deleted object's history survives it
    and nothing cascades into the trail."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now, db_index=True)
    summary = models.CharField(max_length=1000)
    diff = models.TextField(blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        abstract = True
        ordering = ["-at", "-id"]

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None or kwargs.get("force_update"):
            raise AppendOnly("Audit history is append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("Audit history is append-only.")


def hash_token(key: str) -> str:
    """Only this digest is stored: a database leak yields no usable token.
    The secret is 256 random bits, so a fast hash is enough (no salt needed)."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiTokenQuerySet(AccessQuerySet):
    def active(self) -> ApiTokenQuerySet:
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ApiToken(models.Model):
    """`fp_<prefix>_<secret>`: the prefix finds the row, the hash proves the key."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=TOKEN_PREFIX_LENGTH, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} (fp_{self.prefix}_…)"

    @staticmethod
    def new_key() -> tuple[str, str]:
        prefix = secrets.token_hex(TOKEN_PREFIX_LENGTH // 2)
        return prefix, f"fp_{prefix}_{secrets.token_urlsafe(32)}"

    def matches(self, key: str) -> bool:
        return hmac.compare_digest(self.key_hash, hash_token(key))

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def status(self) -> str:
        if self.revoked_at:
            return "revoked"
        return "expired" if self.is_expired else "active"


class ProxyAuditEvent(models.Model):
    """One row per API call made by a proxy-group member acting as someone else."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    acting_as = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=2000)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.actor} as {self.acting_as}: {self.method} {self.path}"
