"""Sphinx configuration for the skdp documentation (builds offline).

``make -C docs html`` (or ``python -m sphinx -W --keep-going -b html docs
docs/_build/html``) builds the site with warnings treated as errors. The
gallery runs ``examples/quickstart.py`` and every ``examples/plot_*.py``; with
``SKDP_DOCS_QUICK=1`` (CI) the heavy ones, whose names end in ``_slow``, are
shown without being run.

No page loads anything from the network: MathJax comes from the
``sphinx-mathjax-offline`` package (the ``docs`` extra) and is copied into
``_static/mathjax``; sphinx-gallery's execution-times page, which loads
jQuery/DataTables from CDNs, is not written. ``tests/test_docs_site.py`` checks
the built pages.
"""

import os
import re
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
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax: no CDN
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

mathjax_path = "mathjax/tex-chtml.js"

autosummary_generate = True
# Inherited members are asked for by class.rst (an "inherited-members" key here,
# even False, overrides that option).
autodoc_default_options = {"members": True}
# The page contents of an API page list "fit()", not "DPKMeans.fit()".
toc_object_entries_show_parents = "hide"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = [
    "_build",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "**.zip",
    "**/*.md5",
    # Left over by builds with write_computation_times on (CDN-loaded tables).
    "sg_execution_times.rst",
    "auto_examples/sg_execution_times.rst",
]
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


class _QuickstartFirst:
    """Gallery order: the README demo first, then the rest as sphinx-gallery
    sorts them by default (shortest first)."""

    def __init__(self, src_dir):
        from sphinx_gallery.sorting import NumberOfCodeLinesSortKey

        self._lines = NumberOfCodeLinesSortKey(src_dir)

    def __call__(self, filename):
        return (filename != "quickstart.py", self._lines(filename))

    def __repr__(self):
        return "_QuickstartFirst"


_quick = bool(os.environ.get("SKDP_DOCS_QUICK"))
# The README demo quickstart.py (about a minute on 2 idle cores) and every plot_*.py are
# executed; SKDP_DOCS_QUICK=1 skips those whose names end in "_slow".
_executed = r"quickstart|plot_(?!.*_slow)\w+" if _quick else r"quickstart|plot_\w+"
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": rf"/({_executed})\.py$",
    "within_subsection_order": _QuickstartFirst,
    "download_all_examples": False,
    "plot_gallery": "True",
    "min_reported_time": 5,
    # quickstart.py prints a table: its thumbnail is a picture, named in a
    # "# sphinx_gallery_thumbnail_path" comment that the page does not show.
    "remove_config_comments": True,
    # "Examples using X" at the bottom of each API page.
    "doc_module": ("skdp",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"skdp": None},
    # An example that raises fails the build.
    "only_warn_on_example_error": False,
    # The sg_execution_times pages load jQuery and DataTables from CDNs.
    "write_computation_times": False,
}


# API pages show the public methods a class inherits (DPKMeans gets fit,
# predict, fit_predict from the private _BaseDPLloyd; class.rst passes
# :inherited-members:), but not the framework's own machinery: of what comes
# from scikit-learn, skorch, torch or Python itself only the estimator methods
# a user calls are kept.
_FOREIGN_METHODS_KEPT = {
    "sklearn": {"fit_predict", "fit_transform", "get_feature_names_out", "predict", "score", "transform"},
    "skorch": {"initialize", "load_params", "save_params"},
}


def _defining_module(obj):
    target = getattr(obj, "fget", None) or getattr(obj, "__func__", None) or obj
    return getattr(target, "__module__", None) or ""


def _skip_foreign_inherited(app, what, name, obj, skip, options):
    if skip or what != "class" or not (callable(obj) or isinstance(obj, property)):
        return None
    module = _defining_module(obj)
    if module == "skdp" or module.startswith("skdp."):
        return None
    return name not in _FOREIGN_METHODS_KEPT.get(module.split(".")[0], ())


_FOREIGN_XREF = re.compile(r":(?:ref|term):`([^`<]*?)\s*(?:<[^`>]*>)?`")


def _plain_foreign_docstring(app, what, name, obj, options, lines):
    """A kept scikit-learn/skorch docstring: its cross-references to that
    project's own docs become plain text, and it says where it comes from."""
    module = _defining_module(obj)
    if what != "method" or module.split(".")[0] not in _FOREIGN_METHODS_KEPT:
        return
    plain = lambda m: m.group(1) if "<" in m.group(0) else f"``{m.group(1)}``"  # noqa: E731
    lines[:] = [_FOREIGN_XREF.sub(plain, line) for line in lines]
    owner = getattr(obj, "__qualname__", "").rpartition(".")[0]
    lines[:0] = [f"*Inherited from* ``{module}.{owner}``.", ""]


# A long token of inline code anywhere (``sklearn.mixture.GaussianMixture``,
# ``tests/test_bnn.py::test_...``), and of any text in a table cell
# ("DPBetaBernoulli(laplace,"), may wrap after a dot, slash, colon,
# underscore, comma or opening bracket, never inside a word (skdp.css forbids
# breaking anywhere): a many-column table fits the column at 1400 px, and a
# paragraph fits a phone.
_LONG_TOKEN = 16
_BREAK_AFTER = re.compile(r"(?<=[./:_,(\[])(?=[^\s./:_,)\]])")


def _break_points(app, doctree, docname):
    from docutils import nodes

    in_table = (nodes.paragraph, nodes.strong, nodes.emphasis, nodes.reference, nodes.inline)
    for text in list(doctree.findall(nodes.Text)):
        parent = text.parent
        if not (
            isinstance(parent, nodes.literal)
            or (isinstance(parent, in_table) and any(isinstance(a, nodes.table) for a in _ancestors(parent)))
        ):
            continue
        pieces = []
        for token in re.split(r"(\s+)", str(text)):
            parts = _BREAK_AFTER.split(token) if len(token) > _LONG_TOKEN else [token]
            for i, part in enumerate(parts):
                if i:
                    pieces.append(nodes.raw("", "<wbr>", format="html"))
                pieces.append(nodes.Text(part))
        if len(pieces) > 1:
            parent.replace(text, pieces)


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_inherited)
    app.connect("autodoc-process-docstring", _plain_foreign_docstring)
    app.connect("doctree-resolved", _break_points)
