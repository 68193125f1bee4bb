"""Whether an object implements a runtime-checkable ``Protocol``, known by its class after the first answer.

Python 3.11's ``isinstance(obj, SomeProtocol)`` collects the protocol's members anew at every call: 20 to 70
microseconds for the storage protocols, checked several times per window (can the session's store read windows,
search, keep generations). :func:`conforms` gives ``isinstance``'s answer, kept per class where the class decides it:

* a class that has every method of a protocol of methods makes each of its instances conform (``isinstance``
  answers so from ``issubclass`` too);
* an object without ``__dict__`` (``None``, a number, an instance of a class with ``__slots__`` only) cannot gain
  members of its own, so its class's answer is its answer.

Anything else (an instance whose own attributes add members its class lacks, a protocol with data members) is
checked with ``isinstance`` each time.
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

_KNOWN: WeakKeyDictionary[type, dict[type, bool]] = WeakKeyDictionary()
"""What :func:`conforms` found, by the object's class, then by protocol (a class that goes away is forgotten)."""


def conforms(obj: object, protocol: type) -> bool:
    """``isinstance(obj, protocol)`` for a runtime-checkable ``Protocol``, answered by ``obj``'s class once its
    class decided it (see the module)."""
    cls = type(obj)
    known = _KNOWN.get(cls)
    if known is not None and (found := known.get(protocol)) is not None:
        return found
    found = isinstance(obj, protocol)
    if found:
        try:
            decided = issubclass(cls, protocol)
        except TypeError:  # a protocol with data members: only its instances can tell
            decided = False
    else:
        decided = not hasattr(obj, "__dict__")
    if decided:
        _KNOWN.setdefault(cls, {})[protocol] = found
    return found


__all__ = ["conforms"]
