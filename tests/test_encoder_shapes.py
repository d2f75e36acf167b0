"""What an outside encoder may return and be, and the clear errors for everything else (no traceback)."""

from types import SimpleNamespace

import numpy as np
import pytest

from factorbench.benchmark.cli import main
from factorbench.benchmark.encoders import encode, load_encoder
from factorbench.generators import FactorbenchError

torch = pytest.importorskip("torch")

IMAGES = np.random.default_rng(0).integers(0, 256, (10, 64, 64, 3), dtype=np.uint8)
DATA = SimpleNamespace(images=IMAGES)
ROWS = np.arange(10)


def _flat(images):
    return images.reshape(len(images), -1)[:, :4].astype(np.float64)


class FullVAE(torch.nn.Module):
    """forward returns (reconstruction, mu, logvar), as most VAEs do."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(64 * 64 * 3, 6)

    def forward(self, x):
        h = self.linear(x.flatten(1))
        return x, h[:, :3], h[:, 3:]


class WithEncode(FullVAE):
    """forward gives the reconstruction only; encode gives (mu, logvar)."""

    def encode(self, x):
        h = self.linear(x.flatten(1))
        return h[:, :3], h[:, 3:]

    def forward(self, x):
        return x


class NeedsArguments:
    def __init__(self, latent_dim):
        self.latent_dim = latent_dim

    def __call__(self, images):
        return _flat(images)[:, :self.latent_dim]


class NoArguments:
    def __call__(self, images):
        return _flat(images)


def make_encoder():
    return lambda images: _flat(images)


def broken_factory():
    raise RuntimeError("weights file missing")


def test_a_module_returning_reconstruction_mu_logvar_is_scored_on_mu_and_logvar():
    model = FullVAE()
    mu, logvar = encode(load_encoder(model), DATA, ROWS)
    x = torch.from_numpy(IMAGES).permute(0, 3, 1, 2).float() / 255
    _, want_mu, want_logvar = model(x)
    assert np.allclose(mu, want_mu.detach().numpy()) and np.allclose(logvar, want_logvar.detach().numpy())


def test_a_module_with_an_encode_method_is_called_through_it():
    encoder = load_encoder(WithEncode())
    assert encoder.description.endswith("WithEncode.encode")
    mu, logvar = encode(encoder, DATA, ROWS)
    assert mu.shape == logvar.shape == (10, 3)


@pytest.mark.parametrize("returned, accepted", [
    (lambda n: (np.zeros((n, 3)), np.ones((n, 3)), 0.5), True),                      # (mu, logvar, kl)
    (lambda n: (np.zeros((n, 3, 8, 8)), np.zeros((n, 3)), np.ones((n, 3))), True),   # (recon, mu, logvar)
    (lambda n: (np.zeros((n, 3)), np.zeros((n, 3)), np.ones((n, 3))), False),       # (z, mu, logvar): ambiguous
    (lambda n: (np.zeros((n, 3)), np.zeros((n, 4))), False),                         # shapes differ
    (lambda n: (np.zeros((n, 3, 8, 8)), np.zeros((n, 2))), False),                   # no pair
])
def test_tuples_are_read_only_when_unambiguous(returned, accepted):
    encoder = lambda images: returned(len(images))  # noqa: E731
    if accepted:
        mu, logvar = encode(encoder, DATA, ROWS)
        assert mu.shape == logvar.shape == (10, 3) and np.all(mu == 0) and np.all(logvar == 1)
    else:
        with pytest.raises(FactorbenchError, match="shapes"):
            encode(encoder, DATA, ROWS)


def test_complex_codes_and_raising_encoders_get_clear_errors():
    with pytest.raises(FactorbenchError, match="complex128; return a real float array"):
        encode(lambda images: _flat(images) + 1j, DATA, ROWS)
    with pytest.raises(FactorbenchError, match="raised ZeroDivisionError on a batch of 10 images"):
        encode(lambda images: 1 / 0, DATA, ROWS)


def test_classes_and_factories_are_built_from_python_too():
    assert np.array_equal(encode(load_encoder(NoArguments), DATA, ROWS)[0], _flat(IMAGES))
    assert np.array_equal(encode(load_encoder(make_encoder), DATA, ROWS)[0], _flat(IMAGES))
    assert np.array_equal(encode(load_encoder(NeedsArguments(2)), DATA, ROWS)[0], _flat(IMAGES)[:, :2])
    with pytest.raises(FactorbenchError, match="constructor needs latent_dim"):
        load_encoder(NeedsArguments)
    with pytest.raises(FactorbenchError, match=r"broken_factory\(\) raised RuntimeError: weights file missing"):
        load_encoder(broken_factory)


@pytest.mark.parametrize("attribute, message", [
    ("NeedsArguments", "is a class whose constructor needs latent_dim"),
    ("broken_factory", "raised RuntimeError: weights file missing"),
])
def test_the_cli_refuses_unusable_encoders_with_exit_status_2(tmp_path, capsys, monkeypatch, attribute, message):
    (tmp_path / "myencoders.py").write_text(
        "import numpy as np\n"
        "class NeedsArguments:\n    def __init__(self, latent_dim):\n        pass\n"
        "def broken_factory():\n    raise RuntimeError('weights file missing')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FACTORBENCH_DATA", str(tmp_path / "cache"))
    code = main(["evaluate", "square-lsbd-v1", "--encoder", f"myencoders:{attribute}", "--quiet"])
    _, err = capsys.readouterr()
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "cache").exists()  # refused before any data was generated
