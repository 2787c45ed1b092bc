"""The in-portal sink: each user's alerts as a list they read in the portal
(the Notifications page, its unread count in the menu), so an alert is seen
without a mail server or a webhook. Subscribers' events reach it through the
same delivery pass as email and webhooks (monitoring.subscriptions names a
`sub<id>:portal` target per subscription). Every function takes the user:
nobody reads another's list."""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.utils import timezone

from portal.events.models import Event, Notification

PAGE_SIZE = 25
# The newest this many per user are kept: the list and its count stay bounded.
KEEP = 500
# The menu shows "99+" past this: the count reads at most this many rows.
COUNT_CAP = 99


def notify(event: Event, user) -> None:
    """Put `event` (as `user` may read it) on their list; once per event."""
    # ON CONFLICT DO NOTHING: a retried delivery finds it there already.
    Notification.objects.bulk_create(
        [
            Notification(
                user=user,
                event_id=event.pk,
                kind=event.kind,
                severity=event.severity,
                flow_group=event.flow_group,
                flow_name=event.flow_name,
                execution_id=event.execution_id,
                message=event.message,
                created=event.created,
            )
        ],
        ignore_conflicts=True,
    )
    oldest_kept = list(
        Notification.objects.filter(user=user).order_by("-id").values_list("id", flat=True)[KEEP : KEEP + 1]
    )
    if oldest_kept:
        Notification.objects.filter(user=user, id__lte=oldest_kept[0]).delete()


def unread_count(user) -> int:
    """At most COUNT_CAP + 1 (shown as "99+"): one bounded query on an index."""
    if not user.is_authenticated:
        return 0
    unread = Notification.objects.filter(user=user, read_at__isnull=True).values("id")[: COUNT_CAP + 1]
    return len(unread)


def page_of(user, number: str | None) -> Page:
    """One page of the user's list, newest first."""
    return Paginator(Notification.objects.filter(user=user), PAGE_SIZE).get_page(number)


def mark_all_read(user) -> int:
    return Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=timezone.now())
