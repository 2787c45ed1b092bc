"""Topology pages. Every signed-in user can look, and make data nodes of their
own; staff change everything, a node's owners change their user-made node and
share it (topology.sharing). Thin: forms parse, topology.services and
topology.sharing validate and save."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from portal.accounts import access
from portal.accounts.requests import AuthenticatedRequest
from portal.topology import connections, nodefields, picker, services, sharing
from portal.topology import grants as node_access
from portal.topology.forms import CapabilityForm, DataNodeForm, SpecExecutorForm
from portal.topology.models import Capability, DataNode, DataNodeGrant, SpecExecutor
from portal.topology.svg import topology_svg

CAPABILITIES = Prefetch("capabilities", queryset=Capability.objects.select_related("source", "destination"))


# Signed-in non-staff get 403 (the topology is public to them, so a 404 would
# hide nothing); anonymous users go to the login page.
staff_required = access.staff_required("Only staff can change the topology.")


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """The administrators' topology, and the user-made nodes the user holds a grant on (all of
    them would be thousands: staff count them)."""
    shown = nodefields.CredentialView(request.user)  # credentials whole to staff and owners only
    own = DataNode.objects.filter(node_access.granted_to(request.user), user_made=True)
    context = {
        "executors": SpecExecutor.objects.prefetch_related(CAPABILITIES),
        "nodes": [(node, shown.page_properties(node)) for node in DataNode.objects.filter(user_made=False)],
        "own_nodes": [(node, shown.page_properties(node)) for node in own],
        "user_made_count": DataNode.objects.filter(user_made=True).count() if request.user.is_staff else None,
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
            return redirect("topology:datanode", name=saved.name)
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
    """Enabling is one click; disabling sends the flows routed through the executor back to
    the compiler, so an enabled executor's toggle leads to its confirmation instead."""
    executor = get_object_or_404(SpecExecutor, name=name)
    if executor.enabled:
        return redirect("topology:executor_disable", name=executor.name)
    services.set_enabled(executor, True)
    messages.success(request, f"Executor {executor} enabled.")
    return redirect("topology:executor", name=executor.name)


@staff_required
@require_http_methods(["GET", "POST"])
def executor_disable(request: HttpRequest, name: str) -> HttpResponse:
    """Asks first, saying how many flows it affects: only the confirmation's POST disables."""
    executor = get_object_or_404(SpecExecutor, name=name)
    if not executor.enabled:
        messages.info(request, f"Executor {executor} is already disabled.")
        return redirect("topology:executor", name=executor.name)
    if request.method == "POST":
        services.set_enabled(executor, False)
        messages.success(
            request, f"Executor {executor} disabled; the flows routed through it are being recompiled."
        )
        return redirect("topology:executor", name=executor.name)
    context = {"executor": executor, "flows": services.flows_routed_through(executor)}
    return render(request, "topology/confirm_disable.html", context)


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
    """The form again for the kind just chosen (htmx swaps its fields in; without JavaScript the
    form's **Show the fields of this kind** button posts the same), keeping what was typed but
    secrets; nothing is validated or saved."""
    typed = {key: value for key, value in request.POST.dict().items() if key != "csrfmiddlewaretoken"}
    form = DataNodeForm(initial=typed, instance=node, user=request.user)
    return render(request, "topology/datanode_form.html", {"form": form, "object": node})


def _wants_fields(request: HttpRequest) -> bool:
    return request.GET.get("part") == "fields" or "show_fields" in request.POST


@login_required
@require_http_methods(["GET", "POST"])
def datanode_create(request: AuthenticatedRequest) -> HttpResponse:
    """Any signed-in user: staff make an administrator's node, everyone else a node of their own
    (topology.policy says what it may reach)."""
    if _wants_fields(request):
        return _datanode_fields(request, None)
    form = DataNodeForm(request.POST or None, user=request.user)
    return _form_page(
        request,
        "topology/datanode_form.html",
        form,
        None,
        lambda f: services.create_data_node(f.node_data(), user=request.user, request=request),
    )


def _changeable_node(request: HttpRequest, name: str, action: str) -> DataNode:
    """The node (404 if there is none), 403 unless the user may change or delete it: staff, and
    the owners of a user-made node."""
    denied = f"Only the owners of data node {name} (and staff) may change it."
    if action == access.DELETE:
        denied = f"Only the owners of data node {name} (and staff) may delete it."
    return access.get_allowed(DataNode.objects.all(), request.user, action, denied=denied, name=name)


@login_required
@require_http_methods(["GET", "POST"])
def datanode_edit(request: AuthenticatedRequest, name: str) -> HttpResponse:
    node = _changeable_node(request, name, access.CHANGE)
    if _wants_fields(request):
        return _datanode_fields(request, node)
    form = DataNodeForm(request.POST or None, instance=node, user=request.user)
    return _form_page(
        request,
        "topology/datanode_form.html",
        form,
        node,
        lambda f: services.update_data_node(node, f.node_data(), user=request.user, request=request),
    )


@login_required
@require_http_methods(["GET", "POST"])
def datanode_delete(request: AuthenticatedRequest, name: str) -> HttpResponse:
    node = _changeable_node(request, name, access.DELETE)
    error = None
    if request.method == "POST":
        try:
            services.delete_data_node(node, user=request.user, request=request)
        except ValidationError as problem:
            error = " ".join(problem.messages)
        else:
            messages.success(request, f"Data node {name} deleted.")
            return redirect("topology:overview")
    flows, total = sharing.flows_using(node, limit=20) if node.user_made else ([], 0)
    context = {"object": node, "noun": "data node", "error": error, "flows": flows, "flows_total": total}
    return render(request, "topology/confirm_delete.html", context, status=409 if error else 200)


# --- a data node's page: sharing, Test connection and discovery --------------------------


def _may_use(request: HttpRequest, node: DataNode) -> bool:
    return node_access.may_use(request.user, node.name, node_access.READ) or node_access.may_use(
        request.user, node.name, node_access.WRITE
    )


def _usable_node(request: HttpRequest, name: str) -> DataNode:
    """A node the user holds a grant on (staff: any); 404 if there is no such node, 403 (its
    page says whom to ask) if they may not use it."""
    node = get_object_or_404(DataNode, name=name)
    if not _may_use(request, node):
        raise PermissionDenied(
            f"You hold no grant on data node {name}; ask its owners with Request access on its page."
        )
    return node


def _typed_credentials(request: HttpRequest) -> dict[str, str]:
    return {
        "user": request.POST.get("test_user", "")[:256],
        "password": request.POST.get("test_password", "")[:1024],
    }


@login_required
@require_GET
def datanode_detail(request: AuthenticatedRequest, name: str) -> HttpResponse:
    """Every signed-in user sees a node's page — its owners, grants and the flows using it —
    so they can ask for access; credentials are whole only to staff and its owners."""
    node = get_object_or_404(DataNode, name=name)
    user = request.user
    may_use, may_share = _may_use(request, node), sharing.may_share(user, node)
    grants = list(
        node.grants.select_related("user", "group").order_by("role", "user__username", "group__name")
    )
    flows, flows_total = sharing.flows_using(node)
    context = {
        "node": node,
        "properties": nodefields.CredentialView(user).page_properties(node),
        "owners": [grant for grant in grants if grant.role == DataNodeGrant.Role.OWNER],
        "grants": [grant for grant in grants if grant.role != DataNodeGrant.Role.OWNER],
        "flows": flows,
        "flows_total": flows_total,
        "may_use": may_use,
        "may_share": may_share,
        "may_change": access.can(user, access.CHANGE, node),
        "may_read": node_access.may_use(user, node.name, node_access.READ),
        "may_write": node_access.may_use(user, node.name, node_access.WRITE),
        "pending": sharing.pending_for(user, node),
        "access_requests": list(sharing.open_requests(node)) if may_share else [],
        "events": list(sharing.history(node)[:10]) if may_share or may_use else [],
        "open_by_default": not grants and not node.user_made and node_access.default_open(),
    }
    return render(request, "topology/datanode_detail.html", context)


def _to_node(node: DataNode, request: HttpRequest | None = None) -> HttpResponse:
    """The node's page; given the request, back where its form was (the data-nodes list, the
    dashboard) when the form says so and the place is this site's."""
    next_url = request.POST.get("next", "") if request is not None else ""
    if (
        request is not None
        and next_url
        and url_has_allowed_host_and_scheme(
            next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
    ):
        return redirect(next_url)
    return redirect("topology:datanode", name=node.name)


def _say(request: HttpRequest, error: ValidationError) -> None:
    messages.error(request, " ".join(error.messages))


@login_required
@require_POST
def datanode_grant(request: AuthenticatedRequest, name: str) -> HttpResponse:
    """An owner (or staff) grants read or write to a user or a group."""
    node = get_object_or_404(DataNode, name=name)
    role = request.POST.get("role", "")
    kind = "group" if request.POST.get("principal_kind") == "group" else "user"
    who = request.POST.get("principal", "").strip()
    try:
        added = sharing.grant(node, user=request.user, role=role, principal={kind: who}, request=request)
    except ValidationError as error:
        _say(request, error)
    else:
        messages.success(
            request,
            f"{kind.capitalize()} {who} may now {role} {node.name}." if added else f"{who} had it already.",
        )
    return _to_node(node)


@login_required
@require_POST
def datanode_revoke(request: AuthenticatedRequest, name: str, grant_id: int) -> HttpResponse:
    node = get_object_or_404(DataNode, name=name)
    try:
        row = sharing.revoke(node, grant_id, user=request.user, request=request)
    except ValidationError as error:
        _say(request, error)
    else:
        messages.success(request, f"Revoked {row.role} from {row.principal}.")
    return _to_node(node)


@login_required
@require_POST
def datanode_request_access(request: AuthenticatedRequest, name: str) -> HttpResponse:
    node = get_object_or_404(DataNode, name=name)
    role = request.POST.get("role", "read")
    try:
        sharing.request_access(
            node, user=request.user, role=role, message=request.POST.get("message", ""), request=request
        )
    except ValidationError as error:
        _say(request, error)
    else:
        messages.success(
            request, f"Asked to {role} {node.name}; its owners will see it on their dashboard and this page."
        )
    return _to_node(node, request)


@login_required
@require_POST
def datanode_answer_request(request: AuthenticatedRequest, name: str, request_id: int) -> HttpResponse:
    node = get_object_or_404(DataNode, name=name)
    grant = request.POST.get("decision") == "grant"
    try:
        asked = sharing.decide(node, request_id, user=request.user, grant_it=grant, request=request)
    except ValidationError as error:
        _say(request, error)
    else:
        who = asked.requested_by.get_username()
        messages.success(
            request, f"{who} may now {asked.role} {node.name}." if grant else f"Declined {who}'s request."
        )
    return _to_node(node, request)


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
    return render(request, "topology/partials/source_picker.html", picker.shown(request.user, request.POST))
