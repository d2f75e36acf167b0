"""Ctrl-C and SIGTERM as a ``KeyboardInterrupt``, held back over sections that must not be cut.

A ``KeyboardInterrupt`` raised while an extension module initialises (the first ``import
matplotlib.pyplot``, for one) does not reach the command's handler as an interrupt: the module reports
``ImportError: initialization failed``, and the command would end with a traceback and status 1 instead of
"interrupted" and 130. :func:`interrupts_deferred` marks such a section; a signal that arrives inside it is
raised when the section ends. :func:`stopping_on_signals` installs the handler for a command's duration.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["caused_by_interrupt", "interrupts_deferred", "stopping_on_signals"]

_depth = 0  # how many deferring sections the main thread is in
_pending = False  # a signal arrived inside one


def _stop(signum: int, frame: FrameType | None) -> None:
    global _pending
    if _depth:
        _pending = True
        return
    raise KeyboardInterrupt


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the block whole: a Ctrl-C or SIGTERM it receives is raised as ``KeyboardInterrupt`` when it ends
    (with :func:`stopping_on_signals` installed; otherwise the signals act as usual). Signals reach the main
    thread only, so a section in another thread defers nothing."""
    global _depth, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending:
            _pending = False
            raise KeyboardInterrupt


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM raise ``KeyboardInterrupt`` in the main thread (after any deferring section), so
    that a command cleans up the same way for both. Signals with a handler of their own (a training run's)
    are left alone, as is every signal outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) == default:
            previous[sig] = signal.signal(sig, _stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised because of a ``KeyboardInterrupt`` (its cause or context, at any depth):
    an extension module that failed to initialise because the user stopped the command."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
