"""What every Rest.li resource shares: telling the Rest.li method from the
HTTP method and `X-RestLi-Method`, reading complex keys and finder
parameters from the raw URL, JSON bodies, paging, and answering every
failure as a Rest.li error instead of DRF's or Django's shapes.

Authentication and access are the portal's own (DRF's authentication
classes, `FlowConfig.objects.restrict`, `orchestration.status`), exactly as
under `/api/`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpResponse, JsonResponse
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.views import APIView

from portal.quotas.services import QuotaExceeded
from portal.restli import protocol
from portal.restli.errors import PROTOCOL_VERSION, RestLiError, error_response

MAX_PAGE = 1000
# Rest.li methods each HTTP method may carry (X-RestLi-Method); the first is the default.
_METHODS = {
    ("GET", False): ("get_all", "finder"),
    ("GET", True): ("get",),
    ("POST", False): ("create", "action"),
    ("POST", True): ("partial_update", "action"),
    ("PUT", True): ("update",),
    ("DELETE", True): ("delete",),
}


def django_messages(error: DjangoValidationError) -> str:
    if hasattr(error, "error_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in error.message_dict.items())
    return " ".join(error.messages)


class RestLiResource(APIView):
    """One Rest.li collection resource. Subclasses define the handlers they
    support (`get`, `create`, `finder_<name>`, `action_<name>`, …)."""

    resource = ""
    finders: tuple[str, ...] = ()
    entity_actions: tuple[str, ...] = ()
    swagger_schema = None
    schema = None  # not part of the OpenAPI document of /api/

    # --- dispatch ---------------------------------------------------------------------

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        version = request.headers.get("X-RestLi-Protocol-Version", PROTOCOL_VERSION)
        if not version.startswith("2."):
            raise RestLiError(
                400, f"Rest.li protocol {version} is not supported; send X-RestLi-Protocol-Version: 2.0.0."
            )
        super().initial(request, *args, **kwargs)

    def _dispatch(self, request: Request, key: str | None = None) -> HttpResponse:  # noqa: C901
        has_key = key is not None
        allowed = _METHODS.get((request.method or "", has_key))
        if allowed is None:
            raise RestLiError(
                405,
                f"{request.method} is not a Rest.li method of /{self.resource}{'/{id}' if has_key else ''}.",
            )
        method = (request.headers.get("X-RestLi-Method") or "").lower()
        query = self.query()
        if not method:
            if "action" in query and request.method == "POST":
                method = "action"
            elif "q" in query and request.method == "GET":
                method = "finder"
            else:
                method = allowed[0]
        if method not in allowed:
            raise RestLiError(
                400,
                f"X-RestLi-Method {method!r} does not fit {request.method} /{self.resource}{'/{id}' if has_key else ''}.",
            )
        if method == "finder":
            name = query.get("q")
            if name not in self.finders:
                raise RestLiError(400, f"/{self.resource} has no finder {name!r}.")
            return getattr(self, f"finder_{name}")(request, query)
        if method == "action":
            name = query.get("action")
            if key is None or name not in self.entity_actions:
                raise RestLiError(
                    400, f"/{self.resource} has no {'entity' if has_key else 'collection'} action {name!r}."
                )
            return getattr(self, f"action_{name}")(request, self.raw_key(key))
        handler = getattr(self, f"restli_{method}", None)
        if handler is None:
            raise RestLiError(405, f"/{self.resource} does not support the Rest.li method {method!r}.")
        return handler(request, self.raw_key(key)) if key is not None else handler(request)

    def get(self, request: Request, key: str | None = None) -> HttpResponse:
        return self._dispatch(request, key)

    post = put = delete = get

    # --- reading the request ----------------------------------------------------------------

    def raw_path(self) -> str:
        """The path as sent: gunicorn gives it in RAW_URI (uWSGI in REQUEST_URI).
        Without either, the decoded path serves: keys never hold the
        characters the decoding could confuse (flow names are [A-Za-z0-9_.-])."""
        meta = self.request.META
        raw = meta.get("RAW_URI") or meta.get("REQUEST_URI")
        return urlsplit(raw).path if raw else self.request.path

    def raw_key(self, key: str) -> str:
        path = self.raw_path()
        marker = f"/{self.resource}/"
        return path[path.index(marker) + len(marker) :] if marker in path else key

    def query(self) -> dict[str, Any]:
        if not hasattr(self, "_query"):
            try:
                self._query = protocol.parse_query(self.request.META.get("QUERY_STRING", ""))
            except protocol.RestLiSyntaxError as error:
                raise RestLiError(400, f"Invalid query parameter: {error}") from None
        return self._query

    def key(self, text: str) -> dict[str, Any]:
        try:
            key = protocol.parse(text)
        except protocol.RestLiSyntaxError as error:
            raise RestLiError(400, f"Invalid key {text[:200]!r}: {error}") from None
        if not isinstance(key, dict):
            raise RestLiError(
                400, f"Invalid key {text[:200]!r}: /{self.resource} has complex keys, (field:value,…)."
            )
        return key

    def body(self) -> Any:
        """The JSON body, whatever Content-Type the client set (curl's
        `--data` says form-urlencoded; the design document's examples use it)."""
        raw = self.request.body
        if not raw.strip():
            raise RestLiError(400, "The request has no body; send the record as JSON.")
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, ValueError) as error:
            raise RestLiError(400, f"The body is not JSON: {error}") from None

    def paging(self) -> tuple[int, int]:
        query = self.query()
        try:
            start = int(query.get("start", 0))
            count = int(query.get("count", settings.REST_FRAMEWORK["PAGE_SIZE"]))
        except (TypeError, ValueError):
            raise RestLiError(400, "start and count must be whole numbers.") from None
        if start < 0 or not 0 <= count <= MAX_PAGE:
            raise RestLiError(400, f"start must be 0 or more and count 0 to {MAX_PAGE}.")
        return start, count

    # --- answers --------------------------------------------------------------------------

    def collection(self, rows: list[Any], start: int, count: int, render) -> JsonResponse:
        """Rest.li's CollectionResponse: `elements` and `paging` (with a `next`
        link when more rows follow; `rows` holds up to count + 1)."""
        links = []
        if len(rows) > count:
            # The request's own raw parameters (Rest.li-encoded values stay as sent).
            kept = [
                pair
                for pair in self.request.META.get("QUERY_STRING", "").split("&")
                if pair and pair.partition("=")[0] not in ("start", "count")
            ]
            query = "&".join([*kept, f"start={start + count}", f"count={count}"])
            links.append({"rel": "next", "href": f"/{self.resource}?{query}", "type": "application/json"})
        return JsonResponse(
            {
                "elements": [render(row) for row in rows[:count]],
                "paging": {"start": start, "count": count, "links": links},
            }
        )

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["X-RestLi-Protocol-Version"] = PROTOCOL_VERSION
        return response

    # DRF takes any HttpResponse back (finalize_response checks for HttpResponseBase); Rest.li's
    # errors are plain JSON responses, not DRF Responses.
    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]  # see above
        if isinstance(exc, RestLiError):
            return error_response(exc.status, exc.message)
        if isinstance(exc, Http404):
            return error_response(404, str(exc) or "Not found.")
        if isinstance(exc, DjangoPermissionDenied):
            return error_response(403, str(exc) or "You may not do this.")
        if isinstance(exc, DjangoValidationError):
            return error_response(400, django_messages(exc))
        if isinstance(exc, RequestDataTooBig):
            return error_response(413, "The request body is larger than the server accepts.")
        if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
            response = error_response(401, str(exc.detail))
            header = self.get_authenticate_header(self.request)
            if header:
                response["WWW-Authenticate"] = header
            return response
        if isinstance(exc, QuotaExceeded):  # Gobblin's QuotaExceededException: 503 naming the quota
            return error_response(exc.status_code, exc.message)
        if isinstance(exc, exceptions.APIException):
            return error_response(exc.status_code, str(exc.detail))
        raise exc
