"""Progress inside long metrics: :func:`evaluate` names the metric it runs (:func:`metric_progress`), and a
metric's long loops (DCI's factors, downstream accuracy's forests) show a bar for it on stderr. Nothing is
shown when no metric is named (a metric called directly) or stderr is not a terminal (tqdm's default)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["metric_progress", "metric_steps"]

T = TypeVar("T")

_RUNNING: ContextVar[str | None] = ContextVar("factorbench_metric_progress", default=None)


@contextmanager
def metric_progress(label: str | None) -> Iterator[None]:
    """While inside, the long loops of the metric called ``label`` show their progress (None: they do not)."""
    token = _RUNNING.set(label)
    try:
        yield
    finally:
        _RUNNING.reset(token)


def metric_steps(items: Iterable[T], total: int, what: str) -> Iterable[T]:
    """``items``, with a progress bar ``"  LABEL: WHAT"`` when a metric is named and stderr is a terminal."""
    label = _RUNNING.get()
    if label is None:
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc=f"  {label}: {what}", leave=False, file=sys.stderr, disable=None,
                dynamic_ncols=True)
