"""The data-nodes page: the sources and destinations a user may use, and those they may ask for.

Airbyte users look for Sources, Destinations and Connections; here they are data nodes, which
used to be listed only on the Topology page (beside executors) and, for nodes one holds no grant
on, nowhere. Thin: topology.catalog pages through them."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.accounts.requests import AuthenticatedRequest
from portal.topology import catalog


@login_required
@require_GET
def datanode_list(request: AuthenticatedRequest) -> HttpResponse:
    """Two lists, each paged on its own (`page`, `ask_page`) and filtered by one search box."""
    user, query = request.user, request.GET.get("q", "")
    context = {
        "usable": catalog.page_of(
            catalog.usable(user), user, number=catalog.page_number(request.GET.get("page")), query=query
        ),
        "askable": catalog.page_of(
            catalog.askable(user), user, number=catalog.page_number(request.GET.get("ask_page")), query=query
        ),
        "query": query.strip()[:100],
    }
    return render(request, "topology/datanode_list.html", context)
