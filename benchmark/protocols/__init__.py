"""Registered, versioned protocols (see ``base`` for the data model and ``catalog`` for the list)."""

from . import catalog  # noqa: F401  (registers the protocols)
from .base import PROTOCOLS, DatasetRef, Headline, MetricCall, Protocol, get_protocol, list_protocols, register

__all__ = ["DatasetRef", "Headline", "MetricCall", "PROTOCOLS", "Protocol", "get_protocol", "list_protocols",
           "register"]
