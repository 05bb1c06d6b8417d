"""The release walker: everything in a fitted model's object graph that is not a release.

Shared by the release-surface suite (``test_release_surface.py``) and the
estimators' own suites, which hold their models to the same rules.
"""

import functools
import numbers
import types

import numpy as np
from sklearn.base import BaseEstimator

try:
    import torch
except ImportError:  # torch is optional
    torch = None

#: Training rows: prime, and no hyperparameter of the registry equals it.
N_ROWS = 97

#: Attributes Python or scikit-learn add to every pickled estimator.
_PICKLE_METADATA = {"_sklearn_version"}

_GENERATOR_TYPES = (
    np.random.Generator,
    np.random.BitGenerator,
    np.random.RandomState,
    np.random.SeedSequence,
)
if torch is not None:
    _GENERATOR_TYPES += (torch.Generator,)

#: Byte lengths of torch's CPU (MT19937) and CUDA (Philox) generator states.
_TORCH_STATE_SIZES = {5056, 16}


def _is_generator_state(obj):
    """True for the state of a generator dumped as plain data."""
    if isinstance(obj, dict) and "bit_generator" in obj:
        return True  # Generator.bit_generator.state
    if isinstance(obj, tuple) and obj and isinstance(obj[0], str) and obj[0] == "MT19937":
        return True  # RandomState.get_state()
    if isinstance(obj, str) and obj in {"MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64"}:
        return True
    if torch is not None and isinstance(obj, torch.Tensor):
        return obj.dtype == torch.uint8 and obj.ndim == 1 and obj.numel() in _TORCH_STATE_SIZES
    return False


def _length_axes(obj):
    """The lengths along each axis of an array-like (empty for scalars)."""
    if isinstance(obj, np.ndarray):
        return obj.shape
    if torch is not None and isinstance(obj, torch.Tensor):
        return tuple(obj.shape)
    if isinstance(obj, list | tuple):
        return (len(obj),)
    return ()


def _children(obj):
    """The objects ``obj`` refers to, with the path step leading to each."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield f"[{key!r}]", key
            yield f"[{key!r}]", value
    elif isinstance(obj, list | tuple | set | frozenset):
        for i, value in enumerate(obj):
            yield f"[{i}]", value
    elif isinstance(obj, np.ndarray):
        if obj.dtype == object:
            for i, value in enumerate(obj.ravel()):
                yield f"[{i}]", value
    elif torch is not None and isinstance(obj, torch.Tensor):
        return
    else:
        state = getattr(obj, "__dict__", None)
        if isinstance(state, dict):
            for key, value in state.items():
                yield f".{key}", value
        for slot in getattr(type(obj), "__slots__", ()):
            if isinstance(slot, str) and hasattr(obj, slot):
                yield f".{slot}", getattr(obj, slot)


#: Objects whose attributes are code, not fitted state.
_CODE = (
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
    functools.partial,
)


def _is_leaf(obj):
    return obj is None or isinstance(obj, (numbers.Number, *_CODE))


def release_violations(root, user_random_state, n_rows=N_ROWS, in_memory=False):
    """Everything in ``root``'s object graph that is not a release; list of strings.

    ``in_memory``: ``root`` was not pickled, so its declared working state
    (``_working_state``: exact statistics a later charged release needs,
    never pickled) is allowed and not walked.
    """
    problems = []
    params = set(root.get_params(deep=False))
    allowed = set(type(root)._release_surface()) | _PICKLE_METADATA | params
    working = set(getattr(type(root), "_working_state", ())) if in_memory else set()
    extra = set(vars(root)) - allowed - working
    problems += [f"undeclared fitted attribute .{name}" for name in sorted(extra)]
    seen = {id(vars(root)[name]) for name in working if name in vars(root)}
    stack = [("model", root)]
    while stack:
        path, obj = stack.pop()
        if id(obj) in seen or _is_leaf(obj):
            continue
        seen.add(id(obj))
        if isinstance(obj, _GENERATOR_TYPES):
            problems.append(f"{path}: generator {type(obj).__name__}")
            continue
        if _is_generator_state(obj):
            problems.append(f"{path}: generator state")
            continue
        if isinstance(obj, str | bytes):
            continue
        if n_rows in _length_axes(obj):
            problems.append(f"{path}: one entry per training row, shape {_length_axes(obj)}")
        if isinstance(obj, BaseEstimator) and obj is not root:
            seed = obj.get_params(deep=False).get("random_state")
            if isinstance(seed, numbers.Integral) and seed != user_random_state:
                problems.append(f"{path}: nested estimator keeps random_state={seed} the user did not pass")
        for step, child in _children(obj):
            stack.append((path + step, child))
    return problems
