"""BibTeX entries of the papers whose datasets the generators make."""

TONNAER_2022 = """@inproceedings{tonnaer2022quantifying,
  title     = {Quantifying and Learning Linear Symmetry-Based Disentanglement},
  author    = {Tonnaer, Loek and Perez Rey, Luis Armando and Menkovski, Vlado and Holenderski, Mike and Portegies, Jacobus W.},
  booktitle = {Proceedings of the 39th International Conference on Machine Learning},
  series    = {PMLR},
  volume    = {162},
  year      = {2022}
}"""

EASTWOOD_2018 = """@inproceedings{eastwood2018framework,
  title     = {A Framework for the Quantitative Evaluation of Disentangled Representations},
  author    = {Eastwood, Cian and Williams, Christopher K. I.},
  booktitle = {International Conference on Learning Representations},
  year      = {2018}
}"""
