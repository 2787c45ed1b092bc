"""A failed task says why twice: a short message for the pages and the
whole traceback for the attempt's log, secrets masked in both."""

from __future__ import annotations

from portal.pipeline.properties import Properties
from portal.pipeline.task import TRACEBACK_CHARS, describe_exception, describe_traceback

PROPS = Properties({"source.jdbc.password": "s3cret-value", "source.jdbc.user": "etl"})


def _failure(message: str) -> Exception:
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def test_the_traceback_names_where_it_failed_and_masks_the_secret():
    exc = _failure("login failed for etl with password=s3cret-value")
    text = describe_traceback(exc, PROPS)
    assert text.startswith("Traceback (most recent call last):")
    assert "in _failure" in text and "raise ValueError(message)" in text
    assert text.endswith("ValueError: login failed for etl with password=***")
    assert "s3cret-value" not in text
    assert describe_exception(exc, PROPS) == "ValueError: login failed for etl with password=***"


def test_a_huge_traceback_is_cut_and_says_by_how_much():
    text = describe_traceback(_failure("x" * (TRACEBACK_CHARS * 2)), PROPS)
    assert len(text) < TRACEBACK_CHARS + 100
    assert text.endswith("more characters)")
