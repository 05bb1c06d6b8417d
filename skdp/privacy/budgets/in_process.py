"""BudgetAccountant: one privacy budget shared by many fits, composed by their events."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
import uuid
from collections import namedtuple
from dataclasses import dataclass, replace
from numbers import Real

from ...exceptions import BudgetExceededError
from ..accountants import get_accountant
from ..accountants.conversions import group_guarantee
from ..events import ADD_REMOVE, REPLACE_ONE, PrivacyEvent, _check_relation
from ..ledger import DEFAULT_COMPOSITION, PrivacySpent, _check_composition, compose

#: Relative slack a settlement may exceed its reservation by: the same
#: floating-point tolerance with which a fit's ``privacy_spent_`` is compared
#: to its request (:meth:`skdp.base.DPEstimatorMixin._end_private_fit`).
_SETTLE_RTOL = 1e-9


def _within_reservation(amount):
    """The largest settlement a reservation of ``amount`` admits (:data:`_SETTLE_RTOL`)."""
    return amount * (1 + _SETTLE_RTOL) + 1e-12


BudgetRemaining = namedtuple("BudgetRemaining", ["epsilon", "delta"])
BudgetRemaining.__doc__ = """(epsilon, delta) a budget still admits (:meth:`BudgetAccountant.remaining`).

Not a guarantee of anything released: the budget's total minus what it has
spent, each floored at 0, in the budget's neighbouring relation.  A request
fits if its epsilon and its delta are both at most these (after conversion
to the budget's relation).
"""


@dataclass(frozen=True)
class BudgetReservation:
    """A part of a budget set aside for one fit, returned by :meth:`~skdp.privacy.BudgetAccountant.reserve`.

    Pass it to :meth:`BudgetAccountant.settle` once the fit knows what it
    spent.  Until then the reserved amount counts as spent.

    Attributes
    ----------
    key : int
        The reservation's entry in its ledger.
    epsilon, delta : float
        Amount reserved, in the budget's neighbouring relation.
    neighbouring : str
        Relation of the request (the default of :meth:`~BudgetAccountant.settle`).
    label : str or None
        Label of the ledger entry.
    ledger : str
        Identity of the ledger the reservation was made on.
    """

    key: int
    epsilon: float
    delta: float
    neighbouring: str
    label: str | None
    ledger: str


def _check_amount(name, value):
    # A negative or NaN amount would credit the budget (or poison every later
    # comparison): refuse it rather than under-report what was spent.
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    if not (value >= 0):
        raise ValueError(f"{name} must be non-negative, got {value!r}.")


BudgetEntry = namedtuple("BudgetEntry", ["epsilon", "delta", "label", "events", "reserved", "composed"])
BudgetEntry.__doc__ = """One entry of a budget's ledger (:attr:`BudgetAccountant.entries`).

``epsilon, delta``: the amount charged, in the budget's relation; ``label``;
``events``: the tuple of privacy events the amount is a guarantee of (None
when the entry came without them); ``reserved``: True for an open
reservation; ``composed``: True when the entry is in the group the budget
composes by its accountant, False when it adds by basic composition.
"""

# An entry as the storage backends hand it over: ``order`` is its rank among
# the entries that came with events, in the order they got them (None for
# the others); ``events`` is a tuple or None.
_Record = namedtuple("_Record", ["key", "epsilon", "delta", "label", "reserved", "events", "order"])


def _check_events(events):
    if events is None:
        return None
    if isinstance(events, PrivacyEvent) or not hasattr(events, "__iter__"):
        raise TypeError(f"events must be a sequence of PrivacyEvent, got {type(events).__name__}.")
    events = tuple(events)
    for e in events:
        if not isinstance(e, PrivacyEvent):
            raise TypeError(f"events must be a sequence of PrivacyEvent, got a {type(e).__name__}.")
    return events


def _merged(events):
    # Identical events of different fits (a grid's folds) become one event
    # with their summed count: the accountant self-composes it (cached).
    counts = {}
    for e in events:
        if e.count > 0:
            key = replace(e, count=0)
            counts[key] = counts.get(key, 0) + e.count
    return [replace(key, count=n) for key, n in counts.items()]


def _composable_events(events, neighbouring, composition):
    # The events in the budget's relation if its accountant composes them all, else None.
    try:
        events = tuple(e.to_relation(neighbouring) for e in events)
    except ValueError:
        return None
    if get_accountant(composition).unsupported(events):
        return None
    return events


def _merged_composable(events, neighbouring, composition):
    """:func:`_composable_events` merged by mechanism (:func:`_merged`), cached by the events.

    A search settles the same plan's events fit after fit: they are
    converted, checked and merged once per process, not once per fit.
    """
    try:
        return _cached_merged_composable(events, neighbouring, composition)
    except TypeError:  # an event type that is not hashable
        composable = _composable_events(events, neighbouring, composition)
        return None if composable is None else tuple(_merged(composable))


@functools.lru_cache(maxsize=4096)
def _cached_merged_composable(events, neighbouring, composition):
    composable = _composable_events(events, neighbouring, composition)
    return None if composable is None else tuple(_merged(composable))


def _join_rank(item):
    return item[0]


class BudgetAccountant:
    """A privacy budget that several fits draw from, composing their events.

    Pass the same instance as ``accountant=`` to any number of skdp estimators.
    Each fit *reserves* its requested ``(epsilon, delta)`` before it touches
    the data (:meth:`reserve`), raising
    :class:`~skdp.exceptions.BudgetExceededError` and charging nothing if it
    does not fit in what remains, and *settles* the reservation when it
    finishes (:meth:`settle`): the reservation is replaced by what the fit
    actually spent (its ``privacy_spent_``, never more than the request)
    together with the fit's privacy *events* (its ``privacy_ledger_.events``).
    The check and the record of a reservation are one atomic step, so two
    concurrent fits can never both be admitted on budget only one of them
    fits; the second is refused before it reads any data.

    A fit that fails after its reservation (bad data, an interrupted
    training, a crash) keeps its reservation charged: it may already have
    looked at the data or drawn a noisy statistic, so the conservative
    choice is to count the whole request as spent.  Open reservations count
    in :attr:`spent`, :meth:`remaining` and :attr:`history`, and are listed by
    :attr:`reservations`.

    Composition of fits
        The budget composes the fits' *events*, not their epsilons.  The
        settled entries whose events (converted to the budget's relation,
        :meth:`~skdp.privacy.PrivacyEvent.to_relation`) the budget's
        accountant (``composition``, :mod:`skdp.privacy.accountants`) has a
        rule for form the *composed group*; every other entry (an open
        reservation, a hand-charged :meth:`spend`, an entry settled without
        events, a fit whose events cannot be converted or that the
        accountant cannot compose) adds by basic composition at its own
        ``(epsilon, delta)``.  :attr:`spent` is

        ``sum of the basic entries + (eps_G, delta_G)``,

        where ``delta_G`` is the sum of the group's own deltas and
        ``eps_G = S_n`` is built along the group in the order its entries
        joined it: ``S_0 = 0`` and
        ``S_k = min(compose(events of the first k entries, delta_1 + ... + delta_k), S_{k-1} + epsilon_k)``.
        Hence ``eps_G`` is at most the composition of all the group's
        events and at most the sum of its epsilons (the basic total of
        earlier versions), and a settlement never raises the total by more
        than the settled amount, which never exceeds its reservation
        (:meth:`settle` checks it): the total only drops when a reservation
        is settled, so nothing admitted by :meth:`reserve` can be overspent
        afterwards.  (Without the ``S_{k-1} + epsilon_k`` arm an accountant's
        bound for a history need not be below its bound for part of the
        history plus the rest's epsilon, e.g. RDP's conversion of a
        Gaussian-and-Laplace history against the Gaussian's exact curve.)

    Why this is valid
        Every candidate of ``S_k`` is an ``(epsilon, delta_1 + ... + delta_k)``
        guarantee of the first ``k`` fits: the first by the accountant, the
        second by basic composition of ``S_{k-1}`` (by induction) with
        fit ``k``'s own guarantee.  Each entry's ``(epsilon, delta)`` is a
        guarantee of its events on their own, which is what :meth:`settle`
        and :meth:`spend` ask of a caller that passes events.  The composed
        group and each basic entry are then interactive mechanisms run
        concurrently on the same data, and concurrent composition of
        interactive ``(epsilon, delta)``-DP mechanisms obeys the same basic
        composition bound as sequential composition (Vadhan & Wang 2021,
        "Concurrent composition of differential privacy"; Lyu 2022; Vadhan &
        Zhang 2023), so their epsilons and deltas add.  An add/remove entry
        charged by amount is converted by group privacy
        (``(2 eps, 2 e^eps delta)``); an add/remove *event* is converted
        exactly (half its noise multiplier), which is what makes a DP-SGD
        net on a replace-one budget cost far less than ``2 eps``.

    Adaptivity caveat
        Composing several fits' events by RDP or PLD assumes each fit's noise
        plan (its events: mechanisms, noise multipliers, sampling rates,
        counts) is fixed independently of the outputs of earlier fits.  That
        holds for ``GridSearchCV``, ``cross_val_score``, a pipeline, and any
        script decided in advance, whatever the data.  When the next fit's
        epsilon (or its noise, or whether it runs at all) is chosen after
        looking at earlier outputs, use ``composition="basic"``: basic
        composition stays valid under fully adaptive choices of the privacy
        parameters (Rogers, Roth, Ullman & Vadhan 2016, privacy filters),
        while RDP and PLD composition with adaptively chosen parameters
        need filters of their own.

    Cloning and model selection
        ``sklearn.base.clone`` returns the *same* ledger (``__sklearn_clone__``),
        so every clone made by ``GridSearchCV`` or ``cross_val_score`` spends
        on the user's budget instead of on a private deep copy.
    Processes
        A ledger copied into another process (``n_jobs > 1`` with joblib's
        process backends) cannot report its spends back; reserving or spending
        from such a copy raises ``RuntimeError`` rather than silently losing
        them.  Use ``n_jobs=1``, a thread backend
        (``joblib.parallel_backend("threading")``), which shares the ledger and
        is serialised by a lock, or :class:`~skdp.privacy.SQLiteBudgetAccountant`,
        a ledger in a database file that any number of processes share.

    Parameters
    ----------
    epsilon : float, default=inf
        Total epsilon budget.
    delta : float, default=1.0
        Total delta budget.
    neighbouring : {"replace_one", "add_remove"}, default="replace_one"
        Relation the budget refers to.  Amounts charged under add/remove
        neighbours without events are converted by group privacy
        (``(2 eps, 2 e^eps delta)``); add/remove events are converted to
        replace-one events.
    composition : {"pld", "rdp", "zcdp", "advanced", "basic"}, default="pld"
        Accountant composing the fits' events (any name of
        :data:`skdp.privacy.COMPOSITIONS`).  ``"basic"`` reproduces the sum
        of the fits' epsilons and is the choice for adaptive workflows
        (the adaptivity caveat above).

    Examples
    --------
    >>> from skdp.privacy import BudgetAccountant
    >>> budget = BudgetAccountant(epsilon=1.0)
    >>> budget.spend(0.3, 0.0)
    >>> budget.remaining()
    BudgetRemaining(epsilon=0.7, delta=1.0)
    >>> held = budget.reserve(0.5, 0.0, label="my release")
    >>> budget.reservations
    [(0.5, 0.0, 'my release')]
    >>> budget.settle(held, 0.2, 0.0)
    >>> budget.spent
    PrivacySpent(epsilon=0.5, delta=0.0)

    Two Gaussian releases settled with their events compose (here by PLD)
    to less than the sum of their epsilons:

    >>> from skdp.privacy import GaussianEvent
    >>> budget = BudgetAccountant(epsilon=10.0, delta=1e-4)
    >>> for _ in range(2):
    ...     held = budget.reserve(1.0, 1e-5)
    ...     budget.settle(held, 1.0, 1e-5, events=[GaussianEvent(1, "replace_one", 4.84)])
    >>> round(budget.spent.epsilon, 2) < 2.0
    True
    """

    def __init__(
        self, epsilon=math.inf, delta=1.0, neighbouring=REPLACE_ONE, composition=DEFAULT_COMPOSITION
    ):
        if not (epsilon > 0):
            raise ValueError(f"epsilon must be positive, got {epsilon!r}.")
        if not (0 <= delta <= 1):
            raise ValueError(f"delta must be in [0, 1], got {delta!r}.")
        _check_relation(neighbouring)
        _check_composition(composition)
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.neighbouring = neighbouring
        self.composition = composition
        self._history = []
        self._open = set()  # indices into _history of unsettled reservations
        self._events = {}  # index into _history -> tuple of events
        self._order = {}  # index into _history -> rank among the entries with events
        self._uid = uuid.uuid4().hex
        self._lock = threading.RLock()
        self._owner_pid = os.getpid()
        self._chain_cache = None  # state of the composed group's prefix (_chain)
        self._group_cache = {}  # entry -> its merged events (_group_events)
        self._total_cache = None  # the entries of the last total and their parts (_total)

    # Shared, never copied, by scikit-learn's clone.
    def __sklearn_clone__(self):
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"]
        state["_chain_cache"] = None
        state.pop("_group_cache", None)
        state.pop("_total_cache", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        # Pickles made before reservations existed have no open ones; those
        # made before events were stored composed every fit by basic
        # composition, which they keep.
        self.__dict__.setdefault("_open", set())
        self.__dict__.setdefault("_uid", uuid.uuid4().hex)
        self.__dict__.setdefault("_events", {})
        self.__dict__.setdefault("_order", {})
        self.__dict__.setdefault("composition", "basic")
        self._chain_cache = None
        self._group_cache = {}
        self._total_cache = None
        self._lock = threading.RLock()

    # Storage hooks: the in-memory ledger below; a persistent backend
    # (skdp.privacy.SQLiteBudgetAccountant) overrides all of them.  The ones
    # that write are only called inside _transaction().
    def _entries(self):
        return list(self._history)

    def _records(self):
        """Every entry as a ``_Record``, oldest first."""
        # Under the (reentrant) lock: a settlement on another thread changes
        # several of these structures together.
        with self._lock:
            return [
                _Record(key, eps, dlt, label, key in self._open, self._events.get(key), self._order.get(key))
                for key, (eps, dlt, label) in enumerate(self._history)
            ]

    def _records_from(self, key):
        """The entries from ``key`` on (every entry for None) as ``_Record``, oldest first."""
        with self._lock:
            start = 0 if key is None else key
            return [
                _Record(k, eps, dlt, label, k in self._open, self._events.get(k), self._order.get(k))
                for k, (eps, dlt, label) in enumerate(self._history[start:], start)
            ]

    def _open_entries(self):
        with self._lock:
            return [self._history[i] for i in sorted(self._open)]

    @contextlib.contextmanager
    def _transaction(self, raises_charge=True):
        # ``raises_charge``: whether the transaction may raise the charged
        # total (a persistent backend makes those durable before returning;
        # in memory there is nothing to make durable).
        del raises_charge
        if os.getpid() != self._owner_pid:
            raise RuntimeError(
                "This BudgetAccountant is a copy in another process (n_jobs > 1?); its spends "
                "would be lost. Use n_jobs=1, the threading backend, or SQLiteBudgetAccountant."
            )
        with self._lock:
            yield

    def _attach_events(self, key, events):
        if events is not None:
            self._events[key] = events
            self._order[key] = len(self._order)

    def _append(self, epsilon, delta, label, reserved=False, events=None):
        self._history.append((epsilon, delta, label))
        key = len(self._history) - 1
        if reserved:
            self._open.add(key)
        self._attach_events(key, events)
        return key

    def _open_entry(self, key):
        """``(epsilon, delta, label)`` of the open reservation ``key``, or None."""
        return self._history[key] if key in self._open else None

    def _close_entry(self, key, epsilon, delta, events=None):
        label = self._history[key][2]
        self._attach_events(key, events)
        self._history[key] = (epsilon, delta, label)
        self._open.discard(key)

    def _resize_entry(self, key, epsilon, delta):
        label = self._history[key][2]
        self._history[key] = (epsilon, delta, label)

    def _ledger_id(self):
        return self._uid

    @property
    def history(self):
        """List of ``(epsilon, delta, label)`` spends, oldest first (open reservations included)."""
        return self._entries()

    @property
    def entries(self):
        """List of :class:`BudgetEntry` (amount, label, events, status), oldest first."""
        return [
            BudgetEntry(r.epsilon, r.delta, r.label, r.events, r.reserved, self._composable(r) is not None)
            for r in self._records()
        ]

    @property
    def reservations(self):
        """List of ``(epsilon, delta, label)`` of the reservations not settled yet.

        They are charged (part of :attr:`history` and :attr:`spent`): a fit in
        progress, or one that failed after reserving.
        """
        return self._open_entries()

    @property
    def spent(self):
        """Total (epsilon, delta) spent so far, open reservations included (class docstring)."""
        return self._total()

    def _composable(self, record):
        """The record's events in the budget's relation if it joins the composed group, else None."""
        if record.reserved or not record.events:
            return None
        return _composable_events(tuple(record.events), self.neighbouring, self.composition)

    def _total(self):
        """The budget's total (class docstring), from the entries changed since the last total.

        A settled entry never changes again (only an open reservation is
        resized or settled), and entries are only ever appended.  So the
        state of the last total is kept up to its first open reservation
        (the running basic sums after each entry, in entry order, and the
        composed group's state): a reservation reads and processes the
        entries from there on, not every fit of the budget, and its cost
        does not grow with the number of fits settled before.
        """
        with self._lock:
            state = self.__dict__.get("_total_cache")
            if state is None:
                state = {"records": [], "sums": [], "open": 0}
            records, sums, m = state["records"], state["sums"], state["open"]
            if m < len(records):
                start = records[m].key
            else:
                start = records[-1].key + 1 if records else None
            fresh = self._records_from(start)
            del records[m:], sums[m:]
            basic_eps, basic_delta = sums[-1] if sums else (0.0, 0.0)
            first_open = None
            joined = []
            for r in fresh:
                if r.reserved and first_open is None:
                    first_open = len(records)
                merged = self._group_events(r)
                if merged is None:
                    basic_eps += r.epsilon
                    basic_delta += r.delta
                else:
                    joined.append((r.order, r.key, r.epsilon, r.delta, merged))
                records.append(r)
                sums.append((basic_eps, basic_delta))
            state["open"] = len(records) if first_open is None else first_open
            self._total_cache = state
            group_eps, group_delta = self._chain(joined)  # delta: the group's deltas summed in join order
            return PrivacySpent(float(basic_eps + group_eps), min(1.0, float(basic_delta + group_delta)))

    def _group_events(self, record):
        """The record's events merged by mechanism if it joins the composed group, else None.

        Cached by entry: a settled entry's events never change, and a fit's
        ledger (one event per DP-SGD step) is converted, checked and merged
        once instead of on every reservation.  The cache holds the events
        object it was computed from and is used only for that same object.
        """
        cache = self.__dict__.setdefault("_group_cache", {})
        entry = cache.get((record.key, record.order))
        if (
            entry is not None
            and not record.reserved
            and (entry[0] is record.events or entry[0] == record.events)
        ):
            return entry[1]
        if record.reserved or not record.events:
            merged = None
        else:
            merged = _merged_composable(tuple(record.events), self.neighbouring, self.composition)
        if not record.reserved:
            cache[(record.key, record.order)] = (record.events, merged)
        return merged

    def _chain(self, joined):
        """``(S_n, delta_1 + ... + delta_n)`` of the class docstring, adding the group entries ``joined``.

        ``joined`` are ``(order, key, epsilon, delta, merged events)`` of the
        group entries among the entries just read; those already composed
        are skipped.  The state of the group composed so far is kept (its
        last ``S_k``, the counts of each distinct mechanism and the summed
        delta), so each settled fit is added once: a reservation composes
        the group's distinct mechanisms once, whatever the number of fits
        (identical events of different fits are one mechanism with the sum
        of their counts, which is all a composition depends on).  An entry
        joins the group after every entry already in it (its rank is the
        next one), so the join order is the order of addition; were a
        rank ever smaller than one already composed (a ledger written by
        another program), the whole group is composed again in join order.
        """
        state = self._chain_cache
        if state is None:
            state = {"ranks": set(), "last": None, "value": 0.0, "events": {}, "delta": 0.0}
        todo = sorted((item for item in joined if item[0] not in state["ranks"]), key=_join_rank)
        if todo and state["last"] is not None and todo[0][0] <= state["last"]:
            every = (self._group_events(r) for r in self._total_cache["records"])
            todo = sorted(
                (
                    (r.order, r.key, r.epsilon, r.delta, merged)
                    for r, merged in zip(self._total_cache["records"], every, strict=True)
                    if merged is not None
                ),
                key=_join_rank,
            )
            state = {"ranks": set(), "last": None, "value": 0.0, "events": {}, "delta": 0.0}
        events = state["events"]  # mechanism (count 0) -> event with its total count
        for order, _, eps_k, delta_k, merged in todo:
            for e in merged:
                key = replace(e, count=0)
                held = events.get(key)
                events[key] = e if held is None else replace(held, count=held.count + e.count)
            state["delta"] += delta_k
            previous = state["value"]
            state["value"] = min(
                self._composed_epsilon(list(events.values()), state["delta"]), previous + eps_k
            )
            state["ranks"].add(order)
            state["last"] = order
        self._chain_cache = state
        return state["value"], state["delta"]

    def _composed_epsilon(self, events, delta):
        """Epsilon at ``delta`` of the distinct mechanisms ``events`` (each with its total count)."""
        if delta >= 1:
            return 0.0  # every mechanism is (0, 1)-DP
        try:
            return float(compose(events, delta, self.composition).epsilon)
        except ValueError:
            # Not expected (every event passed the accountant's support
            # check); the other arm of the chain is valid on its own.
            return math.inf

    def remaining(self):
        """(epsilon, delta) still available, a :class:`BudgetRemaining` (open reservations count as spent)."""
        return self._remaining(self.spent)

    def _remaining(self, spent):
        return BudgetRemaining(max(0.0, self.epsilon - spent.epsilon), max(0.0, self.delta - spent.delta))

    def _converted(self, epsilon, delta, neighbouring):
        _check_amount("epsilon", epsilon)
        _check_amount("delta", delta)
        _check_relation(neighbouring)
        if neighbouring == self.neighbouring:
            return epsilon, delta
        if neighbouring == ADD_REMOVE:
            return group_guarantee(epsilon, delta, 2)
        raise ValueError("A replace-one guarantee cannot be charged to an add/remove budget.")

    def check(self, epsilon, delta, neighbouring=None):
        """Raise BudgetExceededError if ``(epsilon, delta)`` does not fit.

        A query only: nothing is reserved, so a concurrent fit may take the
        budget before a later :meth:`spend`.  Fits use :meth:`reserve`.
        """
        self._check_against(self.spent, epsilon, delta, neighbouring)

    def _check_against(self, spent, epsilon, delta, neighbouring):
        # The request adds by basic composition on top of the composed total.
        relation = neighbouring or self.neighbouring
        asked = (epsilon, delta)
        epsilon, delta = self._converted(epsilon, delta, relation)
        eps_left, delta_left = self._remaining(spent)
        tol = 1e-12
        if epsilon > eps_left + tol or delta > delta_left + tol:
            converted = (
                ""
                if relation == self.neighbouring
                else f" (its add/remove (epsilon={asked[0]:g}, delta={asked[1]:g}) converted to this "
                "replace-one budget by group privacy, (2 eps, 2 e^eps delta); a budget created with "
                "BudgetAccountant(..., neighbouring='add_remove') charges it as it is, and refuses replace-one fits)"
            )
            raise BudgetExceededError(
                f"Privacy budget exceeded: this fit needs (epsilon={epsilon:g}, delta={delta:g}){converted} "
                f"but only (epsilon={eps_left:g}, delta={delta_left:g}) remains of "
                f"(epsilon={self.epsilon:g}, delta={self.delta:g})."
            )
        return epsilon, delta

    def spend(self, epsilon, delta, neighbouring=None, label=None, events=None):
        """Charge ``(epsilon, delta)`` to the budget, after checking it fits.

        The check and the record happen atomically: two concurrent spends can
        never both pass a check that only one of them fits.  The amount is
        checked by basic composition on top of the total; with ``events``
        (of which ``(epsilon, delta)`` must be a guarantee on their own) the
        entry then joins the composed group like a settled fit.
        """
        events = self._in_budget_relation(_check_events(events))
        with self._transaction():
            eps, dlt = self._check_against(self._total(), epsilon, delta, neighbouring)
            self._append(float(eps), float(dlt), label, events=events)

    def reserve(self, epsilon, delta, neighbouring=None, label=None):
        """Set ``(epsilon, delta)`` aside for a release about to be made.

        Atomically checks that the request fits in what remains (by basic
        composition of the request on top of the composed total) and records
        it as an open reservation, which counts as spent until :meth:`settle`
        replaces it by the amount actually spent.  A reservation that is never
        settled (the release failed or its process died) stays charged.

        Parameters
        ----------
        epsilon, delta : float
            Largest guarantee the release may spend.
        neighbouring : {"replace_one", "add_remove"}, default=None
            Relation of the request (None: the budget's).
        label : str, default=None
            Label of the ledger entry (skdp's estimators use their class name).

        Returns
        -------
        reservation : BudgetReservation

        Raises
        ------
        BudgetExceededError
            If the request does not fit; nothing is reserved then.
        """
        neighbouring = neighbouring or self.neighbouring
        with self._transaction():
            eps, dlt = self._check_against(self._total(), epsilon, delta, neighbouring)
            key = self._append(float(eps), float(dlt), label, reserved=True)
        return BudgetReservation(int(key), float(eps), float(dlt), neighbouring, label, self._ledger_id())

    def hold(self, epsilon, delta, neighbouring=None, label=None):
        """Hold ``(epsilon, delta)`` for one fit: a :class:`~skdp.privacy.BudgetHold`.

        The reservation every fit path makes (:meth:`reserve`, wrapped): an
        atomic check-and-record that raises
        :class:`~skdp.exceptions.BudgetExceededError` and charges nothing if
        the request does not fit.  The hold is a context manager that can
        grow (:meth:`BudgetHold.extend`), tracks the fit's ledger
        (:meth:`BudgetHold.track`) and is closed on every exit path
        (:meth:`BudgetHold.settle`, or conservatively when the block raises).

        Examples
        --------
        >>> from skdp.privacy import BudgetAccountant
        >>> budget = BudgetAccountant(epsilon=1.0)
        >>> with budget.hold(0.5, 0.0, label="fit") as held:
        ...     _ = held.extend(0.25, 0.0)
        ...     held.settle(0.6, 0.0)
        >>> budget.spent
        PrivacySpent(epsilon=0.6, delta=0.0)
        """
        from .hold import BudgetHold

        neighbouring = neighbouring or self.neighbouring
        reservation = self.reserve(epsilon, delta, neighbouring, label)
        return BudgetHold(self, reservation, epsilon, delta, neighbouring, label)

    def _extend_reservation(self, reservation, epsilon, delta):
        """Grow the open ``reservation`` by ``(epsilon, delta)`` (budget relation), atomically.

        Checked like a new reservation (the increase on top of the total,
        which already counts the reservation); BudgetExceededError and
        nothing more charged if it does not fit.
        """
        self._check_reservation(reservation)
        _check_amount("epsilon", epsilon)
        _check_amount("delta", delta)
        with self._transaction():
            held = self._open_entry(reservation.key)
            if held is None:
                raise ValueError(
                    f"Reservation {reservation.key} is not open on this budget (already settled?)."
                )
            eps, dlt = self._check_against(self._total(), epsilon, delta, self.neighbouring)
            if eps > 0 or dlt > 0:
                self._resize_entry(reservation.key, float(held[0] + eps), float(held[1] + dlt))

    def _check_reservation(self, reservation):
        if not isinstance(reservation, BudgetReservation):
            raise TypeError(f"reservation must be a BudgetReservation, got {type(reservation).__name__}.")
        if reservation.ledger != self._ledger_id():
            raise ValueError("This reservation was made on another budget.")

    def settle(self, reservation, epsilon, delta, neighbouring=None, events=None):
        """Replace an open reservation by what the release actually spent.

        Parameters
        ----------
        reservation : BudgetReservation
            Returned by :meth:`reserve` on this budget, not settled yet.
        epsilon, delta : float
            Amount spent, at most the reservation.
        neighbouring : {"replace_one", "add_remove"}, default=None
            Relation of the amount (None: the reservation's).
        events : sequence of PrivacyEvent, default=None
            The release's events (a fit's ``privacy_ledger_.events``), of
            which ``(epsilon, delta)`` is a guarantee.  Stored, converted to
            the budget's relation where possible; the entry then joins the
            composed group if the budget's accountant can compose them
            (class docstring).  None: the entry adds by basic composition.

        Raises
        ------
        TypeError
            If ``reservation`` is not a :class:`BudgetReservation` or
            ``events`` is not a sequence of events.
        ValueError
            If ``reservation`` is not an open reservation of this budget, or if
            the amount exceeds it.  An excess is nevertheless recorded (the
            release happened, and the ledger never under-reports it) before
            the error is raised, and may take the total past the budget.
        """
        self._check_reservation(reservation)
        events = self._in_budget_relation(_check_events(events))
        eps, dlt = self._converted(epsilon, delta, neighbouring or reservation.neighbouring)
        eps, dlt = float(eps), float(dlt)
        # A settlement within the reservation it replaces only lowers the
        # total (class docstring): were it lost, the reservation would stay
        # charged, an over-count.  Only one above it (an excess) raises it.
        lowers = eps <= _within_reservation(reservation.epsilon) and dlt <= _within_reservation(
            reservation.delta
        )
        with self._transaction(raises_charge=not lowers):
            held = self._open_entry(reservation.key)
            if held is None:
                raise ValueError(
                    f"Reservation {reservation.key} is not open on this budget (already settled?)."
                )
            self._close_entry(reservation.key, eps, dlt, events)
        if eps > _within_reservation(held[0]) or dlt > _within_reservation(held[1]):
            raise ValueError(
                f"Settled (epsilon={eps:g}, delta={dlt:g}) exceeds the reservation "
                f"(epsilon={held[0]:g}, delta={held[1]:g}); the larger amount was charged."
            )

    def _in_budget_relation(self, events):
        # Stored converted when possible (what the group composes); kept as
        # recorded otherwise, for the record (such an entry adds by basic
        # composition).
        if events is None:
            return None
        try:
            return tuple(e.to_relation(self.neighbouring) for e in events)
        except ValueError:
            return events

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"BudgetAccountant(epsilon={self.epsilon:g}, delta={self.delta:g}, "
            f"composition={self.composition!r}, spent=(epsilon={eps:g}, delta={delta:g}))"
        )
