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

GONDAL_2019 = """@inproceedings{gondal2019transfer,
  title     = {On the Transfer of Inductive Bias from Simulation to the Real World: a New Disentanglement Dataset},
  author    = {Gondal, Muhammad Waleed and W{\\"u}thrich, Manuel and Miladinovi{\\'c}, {\\DJ}or{\\dj}e and Locatello, Francesco and Breidt, Martin and Volchkov, Valentin and Akpo, Joel and Bachem, Olivier and Sch{\\"o}lkopf, Bernhard and Bauer, Stefan},
  booktitle = {Advances in Neural Information Processing Systems},
  volume    = {32},
  year      = {2019}
}"""

BURGESS_KIM_2018 = """@misc{3dshapes18,
  title        = {3D Shapes Dataset},
  author       = {Burgess, Chris and Kim, Hyunjik},
  howpublished = {https://github.com/deepmind/3dshapes-dataset/},
  year         = {2018}
}"""

DSPRITES_2017 = """@misc{dsprites17,
  author       = {Matthey, Loic and Higgins, Irina and Hassabis, Demis and Lerchner, Alexander},
  title        = {dSprites: Disentanglement testing Sprites dataset},
  howpublished = {https://github.com/deepmind/dsprites-dataset/},
  year         = {2017}
}"""

HIGGINS_2017 = """@inproceedings{higgins2017betavae,
  title     = {beta-{VAE}: Learning Basic Visual Concepts with a Constrained Variational Framework},
  author    = {Higgins, Irina and Matthey, Loic and Pal, Arka and Burgess, Christopher and Glorot, Xavier and Botvinick, Matthew and Mohamed, Shakir and Lerchner, Alexander},
  booktitle = {International Conference on Learning Representations},
  year      = {2017}
}"""
