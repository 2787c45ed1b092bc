"""API token service: create (the key is returned once), authenticate, revoke."""

from __future__ import annotations

import logging
from datetime import datetime

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.accounts import access
from portal.accounts.models import ApiToken, hash_token

logger = logging.getLogger(__name__)
MAX_ACTIVE_TOKENS = 50


def create_token(user: User, *, name: str, expires_at: datetime | None = None) -> tuple[ApiToken, str]:
    """Returns the token row and the plain key. The key is never stored or
    logged; the caller shows it once."""
    name = (name or "").strip()
    errors: dict[str, list[str]] = {}
    if not name:
        errors["name"] = ["Give the token a name, e.g. the script that will use it."]
    elif len(name) > 100:
        errors["name"] = ["At most 100 characters."]
    if expires_at is not None and expires_at <= timezone.now():
        errors["expires_at"] = ["The expiry must be in the future."]
    if ApiToken.objects.filter(user=user).active().count() >= MAX_ACTIVE_TOKENS:
        errors["name"] = [f"You already have {MAX_ACTIVE_TOKENS} active tokens; revoke one first."]
    if errors:
        raise ValidationError(errors)
    prefix, key = ApiToken.new_key()
    token = ApiToken.objects.create(
        user=user, name=name, prefix=prefix, key_hash=hash_token(key), expires_at=expires_at
    )
    logger.info("API token %s created for %s", token.pk, user)
    return token, key


def authenticate_key(key: str) -> ApiToken | None:
    """The active token for `key`, or None. Marks it used."""
    parts = key.split("_")
    if len(parts) < 3 or parts[0] != "fp":
        return None
    token = ApiToken.objects.active().select_related("user").filter(prefix=parts[1]).first()
    if token is None or not token.matches(key) or not token.user.is_active:
        return None
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk).update(last_used=now)
    token.last_used = now
    return token


def revoke_token(user: User, token_id: int) -> ApiToken:
    """Only the token's own user revokes it; anyone else's id is a DoesNotExist."""
    token = ApiToken.objects.restrict(user, access.CHANGE).get(pk=token_id)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        logger.info("API token %s revoked by %s", token.pk, user)
    return token
