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


def test_every_superseded_run_is_the_record_of_a_retired_scoring():
    """Each shipped superseded run (a run its job's later training replaced) validates, is no reference row
    (other weights than its model's reference run of the same seed) and scored the weights of a shipped
    result of another protocol of its plan's entry: nothing is kept that no earlier scoring joins."""
    from factorbench.benchmark.results import SUPERSEDED_DIR, superseded_results

    def weights(run):
        return (run.training or {}).get("weights_sha256")

    def seed(run):
        return ((run.training or {}).get("sweep") or {}).get("seed")

    for folder in sorted(p for p in SUPERSEDED_DIR.glob("*") if p.is_dir()):
        for model, runs in superseded_results(folder.name).items():
            current = {seed(r): weights(r) for r in reference_results(folder.name)[model]}
            scored = {weights(r) for other in REFERENCE_DIR.glob(f"*/{model}.json") if other.parent.name != folder.name
                      for r in reference_results(other.parent.name).get(model, [])}
            for run in runs:
                assert weights(run) and weights(run) != current.get(seed(run)), (folder.name, model, seed(run))
                assert weights(run) in scored, (folder.name, model, seed(run))
