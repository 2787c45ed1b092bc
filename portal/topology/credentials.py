"""Secrets written inside a data node's connection values: `user:pass@` in a
URL, `password=` (and the like) in its query, `;`-parameters or a JAAS line.
A key named like a secret must already be ENC(...) (validators.py), but a
JDBC URL carrying `?password=` slipped past that and was shown to every
signed-in user. Saving refuses them (validators.validate_connection_properties);
`masked` hides them, and a node's secret-named values, wherever a node written
before that rule is shown to someone who is not its owner (nodefields.shown_properties).
Pure text rules: no Django, no models, so the validators can use them."""

from __future__ import annotations

import re

from portal.crypto.secretnames import names_secret

MASK = "********"

# scheme://userinfo@ — userinfo runs to the last '@' before the path, as urllib.parse splits it.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#\s]*)@")
# name=value after the start, '?', '&', ';', ',' or whitespace; a quoted value keeps its quotes.
_PARAM = re.compile(
    r"(?P<head>(?:^|(?<=[?&;,\s]))(?P<name>[A-Za-z][A-Za-z0-9_.\-]*)\s*=\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^&;,\s#\"']*)"
)
_ENCRYPTED = re.compile(r"^ENC\(.+\)\Z", re.S)


def _unquoted(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'" else value


def _clear(secret: str) -> bool:
    """A secret value in the clear: not empty, not already ENC(...)."""
    secret = _unquoted(secret).strip()
    return bool(secret) and not _ENCRYPTED.match(secret)


def secrets_in(value: str) -> list[str]:
    """What carries a clear secret in the value, as shown in a refusal
    (`user:password@`, `password=`); empty when nothing does."""
    found = []
    for match in _PARAM.finditer(value):
        if names_secret(match["name"]) and _clear(match["value"]):
            found.append(f"{match['name']}=")
    for match in _USERINFO.finditer(_mask_params(value)):
        _user, colon, password = match["userinfo"].partition(":")
        if colon and _clear(password):
            found.append("user:password@")
    return list(dict.fromkeys(found))


def _mask_params(value: str) -> str:
    def hide(match: re.Match[str]) -> str:
        if not (names_secret(match["name"]) and _clear(match["value"])):
            return match[0]
        quote = match["value"][0] if _unquoted(match["value"]) != match["value"] else ""
        return f"{match['head']}{quote}{MASK}{quote}"

    return _PARAM.sub(hide, value)


# The keys and parameters naming the account a connection logs in as (compared without case).
_ACCOUNT_NAMES = {"user", "username", "user.name", "login"}


def names_account(key: str) -> bool:
    """A property or parameter naming a login: `user`, `sasl.username`, `source.conn.username`."""
    name = key.lower()
    return name in _ACCOUNT_NAMES or any(name.endswith("." + n) for n in _ACCOUNT_NAMES)


def _mask_accounts(value: str) -> str:
    def hide(match: re.Match[str]) -> str:
        if not names_account(match["name"]) or not _unquoted(match["value"]).strip():
            return match[0]
        quote = match["value"][0] if _unquoted(match["value"]) != match["value"] else ""
        return f"{match['head']}{quote}{MASK}{quote}"

    return _PARAM.sub(hide, value)


def masked(value: str, *, accounts: bool = False) -> str:
    """The value with every clear secret in it replaced by ********: parameters
    first, so a password holding '@' cannot pass for the end of a user part.
    With `accounts`, the login names too (`user=`, a URL's user part), as a
    node is shown to someone who is not its owner."""

    def hide(match: re.Match[str]) -> str:
        user, colon, password = match["userinfo"].partition(":")
        if accounts:
            return f"{match['head']}{MASK}@"
        if not (colon and _clear(password)):
            return match[0]
        return f"{match['head']}{user}:{MASK}@"

    text = _mask_params(value)
    return _USERINFO.sub(hide, _mask_accounts(text) if accounts else text)
