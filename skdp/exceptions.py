"""Warnings and errors raised by skdp."""


class PrivacyLeakWarning(RuntimeWarning):
    """A guarantee rests on something computed from the data without privacy.

    Raised when the user declared no bound (``data_norm``, ``bounds``) and skdp
    falls back to the data's own range, as diffprivlib does.  The message names
    the quantity that leaks.
    """


class BudgetExceededError(ValueError):
    """A fit would spend more privacy budget than remains."""
