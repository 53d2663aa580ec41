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

import contextlib
import importlib
import importlib.util
import inspect
import sys


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


def stuck_after(seconds):
    """The processor time a check lets an engine spend on a student's MPI code before it
    calls the code stuck (a deadlock, a message no rank sends; see :func:`stuck_limits`):
    ``seconds``, or ``$HPCLAB_STUCK_SECONDS`` where that is shorter and positive. The checks
    that wait so give code that is right milliseconds of work; a run that grades many wrong
    answers, several of which wait forever by design, may give each less."""
    import math
    import os

    try:
        cap = float(os.environ.get("HPCLAB_STUCK_SECONDS", "inf"))
    except ValueError:
        cap = math.inf
    return min(seconds, cap) if cap > 0 else seconds


STUCK_WALL = 2  # a stuck check's clock runs this many times its seconds (see stuck_limits)


def stuck_limits(seconds):
    """The limits of :meth:`hpclab.engines.Engines.run` for a check that waits for a student's
    MPI code which, when right, is milliseconds of work: stuck once an engine has spent
    :func:`stuck_after` (``seconds``) seconds of processor time on it (a deadlock polls: on an
    idle machine that is as many seconds on the clock), or after STUCK_WALL times ``seconds``
    on the clock (an MPI that waits without polling; a machine too loaded to give it the
    time). Right code on a loaded machine takes long on the clock, never that much work."""
    return {"timeout": STUCK_WALL * seconds, "busy": stuck_after(seconds)}


def map_calls(func, calls):
    """``[func(*args) for args in calls]``: in one request to the notebook's kernel where
    ``func`` is the grader's proxy of a notebook function (autograder/judge.py), which costs a
    request each call (milliseconds); call by call otherwise. For checks that call a
    student's function on many inputs whose answers they need before they judge."""
    batch = getattr(type(func), "__hpclab_map__", None)
    if batch is not None:
        return batch(func, [tuple(args) for args in calls])
    return [func(*args) for args in calls]


def timed_ranks(engines, nprocs):
    """``nprocs`` as an int when a harness may time on that many of ``engines``: at least one,
    at most the engines and one per usable core (a timing on more ranks than cores times the
    sharing); a ValueError that names the cores otherwise."""
    from hpclab import launch

    cores = launch.usable_cores()
    if not 1 <= nprocs <= min(engines.n, cores):
        raise ValueError(f"time on 1 to {min(engines.n, cores)} ranks (one per core of the "
                         f"{cores}), not {nprocs}")
    return int(nprocs)


def take_turns(comm, calls, repetitions, warmup=1):
    """Seconds of each of ``calls`` (name -> function of no arguments, called on every rank
    of ``comm``), the slowest rank's, each call alone between a barrier and the clock; the
    calls take turns within every repetition, so a change in the machine's load falls on all
    of them alike. ``warmup`` rounds first are not timed (pages first touched, datatypes and
    caches first made). {name: [seconds of each repetition]}."""
    from mpi4py import MPI

    times: dict = {name: [] for name in calls}
    for r in range(warmup + repetitions):
        for name, call in calls.items():
            comm.Barrier()
            t0 = MPI.Wtime()
            call()
            dt = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
            if r >= warmup:
                times[name].append(dt)
    return times


def names_used(func):
    """The global and attribute names ``func``'s code uses, with those of the functions
    defined inside it: which calls a student's function makes, read without running it (from
    its compiled code, or, for a function known by its source only, such as the grader's proxy
    of a notebook's function, from that source)."""
    import ast
    import textwrap
    import types

    code = getattr(func, "__code__", None)
    if code is None:
        from hpclab.mpicython import source_of

        text = source_of(func)
        if text is None:
            raise ValueError(f"{func!r}: neither its code nor its source can be read")
        tree = ast.parse(textwrap.dedent(text))
        node = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                     and n.name == getattr(func, "__name__", None)), tree)
        # as the compiled code's co_names: attributes and the names read that are not the
        # function's own (its parameters and the names it assigns are locals)
        local = {a.arg for f in ast.walk(node) if isinstance(f, ast.FunctionDef)
                 for a in f.args.args + f.args.kwonlyargs + f.args.posonlyargs}
        local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, (ast.Store, ast.Del))}
        local |= {a.asname or a.name.split(".")[0] for n in ast.walk(node)
                  if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        # an import inside it: the module's dotted name and the names taken from it, as
        # IMPORT_NAME and IMPORT_FROM put them in co_names
        imported = {a.name for n in ast.walk(node) if isinstance(n, ast.Import)
                    for a in n.names}
        imported |= {n.module for n in ast.walk(node)
                     if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(node) if isinstance(n, ast.ImportFrom)
                     for a in n.names}
        return imported | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | \
            {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load) and n.id not in local}
    names, todo = set(), [code]
    while todo:
        code = todo.pop()
        names |= set(code.co_names)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return names


def origins(func):
    """{global name: the module its value comes from} of the names ``func``'s code reads
    from its globals (a function alias, ``f = fd.second_derivative``, counts as fd's): which
    library a student's function reaches, however it names it. Read from the function, or,
    for the grader's proxy of a notebook's function, as the notebook's kernel read it there
    (autograder/kernel_side.py). Empty for a compiled function."""
    import types

    code, space = getattr(func, "__code__", None), getattr(func, "__globals__", None)
    if not (isinstance(code, types.CodeType) and isinstance(space, dict)):
        return dict(getattr(func, "origins", None) or {})
    found, todo = {}, [code]
    while todo:
        c = todo.pop()
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        for n in c.co_names:
            if n in space:
                v = space[n]
                where = v.__name__ if isinstance(v, types.ModuleType) else getattr(
                    v, "__module__", None)
                if isinstance(where, str):
                    found[n] = where
    return found


COMPLETIONS = ("Wait", "wait", "Test", "test", "Waitall", "waitall", "Waitany", "waitany",
               "Waitsome", "waitsome", "Testall", "testall", "Testany", "testany", "Testsome",
               "testsome")


def logged_requests(real, log, on_wait=None):
    """A subclass of MPI.Request (``real``) that notes each completion call (wait or test, of
    one or of many) in ``log`` as ``("done", requests posted so far)``, after calling
    ``on_wait()`` when given (before the real completion runs)."""

    def noted():
        log.append(("done", log.count("post")))
        if on_wait is not None:
            on_wait()

    def instance(name):
        def call(self, *args, **kwargs):
            noted()
            return getattr(real, name)(self, *args, **kwargs)
        return call

    def many(name):
        def call(cls, requests, *args, **kwargs):
            noted()
            return getattr(real, name)(requests, *args, **kwargs)
        return classmethod(call)

    body = {n: instance(n) if n.lower() in ("wait", "test") else many(n) for n in COMPLETIONS}
    return type("Request", (real,), body)


class LoggedComm:
    """A communicator whose non-blocking posts (Irecv, Isend, Issend) are noted in ``log`` as
    ``"post"``, after calling ``on_post(name, args, kwargs)`` when given, their requests
    returned as ``requests`` (a :func:`logged_requests` class) and kept in ``made`` when
    given; anything else is the real one's."""

    def __init__(self, real, log, requests, on_post=None, made=None):
        self._real, self._log, self._requests, self._on_post = real, log, requests, on_post
        self._made = made

    def _post(self, name, *args, **kwargs):
        if self._on_post is not None:
            self._on_post(name, args, kwargs)
        self._log.append("post")
        request = self._requests(getattr(self._real, name)(*args, **kwargs))
        if self._made is not None:
            self._made.append(request)
        return request

    def Irecv(self, *args, **kwargs):  # noqa: N802 (mpi4py's names)
        return self._post("Irecv", *args, **kwargs)

    def Isend(self, *args, **kwargs):  # noqa: N802
        return self._post("Isend", *args, **kwargs)

    def Issend(self, *args, **kwargs):  # noqa: N802
        return self._post("Issend", *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._real, name)


class Posts:
    """What a :func:`logged` communicator saw: ``log``, its posts (``"post"``) and completion
    calls (``("done", posted so far)``) in order, and ``requests``, those its posts made."""

    def __init__(self):
        self.log, self.requests = [], []

    @property
    def unwaited(self):
        """How many of the requests were never completed (by a wait or a test)."""
        return pending(self.requests)

    @property
    def posted(self):
        """How many messages were posted (Irecv, Isend, Issend)."""
        return self.log.count("post")

    @property
    def before_first_wait(self):
        """How many were posted when the first wait or test was called (None: never)."""
        return next((e[1] for e in self.log if e != "post"), None)


@contextlib.contextmanager
def logged(comm, on_post=None, on_wait=None):
    """``(comm, posts)``: ``comm`` as a :class:`LoggedComm` whose posts and their requests'
    waits and tests are noted in ``posts`` (a :class:`Posts`), ``on_post(name, args,
    kwargs)`` called before each post and ``on_wait()`` before each completion call. While it
    is open,
    ``MPI.Request`` is the logging class, so that ``MPI.Request.Waitall`` is noted too; it is
    given back on leaving."""
    from mpi4py import MPI

    posts, real = Posts(), MPI.Request
    requests = logged_requests(real, posts.log, on_wait)
    setattr(MPI, "Request", requests)  # noqa: B010 (a final name)
    try:
        yield LoggedComm(comm, posts.log, requests, on_post, posts.requests), posts
    finally:
        setattr(MPI, "Request", real)  # noqa: B010


DERIVED = "derived datatype"  # CountingComm's count of calls given a derived datatype


def _derived(arg):
    """True when ``arg`` is a buffer spec ([buf, count, datatype], ...) whose datatype is a
    derived one (a subarray, a vector...), not a predefined MPI type."""
    from mpi4py import MPI

    return isinstance(arg, (list, tuple)) and any(
        isinstance(x, MPI.Datatype) and not x.is_predefined for x in arg)


def pending(requests):
    """How many of ``requests`` have not been waited for (mpi4py sets a request it completed
    in a wait or a test to MPI.REQUEST_NULL, in place)."""
    from mpi4py import MPI

    return sum(1 for r in requests if r != MPI.REQUEST_NULL)


def _bytes_of(buf):
    """A copy of a buffer's bytes, or None for what is not a buffer."""
    try:
        return memoryview(buf).tobytes()
    except TypeError:
        return None


@contextlib.contextmanager
def watch_send_buffers(func, sent, found):
    """While open, every line that runs in ``func``'s code (and in other functions of the
    file it was defined in) is followed by a look at the non-blocking sends in ``sent``
    (filled by :class:`CountingComm`) not yet waited for. The first time one's buffer no
    longer holds the bytes it was sent with, ``found`` gets ``{"function": name, "line": n}``:
    the line that ran last (1 = its function's ``def``), which changed it (or called the code
    that did). MPI may read a send's buffer until the send is waited for: a program that
    changes it earlier sends whatever the buffer holds when the library reads it."""
    from mpi4py import MPI

    where = getattr(getattr(func, "__code__", None), "co_filename", None)
    last: dict[int, int] = {}  # frame -> the line it ran last

    def local(frame, event, arg):
        if not found and event in ("line", "return") and id(frame) in last and any(
                r != MPI.REQUEST_NULL and _bytes_of(b) != copy for r, b, copy in sent):
            found.append({"function": frame.f_code.co_name,
                          "line": last[id(frame)] - frame.f_code.co_firstlineno + 1})
        last[id(frame)] = frame.f_lineno
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == where and not found else None

    old = sys.gettrace()
    sys.settrace(tracer if where else old)
    try:
        yield
    finally:
        sys.settrace(old)


class CountingComm:
    """A communicator that counts the calls made on it and on the communicators made from it
    (``Create_cart``, ``Dup``, ...): every attribute is the real communicator's. The calls
    given a buffer described by a derived datatype are counted under :data:`DERIVED` too, and
    under ``f"{DERIVED} {name}"`` for each call's name. With ``order`` (a list), each call is
    appended to it as ``(name, sends pending, tag)``: the non-blocking sends started on these
    communicators (kept in ``requests``) that were not yet waited for when the call was
    made, and the tag it was given (None when it takes none). With ``sent`` (a list), each
    non-blocking send appends ``(request, buffer, bytes)``: the buffer it was given and a copy
    of its bytes then, which must not change before the request is waited for (see
    :func:`watch_send_buffers`)."""

    def __init__(self, comm, calls, order=None, requests=None, sent=None):
        self._comm, self._calls, self._order = comm, calls, order
        self._requests = [] if requests is None else requests
        self._sent = sent

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            from mpi4py import MPI

            self._calls[name] = self._calls.get(name, 0) + 1
            if any(_derived(a) for a in (*args, *kwargs.values())):
                self._calls[DERIVED] = self._calls.get(DERIVED, 0) + 1
                key = f"{DERIVED} {name}"  # which call was given one
                self._calls[key] = self._calls.get(key, 0) + 1
            if self._order is not None:  # (call, sends started and not yet waited for, tag)
                tag = kwargs.get("tag", args[2] if len(args) > 2 else None)
                self._order.append((name, pending(self._requests),
                                    tag if isinstance(tag, int) else None))
            out = attr(*args, **kwargs)
            if isinstance(out, MPI.Request) and "send" in name.lower():
                self._requests.append(out)
                if self._sent is not None:
                    buf = args[0] if args else kwargs.get("buf")
                    buf = buf[0] if isinstance(buf, (list, tuple)) and buf else buf
                    copy = _bytes_of(buf)
                    if copy is not None:
                        self._sent.append((out, buf, copy))
            return CountingComm(out, self._calls, self._order, self._requests, self._sent) \
                if isinstance(out, MPI.Comm) else out

        return call


class NotAnswered(Exception):
    """A self-check ran before the exercise it checks was answered."""


# name -> what the last cell that defines it raised ("ZeroDivisionError: division by zero,
# line 4: B_c = 1 / 0"), while that cell's latest run raised (see _after_cell)
_RAISED: dict[str, str] = {}


def _defined(source):
    """Names a cell's code binds at its top level (assignments, def, class, import)."""
    import ast

    if source.lstrip().startswith("%%mpi_cython"):  # Cython: the functions it compiles
        from hpclab import mpicython

        return set(mpicython.function_names(source.lstrip().partition("\n")[2]))
    try:  # IPython's own syntax (%time, !ls) as the Python it runs
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - without IPython, or a cell it cannot transform
        pass
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            out |= {n.id for n in ast.walk(node)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return out


def _cell_line(exc, source):
    """'line N: <code>' of the cell that ran when ``exc`` was raised: the line of that cell
    (the first frame of the notebook's code; deeper ones may be earlier cells' functions),
    or ''."""
    import traceback

    lines = source.splitlines()
    for frame in traceback.extract_tb(exc.__traceback__):
        if "ipykernel_" in frame.filename or frame.filename.startswith("<ipython-input"):
            if frame.lineno and 0 < frame.lineno <= len(lines):
                return f"line {frame.lineno}: {lines[frame.lineno - 1].strip()}"
            return ""
    return ""


def _after_cell(result):
    """IPython's post_run_cell: remember what a cell that raised would have defined."""
    info = getattr(result, "info", None)
    source = getattr(info, "raw_cell", "") or ""
    names = _defined(source)
    err = getattr(result, "error_in_exec", None)
    for name in names:
        if err is None:
            _RAISED.pop(name, None)
        else:
            where = _cell_line(err, source)
            _RAISED[name] = f"{type(err).__name__}: {err}" + (f", at {where}" if where else "")


def _watch():
    """Follow the notebook's cells (once per kernel), so that a self-check after an
    answer that raised says so instead of "not answered"."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and _after_cell not in shell.events.callbacks["post_run_cell"]:
        shell.events.register("post_run_cell", _after_cell)


_watch()


def require(*names):
    """Raise NotAnswered unless every name is defined in the caller's namespace (the
    notebook's): a self-check cell says "answer the exercise above first", not NameError;
    and when the cell that defines a name raised, what it raised and on which line."""
    import sys

    where = sys._getframe(1).f_globals
    missing = [n for n in names if n not in where]
    raised = [(n, _RAISED[n]) for n in missing if n in _RAISED]
    if raised:
        name, what = raised[0]
        raise NotAnswered(f"your answer did not run to the end: the cell that defines {name} "
                          f"raised {what}. Fix it, run that cell again, then this one") from None
    if missing:
        raise NotAnswered(f"answer the exercise above first: {', '.join(missing)} "
                          f"{'is' if len(missing) == 1 else 'are'} not defined yet (write the "
                          "code, then run its cell, then this one)") from None


def save_yours(chapter, what, values, unit, nprocs=1, nthreads=1, impl="yours", **params):
    """Save the timings of a student's own kernel as a run of experiment ``<chapter>-yours``
    in results/, with the provenance of every run (machine, commit, profile, time): for the
    instructor, never an input of another lab (those resolve their chapter's experiment by
    name). ``values``: one number per repetition, in ``unit``; or a pandas Series whose named
    index is a parameter (a row per entry: ``nbytes`` -> time). Values that are not finite
    numbers are left out. ``impl`` names the kernel when a lab times two of the student's
    (``yours_cython``). Returns the CSV's path, or None when nothing is left."""
    import numpy as np

    from hpclab import profiles, records

    experiment = f"{chapter}-yours"
    index = getattr(values, "index", None)
    if index is not None and getattr(index, "name", None):
        groups = [({**params, index.name: key}, [value]) for key, value in values.items()]
    else:
        groups = [(params, values)]
    rows = []
    for where, numbers in groups:
        try:
            numbers = np.asarray(numbers, dtype=float).ravel()
        except (TypeError, ValueError):  # not numbers: the checks say what is wrong with them
            continue
        numbers = numbers[np.isfinite(numbers)]
        rows += records.rows(experiment, chapter, impl, nprocs, nthreads, where, numbers,
                             what, unit)
    if not rows:
        return None  # nothing measured: a kernel that raised or returned no number
    meta = records.metadata(experiment, profiles.name(), {"student_code": True, "what": what})
    return records.Run(records.frame(rows), meta).save()


NAN = float("nan")
# ratios on which the rules students write instead of |log(ratio)| pick another term: the
# largest ratio and |ratio - 1| both take 1.8 over 0.4; a NaN first trips a plain max, and an
# infinite ratio (a model time of 0) wins it
_FURTHEST = (
    ({"a": 0.4, "b": 1.8}, "a", "0.4 is further from 1 than 1.8 on a logarithmic scale (2.5 "
     "times too fast against 1.8 times too slow): compare |log(ratio)|, not the largest ratio "
     "or |ratio - 1|"),
    ({"a": 1.5, "b": 0.5}, "b", "0.5 is twice as fast as the model, 1.5 only 1.5 times as "
     "slow: compare |log(ratio)|"),
    ({"b": NAN, "a": 3.0}, "a", "skip a NaN ratio (a term with no model time): it is no "
     "distance from 1, and max() with a NaN first keeps the NaN"),
    ({"a": 3.0, "b": float("inf")}, "a", "skip an infinite ratio too (a time measured against "
     "a model time of 0): it says the model has no such term, not how far off the term is"),
)
_VERDICT = (((1.1, 1.3), "slower than the model"), ((0.7, 0.9), "faster than the model"),
            ((0.9, 1.4), "no difference shown"), ((0.6, 1.05), "no difference shown"),
            ((1.0, 1.2), "no difference shown"), ((0.8, 1.0), "no difference shown"),
            ((NAN, NAN), "cannot tell"))


def furthest_problem(furthest):
    """What is wrong with a student's ``furthest(ratios)`` (the key of the ratio furthest
    from 1 on a logarithmic scale, NaN skipped), tried on ratios where the usual other rules
    pick another key; None when it is right."""
    for ratios, want, why in _FURTHEST:
        try:
            got = furthest(dict(ratios))
        except Exception as exc:  # noqa: BLE001 - the student's error, said in words
            return f"furthest({ratios}) raised {type(exc).__name__}: {exc}"
        if got != want:
            return f"furthest({ratios}) gave {got!r}, not {want!r}: {why}"
    return None


def verdict_problem(verdict):
    """What is wrong with a student's ``verdict(low, high)`` (what a 95% interval of a
    measured/model ratio lets one claim), tried on intervals on each side of 1, holding 1,
    and missing; None when it is right."""
    for (low, high), want in _VERDICT:
        try:
            got = verdict(low, high)
        except Exception as exc:  # noqa: BLE001 - the student's error, said in words
            return f"verdict({low}, {high}) raised {type(exc).__name__}: {exc}"
        if got != want:
            why = ("an interval that ends at 1 holds 1: a difference needs the whole interval "
                   "strictly above or below 1 (low > 1, high < 1)" if 1.0 in (low, high) else
                   "an interval that holds 1 shows no difference, wherever the ratio inside it "
                   "lies" if want == "no difference shown" else
                   "with no interval (NaN) nothing can be told" if want == "cannot tell" else
                   "the whole interval lies on one side of 1: the measurement is "
                   + want.replace(" than the model", "") + " than the model")
            return f"verdict({low}, {high}) gave {got!r}, not {want!r}: {why}"
    return None


def __getattr__(name):
    found = harnesses()
    if name in found:
        return found[name]
    raise AttributeError(f"hpclab.exercises has no harness {name!r}; the labs' harnesses are "
                         f"{', '.join(sorted(found))}")


def __dir__():
    return sorted(set(globals()) | set(harnesses()))
