"""Whether a name says it holds a secret: one rule for every surface that asks (the save's
refusal of a clear value, the worker's decryption, the masking on pages, in the API, in the
versions' diff, in error text and in logs), so none masks what another shows in clear.

The last word decides, as in English: ``writer.jdbc.password``, ``s3.access.key``, ``db.pass``,
``oauth.token``, ``spark.ssl.trustStorePassword`` and a connection URL's ``sslpassword`` name
secrets; ``password.encoding`` and ``passwordCharacterEncoding`` (how one is encoded),
``token.endpoint`` (where one is asked for) and ``fork.one.pass`` (a count before ``pass`` makes
it a pass over the data) do not. Words are split at dots, dashes, underscores, spaces and
camelCase; a word ending in a secret's name counts (vendors glue words: ``sslpassword``,
``apikey``). Numbers say which one (``password1``, a branch's ``password.1``) and are skipped.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

# A template lists the attributes it wants given as ENC(...) here; they are secrets too.
ENCRYPTED_ATTRIBUTES_KEY = "gobblin.template.encrypted_attributes"

SECRET_ENDINGS = (
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "secrets",
    "token",
    "credential",
    "credentials",
    "privatekey",
    "apikey",
    "accesskey",
    "secretkey",
)
# Two last words that name a secret together: ``s3.access.key``, ``my.api.key``.
SECRET_PAIRS = frozenset({("private", "key"), ("api", "key"), ("access", "key"), ("secret", "key")})

# A ``pass`` after one of these is a pass over the data, not a password.
COUNT_WORDS = frozenset({"one", "single", "two", "multi", "first", "second", "each", "every", "last"})

_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_DIGITS = re.compile(r"\d+\Z")


def words(name: str) -> list[str]:
    """``spark.ssl.trustStorePassword2`` -> ``['spark', 'ssl', 'trust', 'store', 'password']``."""
    found = (_DIGITS.sub("", part.lower()) for part in _SPLIT.split(name))
    return [word for word in found if word]


@functools.lru_cache(maxsize=8192)  # pure; a recompile batch asks it of the same keys per flow
def names_secret(name: str) -> bool:
    """True when `name` (a property key or a connection parameter) says its value is a secret."""
    found = words(name)
    if not found:
        return False
    last, before = found[-1], found[-2] if len(found) > 1 else ""
    if last.endswith(SECRET_ENDINGS) or (before, last) in SECRET_PAIRS:
        return True
    return last == "pass" and before not in COUNT_WORDS


def listed(value: object) -> list[str]:
    """A comma list property (``a, b,c``) as names."""
    return [item.strip() for item in str(value or "").split(",") if item.strip()]


def secret_keys(properties: Mapping[str, object], also: Iterable[str] = ()) -> set[str]:
    """The keys of `properties` whose values no page, message or log may show: those named like
    a secret, those a template declares encrypted (``gobblin.template.encrypted_attributes``) and
    `also` (the keys the caller knows were ``ENC(...)`` before it decrypted them)."""
    declared = set(listed(properties.get(ENCRYPTED_ATTRIBUTES_KEY))) | set(also)
    return {key for key in properties if isinstance(key, str) and (key in declared or names_secret(key))}
