"""Personal API tokens, the audit of proxied API calls, and the shape of a
grant to a user or a group (PrincipalGrant) that other apps' access lists share."""

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
