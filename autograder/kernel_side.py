# The kernel's side of judge.py's bridge. Its source is sent to the submission's kernel with
# every request and run there in a cell, compressed to one line (judge.KERNEL_SIDE_CELL), so
# that nothing defined in the kernel is relied on; it is linted and type-checked here like the
# rest, and never imported by the grader.
def __hpclab_bridge__(folder):
    import base64
    import importlib
    import json
    import os
    import traceback
    import types

    import numpy as np
    ns = globals()  # this function is defined in a cell: the notebook's namespace
    try:
        import pandas as pd
    except ImportError:
        pd = None

    def enc(x, depth=0):
        if depth > 40:
            raise TypeError("nested too deep")
        if x is None or type(x) in (bool, str):
            return x
        if isinstance(x, (bool, np.bool_)):
            return bool(x)
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return int(x)
        if isinstance(x, (float, np.floating)):
            v = float(x)
            finite = v == v and v not in (float("inf"), float("-inf"))
            return v if finite else {"__float__": repr(v)}
        if isinstance(x, str):
            return str(x)
        if isinstance(x, np.ndarray):
            if x.dtype.kind not in "biuf":
                return {"__list_array__": [enc(v, depth + 1) for v in x.tolist()]}
            a = np.ascontiguousarray(x)
            return {"__ndarray__": base64.b64encode(a.tobytes()).decode(), "dtype": a.dtype.str,
                    "shape": list(a.shape)}
        if pd is not None and isinstance(x, pd.DataFrame):
            return {"__frame__": {"columns": [enc(c, depth + 1) for c in x.columns],
                                  "data": [enc(x.iloc[:, i].to_numpy(), depth + 1)
                                           for i in range(x.shape[1])],
                                  "index": enc(np.asarray(x.index.tolist(), dtype=object)
                                               if x.index.nlevels > 1 else x.index.to_numpy(),
                                               depth + 1),
                                  "index_names": [enc(n, depth + 1) for n in x.index.names]}}
        if pd is not None and isinstance(x, pd.Series):
            return {"__series__": {"data": enc(x.to_numpy(), depth + 1),
                                   "index": enc(x.index.to_numpy(), depth + 1),
                                   "name": enc(x.name, depth + 1)}}
        if isinstance(x, tuple):
            return {"__tuple__": [enc(v, depth + 1) for v in x]}
        if isinstance(x, list):
            return [enc(v, depth + 1) for v in x]
        if isinstance(x, (set, frozenset)):
            return {"__set__": [enc(v, depth + 1) for v in x]}
        if isinstance(x, dict):
            return {"__dict__": [[enc(k, depth + 1), enc(v, depth + 1)] for k, v in x.items()]}
        raise TypeError(f"a {type(x).__name__} cannot be graded")

    def dec(x):
        if isinstance(x, list):
            return [dec(v) for v in x]
        if not isinstance(x, dict):
            return x
        if "__callable__" in x:
            return ns[x["__callable__"]]
        if "__ndarray__" in x:
            return np.frombuffer(base64.b64decode(x["__ndarray__"]),
                                 dtype=x["dtype"]).reshape(x["shape"]).copy()
        if "__tuple__" in x:
            return tuple(dec(v) for v in x["__tuple__"])
        if "__dict__" in x:
            return {dec(k): dec(v) for k, v in x["__dict__"]}
        if "__float__" in x:
            return float(x["__float__"])
        raise TypeError("unknown request")

    def source(x):
        """The code a function was compiled from, for checks that read it (where its MPI
        calls or its threads are): a compiled cell's own (an ``%%mpi_cython`` function
        carries it), the ``.pyx`` file a ``%%cython`` cell wrote, or a Python function's
        lines. None when there is none, or when looking raised (whatever the notebook's
        object does, the lookup of the other names goes on)."""
        try:
            return find_source(x)
        except Exception:  # noqa: BLE001
            return None

    def find_source(x):
        import inspect
        import sys

        text = getattr(x, "source", None)
        if isinstance(text, str):
            return text[:200_000]
        module = sys.modules.get(getattr(x, "__module__", None) or "")
        where = getattr(module, "__file__", None)
        if where and not where.endswith(".py"):  # a compiled module: its .pyx beside it
            pyx = os.path.join(os.path.dirname(where), module.__name__ + ".pyx")
            try:
                with open(pyx) as fh:
                    return fh.read(200_000)
            except OSError:
                return None
        try:
            return inspect.getsource(x)[:200_000]
        except (OSError, TypeError):
            return None

    def origins(x):
        """{global name: the module its value comes from} of the names a Python function
        reads from its globals (hpclab.exercises.origins, the library the lab imports): where
        a check sees a library function reached through an alias. Empty where it fails."""
        try:
            from hpclab.exercises import origins as read

            return {str(k): str(v) for k, v in read(x).items()}
        except Exception:  # noqa: BLE001 - whatever the notebook's object does
            return {}

    def kind(name):
        if name not in ns:
            return {"kind": "missing"}
        x = ns[name]
        if isinstance(x, types.ModuleType):
            return {"kind": "module", "name": x.__name__}
        if type(x).__name__ == "Engines" and hasattr(x, "run"):
            return {"kind": "engines", "n": enc(x.n)}
        if callable(x) and not isinstance(x, np.ndarray) and not (
                pd is not None and isinstance(x, (pd.DataFrame, pd.Series))):
            return {"kind": "callable", "name": getattr(x, "__name__", name),
                    "source": source(x), "origins": origins(x)}
        try:
            return {"kind": "data", "value": enc(x)}
        except Exception as exc:
            return {"kind": "opaque", "why": str(exc)}

    with open(os.path.join(folder, "request.json")) as fh:
        req = json.load(fh)
    try:
        if req["op"] == "lookup":
            reply = {"names": {n: kind(n) for n in req["names"]}}
        elif req["op"] == "call":
            args, kwargs = dec(req["args"]), dec(req["kwargs"])
            result = ns[req["name"]](*args, **kwargs)
            reply = {"result": enc(result),
                     "after": [enc(a) if isinstance(a, np.ndarray) else None for a in args]}
        elif req["op"] == "map":  # one call after the other, in one request
            func = ns[req["name"]]
            reply = {"results": [enc(func(*dec(args))) for args in req["calls"]]}
        elif req["op"] == "engines":
            func = importlib.import_module(req["module"])
            for part in req["qualname"].split("."):
                func = getattr(func, part)
            result = ns[req["engines"]].run(func, *dec(req["args"]), **dec(req["kwargs"]))
            reply = {"result": enc(result)}
        else:
            reply = {"error": "unknown request"}
    except BaseException as exc:
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        reply = {"raised": type(exc).__name__, "message": str(exc),
                 "builtin": type(exc).__module__ == "builtins", "module": type(exc).__module__,
                 "traceback": "".join(tb[:1] + tb[2:] if len(tb) > 2 else tb)[-6000:]}
    tmp = os.path.join(folder, "reply.part")
    with open(tmp, "w") as fh:
        json.dump(reply, fh)
    os.replace(tmp, os.path.join(folder, "reply.json"))
