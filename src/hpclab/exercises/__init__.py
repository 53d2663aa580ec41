"""Harnesses that run a student's code on the MPI engines and report what it did.

They hold no answers: they allocate buffers, call the student's function on
every rank, and check what arrived, so that a lab's self-checks and its
hidden tests can assert on plain numbers. Every call that starts MPI work has a
timeout.

Each lab's harnesses live in its chapter (``hpclab.chapters.<slug>.exercises``);
``hpclab.exercises.<name>``
finds them by name (``exercises.pingpong_check``), so a lab imports one module.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect


def _modules():
    from hpclab.kernels import registry

    for slug in registry.chapter_order():
        name = f"hpclab.chapters.{slug}.exercises"
        if importlib.util.find_spec(name) is not None:
            yield importlib.import_module(name)


def harnesses():
    """name -> function of every lab's public harness."""
    out = {}
    for module in _modules():
        for name, func in vars(module).items():
            if inspect.isfunction(func) and not name.startswith("_") \
                    and func.__module__ == module.__name__:
                out[name] = func
    return out


class NotAnswered(Exception):
    """A self-check ran before the exercise it checks was answered."""


def require(*names):
    """Raise NotAnswered unless every name is defined in the caller's namespace (the
    notebook's): a self-check cell says "answer the exercise above first", not NameError."""
    import sys

    where = sys._getframe(1).f_globals
    missing = [n for n in names if n not in where]
    if missing:
        raise NotAnswered(f"answer the exercise above first: {', '.join(missing)} "
                          f"{'is' if len(missing) == 1 else 'are'} not defined yet (write the "
                          "code, then run its cell, then this one)") from None


def __getattr__(name):
    found = harnesses()
    if name in found:
        return found[name]
    raise AttributeError(f"hpclab.exercises has no harness {name!r}; the labs' harnesses are "
                         f"{', '.join(sorted(found))}")


def __dir__():
    return sorted(set(globals()) | set(harnesses()))
