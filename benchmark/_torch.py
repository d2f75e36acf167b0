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
    factors a float64 tensor (K,). Safe with ``DataLoader(num_workers > 0)``: each worker reopens the file."""

    def __init__(self, dataset: Any, indices: np.ndarray, transform: Callable[[np.ndarray], Any] | None) -> None:
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int) -> tuple[Any, torch.Tensor]:
        row = int(self.indices[i])
        image = self.dataset.images[row]
        if self.transform is not None:
            x = self.transform(image)
        else:
            x = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).float().div_(255.0)
        return x, torch.from_numpy(self.dataset.factors[row].copy())
