"""How long ago, in words a person reads: never "0 minutes ago"."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from portal.monitoring.templatetags.monitoring import ago


def test_moments_under_a_minute_ago_are_said_in_seconds_not_zero_minutes():
    now = timezone.now()
    assert ago(now + timedelta(seconds=1)) == "just now"
    assert ago(now - timedelta(seconds=12)) == "12 s ago"
    assert ago(now - timedelta(minutes=5, seconds=2)) == "5\xa0minutes ago"
    assert ago(None) == "—"
