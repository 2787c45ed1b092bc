"""The Spark UI of a running job, reached through the portal.

A worker's Spark UI has no login, listens only where the worker's session put it (loopback or the
worker's own address, `portal.pipeline.spark.session.ui_host`), and belongs to the worker's long-lived
application, so it shows every job that worker ran. The portal lets staff read it through a proxy
view on the web node, for one job, while that job runs (`sparkui_views`). The proxy must never
become a way to reach other addresses from the web node, so:

* it reaches only the address the worker itself recorded for the job (`JobExecution.spark_ui_url`),
  an http(s) origin without credentials, path or query, and only while the job is RUNNING; nothing
  in the request names the host, the port or the scheme;
* the path it asks for is a plain path inside that UI: no empty, ``.`` or ``..`` segment, no
  backslash or control character, no ``scheme:`` first segment, and never Spark's kill handlers
  (Spark answers them on GET too; a job is killed from the execution page);
* it sends GET with no header of the reader's (no cookie, no authorization), only
  ``X-Forwarded-Context`` naming the proxy's own path, from which Spark writes its links (Spark's
  `UIUtils.uiRoot`), so no page is rewritten; it follows no redirect and uses no HTTP proxy;
* it returns the body, the status and a few headers (type, Spark's own Content-Security-Policy,
  framing, caching, download name), never Set-Cookie; a redirect inside the UI comes back as one
  under the proxy's path, any other is refused.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from portal.orchestration.models import JobExecution, JobStatus

TIMEOUT_SECONDS = 30  # Spark's REST API takes seconds to answer its first call
MAX_BYTES = 32 * 1024 * 1024  # Spark's biggest pages (a stage of many tasks) stay well below
PASSED_HEADERS = (
    "Content-Type",
    "Content-Security-Policy",
    "X-Frame-Options",
    "Content-Disposition",
    "Last-Modified",
)
# When the UI sends no policy of its own (an older Spark): no script but the UI's files.
FALLBACK_POLICY = (
    "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'"
)
REFUSED_SEGMENTS = {"", ".", ".."}
KILL = "kill"
_QUERY = re.compile(r"[\x21-\x7e]*")  # what a browser sends, already percent-encoded
_SAFE_PATH = "/-._~!$&'()*+,;=:@"


class RefusedPath(ValueError):
    """A path the proxy will not ask the Spark UI for (the reader's 400)."""


class UnreachableUI(Exception):
    """The recorded UI did not answer, or answered what the proxy does not pass on (a 502)."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    netloc: str

    def url(self, path: str, query: str = "") -> str:
        return urlunsplit((self.scheme, self.netloc, path, query, ""))


@dataclass
class Proxied:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def recorded_ui(job: JobExecution) -> Origin | None:
    """The origin of the UI the job's worker recorded, while the job runs and if it is a plain
    http(s) origin (no credentials, path, query or fragment); None otherwise."""
    if job.status != JobStatus.RUNNING or not job.spark_ui_url:
        return None
    try:
        parts = urlsplit(job.spark_ui_url)
        port = parts.port  # raises on a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        return None
    if parts.path not in ("", "/") or (port is not None and not 0 < port < 65536):
        return None
    return Origin(parts.scheme, parts.netloc)


def ui_path(path: str) -> str:
    """The path to ask the UI for, from what follows the proxy's address (Django decoded it, so
    an encoded ``..%2f`` arrives as ``../``); RefusedPath says why not."""
    if "\\" in path or any(ord(char) < 0x20 or ord(char) == 0x7F for char in path):
        raise RefusedPath("The Spark UI path may not hold a backslash or a control character.")
    segments = path.split("/") if path else []
    if segments and ":" in segments[0]:
        raise RefusedPath("The Spark UI path must be a path inside the UI, not an address of its own.")
    inner = segments[:-1] if segments and segments[-1] == "" else segments  # a trailing slash is fine
    if any(segment in REFUSED_SEGMENTS for segment in inner):
        raise RefusedPath("The Spark UI path may not hold an empty, '.' or '..' segment.")
    if KILL in segments:
        raise RefusedPath("The proxy only reads the Spark UI: kill the job from its execution page instead.")
    return "/" + quote(path, safe=_SAFE_PATH)


def ui_query(query: str) -> str:
    if not _QUERY.fullmatch(query):
        raise RefusedPath("The Spark UI query must be percent-encoded, without spaces.")
    return query


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the redirect comes back to the proxy as it is (rewritten, or refused)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def fetch(origin: Origin, path: str, query: str, context: str) -> Proxied:
    """GET `path`?`query` from the UI at `origin`, Spark told to write its links under `context`
    (the proxy's own path for this job)."""
    target = origin.url(path, query)
    if urlsplit(target).netloc != origin.netloc:  # ui_path makes this impossible; kept as the rule
        raise RefusedPath("The Spark UI path left the UI.")
    request = urllib.request.Request(  # noqa: S310 - an http(s) origin, checked by recorded_ui
        target,
        method="GET",
        headers={"X-Forwarded-Context": context, "User-Agent": "flowport-spark-ui-proxy"},
    )
    try:
        try:
            response = _OPENER.open(request, timeout=TIMEOUT_SECONDS)
        except urllib.error.HTTPError as answered:  # 3xx, 4xx, 5xx: Spark's answer all the same
            response = answered
        with response:
            status = response.status if response.status is not None else response.getcode()
            body = response.read(MAX_BYTES + 1)
            headers = response.headers
    except (urllib.error.URLError, HTTPException, OSError) as error:
        reason = getattr(error, "reason", error)
        raise UnreachableUI(
            f"The job's Spark UI did not answer ({reason}); its worker may have stopped."
        ) from error
    if len(body) > MAX_BYTES:
        raise UnreachableUI(f"The Spark UI's page is larger than {MAX_BYTES // (1024 * 1024)} MiB.")
    passed = {name: headers[name] for name in PASSED_HEADERS if headers.get(name)}
    passed.setdefault("Content-Type", "application/octet-stream")
    passed.setdefault("Content-Security-Policy", FALLBACK_POLICY)
    if 300 <= status < 400 and headers.get("Location"):
        passed["Location"] = moved(origin, target, headers["Location"], context)
    return Proxied(status, body, passed)


def moved(origin: Origin, target: str, location: str, context: str) -> str:
    """A redirect of the UI as an address under the proxy's path; UnreachableUI when it leads
    anywhere but the UI itself."""
    absolute = urlsplit(urljoin(target, location))
    if (absolute.scheme, absolute.netloc) != (origin.scheme, origin.netloc):
        raise UnreachableUI("The Spark UI redirected outside itself; the proxy does not follow it.")
    path = absolute.path if absolute.path.startswith(context + "/") else context + absolute.path
    return urlunsplit(("", "", path, absolute.query, ""))
