"""The one exception type users see: every message says what is wrong and what to do."""

from __future__ import annotations


class FactorbenchError(Exception):
    """A user-facing error (bad input, bad file, bad parameters).

    The command-line interface prints its message without a traceback and exits with status 2.
    """
