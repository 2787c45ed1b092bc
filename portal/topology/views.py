"""Topology pages. Every signed-in user can look; only staff change
anything. Thin: forms parse, topology.services validates and saves."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from portal.accounts import access
from portal.accounts.requests import AuthenticatedRequest
from portal.topology import access as node_access
from portal.topology import connections, picker, services
from portal.topology.forms import CapabilityForm, DataNodeForm, SpecExecutorForm
from portal.topology.models import Capability, DataNode, SpecExecutor
from portal.topology.svg import topology_svg

CAPABILITIES = Prefetch("capabilities", queryset=Capability.objects.select_related("source", "destination"))


# Signed-in non-staff get 403 (the topology is public to them, so a 404 would
# hide nothing); anonymous users go to the login page.
staff_required = access.staff_required("Only staff can change the topology.")


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    context = {
        "executors": SpecExecutor.objects.prefetch_related(CAPABILITIES),
        "nodes": DataNode.objects.all(),
        "graph": topology_svg(),
    }
    return render(request, "topology/overview.html", context)


def _capability_context(
    request: HttpRequest, executor: SpecExecutor, form: CapabilityForm | None = None
) -> dict:
    return {
        "executor": executor,
        "capabilities": executor.capabilities.select_related("source", "destination"),
        "capability_form": form or CapabilityForm(),
    }


@login_required
def executor_detail(request: HttpRequest, name: str) -> HttpResponse:
    executor = get_object_or_404(SpecExecutor, name=name)
    return render(request, "topology/executor_detail.html", _capability_context(request, executor))


def _form_page(request: HttpRequest, template: str, form, instance, save: Callable) -> HttpResponse:
    if request.method == "POST" and form.is_valid():
        try:
            saved = save(form)
        except ValidationError as error:
            form.add_service_errors(error)
        else:
            messages.success(request, f"{saved} saved.")
            if isinstance(saved, SpecExecutor):
                return redirect("topology:executor", name=saved.name)
            return redirect("topology:overview")
    status = 400 if request.method == "POST" else 200
    return render(request, template, {"form": form, "object": instance}, status=status)


@staff_required
@require_http_methods(["GET", "POST"])
def executor_create(request: HttpRequest) -> HttpResponse:
    form = SpecExecutorForm(request.POST or None, initial={"spark_master": "local[*]", "cost": 100})
    return _form_page(
        request,
        "topology/executor_form.html",
        form,
        None,
        lambda f: services.create_executor(f.executor_data()),
    )


@staff_required
@require_http_methods(["GET", "POST"])
def executor_edit(request: HttpRequest, name: str) -> HttpResponse:
    executor = get_object_or_404(SpecExecutor, name=name)
    form = SpecExecutorForm(request.POST or None, instance=executor)
    return _form_page(
        request,
        "topology/executor_form.html",
        form,
        executor,
        lambda f: services.update_executor(executor, f.executor_data()),
    )


@staff_required
@require_POST
def executor_toggle(request: HttpRequest, name: str) -> HttpResponse:
    executor = get_object_or_404(SpecExecutor, name=name)
    services.set_enabled(executor, not executor.enabled)
    messages.success(request, f"Executor {executor} {'enabled' if executor.enabled else 'disabled'}.")
    return redirect("topology:executor", name=executor.name)


@staff_required
@require_http_methods(["GET", "POST"])
def executor_delete(request: HttpRequest, name: str) -> HttpResponse:
    executor = get_object_or_404(SpecExecutor, name=name)
    if request.method == "POST":
        services.delete_executor(executor)
        messages.success(request, f"Executor {name} deleted.")
        return redirect("topology:overview")
    return render(request, "topology/confirm_delete.html", {"object": executor, "noun": "executor"})


@staff_required
@require_POST
@vary_on_headers("HX-Request")
def capability_add(request: AuthenticatedRequest, name: str) -> HttpResponse:
    executor = get_object_or_404(SpecExecutor, name=name)
    form = CapabilityForm(request.POST)
    status = 200
    if form.is_valid():
        try:
            services.add_capability(
                executor, form.cleaned_data["source"].name, form.cleaned_data["destination"].name
            )
        except ValidationError as error:
            form.add_error(None, [m for ms in error.message_dict.values() for m in ms])
    if form.errors:
        status = 400
    elif not request.htmx:
        return redirect("topology:executor", name=executor.name)
    else:
        form = CapabilityForm()
    if request.htmx:
        context = _capability_context(request, executor, form)
        return render(request, "topology/partials/capabilities.html", context, status=status)
    context = _capability_context(request, executor, form)
    return render(request, "topology/executor_detail.html", context, status=status)


@staff_required
@require_POST
@vary_on_headers("HX-Request")
def capability_remove(request: AuthenticatedRequest, name: str, pk: int) -> HttpResponse:
    executor = get_object_or_404(SpecExecutor, name=name)
    services.remove_capability(get_object_or_404(Capability, pk=pk, executor=executor))
    if request.htmx:
        return render(request, "topology/partials/capabilities.html", _capability_context(request, executor))
    return redirect("topology:executor", name=executor.name)


def _datanode_fields(request: HttpRequest, node: DataNode | None) -> HttpResponse:
    """The form again for the kind just chosen (htmx swaps its fields in),
    keeping what was typed; nothing is validated or saved."""
    form = DataNodeForm(initial=request.POST.dict(), instance=node)
    return render(request, "topology/datanode_form.html", {"form": form, "object": node})


@staff_required
@require_http_methods(["GET", "POST"])
def datanode_create(request: HttpRequest) -> HttpResponse:
    if request.GET.get("part") == "fields":
        return _datanode_fields(request, None)
    form = DataNodeForm(request.POST or None)
    return _form_page(
        request, "topology/datanode_form.html", form, None, lambda f: services.create_data_node(f.node_data())
    )


@staff_required
@require_http_methods(["GET", "POST"])
def datanode_edit(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(DataNode, name=name)
    if request.GET.get("part") == "fields":
        return _datanode_fields(request, node)
    form = DataNodeForm(request.POST or None, instance=node)
    return _form_page(
        request,
        "topology/datanode_form.html",
        form,
        node,
        lambda f: services.update_data_node(node, f.node_data()),
    )


@staff_required
@require_http_methods(["GET", "POST"])
def datanode_delete(request: HttpRequest, name: str) -> HttpResponse:
    node = get_object_or_404(DataNode, name=name)
    error = None
    if request.method == "POST":
        try:
            services.delete_data_node(node)
        except ValidationError as problem:
            error = " ".join(problem.messages)
        else:
            messages.success(request, f"Data node {name} deleted.")
            return redirect("topology:overview")
    context = {"object": node, "noun": "data node", "error": error}
    return render(request, "topology/confirm_delete.html", context, status=409 if error else 200)


# --- a data node's page: Test connection and discovery ----------------------------------


def _usable_node(request: HttpRequest, name: str) -> DataNode:
    """A node the user holds a grant on (staff: any); otherwise 404, so a
    user learns nothing about what lies behind a node not granted to them."""
    node = get_object_or_404(DataNode, name=name)
    if not (
        node_access.may_use(request.user, name, node_access.READ)
        or node_access.may_use(request.user, name, node_access.WRITE)
    ):
        raise Http404("No such data node.")
    return node


def _typed_credentials(request: HttpRequest) -> dict[str, str]:
    return {
        "user": request.POST.get("test_user", "")[:256],
        "password": request.POST.get("test_password", "")[:1024],
    }


@login_required
@require_GET
def datanode_detail(request: HttpRequest, name: str) -> HttpResponse:
    node = _usable_node(request, name)
    return render(request, "topology/datanode_detail.html", {"node": node})


@login_required
@require_POST
def datanode_test(request: HttpRequest, name: str) -> HttpResponse:
    node = _usable_node(request, name)
    result = connections.test_connection(node, **_typed_credentials(request))
    return render(request, "topology/partials/connection_result.html", {"node": node, "result": result})


@login_required
@require_POST
def datanode_discover(request: HttpRequest, name: str) -> HttpResponse:
    node = _usable_node(request, name)
    found = connections.discover(node, **_typed_credentials(request))
    return render(request, "topology/partials/discovery.html", {"node": node, "found": found})


@login_required
@require_POST
def source_picker(request: HttpRequest) -> HttpResponse:
    """The flow form's picker (htmx, the whole form posted): the source's
    tables or folders; with one chosen, its columns and watermark columns."""
    found = picker.choices(
        request.user, request.POST.get("source", ""), connect_as=picker.connection_user(request.POST)
    )
    chosen = found.find(request.POST.get("pick_dataset", ""))
    context = {"found": found, "chosen": chosen}
    return render(request, "topology/partials/source_picker.html", context)
