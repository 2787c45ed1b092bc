"""Personal API tokens and the audit of proxied API calls."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from portal.accounts.access import AccessQuerySet

TOKEN_PREFIX_LENGTH = 8


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
