"""Scripts that reproduce the papers' experiments with factorbench (run with python -m)."""
