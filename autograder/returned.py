"""What comes back from a submission's run in the sandbox (sandbox.py), read as untrusted:
every file capped in size and parsed defensively, the runner's verdicts of the graded cells,
and the executed notebook's outputs merged, cell by cell, onto the grader's own copy."""
from __future__ import annotations

import json
import math
import os
import signal

import nbformat


def last_bytes(path, n):
    """The last ``n`` bytes of a file, as text."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - n))
            return fh.read(n).decode(errors="replace")
    except OSError:
        return ""


def read_judged(path, tests, limit):
    """{cell index: (outputs, execution count)} of the graded cells the runner judged."""
    out = {}
    try:
        if path.stat().st_size > limit:
            return out
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            rec = json.loads(line)
            index, outputs = int(rec["index"]), rec["outputs"]
            nodes = [nbformat.from_dict(o) for o in outputs]
            cell = nbformat.v4.new_code_cell(outputs=nodes, execution_count=1)
            nbformat.validate(nbformat.v4.new_notebook(cells=[cell]))
        except Exception:
            continue
        if index in tests:
            out[index] = (nodes, int(rec.get("execution_count") or 1))
    return out


def ended(code):
    """An exit code in words (a shell-style 128 + n is signal n)."""
    n = -code if code < 0 else code - 128 if code > 128 else 0
    if n:
        try:
            return f"signal {signal.Signals(n).name} (killed)"
        except ValueError:
            return f"signal {n}"
    return f"exit status {code}"


def read_values(path, names):
    """The values file written in the sandbox, reduced to finite floats of the names asked."""
    try:
        if path.is_symlink() or path.stat().st_size > 1 << 20:
            return {}
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for name in names:
        v = raw.get(name) if isinstance(raw, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[name] = float(v)
    return out


def read_untrusted(path, limit):
    """The notebook at ``path`` if it is a plain file within ``limit`` bytes and valid;
    else None."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        with open(path) as fh:
            nb = nbformat.read(fh, as_version=4)
        nbformat.validate(nb)
        return nb
    except Exception:  # any malformed file means: no outputs
        return None


def cut(outputs, text):
    """Outputs with every text longer than ``text`` characters cut, saying so."""
    for out in outputs:
        fields = [("text", out)] if "text" in out else []
        fields += [(k, out["data"]) for k in ("text/plain", "text/html")
                   if isinstance(out.get("data"), dict) and k in out["data"]]
        fields += [("evalue", out)] if "evalue" in out else []
        for key, holder in fields:
            value = holder[key]
            value = "".join(value) if isinstance(value, list) else str(value)
            if len(value) > text:
                holder[key] = (value[:text] + f"\n[output cut: {len(value):,} characters, "
                               f"the grader keeps {text:,}]\n")
        if isinstance(out.get("traceback"), list) and \
                sum(len(x) for x in out["traceback"]) > text:
            out["traceback"] = [x[:text // 10] for x in out["traceback"][-10:]]
    return outputs


def merge(nb, executed, tests=(), judged=None, *, text):
    """The trusted notebook with ``executed``'s outputs, cell by cell (each text cut at
    ``text`` characters), and the graded test cells' outputs from ``judged`` (the runner's
    verdicts, never the returned notebook's); (notebook, problem)."""
    merged = nbformat.from_dict(json.loads(json.dumps(nb)))
    judged = judged or {}
    for i, (outputs, count) in judged.items():
        merged.cells[i].outputs, merged.cells[i].execution_count = cut(outputs, text), count
    if executed is None:
        return merged, "the sandbox returned no readable notebook"
    if len(executed.cells) != len(merged.cells):
        return merged, "the notebook's cells changed while it ran"
    for i, (mine, theirs) in enumerate(zip(merged.cells, executed.cells)):
        if i in tests:
            if theirs.cell_type != "code":
                return merged, "the notebook's cells changed while it ran"
            continue
        if mine.cell_type != theirs.cell_type or mine.source != theirs.source:
            return merged, "the notebook's cells changed while it ran"
        if mine.cell_type == "code":
            mine.outputs = cut(theirs.get("outputs", []), text)
            mine.execution_count = theirs.get("execution_count")
    return merged, ""


def mark_not_run(nb, why):
    """Give every graded code cell that has no execution count an error output; count."""
    n = 0
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and cell.get("execution_count") is None:
            cell.outputs = [nbformat.v4.new_output(
                "error", ename="NotRun", evalue=f"this cell did not run: {why}",
                traceback=[f"NotRun: this cell did not run: {why}"])]
            n += 1
    return n


def _as_text(out):
    """What an output shows, as text (a figure or other data named, not shown)."""
    if out.get("output_type") == "stream":
        value = out.get("text", "")
    elif out.get("output_type") == "error":
        value = f"{out.get('ename', '')}: {out.get('evalue', '')}"
    else:
        data = out.get("data") if isinstance(out.get("data"), dict) else {}
        value = data.get("text/plain", "[" + ", ".join(sorted(map(str, data))) + "]")
        if any(str(k).startswith("image/") for k in data):
            value = "[a figure]"
    value = "".join(value) if isinstance(value, list) else str(value)
    return value if value.endswith("\n") else value + "\n"


def add_own_run(nb, submitted, tests, *, text):
    """Beside each code cell's outputs in ``nb`` (the graded run, in the grading profile), the
    student's own outputs of it as saved in their notebook (``submitted``, untrusted: what a
    student's run printed, or whatever they saved), as escaped text under a closed heading: a
    written answer speaks of the numbers the student measured, on their machine and in their
    profile, and whoever grades it by hand reads them there. A cell is matched by its id (a
    cell the student added or removed moves no other), else by its place when the two have
    as many cells; graded test cells, cells whose source is not the submitted one and cells
    that printed nothing are left as they are; each cell's text is cut at ``text``
    characters. Returns how many cells got one."""
    import html

    n = 0
    if submitted is None:
        return n
    theirs_by_id = {c.get("id"): c for c in submitted.cells if c.get("id")}
    same_length = len(submitted.cells) == len(nb.cells)
    for i, mine in enumerate(nb.cells):
        theirs = theirs_by_id.get(mine.get("id")) if mine.get("id") else None
        if theirs is None and same_length:
            theirs = submitted.cells[i]
        if theirs is None or i in tests or mine.cell_type != "code" \
                or theirs.cell_type != "code" or mine.source != theirs.source:
            continue
        shown = "".join(_as_text(o) for o in theirs.get("outputs", []) if isinstance(o, dict))
        if not shown.strip():
            continue
        if len(shown) > text:
            shown = (shown[:text] + f"\n[cut: {len(shown):,} characters, the grader keeps "
                     f"{text:,}]\n")
        heading = "As saved in the submitted notebook: the student's own run of this cell"
        mine.outputs.append(nbformat.v4.new_output("display_data", data={
            "text/plain": f"{heading}\n{shown}",
            "text/html": f"<details class=\"hpclab-own-run\"><summary>{heading}</summary>"
                         f"<pre>{html.escape(shown)}</pre></details>"}))
        n += 1
    return n
