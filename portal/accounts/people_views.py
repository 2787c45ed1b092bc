"""Pages where staff manage users and groups (portal.accounts.people holds the rules). Staff
only: anyone else gets 403, an anonymous visitor the login page. Thin: Django's forms parse."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts import access, people
from portal.accounts.forms import GroupForm, NewUserForm, UserGroupsForm
from portal.accounts.requests import AuthenticatedRequest

staff_required = access.staff_required("Only staff manage users and groups.")
PER_PAGE = 50


def _common() -> dict:
    return {"directory": people.directory_managed(), "where_from": people.where_users_come_from()}


@staff_required
@require_GET
def user_list(request: AuthenticatedRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:100]
    page = Paginator(people.users(query), PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "accounts/people/user_list.html", {**_common(), "page": page, "query": query})


@staff_required
@require_http_methods(["GET", "POST"])
def user_create(request: AuthenticatedRequest) -> HttpResponse:
    people.require_local(request.user)
    form = NewUserForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        messages.success(request, f"User {user.username} created; they sign in with the password given.")
        return redirect("people:user", user.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "accounts/people/user_form.html", {**_common(), "form": form}, status=status)


def _user_page(
    request: AuthenticatedRequest, target, form: UserGroupsForm, status: int = 200
) -> HttpResponse:
    context = {
        **_common(),
        "person": target,
        "form": form,
        "may_change": people.may_change(request.user, target),
        "groups": target.groups.order_by("name"),
    }
    return render(request, "accounts/people/user_detail.html", context, status=status)


@staff_required
@require_http_methods(["GET", "POST"])
def user_detail(request: AuthenticatedRequest, user_id: int) -> HttpResponse:
    """The user, their groups (a form that sets them, where users are the portal's own)."""
    target = get_object_or_404(people.User, pk=user_id)
    if request.method == "GET":
        return _user_page(request, target, UserGroupsForm(initial={"groups": target.groups.all()}))
    form = UserGroupsForm(request.POST)
    if not form.is_valid():
        return _user_page(request, target, form, status=400)
    people.set_groups(request.user, target, list(form.cleaned_data["groups"]))
    messages.success(request, f"Groups of {target.username} saved.")
    return redirect("people:user", target.pk)


@staff_required
@require_POST
def user_active(request: AuthenticatedRequest, user_id: int) -> HttpResponse:
    target = get_object_or_404(people.User, pk=user_id)
    active = request.POST.get("active") == "yes"
    try:
        people.set_active(request.user, target, active)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        form = UserGroupsForm(initial={"groups": target.groups.all()})
        return _user_page(request, target, form, status=400)
    if active:
        messages.success(request, f"{target.username} is active again and may sign in.")
    else:
        messages.success(request, f"{target.username} is deactivated: no sign-in, no API token works.")
    return redirect("people:user", target.pk)


@staff_required
@require_http_methods(["GET", "POST"])
def group_list(request: AuthenticatedRequest) -> HttpResponse:
    """Every group with its member count, and (users being the portal's own) a form for a new one."""
    form = GroupForm(request.POST or None)
    if request.method == "POST":
        people.require_local(request.user)
        if form.is_valid():
            group = form.save()
            messages.success(request, f"Group {group.name} created; add users to it on their pages.")
            return redirect("people:group", group.pk)
    page = Paginator(people.groups(), PER_PAGE).get_page(request.GET.get("page"))
    status = 400 if form.errors else 200
    return render(
        request, "accounts/people/group_list.html", {**_common(), "page": page, "form": form}, status=status
    )


@staff_required
@require_GET
def group_detail(request: AuthenticatedRequest, group_id: int) -> HttpResponse:
    group = get_object_or_404(people.Group, pk=group_id)
    page = Paginator(group.user_set.order_by("username"), PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "accounts/people/group_detail.html", {**_common(), "group": group, "page": page})
