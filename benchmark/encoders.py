"""Encoders: how a model is turned into codes for a protocol, and the reference encoders.

An encoder is any callable that maps a batch of uint8 images ``(n, H, W, C)`` to codes ``(n, D)``,
or to a Gaussian posterior ``(mu, logvar)``, as numpy arrays or torch tensors (on any device). A
``torch.nn.Module`` is wrapped automatically (float images in [0, 1], channels first, ``eval()`` and
``no_grad``, on the module's device). Two optional hooks:

- ``fit(images)``: called once with the training split's images (e.g. PCA);
- ``encode_dataset(dataset, rows)``: encode rows of a dataset directly (the ``ideal`` encoder reads
  the true factors instead of the pixels).

Reference encoders (:data:`REFERENCE_ENCODERS`), the floor and ceiling rows of every table:
``ideal`` (the true factors, cyclic ones as (cos, sin)), ``random`` (a fixed random projection of
the pixels to 10 dimensions) and ``pca`` (10 principal components fitted on the training split).
"""

from __future__ import annotations

import importlib
import inspect
import math
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from factorbench.generators.errors import FactorbenchError

__all__ = ["IdealEncoder", "PCAEncoder", "REFERENCE_ENCODERS", "RandomProjectionEncoder", "describe_encoder",
           "encode", "load_encoder", "to_numpy"]


def to_numpy(x: Any) -> np.ndarray:
    """A numpy array from a numpy array, a torch tensor (any device) or an array-like."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu()
        if hasattr(x, "float") and str(getattr(x, "dtype", "")).startswith("torch.bfloat16"):
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


class IdealEncoder:
    """The true factors as a code: continuous and categorical factors as their values, cyclic
    factors as (cos, sin) of their angle. The ceiling row of every protocol."""

    description = "ideal: the true factors (cyclic factors as cos, sin)"

    def encode_dataset(self, dataset: Any, rows: np.ndarray) -> np.ndarray:
        values = dataset.factors[rows]
        columns = []
        for j, factor in enumerate(dataset.spec.factors):
            v = values[:, j]
            if factor.kind == "cyclic":
                angle = 2.0 * math.pi * (v - factor.low) / factor.period
                columns += [np.cos(angle), np.sin(angle)]
            else:
                columns.append(v)
        return np.stack(columns, axis=1)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        raise FactorbenchError("the ideal encoder reads the true factors, not images: use it through evaluate()")


class RandomProjectionEncoder:
    """A fixed Gaussian random projection of the pixels (scaled to [0, 1]) to ``dim`` dimensions,
    seeded: the floor row of every protocol."""

    def __init__(self, dim: int = 10, seed: int = 0) -> None:
        self.dim, self.seed = dim, seed
        self.description = f"random: fixed Gaussian projection of the pixels to {dim} dimensions (seed {seed})"
        self._matrix: np.ndarray | None = None

    def __call__(self, images: np.ndarray) -> np.ndarray:
        x = images.reshape(len(images), -1).astype(np.float32) / 255.0
        if self._matrix is None or self._matrix.shape[0] != x.shape[1]:
            rng = np.random.default_rng(self.seed)
            self._matrix = (rng.standard_normal((x.shape[1], self.dim)) / math.sqrt(x.shape[1])).astype(np.float32)
        return (x @ self._matrix).astype(np.float64)


class PCAEncoder:
    """Principal components of the pixels (scaled to [0, 1]), fitted on (at most ``max_fit`` images of)
    the training split with a seeded randomised SVD."""

    def __init__(self, dim: int = 10, max_fit: int = 10_000, seed: int = 0) -> None:
        self.dim, self.max_fit, self.seed = dim, max_fit, seed
        self.description = (f"pca: {dim} principal components of the pixels, fitted on <= {max_fit} training images "
                            f"(seed {seed})")
        self._mean: np.ndarray | None = None
        self._components: np.ndarray | None = None

    def fit(self, images: Any) -> "PCAEncoder":
        from sklearn.decomposition import PCA

        n = len(images)
        rows = np.arange(n)
        if n > self.max_fit:
            rows = np.sort(np.random.default_rng(self.seed).choice(n, self.max_fit, replace=False))
        x = np.asarray(images[rows]).reshape(len(rows), -1).astype(np.float32) / 255.0
        pca = PCA(n_components=min(self.dim, *x.shape), svd_solver="randomized", random_state=self.seed).fit(x)
        self._mean, self._components = pca.mean_.astype(np.float32), pca.components_.astype(np.float32)
        return self

    def __call__(self, images: np.ndarray) -> np.ndarray:
        if self._components is None:
            raise FactorbenchError("PCAEncoder is not fitted: call fit(training images) first (evaluate() does)")
        x = images.reshape(len(images), -1).astype(np.float32) / 255.0
        return ((x - self._mean) @ self._components.T).astype(np.float64)


#: name -> factory of a reference encoder
REFERENCE_ENCODERS: dict[str, Callable[[], Any]] = {
    "ideal": IdealEncoder,
    "random": RandomProjectionEncoder,
    "pca": PCAEncoder,
}


class _TorchModule:
    """Wraps a ``torch.nn.Module``: uint8 (n, H, W, C) -> float (n, C, H, W) in [0, 1] on its device."""

    def __init__(self, module: Any) -> None:
        self.module = module
        encode_method = getattr(module, "encode", None)
        self._call = encode_method if callable(encode_method) else module
        via = ".encode" if callable(encode_method) else ""
        self.description = f"torch module {type(module).__module__}.{type(module).__qualname__}{via}"

    def __call__(self, images: np.ndarray) -> Any:
        import torch

        try:
            device = next(self.module.parameters()).device
        except StopIteration:
            device = torch.device("cpu")
        x = torch.from_numpy(np.ascontiguousarray(images)).to(device).permute(0, 3, 1, 2).float() / 255.0
        self.module.eval()
        with torch.no_grad():
            return self._call(x)


def _is_torch_module(obj: Any) -> bool:
    return any(f"{c.__module__}.{c.__name__}" == "torch.nn.modules.module.Module" for c in type(obj).__mro__)


def _required_arguments(obj: Any) -> list[str] | None:
    """Names of the arguments calling ``obj`` requires (None when its signature cannot be read)."""
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                                          p.KEYWORD_ONLY)]


def _is_factory(obj: Any) -> bool:
    """A class, or a function that takes no required argument: called once to build the encoder (an encoder
    itself takes the images)."""
    if isinstance(obj, type):
        return True
    return callable(obj) and not _is_torch_module(obj) and _required_arguments(obj) == []


def _build(factory: Any, what: str) -> Any:
    """The encoder a factory (a class, or a function without required arguments) returns, with clear errors."""
    name = getattr(factory, "__qualname__", type(factory).__qualname__)
    if isinstance(factory, type):
        required = _required_arguments(factory)
        if required:
            raise FactorbenchError(
                f"{what}: {name} is a class whose constructor needs {', '.join(required)}; factorbench calls a class "
                f"with no arguments to build the encoder. Give a function that builds it instead, e.g. "
                f"def encoder(): return {name}(...), or an instance (from Python)")
    try:
        return factory()
    except Exception as exc:
        raise FactorbenchError(f"{what}: building the encoder, {name}() raised {type(exc).__name__}: {exc}") from exc


def _load_run(run_dir: str, device: str = "cpu") -> Any:
    """A model trained by ``factorbench train`` (needs the ``train`` extra), on ``device``."""
    try:
        from factorbench.baselines.runs import load_run
        import torch  # noqa: F401
    except ImportError:
        raise FactorbenchError("--encoder run:... needs PyTorch: pip install 'factorbench[train]'") from None
    if device != "cpu":
        from factorbench.baselines.trainer import choose_device

        device = str(choose_device(device))
    return load_run(run_dir, device=device)


def _import_from_cwd() -> None:
    """Make modules in the current directory importable, as ``python -m`` does (the ``factorbench``
    script's own folder is on ``sys.path`` instead)."""
    cwd = os.getcwd()
    if not any(p in ("", ".", cwd) for p in sys.path):
        sys.path.insert(0, cwd)
    importlib.invalidate_caches()


def check_encoder_spec(spec: str) -> None:
    """Refuse an ``--encoder`` string that names nothing loadable (by its form alone: nothing is imported or
    read), so that a mistyped spec is reported before a default file name is made from it."""
    if spec in REFERENCE_ENCODERS:
        return
    if spec.startswith("run:"):
        if not spec[len("run:"):].partition("@")[0]:
            raise FactorbenchError(f"--encoder {spec!r}: give the run's directory, e.g. run:runs/beta-vae")
        return
    module_name, colon, attr = spec.partition(":")
    dotted = (module_name, attr)
    if not colon or not all(part.isidentifier() for name in dotted for part in name.split(".")):
        hint = (f"; for a trained run write run:{spec}" if ("/" in spec or os.sep in spec or os.path.isdir(spec))
                and ":" not in spec else "")
        raise FactorbenchError(f"--encoder {spec!r}: give a reference encoder ({', '.join(REFERENCE_ENCODERS)}), "
                               f"run:RUN_DIR or module:function, e.g. mypackage.models:encode{hint}")


def load_encoder(spec: Any, device: str = "cpu") -> Any:
    """An encoder from a reference name (``ideal``, ``random``, ``pca``), ``run:RUN_DIR`` (a trained run, on
    ``device``: cpu, cuda or auto),
    a ``module:attribute`` string
    (a callable encoder, or a factory called with no arguments that returns one; imported from the
    current directory too, as ``python -m`` does), or an object."""
    if isinstance(spec, str):
        if spec in REFERENCE_ENCODERS:
            return REFERENCE_ENCODERS[spec]()
        if spec.startswith("run:"):
            return _load_run(spec[len("run:"):], device)
        check_encoder_spec(spec)
        module_name, _, attr = spec.partition(":")
        _import_from_cwd()
        try:
            obj = importlib.import_module(module_name)
        except ImportError as exc:
            raise FactorbenchError(f"--encoder {spec!r}: cannot import {module_name!r} ({exc}); run from the folder "
                                   f"that holds it ({os.getcwd()} has no {module_name.split('.')[0]!r}), put it on "
                                   "PYTHONPATH or install it") from None
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise FactorbenchError(f"--encoder {spec!r}: {module_name} has no attribute {attr!r}")
            obj = getattr(obj, part)
        spec = _build(obj, f"--encoder {spec!r}") if _is_factory(obj) else obj
    elif _is_factory(spec):  # a class or an uncalled factory given from Python
        spec = _build(spec, "the encoder given")
    if _is_torch_module(spec):
        return _TorchModule(spec)
    if not (callable(spec) or hasattr(spec, "encode_dataset")):
        raise FactorbenchError(f"the encoder must be callable (images -> codes), got {type(spec).__name__}")
    return spec


def describe_encoder(encoder: Any) -> str:
    """A one-line description of an encoder for the result file."""
    text = getattr(encoder, "description", None)
    if isinstance(text, str):
        return text
    name = getattr(encoder, "__qualname__", None) or type(encoder).__qualname__
    return f"{getattr(encoder, '__module__', type(encoder).__module__)}.{name}"


def _shape(x: Any) -> tuple[int, ...] | None:
    shape = getattr(x, "shape", None)
    return tuple(int(s) for s in shape) if shape is not None else None


def _posterior_entries(out: tuple | list, n: int, what: str) -> tuple[Any, Any]:
    """(mu, logvar) from a tuple an encoder returned: the two entries of one (n, D) shape, next to each other,
    when no other entry has that shape, e.g. (mu, logvar), (reconstruction, mu, logvar) or (mu, logvar, kl).
    Anything else is ambiguous, e.g. (z, mu, logvar), and refused."""
    shapes = [_shape(x) for x in out]
    codes = [i for i, s in enumerate(shapes) if s is not None and len(s) == 2 and s[0] == n]
    if len(out) == 2 and len(codes) == 2 and shapes[0] != shapes[1]:
        raise FactorbenchError(f"{what} returned (mu, logvar) of shapes {shapes[0]} and {shapes[1]}; they must match")
    pairs = [(i, j) for i, j in zip(codes, codes[1:]) if j == i + 1 and shapes[i] == shapes[j]]
    same = [i for i in codes if pairs and shapes[i] == shapes[pairs[0][0]]]
    if len(pairs) == 1 and len(same) == 2:
        return out[pairs[0][0]], out[pairs[0][1]]
    listed = ", ".join("?" if s is None else str(s) for s in shapes)
    raise FactorbenchError(
        f"{what} returned a {type(out).__name__} of {len(out)} entries of shapes {listed} for {n} images; "
        "factorbench takes codes (n, D), or (mu, logvar) as two arrays (n, D), also inside a longer tuple when no "
        "other entry has their shape, e.g. (reconstruction, mu, logvar). This one is ambiguous: return codes or "
        "(mu, logvar) from a function, or give a model with an encode method")


def _check_batch(out: Any, n: int, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    if isinstance(out, (tuple, list)):
        first, second = _posterior_entries(out, n, what)
        mu, logvar = to_numpy(first), to_numpy(second)
    else:
        mu, logvar = to_numpy(out), None
    for name, a in (("codes" if logvar is None else "mu", mu), ("logvar", logvar)):
        if a is None:
            continue
        if a.dtype == object or not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
            raise FactorbenchError(f"{what} returned {name} of dtype {a.dtype}; return a real float array (n, D)")
        if a.ndim != 2:
            raise FactorbenchError(f"{what} returned {name} of shape {a.shape} for {n} images; return an array of "
                                   "shape (n, D) (flatten the code)")
        if a.shape[0] != n:
            raise FactorbenchError(f"{what} returned {a.shape[0]} rows for a batch of {n} images; return one row "
                                   "per image, in order")
        if not np.isfinite(a).all():
            raise FactorbenchError(f"{what} returned NaN or inf in {name}; fix the model before scoring it")
    return mu.astype(np.float64), None if logvar is None else logvar.astype(np.float64)


def _encode_batch(encoder: Any, images: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``encoder(images)`` checked (:func:`_check_batch`); its own error becomes a FactorbenchError naming the
    batch."""
    try:
        out = encoder(images)
    except FactorbenchError:
        raise
    except Exception as exc:
        raise FactorbenchError(f"{what} raised {type(exc).__name__} on a batch of {len(images)} images "
                               f"(uint8, shape {images.shape}): {exc}") from exc
    return _check_batch(out, len(images), what)


def encode_images(encoder: Any, images: np.ndarray) -> np.ndarray:
    """The codes (means) of one batch of uint8 images (n, H, W, C), checked as :func:`encode` checks them."""
    return _encode_batch(encoder, images, f"the encoder {describe_encoder(encoder)}")[0]


def encode(encoder: Any, dataset: Any, rows: np.ndarray, *, batch_size: int = 256,
           progress: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Codes (and log-variances, or None) of ``rows`` of ``dataset``, in that order, checked batch by batch."""
    from tqdm import tqdm

    if batch_size < 1:
        raise FactorbenchError(f"batch_size must be positive, got {batch_size}")
    what = f"the encoder {describe_encoder(encoder)}"
    if hasattr(encoder, "encode_dataset"):
        return _check_batch(encoder.encode_dataset(dataset, rows), len(rows), what)
    mus, logvars = [], []
    bar = tqdm(total=len(rows), desc="encoding", unit="img", disable=None if progress else True, leave=False)
    for start in range(0, len(rows), batch_size):
        batch_rows = rows[start:start + batch_size]
        mu, logvar = _encode_batch(encoder, dataset.images[batch_rows], what)
        if mus and mu.shape[1] != mus[0].shape[1]:
            raise FactorbenchError(f"{what} returned {mu.shape[1]} code dimensions for one batch and "
                                   f"{mus[0].shape[1]} for another; the code size must be fixed")
        mus.append(mu)
        logvars.append(logvar)
        bar.update(len(batch_rows))
    bar.close()
    if any(lv is None for lv in logvars) and not all(lv is None for lv in logvars):
        raise FactorbenchError(f"{what} returned a posterior for some batches and plain codes for others")
    mu = np.concatenate(mus)
    return mu, None if logvars[0] is None else np.concatenate(logvars)
