"""skdp.privacy.roots: Brent's method equals scipy's brentq to the bit; the searches meet their targets."""

import math

import numpy as np
import pytest
from scipy import optimize, special

from skdp.privacy.accountants.conversions import gaussian_delta
from skdp.privacy.roots import NoCrossing, bisect, brentq, brentq_meets, step_up

# Monotone functions with their brackets and tolerances (scipy's defaults, and
# the call sites' own: the staged plan's rtol / 4 on log z, gaussian_epsilon's
# xtol=1e-12), including flat and steep ends and a root at an end point.
BRENT_CASES = [
    (lambda x: x**3 - 2.0, 0.0, 3.0, {}),
    (lambda x: math.exp(x) - 7.5, -5.0, 5.0, {}),
    (lambda x: math.atan(x - 0.3), -10.0, 1e3, {}),
    (lambda x: -math.log1p(x) + 0.25, 0.0, 10.0, {"xtol": 1e-12}),
    (lambda x: special.ndtr(x) - 0.975, -8.0, 8.0, {}),
    (
        lambda x: 1.0 / (1.0 + math.exp(-40.0 * (x - 0.123))) - 0.5,
        -1.0,
        1.0,
        {"xtol": 2.5e-5, "rtol": 2.5e-5},
    ),
    (lambda e: gaussian_delta(1.3, e) - 1e-5, 0.0, 8.0, {"xtol": 1e-12}),
    (
        lambda s: gaussian_delta(math.exp(s), 1.0) - 1e-6,
        math.log(1e-3),
        math.log(10.0),
        {"xtol": 2.5e-5, "rtol": 2.5e-5},
    ),
    (lambda x: x - 1.0, 1.0, 2.0, {}),
    (lambda x: x**5 + x - 1e-300, -1.0, 1.0, {"maxiter": 200}),
]


@pytest.mark.parametrize("case", range(len(BRENT_CASES)))
def test_brentq_equals_scipy_brentq_to_the_bit(case):
    f, a, b, kwargs = BRENT_CASES[case]
    ours = brentq(f, a, b, **kwargs)
    theirs = optimize.brentq(f, a, b, **kwargs)
    assert ours == theirs  # the same float, not a close one
    # The same iterates: the same points evaluated, in the same order.
    seen_ours, seen_theirs = [], []
    brentq(lambda x: seen_ours.append(x) or f(x), a, b, **kwargs)
    optimize.brentq(lambda x: seen_theirs.append(x) or f(x), a, b, **kwargs)
    assert seen_ours == seen_theirs


def test_brentq_matches_scipy_on_random_monotone_cubics():
    rng = np.random.default_rng(7)
    for _ in range(200):
        c1, c3 = rng.uniform(0.01, 5.0, 2)
        root = rng.uniform(-3, 3)

        def f(x, c1=c1, c3=c3, root=root):
            return c3 * (x - root) ** 3 + c1 * (x - root)

        a, b = root - rng.uniform(0.1, 10), root + rng.uniform(0.1, 10)
        assert brentq(f, a, b) == optimize.brentq(f, a, b)
        assert brentq(f, a, b, xtol=1e-4, rtol=1e-4) == optimize.brentq(f, a, b, xtol=1e-4, rtol=1e-4)


def test_brentq_refuses_a_bracket_without_a_sign_change():
    with pytest.raises(NoCrossing):
        brentq(lambda x: x + 5.0, 0.0, 1.0)


@pytest.mark.parametrize("case", range(len(BRENT_CASES)))
def test_brentq_meets_returns_an_evaluated_point_that_meets(case):
    f, a, b, kwargs = BRENT_CASES[case]
    seen = {}

    def gap(x):
        seen[x] = f(x)
        return seen[x]

    x = brentq_meets(gap, a, b, **kwargs)
    assert x in seen and seen[x] <= 0
    # Where Brent's own answer meets, it is the answer.
    root = optimize.brentq(f, a, b, **kwargs)
    if f(root) <= 0:
        assert x == root
    else:
        tol = kwargs.get("xtol", 2e-12) + kwargs.get("rtol", 8.881784197001252e-16) * abs(root)
        assert abs(x - root) <= 2 * tol


def test_step_up_returns_the_first_point_of_the_walk_that_meets():
    assert step_up(lambda z: z >= 1.0, 0.9, 1.01) == pytest.approx(1.0, rel=0.011)
    assert step_up(lambda z: z >= 1.0, 0.9, 1.01) >= 1.0
    assert step_up(lambda z: True, 0.5, 2.0) == 0.5


def test_bisect_without_locating_evaluates_every_midpoint_and_agrees_when_monotone():
    calls = []

    def f(z):
        calls.append(z)
        return 1.0 / z

    located = bisect(f, 0.5, 0.1, 10.0, 1e-10)
    n_located = len(calls)
    calls.clear()
    plain = bisect(f, 0.5, 0.1, 10.0, 1e-10, locate=False)
    assert plain == located and f(plain) <= 0.5
    assert len(calls) > n_located
