"""Warnings and errors raised by skdp."""

import re


class PrivacyLeakWarning(RuntimeWarning):
    """A guarantee rests on something computed from the data without privacy.

    Raised when the user declared no bound (``data_norm``, ``bounds``) and skdp
    falls back to the data's own range, as diffprivlib does.  The message names
    the quantity that leaks.
    """


class BudgetExceededError(ValueError):
    """A fit would spend more privacy budget than remains."""


#: Messages of NumPy and Python conversions that end by quoting the offending
#: value ("could not convert string to float: 'Alice'").
_QUOTES_A_VALUE = re.compile(
    r"^(?P<what>could not convert .*?|invalid literal for .*?|could not broadcast input array .*?)"
    r"(?::\s*.*)?$",
    re.DOTALL,
)


#: scikit-learn's shape errors, which print the array after the message
#: ("Expected 2D array, got 1D array instead:\narray=[ 0.12 0.10 ...]").
_QUOTES_AN_ARRAY = re.compile(r"^(?P<what>Expected 2D array, got [^:\n]*? instead)\s*:\s*array=", re.DOTALL)


def without_data_values(exc):
    """Return ``exc``, or a copy of it whose message no longer quotes a data value.

    An error raised while reading the training data is a release like any
    other (:doc:`/guarantee`): a message that quotes a value from the data
    would publish it outside the guarantee.  NumPy's and Python's conversion
    errors do (``could not convert string to float: 'Alice'``), and so do
    scikit-learn's shape errors (``Expected 2D array, got 1D array instead:
    array=[...]``); they are replaced by the same error type with the values
    cut off.  Other messages
    are returned unchanged: skdp's own name the parameter, never a value.

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    exc : BaseException
        ``exc`` itself, or a new exception of the same type, not chained to
        ``exc`` (a traceback would print the original message).
    """
    if not isinstance(exc, ValueError | TypeError):
        return exc
    array = _QUOTES_AN_ARRAY.match(str(exc))
    if array is not None:
        clean = type(exc)(
            f"{array['what']} (the values are not shown: they come from the data). Reshape your "
            "data with X.reshape(-1, 1) if it has a single feature."
        )
        clean.__suppress_context__ = True
        return clean
    match = _QUOTES_A_VALUE.match(str(exc))
    if match is None:
        return exc
    clean = type(exc)(f"{match['what']} (the value is not shown: it comes from the data).")
    clean.__suppress_context__ = True
    return clean
