"""Dark regions of one-sided shading on meshes made by others (the figures in DATASETS.md).

For each object, renders its 64 rotations with the ``modelnet40`` camera and light three ways: one-sided
from the faces as wound in the file; one-sided from the faces wound consistently
(:meth:`Mesh.consistently_oriented`: ``modelnet40`` 1.2.0); and two-sided from the consistently wound faces
(:meth:`Mesh.two_sided` with back faces culled: ``modelnet40`` 1.3.0, as Blender shaded Tonnaer et al.'s
renders). Prints the share of interior object pixels darker than their 5 x 5 neighbourhood's median
(speckles), and the share of object pixels more than 25/255 darker than in the two-sided rendering:
unlike the speckle count, this sees dark regions of any size (a wing lit by the ambient term alone).

Run from the repository root::

    python tests/perf/speckles_modelnet40.py        # the shipped airplane: half its faces rewound; every face twice
    python tests/perf/speckles_modelnet40.py --source ~/data/ModelNet40.zip --objects 20   # real airplanes
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from factorbench.generators import get
from factorbench.generators.airplane import CAMERA_AZIMUTH, LIGHT
from factorbench.generators.meshes import Mesh, airplane, load_off, load_ply
from factorbench.generators.render import Camera, RenderSettings, get_backend, orbit_views, rotation_z
from factorbench.generators.turntable import BASE_COLOUR, FOV_Y_DEGREES

STEPS = 64


def render_turns(mesh: Mesh, backend: str = "auto", two_sided: bool = False) -> np.ndarray:
    """The 64 rotations of ``mesh`` (centred, unit radius) as the turntable datasets draw them."""
    angles = 2 * math.pi * np.arange(STEPS) / STEPS
    view = orbit_views(np.full(STEPS, CAMERA_AZIMUTH), np.full(STEPS, math.radians(20.0)), 2.6)
    colours = np.broadcast_to(np.asarray(BASE_COLOUR), (STEPS, 3))
    mesh = mesh.centred_and_scaled(1.0)
    return get_backend(backend).render(mesh.two_sided() if two_sided else mesh, rotation_z(angles), view, colours,
                                       Camera(64, FOV_Y_DEGREES), LIGHT,
                                       RenderSettings((1.0, 1.0, 1.0), 4, cull_back_faces=two_sided))


def speckles(images: np.ndarray) -> float:
    """Share of interior object pixels more than 25/255 darker than their 5 x 5 object neighbourhood's median."""
    luma = images.astype(float).mean(axis=-1)
    obj = (images < 250).any(axis=-1)
    padded = np.pad(np.where(obj, luma, np.nan), ((0, 0), (2, 2), (2, 2)), constant_values=np.nan)
    windows = sliding_window_view(padded, (5, 5), axis=(1, 2)).reshape(*luma.shape, 25)
    with warnings.catch_warnings():  # windows without object pixels have no median (and are not used)
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(windows, axis=-1)
    interior = obj & sliding_window_view(np.pad(obj, ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2)).all(axis=(-2, -1))
    return float((interior & (luma < median - 25)).sum() / max(interior.sum(), 1))


def darker_than(images: np.ndarray, reference: np.ndarray) -> float:
    """Share of object pixels more than 25/255 darker (in any channel) than in ``reference``."""
    obj = (reference < 250).any(axis=-1)
    return float(((reference.astype(int) - images).max(axis=-1) > 25)[obj].mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="ModelNet40 folder or zip (default: the shipped airplane, faces rewound)")
    parser.add_argument("--objects", type=int, default=10, help="objects of airplane/train to measure")
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    if args.source:
        gen = get("modelnet40", source=args.source)
        reader = {".off": load_off, ".ply": load_ply}
        meshes = {name: reader[name[-4:].lower()](gen.source.read(name)) for name in gen.files[:args.objects]}
    else:
        plane = airplane()
        flip = np.random.default_rng(0).random(len(plane.faces)) < 0.5
        meshes = {"airplane, half its faces rewound": Mesh(plane.vertices, np.where(flip[:, None], plane.faces[:, ::-1],
                                                                                   plane.faces)),
                  "airplane, every face twice (both windings)": Mesh(plane.vertices, np.concatenate(
                      [plane.faces, plane.faces[:, ::-1]]))}
    print(f"{'object':44s} {'speckles: as wound':>19s} {'two-sided':>10s}   {'darker than two-sided: as wound':>31s} "
          f"{'consistent, one-sided (1.2.0)':>30s}")
    for name, mesh in meshes.items():
        as_wound = render_turns(mesh, args.backend)
        oriented = mesh.consistently_oriented()
        one_sided = render_turns(oriented, args.backend)
        reference = render_turns(oriented, args.backend, two_sided=True)
        print(f"{name:44s} {100 * speckles(as_wound):18.2f}% {100 * speckles(reference):9.2f}%   "
              f"{100 * darker_than(as_wound, reference):30.2f}% {100 * darker_than(one_sided, reference):29.2f}%")

if __name__ == "__main__":
    main()
