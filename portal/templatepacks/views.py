"""Template pack pages. Thin: access via accounts.access, as the API asks it
(a pack the user cannot see is 404; a form to change a pack they only read is
403 before it is shown), and changes via services (which re-check edit rights)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from portal.accounts import access
from portal.accounts.requests import AuthenticatedRequest
from portal.templatepacks import access_requests, services, versions
from portal.templatepacks.acl import acl_entries
from portal.templatepacks.forms import AclForm, ArchiveForm, PackCreateForm, TemplateForm
from portal.templatepacks.models import JobTemplate, PackAuditEvent, PackVersion, TemplatePack

HISTORY_ON_DETAIL = 10


def _pack(request: HttpRequest, name: str, action: str = access.VIEW) -> TemplatePack:
    """The pack: 404 if the user cannot see it, 403 (as the API's services
    answer) if the page changes it and they only read it."""
    denied = f"Only owners of {name} may change it."
    return access.get_allowed(TemplatePack.objects.all(), request.user, action, denied=denied, name=name)


def _to_detail(pack: TemplatePack) -> HttpResponse:
    return redirect("templatepacks:detail", name=pack.name)


@login_required
def pack_list(request: HttpRequest) -> HttpResponse:
    packs = TemplatePack.objects.restrict(request.user).select_related("current_version", "created_by")
    # Packs the user cannot read are listed by name with whom to ask, so a
    # new user finds the template they were told about and can request it.
    others = TemplatePack.objects.exclude(pk__in=packs.values("pk")).prefetch_related(
        "acl__user", "acl__group"
    )
    pending = access_requests.pending_for(request.user)
    closed = [
        {"pack": pack, "owners": access_requests.owners(pack), "requested": pack.pk in pending}
        for pack in others
    ]
    return render(request, "templatepacks/pack_list.html", {"packs": packs, "closed": closed})


@login_required
@require_POST
def pack_request_access(request: HttpRequest, name: str) -> HttpResponse:
    pack = get_object_or_404(TemplatePack, name=name)
    try:
        access_requests.request_access(pack, user=request.user, message=request.POST.get("message", ""))
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(
            request, f"Access to {pack.name} requested; its owners will see it on the pack's page."
        )
    return redirect("templatepacks:list")


@login_required
@require_POST
def pack_answer_request(request: HttpRequest, name: str, request_id: int) -> HttpResponse:
    pack = _pack(request, name)
    grant = request.POST.get("decision") == "grant"
    try:
        asked = access_requests.decide(pack, request_id, user=request.user, grant=grant, request=request)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        who = asked.requested_by.username
        messages.success(
            request, f"{who} can now read {pack.name}." if grant else f"Declined {who}'s request."
        )
    return _to_detail(pack)


@login_required
@require_http_methods(["GET", "POST"])
def pack_create(request: HttpRequest) -> HttpResponse:
    form = PackCreateForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            pack = services.create_pack(user=request.user, request=request, **form.cleaned_data)
        except ValidationError as error:
            form.add_service_errors(error)
        except services.PackExists as error:
            form.add_error("name", str(error))
        else:
            messages.success(request, f"Template pack {pack.name} created.")
            return _to_detail(pack)
    status = 400 if request.method == "POST" else 200
    return render(request, "templatepacks/pack_form.html", {"form": form}, status=status)


@login_required
def pack_detail(request: HttpRequest, name: str) -> HttpResponse:
    pack = _pack(request, name)
    can_edit = access.can(request.user, access.CHANGE, pack)
    entries = acl_entries(pack)
    context = {
        "pack": pack,
        "can_edit": can_edit,
        "templates": JobTemplate.objects.filter(version_id=pack.current_version_id).only("path"),
        "versions": pack.versions.select_related("created_by"),
        "acl": entries,
        "acl_form": AclForm(initial=AclForm.initial_for(entries)) if can_edit else None,
        "events": _history(pack)[:HISTORY_ON_DETAIL],
        "access_requests": access_requests.open_requests(pack) if can_edit else None,
    }
    return render(request, "templatepacks/pack_detail.html", context)


def _history(pack: TemplatePack) -> QuerySet[PackAuditEvent]:
    return PackAuditEvent.objects.filter(pack_name=pack.name).select_related("actor", "on_behalf_of")


@login_required
@vary_on_headers("HX-Request")
def pack_history(request: AuthenticatedRequest, name: str) -> HttpResponse:
    pack = _pack(request, name)
    context = {"pack": pack, "events": _history(pack)}
    if request.htmx:
        return render(request, "templatepacks/partials/history.html", context)
    return render(request, "templatepacks/pack_history.html", context)


def _version(pack: TemplatePack, number: int) -> PackVersion:
    return get_object_or_404(PackVersion.objects.select_related("created_by"), pack=pack, number=number)


@login_required
def pack_version(request: HttpRequest, name: str, number: int) -> HttpResponse:
    """One version as it was: its templates (each readable as of then) and
    a form to compare it with any other."""
    pack = _pack(request, name)
    version = _version(pack, number)
    context = {
        "pack": pack,
        "version": version,
        "templates": JobTemplate.objects.filter(version=version).only("path").order_by("path"),
        "versions": versions.versions_of(pack),
        "can_edit": access.can(request.user, access.CHANGE, pack),
    }
    return render(request, "templatepacks/pack_version.html", context)


@login_required
def pack_compare(request: HttpRequest, name: str) -> HttpResponse:
    """`?from=N&to=M`: the templates added, removed and changed between any
    two versions, with their unified diff."""
    pack = _pack(request, name)
    all_versions = versions.versions_of(pack)
    numbers = {"from": request.GET.get("from", ""), "to": request.GET.get("to", "")}
    bad = [
        f"“{key}” must be a version number, got {value!r}."
        for key, value in numbers.items()
        if not value.isdigit()
    ]
    context = {"pack": pack, "versions": all_versions, "chosen": numbers, "errors": bad}
    if bad:
        return render(request, "templatepacks/pack_compare.html", context, status=400)
    old, new = _version(pack, int(numbers["from"])), _version(pack, int(numbers["to"]))
    context["comparison"] = versions.compare(old, new)
    return render(request, "templatepacks/pack_compare.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def pack_upload(request: HttpRequest, name: str) -> HttpResponse:
    pack = _pack(request, name, access.CHANGE)
    form = ArchiveForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            version = services.upload_version(
                pack, user=request.user, request=request, upload=form.cleaned_data["archive"]
            )
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            messages.success(request, f"Uploaded as version {version.number}.")
            return _to_detail(pack)
    status = 400 if request.method == "POST" else 200
    return render(request, "templatepacks/upload_form.html", {"form": form, "pack": pack}, status=status)


@login_required
def template_detail(request: HttpRequest, name: str, path: str) -> HttpResponse:
    pack = _pack(request, name)
    version = request.GET.get("version")
    templates = JobTemplate.objects.select_related("version").filter(version__pack=pack, path=path)
    if version and version.isdigit():
        template = get_object_or_404(templates, version__number=int(version))
    else:
        template = get_object_or_404(templates, version_id=pack.current_version_id)
    context = {"pack": pack, "template": template, "can_edit": access.can(request.user, access.CHANGE, pack)}
    return render(request, "templatepacks/template_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def template_edit(request: HttpRequest, name: str, path: str | None = None) -> HttpResponse:
    pack = _pack(request, name, access.CHANGE)
    initial = {}
    if path is not None:
        current = get_object_or_404(JobTemplate, version_id=pack.current_version_id, path=path)
        initial = {"path": current.path, "text": current.text}
    form = TemplateForm(request.POST or None, initial=initial)
    if path is not None:
        form.fields["path"].disabled = True
    if request.method == "POST" and form.is_valid():
        try:
            version = services.save_template(
                pack,
                user=request.user,
                request=request,
                path=form.cleaned_data["path"],
                text=form.cleaned_data["text"],
            )
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            messages.success(request, f"Saved as version {version.number}.")
            return _to_detail(pack)
    status = 400 if request.method == "POST" else 200
    return render(
        request, "templatepacks/template_form.html", {"form": form, "pack": pack, "path": path}, status=status
    )


@login_required
@require_POST
def pack_acl(request: HttpRequest, name: str) -> HttpResponse:
    pack = _pack(request, name, access.CHANGE)
    form = AclForm(request.POST)
    if form.is_valid():
        entries = form.entries()
        if form.is_valid():
            try:
                services.set_acl(pack, user=request.user, entries=entries, request=request)
            except ValidationError as error:
                form.add_service_errors(error)
            else:
                messages.success(request, "Access list saved.")
                return _to_detail(pack)
    return render(request, "templatepacks/acl_form.html", {"form": form, "pack": pack}, status=400)


@login_required
@require_POST
def pack_rollback(request: HttpRequest, name: str, number: int) -> HttpResponse:
    pack = _pack(request, name)
    try:
        version = services.rollback(pack, user=request.user, request=request, number=number)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(
            request, f"Rolled back: version {version.number} has the templates of version {number}."
        )
    return _to_detail(pack)


@login_required
@require_http_methods(["GET", "POST"])
def pack_delete(request: HttpRequest, name: str) -> HttpResponse:
    pack = _pack(request, name, access.CHANGE)
    if request.method == "POST":
        services.delete_pack(pack, user=request.user, request=request)
        messages.success(request, f"Template pack {name} deleted; its history is kept.")
        return redirect("templatepacks:list")
    return render(request, "templatepacks/pack_confirm_delete.html", {"pack": pack})
