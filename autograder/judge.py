"""Graded test cells, run by the notebook's runner instead of by the submission's kernel.

The runner (run_notebook.py) is a process of its own beside the submission's kernel: the
kernel cannot patch its modules, replace its functions or make its comparisons lie. A
graded test cell's code (with its hidden part, which the kernel never receives) runs here,
with the runner's own numpy, models and harnesses. Every name the cell reads from the
notebook is fetched from the kernel through a bridge, as plain data:

* numbers, strings, booleans, lists, tuples, dicts, sets, numeric arrays and pandas tables
  arrive as plain values of exactly those types (a subclass whose ``==`` always holds
  arrives as the number it converts to);
* a module arrives as its name, and this process imports its own copy (``hpclab``,
  numpy, pandas, scipy and the standard library only);
* a function of the notebook (the student's answer, or a helper of the lab) arrives as a
  proxy: calling it calls the function in the kernel on plain copies of the arguments and
  brings back the result (and the arrays it changed in place) as plain data; the proxy
  carries the code the function was compiled from (``source``), for checks that read it;
* the lab's MPI engines arrive as a proxy whose ``run`` asks the kernel to run one of the
  harnesses' own engine functions, by module and name.

So a submission decides only what its functions return; what is compared, and against what,
is decided here. What it cannot change is written to a file the kernel cannot reach; see
sandbox.py.
"""
from __future__ import annotations

import base64
import builtins
import contextlib
import importlib
import io
import json
import linecache
import os
import traceback
import zlib
from pathlib import Path

CELL_FILE = "<graded cell>"
ALLOWED_MODULES = ("hpclab", "numpy", "pandas", "scipy", "math", "statistics", "json",
                   "collections", "itertools", "functools", "fractions", "decimal")
MAX_REPLY = 512 << 20  # bytes of one reply from the kernel
MAX_DEPTH = 40


class BridgeError(Exception):
    """The kernel did not answer a request of the graded cell."""


class StudentError(Exception):
    """An exception raised by the notebook's code in the kernel (not a built-in type)."""


# --- the kernel's side (kernel_side.py): its source, sent with every request, so that
# nothing defined in the kernel is relied on
KERNEL_SIDE = Path(__file__).with_name("kernel_side.py").read_text()
# The request's cell holds that source as one line, compressed: the kernel tokenizes and
# parses every cell it runs several times over (IPython's input transforms, its check for
# top-level await, hpclab.exercises' watch of what a cell defines), and as 155 lines of
# code this took most of a kernel's CPU time in a check that calls a notebook's function
# often. Compiled under its own name, its frames in a traceback say where they come from.
_BUILTIN = "__import__('builtins')"
_PACKED = base64.b64encode(zlib.compress(KERNEL_SIDE.encode())).decode()
KERNEL_SIDE_CELL = (
    f"{_BUILTIN}.exec({_BUILTIN}.compile(__import__('zlib').decompress("
    f"__import__('base64').b64decode({_PACKED!r})), '<hpclab bridge>', 'exec'))\n")


# --- this process's side: plain values in, plain values out
def encode(x, depth=0):
    """A value of this process as the kernel's decoder reads it."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise TypeError("nested too deep")
    if isinstance(x, KernelFunction):
        return {"__callable__": x.name}
    if isinstance(x, np.bool_):
        return bool(x)
    if x is None or isinstance(x, (bool, str, int)):
        return x.item() if isinstance(x, np.generic) else x
    if isinstance(x, (float, np.floating)):
        v = float(x)
        return v if np.isfinite(v) else {"__float__": repr(v)}
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        a = np.ascontiguousarray(x)
        return {"__ndarray__": base64.b64encode(a.tobytes()).decode(), "dtype": a.dtype.str,
                "shape": list(a.shape)}
    if isinstance(x, tuple):
        return {"__tuple__": [encode(v, depth + 1) for v in x]}
    if isinstance(x, list):
        return [encode(v, depth + 1) for v in x]
    if isinstance(x, dict):
        return {"__dict__": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
    raise TypeError(f"cannot pass a {type(x).__name__} to the notebook's code")


def decode(x, depth=0):
    """A reply of the kernel as plain values of exactly the built-in (or numpy, pandas) types."""
    import numpy as np

    if depth > MAX_DEPTH:
        raise BridgeError("the kernel's reply is nested too deep")
    if x is None or type(x) in (bool, int, float, str):
        return x
    if type(x) is list:
        return [decode(v, depth + 1) for v in x]
    if type(x) is not dict or len(x) == 0:
        raise BridgeError("the kernel's reply is not plain data")
    if "__float__" in x:
        if x["__float__"] not in ("nan", "inf", "-inf"):
            raise BridgeError("a malformed number")
        return float(x["__float__"])
    if "__ndarray__" in x:
        dtype = np.dtype(str(x["dtype"]))
        if dtype.kind not in "biuf":
            raise BridgeError("an array of a type that is not numeric")
        shape = [int(s) for s in x["shape"]]
        raw = base64.b64decode(str(x["__ndarray__"]), validate=True)
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    if "__list_array__" in x:
        return np.array([decode(v, depth + 1) for v in x["__list_array__"]], dtype=object)
    if "__tuple__" in x:
        return tuple(decode(v, depth + 1) for v in x["__tuple__"])
    if "__set__" in x:
        return {_hashable(decode(v, depth + 1)) for v in x["__set__"]}
    if "__dict__" in x:
        return {_hashable(decode(k, depth + 1)): decode(v, depth + 1) for k, v in x["__dict__"]}
    if "__frame__" in x:
        import pandas as pd

        f = x["__frame__"]
        columns = [_hashable(decode(c, depth + 1)) for c in f["columns"]]
        data = [decode(c, depth + 1) for c in f["data"]]
        index = decode(f["index"], depth + 1)
        names = [decode(n, depth + 1) for n in f["index_names"]]
        if len(names) > 1:
            index = pd.MultiIndex.from_tuples([tuple(v) for v in index], names=names)
        else:
            index = pd.Index(index, name=names[0] if names else None)
        frame = pd.DataFrame(dict(enumerate(data)), index=index)
        frame.columns = columns
        return frame
    if "__series__" in x:
        import pandas as pd

        s = x["__series__"]
        return pd.Series(decode(s["data"], depth + 1), index=decode(s["index"], depth + 1),
                         name=_hashable(decode(s["name"], depth + 1)))
    raise BridgeError("the kernel's reply is not plain data")


def _hashable(v):
    import numpy as np

    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, np.ndarray):
        return tuple(v.tolist())
    return v


class Bridge:
    """Requests to the submission's kernel: ``execute(code)`` runs code in the kernel and
    returns its outputs (nbformat dicts); replies travel through a folder of the sandbox."""

    def __init__(self, execute, folder):
        self._execute, self.folder = execute, folder
        os.makedirs(folder, exist_ok=True)
        self.outputs = []  # the kernel's own outputs while serving, shown in the cell

    def ask(self, request):
        reply_path = os.path.join(self.folder, "reply.json")
        with contextlib.suppress(FileNotFoundError):
            os.remove(reply_path)
        with open(os.path.join(self.folder, "request.json"), "w") as fh:
            json.dump(request, fh)
        outputs = self._execute(KERNEL_SIDE_CELL + f"__hpclab_bridge__({self.folder!r})\n"
                                "del __hpclab_bridge__\n")
        self.outputs.extend(o for o in outputs if o.get("output_type") == "stream")
        try:
            if os.path.islink(reply_path) or os.path.getsize(reply_path) > MAX_REPLY:
                raise BridgeError("the kernel's reply is too large")
            with open(reply_path) as fh:
                reply = json.load(fh)
        except (OSError, ValueError):
            errors = [o for o in outputs if o.get("output_type") == "error"]
            why = f": {errors[-1].get('ename')}: {errors[-1].get('evalue')}" if errors else ""
            raise BridgeError(f"the notebook's kernel did not answer{why}") from None
        if not isinstance(reply, dict):
            raise BridgeError("the kernel's reply is not plain data")
        if "raised" in reply:
            raise _student_exception(reply)
        return reply


# exceptions of libraries, besides the built-in ones, that a check may catch by their type
# as it would in the notebook ((module, name) as the kernel names them: its own classes are
# not trusted here)
LIBRARY_EXCEPTIONS = frozenset({("numpy.linalg", "LinAlgError")})


def _student_exception(reply):
    import importlib

    name, message = str(reply.get("raised")), str(reply.get("message", ""))
    where = str(reply.get("traceback", "")).rstrip()
    text = message + (f"\n\nraised in your notebook:\n{where}" if where else "")
    cls = getattr(builtins, name, None) if reply.get("builtin") is True else None
    module = str(reply.get("module"))
    if (module, name) in LIBRARY_EXCEPTIONS:
        cls = getattr(importlib.import_module(module), name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(text)
        except Exception:
            pass
    return StudentError(f"{name}: {text}")


class KernelFunction:
    """A function defined in the notebook: called in the kernel on plain copies of the
    arguments; arrays passed in are updated with what the function wrote into them."""

    def __init__(self, bridge, name, source=None, origins=None):
        self._bridge, self.name = bridge, name
        self.__name__ = name
        # the code it was compiled from, as the kernel found it (checks read where its MPI
        # calls or its threads are: hpclab.mpicython.source_of)
        self.source = source if isinstance(source, str) else None
        # the modules the globals it reads come from (hpclab.exercises.origins)
        self.origins = {k: v for k, v in origins.items() if isinstance(k, str)
                        and isinstance(v, str)} if isinstance(origins, dict) else {}

    def __call__(self, *args, **kwargs):
        import numpy as np

        reply = self._bridge.ask({"op": "call", "name": self.name, "args": encode(list(args)),
                                  "kwargs": encode(dict(kwargs))})
        after = reply.get("after") or []
        for given, back in zip(args, after if isinstance(after, list) else []):
            if isinstance(given, np.ndarray) and back is not None:
                back = decode(back)
                if not isinstance(back, np.ndarray) or back.shape != given.shape:
                    raise BridgeError(f"{self.name} changed the shape of an array it was given")
                given[...] = back
        return decode(reply.get("result"))

    def __hpclab_map__(self, calls):
        """``[self(*args) for args in calls]`` in one request to the kernel (a request costs
        milliseconds; a check that fits dozens of segments with the student's line made
        hundreds). The arguments are copies: what the function writes into them is not
        brought back. The first call that raises raises here, as a single call would."""
        reply = self._bridge.ask({"op": "map", "name": self.name,
                                  "calls": [encode(list(args)) for args in calls]})
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(calls):
            raise BridgeError(f"the kernel did not return one result per call of {self.name}")
        return [decode(r) for r in results]

    def __repr__(self):
        return f"<your function {self.name}>"


class EnginesProxy:
    """The lab's MPI engines: ``run(func, ...)`` runs one of hpclab's own engine functions
    (named by module and name) in the kernel; what the engines return comes back as data."""

    def __init__(self, bridge, name, n):
        self._bridge, self._name, self.n = bridge, name, n

    def run(self, func, *args, **kwargs):
        module = getattr(func, "__module__", "") or ""
        if not module.startswith("hpclab."):
            raise BridgeError("a graded cell runs only hpclab's own functions on the engines")
        reply = self._bridge.ask({"op": "engines", "engines": self._name, "module": module,
                                  "qualname": func.__qualname__, "args": encode(list(args)),
                                  "kwargs": encode(dict(kwargs))})
        result = decode(reply.get("result"))
        if not isinstance(result, list):
            raise BridgeError("the engines' results are not a list")
        return result


def _names(code):
    """Every global name a compiled cell (and the functions and comprehensions in it) reads."""
    import dis

    out = {i.argval for i in dis.get_instructions(code)
           if i.opname in ("LOAD_NAME", "LOAD_GLOBAL", "LOAD_FROM_DICT_OR_GLOBALS")}
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            out |= _names(const)
    return {n for n in out if isinstance(n, str)}


class Unreadable:
    """A notebook value the grader cannot read as plain data: any use says so."""

    def __init__(self, name, why):
        self._name = name
        self._text = (f"{name} cannot be graded ({why}): give it as numbers, arrays, lists, "
                      "tuples, dicts or a pandas table")

    def _fail(self, *args, **kwargs):
        raise TypeError(self._text)

    def __repr__(self):
        return f"<{self._name}: not plain data>"

    __getattr__ = __call__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _fail
    __float__ = __int__ = __bool__ = __iter__ = __len__ = __getitem__ = __array__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _fail
    __rtruediv__ = __abs__ = __neg__ = __hash__ = _fail


def _module(name):
    """This process's own copy of a module the kernel names (hpclab's and a few others')."""
    if name.split(".")[0] not in ALLOWED_MODULES:
        return None
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def namespace(bridge, names):
    """The graded cell's globals: the kernel's values of ``names``, as plain data/proxies."""
    ns = {"__builtins__": builtins, "__name__": "__graded__"}
    if not names:
        return ns
    reply = bridge.ask({"op": "lookup", "names": sorted(names)})
    found = reply.get("names")
    if not isinstance(found, dict):
        raise BridgeError("the kernel's reply is not plain data")
    for name in names:
        info = found.get(name)
        if not isinstance(info, dict):
            continue
        kind = info.get("kind")
        if kind == "module":
            mod = _module(str(info.get("name")))
            if mod is not None:
                ns[name] = mod
        elif kind == "callable":
            ns[name] = KernelFunction(bridge, name, info.get("source"), info.get("origins"))
        elif kind == "engines":
            n = decode(info.get("n"))
            ns[name] = EnginesProxy(bridge, name, n if type(n) is int else 0)
        elif kind == "data":
            ns[name] = decode(info.get("value"))
        elif kind == "opaque":
            ns[name] = Unreadable(name, str(info.get("why", ""))[:200])
    return ns


def run_test(source, bridge, count):
    """Run a graded cell's code here; its nbformat outputs (stdout, then an error if it
    raised), like a kernel's."""
    import nbformat

    out = io.StringIO()
    error = None
    filename = f"{CELL_FILE.rstrip('>')} {count}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        code = compile(source, filename, "exec")
        names = {n for n in _names(code) if not hasattr(builtins, n)}
        with contextlib.redirect_stdout(out):
            ns = namespace(bridge, names)
            exec(code, ns)
    except Exception as exc:
        error = exc
    outputs = []
    text = out.getvalue()
    kernel_text = "".join(str(o.get("text", "")) for o in bridge.outputs
                          if o.get("name") == "stdout")
    if kernel_text:
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text=kernel_text))
    if text:
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text=text))
    if error is not None:
        outputs.append(_error_output(error, filename))
    bridge.outputs = []
    return outputs


def _error_output(exc, filename):
    import nbformat

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename == filename or "/hpclab/" in f.filename]
    lines = ["Traceback (most recent call last):\n"]
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return nbformat.v4.new_output("error", ename=type(exc).__name__, evalue=str(exc),
                                  traceback=["".join(lines).rstrip()])
