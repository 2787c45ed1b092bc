"""Rest.li's error responses: the status, `X-RestLi-Error-Response: true` and
the ErrorResponse record (`status`, `message`, `exceptionClass`), which
Gobblin's clients turn into a RestLiResponseException."""

from __future__ import annotations

import json

from django.http import HttpResponse

PROTOCOL_VERSION = "2.0.0"
RESOURCE_NAMES = ("flowconfigs", "flowconfigsV2", "flowstatuses", "flowexecutions")


def is_restli_path(path: str) -> bool:
    return any(path == f"/{name}" or path.startswith(f"/{name}/") for name in RESOURCE_NAMES)


EXCEPTION_CLASS = "com.linkedin.restli.server.RestLiServiceException"


class RestLiError(Exception):
    """An answer other than success; `message` is safe to show the caller."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


class ValidationFailure(RestLiError):
    """Input that breaks the record's schema: 422, worded like Rest.li's
    validation filter (`ERROR :: /path :: reason`), one line per problem."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        lines = "".join(f"ERROR :: {path} :: {reason}\n" for path, reason in problems)
        super().__init__(422, f"Input field validation failure, reason: {lines}")


def error_response(status: int, message: str) -> HttpResponse:
    body = {"status": status, "message": message, "exceptionClass": EXCEPTION_CLASS}
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    response["X-RestLi-Error-Response"] = "true"
    response["X-RestLi-Protocol-Version"] = PROTOCOL_VERSION
    return response
