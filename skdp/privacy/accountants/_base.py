"""The accountant interface and its registry."""

from __future__ import annotations

#: Accountant classes by name, filled by :meth:`Accountant.__init_subclass__`.
ACCOUNTANTS = {}


class UnsupportedEventError(ValueError):
    """An accountant was asked to compose an event type it has no rule for."""


class Accountant:
    """Composition of privacy events into ``(epsilon, delta)`` (base class).

    Subclasses set ``name`` (the ``composition=`` string that selects them)
    and register one *rule* per event type with :meth:`rule`; a rule
    registered for a class also covers its subclasses unless a subclass has
    its own (the discrete Gaussian of secure noise, a subclass of the
    Gaussian, has its own everywhere it differs).  :meth:`epsilon` composes a
    history of supported events that share one neighbouring relation.

    Accountants hold no state: a history is passed to :meth:`epsilon` whole.
    """

    #: The ``composition=`` string selecting this accountant.
    name = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Each subclass gets its own rule table (not its parent's).
        cls._rules = {}
        if cls.name is not None:
            if cls.name in ACCOUNTANTS:
                raise ValueError(f"An accountant named {cls.name!r} is already registered.")
            ACCOUNTANTS[cls.name] = cls

    @classmethod
    def rule(cls, *event_types, applies=None):
        """Decorator registering a function as this accountant's rule for ``event_types``.

        ``applies(event)``, when given, restricts the rule to the events of
        those types it returns True for (a sampling scheme with a curve under
        one neighbouring relation only); the others are unsupported.
        """

        def register(function):
            for event_type in event_types:
                cls._rules[event_type] = (function, applies)
            return function

        return register

    @classmethod
    def _rule_for(cls, event):
        for klass in type(event).__mro__:
            entry = cls._rules.get(klass)
            if entry is not None:
                function, applies = entry
                return function if applies is None or applies(event) else None
        return None

    @classmethod
    def supports(cls, event):
        """Whether this accountant can compose ``event``."""
        return cls._rule_for(event) is not None

    @classmethod
    def unsupported(cls, events):
        """The events of ``events`` this accountant cannot compose."""
        return [e for e in events if not cls.supports(e)]

    @classmethod
    def _apply(cls, event, *args):
        rule = cls._rule_for(event)
        if rule is None:
            raise UnsupportedEventError(
                f"composition={cls.name!r} cannot account a {type(event).__name__} "
                f"under {event.neighbouring!r} neighbours."
            )
        return rule(event, *args)

    def epsilon(self, events, delta):
        """Epsilon at ``delta`` of the composition of ``events`` (none with count 0)."""
        raise NotImplementedError


def get_accountant(name):
    """The accountant registered under ``name`` (a ``composition=`` string)."""
    try:
        return ACCOUNTANTS[name]()
    except KeyError:
        raise ValueError(f"composition must be one of {tuple(ACCOUNTANTS)}, got {name!r}.") from None
