"""A picture of a trained model: inputs and their reconstructions, then one row per latent dimension
decoding the posterior mean of one input with that dimension swept over [-2.5, 2.5] (the prior's bulk).
Written at the end of training as ``samples.png``; ``factorbench show-run RUN_DIR`` redraws it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError
from factorbench.generators.outputs import check_output_file, save_figure

__all__ = ["show_run", "write_samples"]

N_INPUTS = 8
TRAVERSAL = np.linspace(-2.5, 2.5, 8)


def _decode(model: Any, z: Any) -> np.ndarray:
    import torch

    with torch.no_grad():
        return torch.sigmoid(model.decode(z).float()).permute(0, 2, 3, 1).cpu().numpy()


def write_samples(model: Any, data: Any, out: Path, *, device: Any = "cpu") -> Path:
    """Draw reconstructions and traversals of ``model`` on the first images of a seeded batch of ``data``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    images = data.batch(0, N_INPUTS, 12345)
    x = torch.from_numpy(images).to(device).permute(0, 3, 1, 2).float().div(255.0)
    with torch.no_grad():
        encoded = model.encode(x)
    mu = (encoded if isinstance(encoded, torch.Tensor) else encoded[0]).float()
    recon = _decode(model, mu)
    if hasattr(model, "traversals"):  # a latent that is not R^D (LSBD-VAE's circles) says how to sweep it
        sweeps = model.traversals(mu[:1], len(TRAVERSAL))
    else:
        values = torch.tensor(TRAVERSAL, dtype=mu.dtype, device=mu.device)
        sweeps = []
        for d in range(mu.shape[1]):
            z = mu[:1].repeat(len(TRAVERSAL), 1)
            z[:, d] = values
            sweeps.append((f"z{d} (mean {float(mu[0, d]):+.2f})", z))

    rows = [("input", images / 255.0), ("reconstruction", recon)]
    rows += [(label, _decode(model, z)) for label, z in sweeps]
    cols = max(N_INPUTS, len(TRAVERSAL))
    fig, axes = plt.subplots(len(rows), cols, figsize=(1.1 * cols + 1.6, 1.1 * len(rows) + 0.6), squeeze=False)
    for r, (label, imgs) in enumerate(rows):
        for c in range(cols):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c < len(imgs):
                ax.imshow(np.clip(imgs[c].squeeze(), 0, 1), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            else:
                ax.axis("off")
            if r == 2 and not hasattr(model, "traversals"):
                ax.set_title(f"{TRAVERSAL[c]:+.1f}", fontsize=7)
        axes[r, 0].set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
    caption = getattr(model, "traversal_caption", "each latent swept over [-2.5, 2.5] from the first input's code")
    fig.suptitle(f"top: inputs and reconstructions (posterior mean); below: {caption}", fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out, dpi=80)


def show_run(run_dir: str | os.PathLike, out: str | os.PathLike | None = None, *, force: bool = False) -> Path:
    """Redraw a finished run's picture (default ``RUN_DIR/samples.png``, which is always redrawn)."""
    from .data import TrainingData, resolve_dataset
    from .runs import SAMPLES, load_run, read_run

    run_dir = Path(run_dir)
    target = Path(out) if out is not None else run_dir / SAMPLES
    if out is not None:  # checked by creating a file (permission bits pass for root, also in /proc)
        check_output_file(target, force)
    encoder = load_run(run_dir)
    record = read_run(run_dir)
    info = record["data"]
    local = Path(record.get("dataset_path", ""))
    data = TrainingData(local if local.is_file() else resolve_dataset(info["generator"], progress=False),
                        info["split"])
    try:
        if data.identity["images_sha256"] != info["images_sha256"]:
            raise FactorbenchError(f"{data.path} is not the data {run_dir} was trained on (image hashes "
                                   "differ); regenerate that dataset first")
        return write_samples(encoder.model, data, target)
    finally:
        data.close()
