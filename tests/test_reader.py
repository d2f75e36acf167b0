"""The reader: lazy chunked image access, factors, splits and subset views."""

import pickle

import numpy as np
import pytest

from factorbench.benchmark import FactorbenchError, load


@pytest.fixture(scope="module")
def square(generated):
    with load(generated("square")) as ds:
        yield ds, ds.images[:]


def test_indexing_matches_the_full_array(square):
    ds, full = square
    assert ds.images.shape == full.shape == (4096, 64, 64, 3) and len(ds.images) == 4096
    assert np.array_equal(ds.images[7], full[7]) and np.array_equal(ds.images[-1], full[-1])
    assert np.array_equal(ds.images[10:200:3], full[10:200:3])
    for idx in ([5, 1, 5, 4095, 0], np.array([3000, 12, 12]), np.arange(4096)[::-97], []):
        assert np.array_equal(ds.images[idx], full[np.asarray(idx, dtype=int)])
    mask = np.zeros(4096, bool)
    mask[[2, 900]] = True
    assert np.array_equal(ds.images[mask], full[[2, 900]])
    assert np.array_equal(np.asarray(ds.images)[:3], full[:3])


@pytest.mark.parametrize("bad", [4096, -4097, [0, 4096], np.array([0.5]), np.zeros(3, bool)])
def test_bad_indices_raise_index_error(square, bad):
    ds, _ = square
    with pytest.raises(IndexError):
        ds.images[bad]


def test_splits_are_disjoint_views(square):
    ds, full = square
    assert set(ds.split_names) == {"train", "validation", "test"}
    parts = [ds.split_indices(name) for name in ds.split_names]
    assert sum(map(len, parts)) == 4096 and len(np.unique(np.concatenate(parts))) == 4096
    test = ds.split("test")
    assert len(test) == len(parts[0]) and np.array_equal(test.indices, ds.split_indices("test"))
    assert np.array_equal(test.images[3:6], full[test.indices[3:6]])
    assert np.array_equal(test.factors, ds.factors[test.indices])
    assert np.array_equal(test.factor_classes, ds.factor_classes[test.indices])
    assert ds.info["splits"] == {name: len(ds.split_indices(name)) for name in ds.split_names}
    with pytest.raises(FactorbenchError, match="no split 'zeroshot'; its splits are: test, train, validation"):
        ds.split("zeroshot")


def test_factors_are_read_only(square):
    ds, _ = square
    with pytest.raises(ValueError):
        ds.factors[0, 0] = 1.0


def test_dataset_pickles_and_reopens(square):
    ds, full = square
    clone = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(clone.images[[9, 8]], full[[9, 8]])
    clone.close()


def test_to_torch(square):
    torch = pytest.importorskip("torch")
    ds, full = square
    tds = ds.to_torch(split="train")
    assert len(tds) == len(ds.split_indices("train"))
    x, y = tds[0]
    row = ds.split_indices("train")[0]
    assert x.shape == (3, 64, 64) and x.dtype == torch.float32
    assert torch.allclose(x, torch.from_numpy(full[row].transpose(2, 0, 1)).float() / 255)
    assert y.dtype == torch.float32 and np.array_equal(y.numpy(), ds.factors[row].astype(np.float32))
    assert torch.equal(tds[-1][0], tds[len(tds) - 1][0])
    with pytest.raises(IndexError):
        tds[len(tds)]
    # a batch is one read (__getitems__), in the order asked, repeats allowed; it equals the items one by one
    batch = tds.__getitems__([5, 0, 5, 17])
    for (xb_i, yb_i), i in zip(batch, [5, 0, 5, 17]):
        assert torch.equal(xb_i, tds[i][0]) and torch.equal(yb_i, tds[i][1])
    rows = ds.split_indices("train")
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(tds, batch_size=100, num_workers=workers)
        xb, yb = next(iter(loader))
        assert xb.shape == (100, 3, 64, 64) and yb.shape == (100, 2) and yb.dtype == torch.float32
        assert np.array_equal(yb.numpy(), ds.factors[rows[:100]].astype(np.float32))
        assert torch.equal(xb, torch.from_numpy(full[rows[:100]].transpose(0, 3, 1, 2)).float() / 255)


def test_to_torch_targets_classes_and_transforms(square, toy, tmp_path):
    torch = pytest.importorskip("torch")
    from factorbench.generators import write_dataset

    ds, full = square
    tds = ds.to_torch(split="train", target="classes", target_transform=lambda y: y[0],
                      transform=lambda image: image.shape)
    rows = ds.split_indices("train")
    x, y = tds[3]
    assert x == (64, 64, 3) and y.dtype == torch.int64 and int(y) == int(ds.factor_classes[rows[3], 0])
    loader = torch.utils.data.DataLoader(ds.to_torch(target="classes"), batch_size=64)
    _, yb = next(iter(loader))
    assert yb.dtype == torch.int64 and np.array_equal(yb.numpy(), ds.factor_classes[:64])
    with pytest.raises(FactorbenchError, match="choose one of factors, classes"):
        ds.to_torch(target="labels")
    path = write_dataset(toy, tmp_path / "toy.h5", n=50, progress=False)  # sampled i.i.d.: no grid classes
    with load(path) as iid:
        assert iid.factor_classes is None
        with pytest.raises(FactorbenchError, match="has no factor classes"):
            iid.to_torch(target="classes")


def test_strided_and_reversed_slices(square):
    ds, full = square
    assert np.array_equal(ds.images[::-1][:5], full[::-1][:5])
    assert np.array_equal(ds.images[4000:100:-450], full[4000:100:-450])
    assert np.array_equal(ds.split("train").images[::-7], full[ds.split_indices("train")[::-7]])


def test_show_traverses_grid_and_iid_datasets(tmp_path, generated, toy):
    from factorbench.benchmark import show
    from factorbench.benchmark.show import traversal_rows
    from factorbench.generators import write_dataset

    with load(generated("square")) as ds:
        rows = traversal_rows(ds, 8)
        # vertical shift varies over 8 evenly spaced classes while the horizontal one stays at sample 0's
        assert list(ds.factor_classes[rows[0], 0]) == [0, 9, 18, 27, 36, 45, 54, 63]
        assert set(ds.factor_classes[rows[0], 1]) == {ds.factor_classes[0, 1]}
        assert list(ds.factor_classes[rows[1], 1]) == [0, 9, 18, 27, 36, 45, 54, 63]
    path = write_dataset(toy, tmp_path / "toy.h5", n=500, progress=False)
    with load(path) as ds:
        rows = traversal_rows(ds, 5)
        targets = np.linspace(0, 1, 5)
        assert np.all(np.abs(ds.factors[rows[0], 0] - targets) < 0.02)  # nearest samples to 5 even values
    png = show(path, tmp_path / "toy.png", per_factor=5)
    assert png.stat().st_size > 1000
