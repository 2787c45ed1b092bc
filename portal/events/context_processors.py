"""The menu's unread count of the signed-in user's notifications, on every page."""

from __future__ import annotations

from django.http import HttpRequest

from portal.events import notifications


def unread_notifications(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    count = notifications.unread_count(user)
    shown = f"{notifications.COUNT_CAP}+" if count > notifications.COUNT_CAP else str(count)
    return {"unread_notifications": count, "unread_notifications_shown": shown}
