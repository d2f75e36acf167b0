"""The one exception type users see: every message says what is wrong and what to do."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import ParamSpec

P = ParamSpec("P")


class FactorbenchError(Exception):
    """A user-facing error (bad input, bad file, bad parameters).

    The command-line interface prints its message without a traceback and exits with status 2.
    """


def exits_2_on_user_error(main: Callable[P, int]) -> Callable[P, int]:
    """Wrap a module command's ``main``: a :class:`FactorbenchError` it raises becomes ``error: <message>``
    on stderr and exit status 2, with no traceback (the user's mistake, not the program's)."""

    @functools.wraps(main)
    def command(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except FactorbenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    return command
