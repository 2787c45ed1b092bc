"""Template URIs: `pack://<pack>/<path>.template`, or GaaS's
`FS:///<path>.template` form. The packs own their addresses; flows name them
in `templateUris` (a comma-separated list)."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError

# pack://<pack>/<path>.template, or GaaS's FS:///<path>.template form.
_TEMPLATE_URI = re.compile(
    r"^(?:pack://(?P<pack>[A-Za-z0-9_.-]{1,128})/(?P<path>[^\s,]+\.template)"
    r"|[Ff][Ss]:///(?P<fspath>[^\s,]+\.template))\Z"
)


def split_template_uris(value: str) -> list[str]:
    return [uri.strip() for uri in (value or "").split(",") if uri.strip()]


def parse_template_uri(uri: str) -> tuple[str | None, str]:
    """(pack name or None for FS:/// form, path inside the pack)."""
    match = _TEMPLATE_URI.match(uri)
    if not match or ".." in uri.split("/"):
        raise ValidationError(
            f"{uri!r} is not a template URI; use pack://<pack>/<path>.template or FS:///<path>.template."
        )
    if match["pack"]:
        return match["pack"], match["path"]
    return None, match["fspath"]


def validate_template_uris(value: str) -> None:
    for uri in split_template_uris(value):
        parse_template_uri(uri)
