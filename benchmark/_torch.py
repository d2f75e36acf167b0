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


class TorchDataset(_TorchBase):
    """Items are ``(image, factors)``: image a float32 tensor (C, H, W) in [0, 1] (or ``transform(uint8 HWC)``),
    factors a float32 tensor (K,) of the factor values. ``DataLoader`` fetches a batch with one read
    (``__getitems__``: the batch's rows read chunk by chunk, not one lookup per image). Safe with
    ``DataLoader(num_workers > 0)``: each worker reopens the file once and keeps it."""

    def __init__(self, dataset: Any, indices: np.ndarray, transform: Callable[[np.ndarray], Any] | None) -> None:
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)
        self.transform = transform
        self._factors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.indices)

    def _factor_rows(self) -> np.ndarray:
        if self._factors is None:  # the view's factor values as float32, read once per process
            self._factors = np.ascontiguousarray(self.dataset.factors[self.indices], dtype=np.float32)
        return self._factors

    def _item(self, image: np.ndarray, position: int) -> tuple[Any, torch.Tensor]:
        if self.transform is not None:
            x = self.transform(image)
        else:
            x = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).float().div_(255.0)
        return x, torch.from_numpy(self._factor_rows()[position].copy())

    def __getitem__(self, i: int) -> tuple[Any, torch.Tensor]:
        position = int(i)
        if not -len(self) <= position < len(self):
            raise IndexError(f"index {i} is out of range for {len(self)} items")
        position %= len(self)
        return self._item(self.dataset.images[int(self.indices[position])], position)

    def __getitems__(self, positions: list[int]) -> list[tuple[Any, torch.Tensor]]:
        """The items at ``positions`` with one batched read (used by ``DataLoader``)."""
        positions_array = np.asarray(positions, dtype=np.int64)
        images = self.dataset._read_images(self.indices[positions_array])
        return [self._item(image, int(p)) for image, p in zip(images, positions_array)]
