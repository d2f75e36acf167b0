"""The optional PyTorch view of a dataset (install the ``torch`` extra)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from factorbench.generators.errors import FactorbenchError

try:
    import torch
    from torch.utils.data import Dataset as _TorchBase
except ImportError:  # pragma: no cover - exercised only without torch
    raise FactorbenchError("to_torch() needs PyTorch: pip install 'factorbench[torch]'") from None


#: what an item's target is: the factor values (float32) or their grid classes (int64)
TARGETS = ("factors", "classes")


class TorchDataset(_TorchBase):
    """Items are ``(image, target)``: image a float32 tensor (C, H, W) in [0, 1] (or ``transform(uint8 HWC)``),
    target a float32 tensor (K,) of the factor values (``target="factors"``) or an int64 tensor (K,) of their
    grid classes (``target="classes"``), or ``target_transform`` of it. ``DataLoader`` fetches a batch with
    one read (``__getitems__``: the batch's rows read chunk by chunk, not one lookup per image). Safe with
    ``DataLoader(num_workers > 0)``: each worker reopens the file once and keeps it."""

    def __init__(self, dataset: Any, indices: np.ndarray, transform: Callable[[np.ndarray], Any] | None,
                 target_transform: Callable[[torch.Tensor], Any] | None = None, target: str = "factors") -> None:
        if target not in TARGETS:
            raise FactorbenchError(f"to_torch(target={target!r}): choose one of {', '.join(TARGETS)}")
        if target == "classes" and dataset.factor_classes is None:
            raise FactorbenchError(f"{dataset.path.name} has no factor classes (not a grid dataset): use "
                                   "target='factors'")
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)
        self.transform = transform
        self.target_transform = target_transform
        self.target = target
        self._targets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.indices)

    def _target_rows(self) -> np.ndarray:
        if self._targets is None:  # the view's targets, read once per process
            source, dtype = ((self.dataset.factors, np.float32) if self.target == "factors"
                             else (self.dataset.factor_classes, np.int64))
            self._targets = np.ascontiguousarray(source[self.indices], dtype=dtype)
        return self._targets

    def _item(self, image: np.ndarray, position: int) -> tuple[Any, Any]:
        if self.transform is not None:
            x = self.transform(image)
        else:
            x = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).float().div_(255.0)
        y = torch.from_numpy(self._target_rows()[position].copy())
        return x, (self.target_transform(y) if self.target_transform is not None else y)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        position = int(i)
        if not -len(self) <= position < len(self):
            raise IndexError(f"index {i} is out of range for {len(self)} items")
        position %= len(self)
        return self._item(self.dataset.images[int(self.indices[position])], position)

    def __getitems__(self, positions: list[int]) -> list[tuple[Any, Any]]:
        """The items at ``positions`` with one batched read (used by ``DataLoader``)."""
        positions_array = np.asarray(positions, dtype=np.int64)
        images = self.dataset._read_images(self.indices[positions_array])
        return [self._item(image, int(p)) for image, p in zip(images, positions_array)]
