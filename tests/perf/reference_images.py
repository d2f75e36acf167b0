"""Where the fit scripts find the pictures of the original datasets (never part of the repository)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

#: the default folder: ``shared/data/reference-images`` beside the repository
DEFAULT = Path(__file__).resolve().parents[3] / "shared/data/reference-images"


def reference_folder(arg: str | None, names: Sequence[str]) -> Path:
    """The folder given by ``--reference`` (``arg``), ``$FACTORBENCH_REFERENCE_IMAGES`` or :data:`DEFAULT`;
    exits with status 2, naming the files and the folder, when it lacks any of ``names``."""
    folder = Path(arg or os.environ.get("FACTORBENCH_REFERENCE_IMAGES") or DEFAULT)
    missing = [name for name in names if not (folder / name).is_file()]
    if missing:
        print(f"{', '.join(missing)} not found in {folder}: give --reference DIR or set "
              "FACTORBENCH_REFERENCE_IMAGES", file=sys.stderr)
        raise SystemExit(2)
    return folder
