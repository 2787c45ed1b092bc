"""Keys services: the API, the flow form, flow validation and the worker all
come here (docs/keys.md).

    wrap_customer_key(user=..., key=... | generate=True) -> WrapResult
    binding_for(user, wrapped_key) -> "user:<id>" | "group:<id>"  # whom new ENC values are bound to
    encrypt_value(wrapped_key, plaintext, owner) -> "ENC(...)"    # server side, e.g. the flow form
    owner_problems(owner, properties)                               # bound to another owner? (save, worker)
    decrypt_properties(properties) -> properties in clear           # worker side, just before the pipeline
    is_encrypted(value) -> bool
    redact(properties, secret_keys=()) -> properties safe to show or log
    wrapped_key_problems(owner, properties) -> [message]           # on every flow save (flows.secrets)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from portal.accounts import access
from portal.accounts.access import Principal, account, is_account
from portal.crypto import client, wrapping
from portal.crypto.encrypted import (
    REDACTED,
    WRAPPED_KEY_PROPERTY,
    decrypt_properties,
    encrypted_keys,
    is_encrypted,
    redact,
    secret_values,
    wrapped_key_property_for,
)
from portal.crypto.errors import (
    DecryptionError,
    EncryptionError,
    MasterKeyError,
    WrappedKeyError,
)
from portal.crypto.master import get_ring
from portal.crypto.secretnames import ENCRYPTED_ATTRIBUTES_KEY
from portal.keys.models import CustomerKey

__all__ = [
    "ENCRYPTED_ATTRIBUTES_KEY",
    "REDACTED",
    "WRAPPED_KEY_PROPERTY",
    "DecryptionError",
    "EncryptionError",
    "MasterKeyError",
    "WrapResult",
    "WrappedKeyError",
    "binding_for",
    "decrypt_properties",
    "encrypt_value",
    "is_encrypted",
    "owner_problems",
    "redact",
    "secret_values",
    "wrap_customer_key",
    "wrapped_key_problems",
]

logger = logging.getLogger(__name__)


@dataclass
class WrapResult:
    customer_key: CustomerKey
    generated_key: str | None  # base64; only when the portal generated it, and only now


def _owner_group(user: Principal, name: str) -> Group:
    group = access.restrict(Group.objects.filter(name=name), user, access.CHANGE).first()
    if group is None:
        # The same answer whether the group exists or not.
        raise ValidationError({"group": [f"You are not a member of a group named {name!r}."]})
    return group


def wrap_customer_key(
    *,
    user: Principal,
    key: str | None = None,
    generate: bool = False,
    label: str = "",
    group: str | None = None,
) -> WrapResult:
    """Wrap a customer key (`key`, base64 AES-256, held by the caller; or a
    new random one with `generate`) with the active master key and store it
    for `user`, or for `group` when `user` is one of its members. The
    plaintext key is never stored; a generated one is returned this once."""
    if generate and key:
        raise ValidationError({"key": ["Give either a key or generate: true, not both."]})
    if not generate and not key:
        raise ValidationError({"key": ["Give a base64 AES-256 key, or generate: true for a new one."]})
    try:
        key_bytes = client.generate_key() if generate else client.load_key(key or "")
    except client.EncryptedValueError as error:
        raise ValidationError({"key": [str(error)]}) from None
    owner_group = _owner_group(user, group) if group else None
    owner = {"owner_group": owner_group} if owner_group else {"owner_user": account(user)}
    label_taken = ValidationError({"label": [f"There is already a key labelled {label!r} for this owner."]})
    if label and CustomerKey.objects.filter(label=label, **owner).exists():
        raise label_taken
    ring = get_ring()
    record = CustomerKey(
        **owner,
        label=label,
        wrapped_key=wrapping.wrap(ring, key_bytes),
        master_key_id=ring.active_id,
        fingerprint=client.key_fingerprint(key_bytes),
        created_by=account(user),
    )
    try:
        with transaction.atomic():
            record.save()
    except IntegrityError:  # the same label stored concurrently
        raise label_taken from None
    logger.info(
        "customer key %s wrapped for %s by %s (master key %s)",
        record.short_fingerprint,
        record.owner_name,
        user,
        ring.active_id,
    )
    return WrapResult(record, client.encode_key(key_bytes) if generate else None)


def holds_key(user: Principal | None, wrapped_key: str) -> bool:
    """True when the customer key inside `wrapped_key` is one of `user`'s
    (or their groups') keys. Compared by fingerprint, so a key re-wrapped by a
    master key rotation still counts. Raises MasterKeyError / WrappedKeyError."""
    customer_key = wrapping.unwrap(get_ring(), wrapped_key)
    fingerprint = client.key_fingerprint(customer_key)
    return CustomerKey.objects.usable_by(user).filter(fingerprint=fingerprint).exists()


def owners_acted_for(user: Principal | None) -> set[str]:
    """The owners (`user:<id>`, `group:<id>`) whose flows `user` owns: their
    own and their groups'. A bound ENC(...) value decrypts in `user`'s flows
    only when it is bound to one of them."""
    if not is_account(user) or not user.pk:
        return set()
    return {f"user:{user.pk}"} | {f"group:{pk}" for pk in user.groups.values_list("pk", flat=True)}


def binding_for(user: Principal | None, wrapped_key: str) -> str:
    """The owner an ENC(...) value `user` makes under `wrapped_key` is bound
    to: the key's owner — `user`'s own key first, else one of their groups'.
    Only a key's owner may encrypt with it: EncryptionError(code="not_key_owner")
    otherwise; MasterKeyError / WrappedKeyError when it cannot be unwrapped."""
    fingerprint = client.key_fingerprint(wrapping.unwrap(get_ring(), wrapped_key))
    records = CustomerKey.objects.usable_by(user).filter(fingerprint=fingerprint)
    record: CustomerKey | None = records.filter(owner_user=user).first() or records.order_by("pk").first()
    if record is None:
        raise EncryptionError(
            "This key is not one of yours or your groups'; only a key's owner may encrypt with it.",
            code="not_key_owner",
        )
    return record.binding


def encrypt_value(wrapped_key: str, plaintext: str, owner: str | None = None) -> str:
    """`plaintext` as an ENC(...) value under the customer key inside
    `wrapped_key`, bound to `owner` (see `binding_for`; without one, the
    version 1 form). Raises MasterKeyError, WrappedKeyError (code says why) or
    EncryptionError(code="too_long")."""
    customer_key = wrapping.unwrap(get_ring(), wrapped_key)
    try:
        return client.encrypt(customer_key, plaintext, owner)
    except client.EncryptedValueError as error:
        raise EncryptionError(str(error), code=error.code) from None


def owner_problems(
    owner: Principal | None,
    properties: Mapping[str, str],
    *,
    skip: Callable[[str], bool] = lambda name: False,
) -> list[str]:
    """One message per ENC(...) value (outside `skip`) bound to an owner that
    may not use it here: not the flow owner (nor one of their groups), or not
    an owner of the customer key it was made with. Version 1 values are bound
    to no one: they pass here and are accepted where the owner holds the key
    (`holds_key`). Nothing is decrypted."""
    mine = owners_acted_for(owner)
    problems, fingerprints = [], {}
    for name in encrypted_keys(properties):
        value = properties[name]
        if skip(name) or not is_encrypted(value):
            continue
        bound_to = client.owner_of(value)
        if bound_to is None:
            continue
        if bound_to not in mine:
            problems.append(
                f"{name!r} is bound to another owner ({bound_to}): it decrypts only in flows that owner "
                "owns. Encrypt the secret again with one of your own keys."
            )
            continue
        wrapped = properties.get(wrapped_key_property_for(name, properties))
        if not isinstance(wrapped, str) or not wrapped:
            continue  # format_problems says so
        try:
            if wrapped not in fingerprints:
                fingerprints[wrapped] = client.key_fingerprint(wrapping.unwrap(get_ring(), wrapped))
        except EncryptionError:
            continue  # the wrapped key's own check says why
        kind, _, pk = bound_to.partition(":")
        field = "owner_group_id" if kind == "group" else "owner_user_id"
        if not CustomerKey.objects.filter(fingerprint=fingerprints[wrapped], **{field: int(pk)}).exists():
            problems.append(f"{name!r} is bound to {bound_to}, which does not own the key it was made with.")
    return problems


def wrapped_key_problems(owner: Principal | None, properties: dict[str, str]) -> list[str]:  # noqa: C901
    """The wrapped-key half of a flow's secret checks (flows.secrets has the
    rest): `encrypt.wrapped.key` unwraps with this portal's master key, is one
    of the owner's (or their groups') customer keys, and is the key every
    ENC(...) value was made with; a prefixed wrapped key is the owner's too.
    Nothing is decrypted. One message per problem, naming the property."""
    messages: list[str] = []
    wrapped = properties.get(WRAPPED_KEY_PROPERTY)
    if isinstance(wrapped, str) and wrapped:
        try:
            customer_key = wrapping.unwrap(get_ring(), wrapped)
        except MasterKeyError as error:
            logger.error("cannot check %s of a flow of %s: %s", WRAPPED_KEY_PROPERTY, owner, error)
            messages.append(
                f"{WRAPPED_KEY_PROPERTY!r} cannot be checked: the portal's master key is unavailable "
                "(an administrator must fix it; see docs/keys.md)."
            )
        except WrappedKeyError as error:
            messages.append(f"{WRAPPED_KEY_PROPERTY!r} {error}.")
        else:
            fingerprint = client.key_fingerprint(customer_key)
            if not CustomerKey.objects.usable_by(owner).filter(fingerprint=fingerprint).exists():
                messages.append(
                    f"{WRAPPED_KEY_PROPERTY!r} is not one of the flow owner's customer keys; wrap the key "
                    "with POST /api/keys/wrap (as the owner, or for one of the owner's groups) and use "
                    "the wrapped key it returns."
                )
            check = client.key_check(customer_key)
            for name in encrypted_keys(properties):
                if is_encrypted(properties[name]) and client.parse(properties[name])[1] != check:
                    messages.append(
                        f"{name!r} was encrypted with a different customer key than the one in "
                        f"{WRAPPED_KEY_PROPERTY!r}."
                    )
    messages += owner_problems(owner, properties)
    for name, value in sorted(properties.items()):
        # Prefixed wrapped keys (`<prefix>.encrypt.wrapped.key`) decrypt the values under their
        # prefix: they too must be the owner's.
        if not (isinstance(value, str) and value and name.endswith("." + WRAPPED_KEY_PROPERTY)):
            continue
        try:
            held = holds_key(owner, value)
        except (MasterKeyError, WrappedKeyError) as error:
            messages.append(f"{name!r} {error}.")
            continue
        if not held:
            messages.append(f"{name!r} is not one of the flow owner's customer keys.")
    return messages
