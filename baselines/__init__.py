"""Reference models trained under the benchmark's protocols (see the README's roadmap)."""
