"""Field rules of a FlowConfig. Model fields use them, so forms, the API and
services can never disagree about what a valid flow is."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from portal.crypto.encrypted import format_problems as encrypted_property_problems
from portal.crypto.encrypted import looks_encrypted
from portal.pipeline.propertyrules import user_property_problems

# Template URIs are the template packs' vocabulary (templatepacks.uris); flows
# migration 0001 still names the validator here.
from portal.templatepacks.uris import validate_template_uris  # noqa: F401

NAME_PATTERN = r"[A-Za-z0-9_.-]{1,128}"
validate_name = RegexValidator(
    rf"^{NAME_PATTERN}\Z",
    "Use 1-128 letters, digits, '_', '.' or '-'.",
)

MAX_PROPERTY_KEY = 256
MAX_PROPERTY_VALUE = 64 * 1024


def validate_properties(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError("Properties must be a map of string keys to string values.")
    problems = []
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            problems.append("keys must be non-empty strings")
        elif len(key) > MAX_PROPERTY_KEY:
            problems.append(f"key {key[:40]!r}… is longer than {MAX_PROPERTY_KEY} characters")
        elif not isinstance(item, str):
            problems.append(f"{key!r} must be a string, not {type(item).__name__}")
        elif len(item) > MAX_PROPERTY_VALUE:
            problems.append(f"{key!r} is longer than {MAX_PROPERTY_VALUE} characters")
    if problems:
        raise ValidationError("; ".join(problems))
    # Who may set which key, allowed class paths, secrets only as ENC(...), control characters
    # (the pipeline's property schema; docs/security.md).
    problems.extend(user_property_problems(value, looks_encrypted, secrets=False))
    # Encrypted values: ENC(...) form and encrypt.wrapped.key (keys app, docs/keys.md).
    problems.extend(encrypted_property_problems(value))
    if problems:
        raise ValidationError("; ".join(problems))


def validate_destinations(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError("Destinations must be a list of data node names.")
    for item in value:
        validate_name(item)
    if len(set(value)) != len(value):
        raise ValidationError("A destination is listed twice.")
