"""factorbench: datasets with known factors of variation, generated locally; fixed, versioned protocols and
metrics; reference scores of baseline models.

    import factorbench
    with factorbench.load("square") as ds:       # the protocols' copy, generated into the cache on first use
        images, factors = ds.images[:64], ds.factors[:64]

The parts: :mod:`factorbench.generators` (datasets), :mod:`factorbench.benchmark` (files, protocols,
metrics, evaluation, score tables), :mod:`factorbench.baselines` (training, sweeps; needs the ``train``
extra). This module imports none of them until it is used, so importing a part stays as fast as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from factorbench.benchmark.dataset import Dataset
    from factorbench.benchmark.protocols.base import DatasetRef

__all__ = ["__version__", "load"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from factorbench.generators.fileformat import package_version

        return package_version()
    raise AttributeError(f"module 'factorbench' has no attribute {name!r}")


def _dataset_ref(name: str, params: Mapping[str, Any]) -> "DatasetRef":
    """The dataset a protocol (``square-lsbd-v1``) or a dataset name (``square``, with ``params``) stands for:
    the copy the protocols of that dataset are scored on."""
    from factorbench.benchmark.protocols import PROTOCOLS
    from factorbench.generators import list_datasets
    from factorbench.generators.errors import FactorbenchError

    if name in PROTOCOLS:
        if params:
            raise FactorbenchError(f"{name} is a protocol: its dataset's parameters are fixed (give a dataset name "
                                   "with params, e.g. load('dsprites', params={'variant': 'color'}))")
        return PROTOCOLS[name].dataset
    if name not in list_datasets():
        raise FactorbenchError(f"no dataset or protocol named {name!r}; datasets: {', '.join(sorted(list_datasets()))} "
                               "(see `factorbench list`); protocols: see `factorbench protocols`; or give an .h5 file")
    for protocol in PROTOCOLS.values():
        if protocol.dataset.generator == name and dict(protocol.dataset.params) == dict(params):
            return protocol.dataset
    known = sorted({repr(dict(p.dataset.params)) for p in PROTOCOLS.values() if p.dataset.generator == name})
    raise FactorbenchError(f"no protocol scores {name} with params {dict(params)!r}; the protocols' copies have "
                           f"{' or '.join(known) or 'none'}; make another with "
                           f"`factorbench generate {name} --param ...`")


def load(name: str | os.PathLike, *, params: Mapping[str, Any] | None = None,
         source: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
         progress: bool = True) -> "Dataset":
    """An open dataset (a context manager; ``ds.images``, ``ds.factors``, ``ds.split(name)``,
    ``ds.to_torch()``) by name, as ``tfds.load`` does:

    - a dataset name (``"square"``, ``"dsprites"`` with ``params={"variant": "color"}``) or a protocol name
      (``"square-lsbd-v1"``): the copy the protocols are scored on, from the cache
      (``$FACTORBENCH_DATA``, else ``~/.cache/factorbench``; ``data_dir`` overrides), generated and verified
      there on first use, exactly as ``factorbench evaluate`` prepares it (with the protocols' splits);
    - a path to an ``.h5`` file: that file.

    ``source``: your copy of the outside data of ``coil100`` and ``modelnet40`` (needed the first time)."""
    from factorbench.benchmark.cache import prepare_dataset
    from factorbench.benchmark.dataset import load as load_file

    text = os.fspath(name)
    if text.endswith((".h5", ".hdf5")) or os.path.sep in text:
        if params or source is not None:
            from factorbench.generators.errors import FactorbenchError

            raise FactorbenchError(f"{text} is a file: params and source belong to a dataset name")
        return load_file(text)
    path = prepare_dataset(_dataset_ref(text, params or {}), source=source, directory=data_dir, progress=progress)
    return load_file(path)
