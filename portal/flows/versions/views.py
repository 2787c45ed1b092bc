"""A flow's versions page: who saved what when, and the diff between any
two versions (`?old=N&new=M`; by default the latest against the one before).
Whoever may see the flow sees its versions; anyone else gets a 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.flows.rules import flow_for
from portal.flows.versions import diffs
from portal.flows.versions import services as versions

SHOWN = 200


def _number(request: HttpRequest, name: str, errors: dict[str, str]) -> int | None:
    text = request.GET.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit() or len(text) > 9:
        errors[name] = f"{name}: a version number (1, 2, …), not {text[:40]!r}."
        return None
    return int(text)


@login_required
@require_GET
def flow_versions(request: HttpRequest, flow_group: str, flow_name: str) -> HttpResponse:
    flow = flow_for(request.user, flow_group, flow_name)
    listed = list(versions.versions_of(flow)[:SHOWN])
    errors: dict[str, str] = {}
    new_number, old_number = _number(request, "new", errors), _number(request, "old", errors)
    by_number = {version.number: version for version in listed}
    for name, number in (("new", new_number), ("old", old_number)):
        if number is not None and number not in by_number:
            found = versions.versions_of(flow).filter(number=number).first()
            if found is None:
                errors[name] = f"{name}: the flow has no version {number}."
            else:
                by_number[number] = found
    comparison = None
    if not errors and listed:
        new = by_number[new_number] if new_number is not None else listed[0]
        if old_number is not None:
            old = by_number[old_number]
        else:
            old = versions.versions_of(flow).filter(number__lt=new.number).first() or new
        comparison = diffs.diff(old, new)
    context = {"flow": flow, "versions": listed, "comparison": comparison, "errors": errors}
    return render(request, "flows/flow_versions.html", context, status=400 if errors else 200)
