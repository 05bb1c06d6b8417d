"""Sphinx configuration for the skdp documentation (builds offline)."""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import skdp  # noqa: E402

project = "skdp"
author = "skdp developers"
release = version = skdp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "**.zip"]
suppress_warnings = ["myst.header", "config.cache"]

html_theme = "pydata_sphinx_theme"
html_title = "skdp"
html_theme_options = {"navigation_with_keys": False, "show_prev_next": False}

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Only plot_*.py examples are executed; SKDP_DOCS_QUICK=1 (CI) skips the
    # heavy ones whose names contain "_slow".
    "filename_pattern": r"/plot_(?!.*_slow)" if os.environ.get("SKDP_DOCS_QUICK") else r"/plot_",
    "download_all_examples": False,
    "plot_gallery": "True",
}

templates_path = ["_templates"]
