"""Privacy events as JSON-ready records, for ledgers kept outside the process.

A budget that composes fits by their events
(:class:`~skdp.privacy.BudgetAccountant`) must store the events of every
settled fit; :class:`~skdp.privacy.SQLiteBudgetAccountant` stores them as
JSON.  An event is a frozen dataclass of plain numbers and strings
(:mod:`skdp.privacy.events`), so its record is its class name and its fields.

Only the event classes of skdp's privacy core are known (those of
:mod:`skdp.privacy.events`): a record names a class by string, and resolving
an arbitrary name would let a ledger file choose what code runs.  Anything
else is refused with ValueError, and so are the events of a search (a
:class:`~skdp.privacy.events.RepeatAndSelectEvent` holds events, which a flat
record cannot; a :class:`~skdp.privacy.events.WeakTrianglePoissonEvent`
occurs only inside one): a budget row holding one counts by basic
composition, as any event the file cannot name.
"""

from __future__ import annotations

import dataclasses
import json

from .. import events

__all__ = ["event_from_record", "event_to_record", "events_from_json", "events_to_json"]


#: The base class, and a search's events, never written to a record (module docstring).
_NOT_RECORDED = (events.PrivacyEvent, events.RepeatAndSelectEvent, events.WeakTrianglePoissonEvent)


def _event_classes():
    classes = {}
    for value in vars(events).values():
        if (
            isinstance(value, type)
            and issubclass(value, events.PrivacyEvent)
            and value not in _NOT_RECORDED
            and value.__module__ == events.__name__
        ):
            classes[value.__name__] = value
    return classes


#: The event classes a record may name, by class name.
EVENT_CLASSES = _event_classes()


def event_to_record(event):
    """The JSON-ready record of ``event``: ``{"type": class name, field: value, ...}``.

    Tuples (Acs et al.'s per-cluster rates and probabilities) become lists;
    :func:`event_from_record` turns them back.

    Raises
    ------
    ValueError
        If ``event`` is not an instance of one of :data:`EVENT_CLASSES`
        (exactly: a subclass defined elsewhere could not be read back).
    """
    name = type(event).__name__
    if EVENT_CLASSES.get(name) is not type(event):
        raise ValueError(
            f"event must be one of skdp's privacy events {sorted(EVENT_CLASSES)}, got {type(event).__name__}."
        )
    record = {"type": name}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        record[field.name] = list(value) if isinstance(value, tuple) else value
    return record


def event_from_record(record):
    """The event described by ``record`` (the inverse of :func:`event_to_record`).

    The event's own checks run again (its ``__post_init__``).

    Raises
    ------
    ValueError
        If ``record`` is not a mapping naming one of :data:`EVENT_CLASSES`
        with that class's fields.
    """
    if not isinstance(record, dict):
        raise ValueError(f"record must be a dict, got {type(record).__name__}.")
    name = record.get("type")
    cls = EVENT_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"record's type must be one of {sorted(EVENT_CLASSES)}, got {name!r}.")
    fields = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in record.items() if k != "type"}
    unknown, missing = set(values) - fields, fields - set(values)
    if unknown or missing:
        raise ValueError(f"record of a {name} has fields {sorted(values)}, expected {sorted(fields)}.")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**values)
    except TypeError as exc:  # a field of the wrong kind; the message names the field
        raise ValueError(f"record of a {name} is malformed: {exc}") from None


def events_to_json(event_list):
    """JSON text of a list of events (:func:`event_to_record` of each)."""
    return json.dumps([event_to_record(e) for e in event_list], allow_nan=True)


def events_from_json(text):
    """The tuple of events of JSON text written by :func:`events_to_json`."""
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"text is not JSON: {exc.msg}.") from None
    if not isinstance(records, list):
        raise ValueError("text must hold a JSON list of event records.")
    return tuple(event_from_record(r) for r in records)
