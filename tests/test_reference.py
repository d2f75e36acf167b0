"""The shipped reference rows: present for every embedded protocol, current (their protocol hash is
today's), and ordered as a floor and a ceiling should be on each protocol's headline metric."""

import math

import pytest

from factorbench.benchmark.protocols import PROTOCOLS
from factorbench.benchmark.results import REFERENCE_DIR, reference_results

EMBEDDED = sorted(name for name, p in PROTOCOLS.items() if not p.needs_source)


@pytest.mark.parametrize("name", EMBEDDED)
def test_reference_rows_are_current_and_ordered(name):
    protocol = PROTOCOLS[name]
    results = reference_results(protocol)  # raises on a stale or partial result
    assert {"ideal", "random", "pca"} <= set(results), f"missing reference rows in {REFERENCE_DIR / name}"
    key = protocol.headline.key
    head = {model: runs[0].scalars()[key] for model, runs in results.items()}
    assert all(math.isfinite(v) for v in head.values())
    sign = 1.0 if protocol.headline.better == "higher" else -1.0
    assert sign * head["ideal"] > sign * head["pca"] > sign * head["random"], head
    for runs in results.values():
        assert len(runs[0].dataset["spec_hash"]) == 64
        # the protocol pins the images its reference rows were scored on
        assert runs[0].dataset["sha256"]["images"] == protocol.reference_images
        assert runs[0].dataset["same_images_as_reference"] is True
