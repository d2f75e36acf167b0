"""Disentanglement metrics: plain, seeded functions over arrays (see ``_base`` for the conventions)."""

from ._base import MetricInputError, MetricResult, factor_classes

__all__ = ["MetricInputError", "MetricResult", "factor_classes"]
