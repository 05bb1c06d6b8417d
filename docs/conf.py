"""Sphinx configuration for the skdp documentation (builds offline).

``make -C docs html`` (or ``python -m sphinx -W --keep-going -b html docs
docs/_build/html``) builds the site with warnings treated as errors. The
gallery runs every ``examples/plot_*.py``; with ``SKDP_DOCS_QUICK=1`` (CI) the
heavy ones, whose names end in ``_slow``, are shown without being run.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import skdp  # noqa: E402

project = "skdp"
author = "skdp developers"
copyright = "skdp developers"
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
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "**.zip", "**/*.md5"]
suppress_warnings = ["myst.header", "config.cache"]
templates_path = ["_templates"]

html_theme = "pydata_sphinx_theme"
html_title = f"skdp {version}"
html_static_path = ["_static"]
html_css_files = ["skdp.css"]
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_prev_next": False,
    "header_links_before_dropdown": 5,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}

_quick = bool(os.environ.get("SKDP_DOCS_QUICK"))
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Only plot_*.py scripts are executed (quickstart.py is the README demo);
    # SKDP_DOCS_QUICK=1 skips those whose names end in "_slow".
    "filename_pattern": r"/plot_(?!.*_slow\.py$)" if _quick else r"/plot_",
    "download_all_examples": False,
    "plot_gallery": "True",
    "min_reported_time": 5,
    # "Examples using X" at the bottom of each API page.
    "doc_module": ("skdp",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"skdp": None},
    # An example that raises fails the build.
    "only_warn_on_example_error": False,
}
