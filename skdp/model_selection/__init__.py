"""Private model selection: hyperparameter search whose choice is accounted.

:class:`DPGridSearchCV` and :class:`DPRandomizedSearchCV` repeat a randomly
chosen candidate a random number of times and release only the best
(Papernot & Steinke 2022); see :doc:`/model_selection`.
"""

from ._search import DPGridSearchCV, DPRandomizedSearchCV

__all__ = ["DPGridSearchCV", "DPRandomizedSearchCV"]
