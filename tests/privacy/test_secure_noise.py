"""Secure noise: exact discrete samplers, and Mironov's floating-point attack."""

import contextlib
import math
import os
import pickle
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
from _registry import CASES
from scipy import stats
from sklearn.base import clone

from skdp import config_context, get_config, set_config
from skdp.audit import epsilon_lower_bound
from skdp.bayes import DPBetaBernoulli
from skdp.cluster import DPKMeans
from skdp.privacy import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianMechanism,
    LaplaceEvent,
    LaplaceMechanism,
    PrivacyLedger,
    compose,
)
from skdp.privacy.accountants.basic import pure_epsilon
from skdp.privacy.accountants.rdp import RDPAccountant
from skdp.privacy.accountants.zcdp import ZCDPAccountant
from skdp.privacy.mechanisms.secure import bernoulli_exp, discrete_gaussian, discrete_laplace, grid_step

N = 20_000


def test_bernoulli_exp_is_exact_in_distribution():
    rng = np.random.default_rng(0)
    for p, q in ((1, 3), (5, 2), (0, 1)):
        hits = sum(bernoulli_exp(p, q, rng) for _ in range(N))
        expected = math.exp(-p / q)
        assert abs(hits / N - expected) < 5 * math.sqrt(expected * (1 - expected) / N) + 1e-12


def test_discrete_laplace_and_gaussian_pmfs():
    rng = np.random.default_rng(1)
    t = 3
    lap = np.array([discrete_laplace(t, rng) for _ in range(N)])
    ks = np.arange(-6, 7)
    pmf = np.exp(-np.abs(ks) / t) * (1 - math.exp(-1 / t)) / (1 + math.exp(-1 / t))
    observed = np.array([(lap == k).sum() for k in ks])
    assert stats.chisquare(observed, pmf * N * observed.sum() / (pmf * N).sum()).pvalue > 1e-3
    sigma2 = 4
    gau = np.array([discrete_gaussian(sigma2, rng) for _ in range(N)])
    ks = np.arange(-5, 6)
    w = np.exp(-(ks**2) / (2 * sigma2))
    observed = np.array([(gau == k).sum() for k in ks])
    assert stats.chisquare(observed, w / w.sum() * observed.sum()).pvalue > 1e-3


@pytest.mark.parametrize(
    "mechanism,std", [(LaplaceMechanism(1.0, 2.0), math.sqrt(2) * 2.0), (GaussianMechanism(1.0, 2.0), 2.0)]
)
def test_secure_release_has_the_claimed_scale_on_a_data_independent_grid(mechanism, std):
    rng = np.random.default_rng(2)
    ledger = PrivacyLedger(secure_noise=True)  # the fit's setting, passed explicitly
    out = mechanism.release(np.full(N, 0.123456789), rng, ledger)
    kurtosis = 6 if isinstance(mechanism, LaplaceMechanism) else 3
    assert np.std(out) == pytest.approx(std, rel=5 * math.sqrt((kurtosis - 1) / (4 * N)))
    gamma = grid_step(mechanism.sensitivity)
    assert np.all(np.mod(out / gamma, 1) == 0)  # every output is an integer multiple of gamma
    if isinstance(mechanism, GaussianMechanism):
        assert type(ledger.events[0]) is DiscreteGaussianEvent
    else:
        assert type(ledger.events[0]) is DiscreteLaplaceEvent


def _event_impossible_under_one(outputs):
    # Outputs in (0, 0.5) that are not multiples of 2**-53: reachable as
    # 0 + n (n has finer ulps there) but never as fl(1 + n), which lands on
    # the 2**-53 grid for any n in (-1, -0.5).
    o = np.asarray(outputs)
    return (o > 0) & (o < 0.5) & (np.mod(o * 2.0**53, 1) != 0)


def _outputs(value, secure, seed):
    rng = np.random.default_rng(seed)
    return LaplaceMechanism(1.0, 1.0).release(np.full(N, value), rng, PrivacyLedger(secure_noise=secure))


def test_floating_point_attack_breaks_naive_laplace_but_not_secure():
    eps = 1.0  # sensitivity 1, scale 1
    naive_0, naive_1 = (
        _event_impossible_under_one(_outputs(0.0, False, 3)),
        _event_impossible_under_one(_outputs(1.0, False, 4)),
    )
    # Naive sampling: the event occurs under value 0 and never under value 1:
    # an infinite privacy loss that the audit measures far above epsilon.
    assert naive_0.mean() > 0.05 and naive_1.sum() == 0
    assert epsilon_lower_bound(naive_0.astype(float), naive_1.astype(float)) > 3 * eps
    secure_0, secure_1 = (
        _event_impossible_under_one(_outputs(0.0, True, 3)),
        _event_impossible_under_one(_outputs(1.0, True, 4)),
    )
    assert secure_0.sum() == 0 and secure_1.sum() == 0
    # And no other low-bit pattern distinguishes them beyond epsilon.
    low_0 = np.mod(_outputs(0.0, True, 5) * 2.0**40, 2)
    low_1 = np.mod(_outputs(1.0, True, 6) * 2.0**40, 2)
    assert epsilon_lower_bound(low_0, low_1) <= eps


def test_estimator_under_secure_noise():
    X = np.random.default_rng(0).binomial(1, 0.4, size=(400, 3))
    with config_context(secure_noise=True):
        model = DPBetaBernoulli(epsilon=1.0, random_state=0).fit(X)
    gamma = grid_step(2.0)
    counts = np.stack([(X == 0).sum(0), X.sum(0)], axis=1)
    noisy = model.noisy_counts_[model.noisy_counts_ > 0]
    assert np.all(np.mod(noisy / gamma, 1) == 0)
    assert model.privacy_spent_.epsilon == pytest.approx(1.0)
    assert np.abs(model.noisy_counts_ - counts).max() < 60  # Laplace(6) noise, 6 draws


def test_config_rejects_unknown_settings():
    with pytest.raises(TypeError, match="Unknown"):
        with config_context(fast=True):
            pass


def _is_secure_event(event):
    """True only for events of noise sampled exactly on a grid.

    A whitelist, so that any other event type (floating-point Gaussian or
    Laplace, subsampled Gaussians, the exponential mechanism's PureDPEvent, or
    a type added later) counts as a bypass of secure noise.
    """
    return type(event) in (DiscreteGaussianEvent, DiscreteLaplaceEvent)


# Estimators on floating-point samplers with no exact counterpart (subsampled
# Gaussians for DP-SEP and DP-SGD, the exponential mechanism for OPS) must
# refuse, naming the setting, before any release.
_REFUSES_SECURE = (
    "DPSEPRegressor",
    "DPNeuralNet",
    "DPGenerativeMixture",
    "DPBetaBernoulli(ops)",
)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_estimator_honours_secure_noise(name):
    case = CASES[name]
    X = case.make_X(np.random.default_rng(0), 60, 3)
    model = clone(case.estimator)
    with config_context(secure_noise=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name.startswith(_REFUSES_SECURE):
            with pytest.raises(ValueError, match="secure_noise"):
                model.fit(X, **case.fit_kwargs(X))
            assert not hasattr(model, "privacy_spent_")
            return
        model.fit(X, **case.fit_kwargs(X))
    events = model.privacy_ledger_.events
    assert events and all(_is_secure_event(e) for e in events), events
    assert model.privacy_spent_.epsilon <= model.epsilon * (1 + 1e-9)
    # Control: the same fit in floating point is caught by the same check (a
    # Laplace release is a LaplaceEvent either way; only its flag differs).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = clone(case.estimator).set_params(secure_noise=False).fit(X, **case.fit_kwargs(X))
    assert not any(_is_secure_event(e) for e in plain.privacy_ledger_.events)


@pytest.mark.parametrize("name", ["DPKMeans", "DPKernelKMeans"])
def test_calibration_cache_follows_the_noise_setting(name):
    # A plain fit followed by a secure fit of the same plan must recalibrate:
    # discrete-Gaussian events cost more than the exact continuous Gaussian.
    case = CASES[name]
    X = case.make_X(np.random.default_rng(1), 60, 3)
    plain = clone(case.estimator).fit(X)
    with config_context(secure_noise=True):
        secure = clone(case.estimator).fit(X)
    assert secure.privacy_spent_.epsilon <= secure.epsilon * (1 + 1e-9)
    secure_noise = np.array([e.noise_multiplier for e in secure.privacy_ledger_.events])
    plain_noise = np.array([e.noise_multiplier for e in plain.privacy_ledger_.events])
    assert np.all(secure_noise > plain_noise)


def test_per_estimator_setting_overrides_the_package_setting():
    X = np.random.default_rng(2).normal(size=(80, 2))
    secure = DPKMeans(n_clusters=2, data_norm=3.0, secure_noise=True, random_state=0).fit(X)
    assert {type(e) for e in secure.privacy_ledger_.events} == {DiscreteGaussianEvent}
    assert get_config()["secure_noise"] is False  # the fit's setting does not leak out
    with config_context(secure_noise=True):
        plain = DPKMeans(n_clusters=2, data_norm=3.0, secure_noise=False, random_state=0).fit(X)
    assert {type(e).__name__ for e in plain.privacy_ledger_.events} == {"GaussianEvent"}
    for model in (secure, plain):
        assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    # Counts released on the discrete-Laplace grid only when asked for.
    B = np.random.default_rng(3).binomial(1, 0.4, size=(300, 2))
    counts = DPBetaBernoulli(secure_noise=True, random_state=0).fit(B).noisy_counts_
    assert np.all(np.mod(counts[counts > 0] / grid_step(2.0), 1) == 0)


# --- secure Laplace releases are recorded as such -----------------------------------------------


def test_laplace_events_record_whether_the_noise_was_discrete():
    from skdp.privacy.calibration import _as_released

    rng = np.random.default_rng(7)
    mechanism = LaplaceMechanism(2.0, 4.0)
    for secure, expected in ((False, LaplaceEvent), (True, DiscreteLaplaceEvent)):
        ledger = PrivacyLedger(secure_noise=secure)
        with config_context(secure_noise=not secure):  # never read by the core
            mechanism.release(np.zeros(3), rng, ledger)
            # Calibration costs a planned Laplace release like the one that will be recorded.
            planned = _as_released(
                LaplaceEvent(count=2, neighbouring="replace_one", noise_multiplier=2.0), secure
            )
        assert type(ledger.events[0]) is expected and type(planned) is expected
        # Relation changes and pickling keep the type.
        doubled = expected(1, "add_remove", 2.0).to_relation("replace_one")
        assert type(doubled) is expected and doubled.noise_multiplier == 1.0
        assert pickle.loads(pickle.dumps(ledger.events[0])) == ledger.events[0]
    # A secure plan costs at least its floating-point twin under RDP (randomised-response curve).
    plan = [LaplaceEvent(200, "replace_one", 4.0)]  # enough uses for RDP to beat basic composition
    secure_cost = compose([_as_released(e, True) for e in plan], 1e-5, "rdp").epsilon
    assert secure_cost > compose(plan, 1e-5, "rdp").epsilon


def _exact_discrete_laplace_rdp(t, shift, alpha, support=4000):
    ys = np.arange(-support, support + 1)
    log_p = -np.abs(ys) / t
    log_q = -np.abs(ys - shift) / t
    log_z = np.logaddexp.reduce(log_p)  # same normaliser for both
    return np.logaddexp.reduce(alpha * log_p + (1 - alpha) * log_q - log_z) / (alpha - 1)


@pytest.mark.parametrize("t", [1, 3])
def test_discrete_laplace_rdp_is_randomised_response_not_the_laplace_curve(t):
    # Shifted by one step, the discrete Laplace's privacy loss is +-1/t only:
    # binary randomised response, whose RDP exceeds the continuous Laplace's.
    # The discrete event must not use the continuous curve.
    orders = np.array([1.5, 2.0, 4.0, 16.0])
    exact = np.array([_exact_discrete_laplace_rdp(t, 1, a) for a in orders])
    discrete = RDPAccountant.curve(DiscreteLaplaceEvent(1, "replace_one", float(t)), orders)
    continuous = RDPAccountant.curve(LaplaceEvent(1, "replace_one", float(t)), orders)
    np.testing.assert_allclose(discrete, exact, rtol=1e-9)
    assert np.all(continuous < exact * (1 - 1e-3))
    # With a larger integer shift and scale (the grid's regime) the event's curve still bounds it.
    assert np.all(
        RDPAccountant.curve(DiscreteLaplaceEvent(1, "replace_one", 2.0), orders)
        >= [_exact_discrete_laplace_rdp(40, 20, a) for a in orders]
    )
    # Pure and zCDP accounting are those of any epsilon-DP mechanism: unchanged.
    for e in (
        DiscreteLaplaceEvent(1, "replace_one", 2.0),
        LaplaceEvent(1, "replace_one", 2.0),
    ):
        assert pure_epsilon(e) == 0.5 and ZCDPAccountant.rho(e) == 0.125


# --- OPS has no exact sampler: it refuses secure noise ------------------------------------------


class _Untouchable:
    """Input whose data must not be read: any array conversion fails the test."""

    shape = (10, 2)

    def __array__(self, *args, **kwargs):
        raise AssertionError("the data was read before the secure-noise refusal")

    def __len__(self):
        raise AssertionError("the data was read before the secure-noise refusal")


@pytest.mark.parametrize("how", ["estimator", "package"])
@pytest.mark.parametrize("estimator", ["beta_bernoulli", "hmm"])
def test_ops_refuses_secure_noise_before_budget_and_data(estimator, how):
    from skdp.bayes import DPNaiveBayesHMM
    from skdp.privacy import BudgetAccountant

    budget = BudgetAccountant(epsilon=10.0)
    secure = True if how == "estimator" else None
    if estimator == "beta_bernoulli":
        model = DPBetaBernoulli(mechanism="ops", accountant=budget, secure_noise=secure, random_state=0)
    else:
        model = DPNaiveBayesHMM(mechanism="ops", n_iter=4, burn_in=2, accountant=budget, secure_noise=secure)
    context = config_context(secure_noise=True) if how == "package" else contextlib.nullcontext()
    with context, pytest.raises(ValueError, match=r"secure_noise.*mechanism='ops'"):
        model.fit(_Untouchable())
    assert budget.history == [] and not hasattr(model, "privacy_spent_")


def test_ops_further_samples_refuse_secure_noise_before_charging():
    from skdp.privacy import BudgetAccountant

    X = np.random.default_rng(0).binomial(1, 0.4, size=(200, 2))
    budget = BudgetAccountant(epsilon=10.0)
    model = DPBetaBernoulli(mechanism="ops", accountant=budget, random_state=0).fit(X)
    spent = budget.spent
    with config_context(secure_noise=True), pytest.raises(ValueError, match="mechanism='ops'"):
        model.sample_posterior(2)
    model.set_params(secure_noise=True)
    with pytest.raises(ValueError, match="secure_noise"):
        model.sample_posterior(2)
    assert budget.spent == spent and model.privacy_spent_.epsilon == pytest.approx(1.0)
    model.set_params(secure_noise=False)  # the estimator's own setting overrides the package one
    with config_context(secure_noise=True):
        assert model.sample_posterior(2).shape == (2, 2)


def test_exponential_mechanism_refuses_secure_noise_before_recording():
    from skdp.privacy import ExponentialMechanism

    mechanism = ExponentialMechanism(1.0, 1.0)
    assert ExponentialMechanism.exact_sampler is False
    ledger = PrivacyLedger(secure_noise=True)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="secure_noise"):
        mechanism.select([0.0, 1.0], rng, ledger)
    with pytest.raises(ValueError, match="secure_noise"):
        mechanism.sample(lambda t, r: 0.0, rng, ledger)
    assert ledger.events == []
    plain = PrivacyLedger()
    with config_context(secure_noise=True):  # the package setting is the estimators' default only
        assert mechanism.select([0.0, 1.0], rng, plain) in (0, 1)


def test_every_mechanism_declares_its_exact_sampler_and_a_secure_ledger_refuses_the_others():
    from skdp.privacy import (
        GaussianEvent,
        SubsampledGaussianMechanism,
        SymmetricMatrixGaussianMechanism,
        TorchGaussianMechanism,
    )

    for exact in (LaplaceMechanism, GaussianMechanism, SymmetricMatrixGaussianMechanism):
        assert exact.exact_sampler is True
    for inexact in (SubsampledGaussianMechanism, TorchGaussianMechanism):
        assert inexact.exact_sampler is False
        with pytest.raises(ValueError, match="secure_noise=True"):
            inexact.refuse_secure_noise()
    ledger = PrivacyLedger(secure_noise=True)
    mech = SubsampledGaussianMechanism(1.0, 2.0, sampling_rate=0.1)
    with pytest.raises(ValueError, match="subsampled"):
        mech.release(np.zeros(2), np.random.default_rng(0), ledger)
    with pytest.raises(ValueError, match="subsampled"):
        with mech.session(np.random.default_rng(0), ledger):
            pass
    # A floating-point event can never be recorded on a secure ledger (the
    # backstop of a mechanism that ignored the setting), before its noise.
    with pytest.raises(ValueError, match="GaussianEvent"):
        ledger.record(GaussianEvent(1, "replace_one", 2.0))
    assert ledger.events == []
    ledger.record(DiscreteGaussianEvent(1, "replace_one", 2.0))
    assert pickle.loads(pickle.dumps(ledger)).secure_noise is True


# --- the package-wide setting reaches worker threads and processes -----------------------------


@pytest.fixture
def restore_config():
    """Put the process-wide setting back after the test."""
    from skdp import _config

    saved = dict(_config._global)
    yield _config
    with _config._lock:
        _config._global.clear()
        _config._global.update(saved)


def test_set_config_is_process_wide_and_leaves_the_environment_alone(restore_config):
    environment = os.environ.get(restore_config.SECURE_NOISE_ENV)
    seen = {}
    barrier = threading.Barrier(2)

    def worker():
        seen["before"] = get_config()["secure_noise"]
        barrier.wait()  # the main thread calls set_config now
        barrier.wait()
        seen["after"] = get_config()["secure_noise"]

    thread = threading.Thread(target=worker)
    thread.start()
    barrier.wait()
    set_config(secure_noise=True)
    barrier.wait()
    thread.join()
    # A thread started before set_config sees the new value, and so does a new one.
    assert seen == {"before": False, "after": True}
    late = []
    threading.Thread(target=lambda: late.append(get_config()["secure_noise"])).start()
    while not late:
        time.sleep(0.01)
    assert late == [True]
    set_config(secure_noise=False)
    # Worker processes get the setting with the estimators, not the environment.
    assert os.environ.get(restore_config.SECURE_NOISE_ENV) == environment
    with pytest.raises(TypeError, match="secure_noise"):
        set_config(secure_noise=1)
    with pytest.raises(TypeError, match="secure_noise"), config_context(secure_noise="yes"):
        pass


def test_environment_variable_sets_the_default(restore_config):
    parse = restore_config._parse_environment
    env = restore_config.SECURE_NOISE_ENV
    assert parse({}) == {"secure_noise": False}
    for word, value in (
        ("1", True),
        (" True ", True),
        ("on", True),
        ("0", False),
        ("no", False),
        ("", False),
    ):
        assert parse({env: word}) == {"secure_noise": value}
    with pytest.raises(ValueError, match=env):
        parse({env: "ture"})  # a typo must not fall back to floating-point noise


def test_config_context_restores_and_stays_in_its_thread(restore_config):
    set_config(secure_noise=True)
    with config_context(secure_noise=False):
        assert get_config()["secure_noise"] is False  # the block's value wins in its thread
        with config_context(secure_noise=True):
            assert get_config()["secure_noise"] is True
        assert get_config()["secure_noise"] is False
        # Another thread sees the process-wide value, not this thread's block.
        other = []
        thread = threading.Thread(target=lambda: other.append(get_config()["secure_noise"]))
        thread.start()
        thread.join()
        assert other == [True]
    assert get_config()["secure_noise"] is True
    with pytest.raises(RuntimeError), config_context(secure_noise=False):
        raise RuntimeError
    assert get_config()["secure_noise"] is True  # restored on error too
    set_config(secure_noise=False)
    with config_context(secure_noise=True):
        pass
    assert get_config()["secure_noise"] is False


def _record_events_scorer(log):
    def scorer(estimator, X, y=None):
        log.append((threading.get_ident(), [type(e).__name__ for e in estimator.privacy_ledger_.events]))
        return 0.0

    return scorer


def test_grid_search_worker_threads_follow_set_config(restore_config):
    from joblib import parallel_backend
    from sklearn.model_selection import GridSearchCV

    X = np.random.default_rng(0).normal(size=(60, 2))
    log = []
    set_config(secure_noise=True)
    search = GridSearchCV(
        DPKMeans(data_norm=3.0, max_iter=2, random_state=0),
        {"n_clusters": [2, 3]},
        cv=2,
        n_jobs=2,
        scoring=_record_events_scorer(log),
        refit=False,
    )
    with parallel_backend("threading", n_jobs=2):
        search.fit(X)
    assert len(log) == 4  # one score per (candidate, fold)
    assert any(ident != threading.main_thread().ident for ident, _ in log)  # fits ran in workers
    assert all(set(names) == {"DiscreteGaussianEvent"} for _, names in log), log


def test_the_fit_reads_the_package_setting_once(restore_config, monkeypatch):
    # The template resolves secure_noise before the plan; a change of the
    # package setting during the fit (another thread's set_config) cannot
    # make its plan and its releases disagree.
    X = np.random.default_rng(0).normal(size=(60, 2))
    original = DPKMeans._check_params

    def flip_during_fit(self):
        set_config(secure_noise=False)
        return original(self)

    monkeypatch.setattr(DPKMeans, "_check_params", flip_during_fit)
    set_config(secure_noise=True)
    model = DPKMeans(n_clusters=2, data_norm=3.0, max_iter=2, random_state=0).fit(X)
    assert get_config()["secure_noise"] is False
    assert {type(e) for e in model.privacy_ledger_.events} == {DiscreteGaussianEvent}
    assert model.privacy_ledger_.secure_noise is True


def test_a_pickled_estimator_carries_the_package_setting(restore_config):
    # Worker processes (loky, multiprocessing) receive estimators pickled:
    # secure_noise=None is sent as True while the package setting is on, so
    # the worker samples as this process would, whatever its own default.
    def sent(model):
        return pickle.loads(pickle.dumps(model))

    assert sent(DPBetaBernoulli()).secure_noise is None
    set_config(secure_noise=True)
    assert sent(DPBetaBernoulli()).secure_noise is True
    assert sent(DPBetaBernoulli(secure_noise=False)).secure_noise is False  # explicit: as it is
    model = DPBetaBernoulli()
    assert sent(model).secure_noise is True and model.secure_noise is None  # the original is untouched
    # A child process whose own default is off fits the sent estimator on the grid.
    code = (
        "import pickle, sys, numpy as np; import skdp; "
        "m = pickle.loads(sys.stdin.buffer.read()); "
        "assert skdp.get_config()['secure_noise'] is False; "
        "X = np.random.default_rng(0).binomial(1, 0.4, size=(50, 2)); "
        "print(sorted({type(e).__name__ for e in m.fit(X).privacy_ledger_.events}))"
    )
    env = {k: v for k, v in os.environ.items() if k != restore_config.SECURE_NOISE_ENV}
    child = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(DPBetaBernoulli(random_state=0)),
        capture_output=True,
        env=env,
        check=True,
    )
    assert child.stdout.decode().strip() == "['DiscreteLaplaceEvent']"


def _shutdown_loky_executor():
    from joblib.externals.loky import reusable_executor

    if reusable_executor._executor is not None:
        reusable_executor._executor.shutdown(wait=True, kill_workers=True)


def _fit_in_worker(model, seed):
    X = np.random.default_rng(seed).binomial(1, 0.4, size=(50, 2))
    events = model.fit(X).privacy_ledger_.events
    return get_config()["secure_noise"], [type(e).__name__ == "DiscreteLaplaceEvent" for e in events]


@pytest.mark.slow
def test_loky_workers_follow_set_config_through_the_estimator_even_when_started_before(restore_config):
    from joblib import Parallel, delayed

    _shutdown_loky_executor()
    try:
        model = DPBetaBernoulli(random_state=0)
        plain = Parallel(n_jobs=2, backend="loky")(delayed(_fit_in_worker)(model, s) for s in range(2))
        assert plain == [(False, [False, False])] * 2
        # The same workers, started before set_config and still under the old
        # default, sample on the grid: the estimator carries the setting.
        set_config(secure_noise=True)
        stale = Parallel(n_jobs=2, backend="loky")(delayed(_fit_in_worker)(model, s) for s in range(2))
        assert stale == [(False, [True, True])] * 2
    finally:
        _shutdown_loky_executor()  # later tests must not inherit these workers
