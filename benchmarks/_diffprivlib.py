"""diffprivlib, a benchmark-only peer, imported under scikit-learn >= 1.8.

diffprivlib 0.6.6 imports ``DOUBLE`` and ``DTYPE`` from ``sklearn.tree._tree``,
which scikit-learn 1.8 stopped exporting; this shim puts them back before the
import.  It is never used by the package or the tests.
"""

import numpy as np


def shim_sklearn_tree():
    """Restore the two names diffprivlib 0.6.6 imports from ``sklearn.tree._tree``."""
    import sklearn.tree._tree as tree

    for name, value in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
        if not hasattr(tree, name):
            setattr(tree, name, value)
