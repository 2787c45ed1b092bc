"""Filters for the portal's log (settings.LOGGING)."""

from __future__ import annotations

import logging


class RefusalsInOneLine(logging.Filter):
    """A 4xx is the portal answering a request it refuses (403 for a missing grant, 400 for a
    suspicious one): Django logs it as a warning, with the exception's traceback, which reads in
    the web process's log as a fault. The warning's line says what and where; a 5xx (an error)
    keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            record.exc_info = None
            record.exc_text = None
        return True
