"""The common wrong answers of each lab, one module per lab (named for it): each module's
``WRONG`` lists cases made by :func:`case`. A case is an edit of the solution's answer cells,
the graded cell it must fail (``loses``) and words the failing check must say (``says``, in
its AssertionError); every other graded cell must still pass. A case made by :func:`right` is
another right answer, which must lose nothing (tests/test_wrong_answers.py,
which leaves half the labs to tests/test_wrong_answers_second.py). An edit is
``(answer cell's grade_id, old text, new text)``."""
import importlib
from pathlib import Path


def case(why, loses, says, *edits, unless=None):
    """``unless``: an expression, true in the kernel when this run's data make the wrong
    answer the right one (two measured numbers that coincide): then it may lose nothing."""
    return {"why": why, "loses": [loses], "says": says, "says_each": [says],
            "edits": list(edits), "unless": unless}


def right(why, *edits):
    """Another right answer (a way the text allows that the solution does not take): its
    edits must lose no points."""
    return {"why": why, "loses": [], "says": "", "says_each": [], "edits": list(edits),
            "unless": None}


def case_losing(why, says_by_check, *edits):
    """A case that loses several checks' points, each saying its own words: ``says_by_check``
    maps a check's grade id to them (a kernel that other answers are computed from)."""
    return {"why": why, "loses": list(says_by_check), "says": " / ".join(says_by_check.values()),
            "says_each": list(says_by_check.values()), "edits": list(edits)}


def interval_upside_down(answer):
    """The furthest term's interval taken as the model over the measurement, in the answer cell
    ``answer`` of a lab that judges its furthest term by that interval (Amdahl, Jacobi,
    Poisson)."""
    return case("the interval of the model over the measurement", "test_worst_verdict",
                "the model over the measurement",
                (answer, "worst_ratio, worst_low, worst_high = ", "worst_ratio, _a, _b = "),
                (answer, "worst_verdict = verdict(worst_low, worst_high)",
                 "worst_low, worst_high = 1 / _b, 1 / _a\n"
                 "worst_verdict = verdict(worst_low, worst_high)"))


def interval_ends_swapped(answer):
    """The furthest term's interval with its ends swapped (high before low), in the answer
    cell ``answer`` of a lab that judges its furthest term by that interval."""
    return case("the interval's ends swapped", "test_worst_verdict", "the low end first",
                (answer, "worst_ratio, worst_low, worst_high = ",
                 "worst_ratio, worst_high, worst_low = "))


def interval_typed_in(answer):
    """The furthest term's interval typed in (an interval that holds 1) instead of the one the
    helper gives, in the answer cell ``answer``."""
    return case("the interval typed in, not the helper's", "test_worst_verdict", "not typed in",
                (answer, "worst_verdict = verdict(worst_low, worst_high)",
                 "worst_low, worst_high = 0.5, 2.0\n"
                 "worst_verdict = verdict(worst_low, worst_high)"))


def furthest_by_distance(answer, test):
    """The furthest term chosen by |ratio - 1| instead of |log(ratio)|, in the answer cell
    ``answer`` of a lab whose ``test`` tries the student's ``furthest`` (Amdahl, Jacobi,
    Poisson)."""
    return case("the furthest term by |ratio - 1|", test, "compare |log(ratio)|",
                (answer, "return max(finite, key=lambda k: abs(np.log(finite[k])))",
                 "return max(finite, key=lambda k: abs(finite[k] - 1))"))


def furthest_keeps_infinite(answer, test):
    """The furthest term chosen with only NaN skipped, so an infinite ratio (a model time of 0)
    wins, in the answer cell ``answer`` of a lab whose ``test`` tries ``furthest``."""
    return case("the furthest term with an infinite ratio kept", test, "infinite ratio",
                (answer, "finite = {k: v for k, v in ratios.items() if np.isfinite(v)}",
                 "finite = {k: v for k, v in ratios.items() if not np.isnan(v)}"))


def verdict_from_any_overlap(answer):
    """"Slower than the model" whenever the interval reaches above 1, in the answer cell
    ``answer`` of a lab whose verdict check tries the student's ``verdict``."""
    return case("slower whenever the interval reaches above 1", "test_worst_verdict",
                "holds 1 shows no difference",
                (answer, "    if low > 1:\n        return \"slower than the model\"",
                 "    if high > 1:\n        return \"slower than the model\""))


def verdict_at_one(answer):
    """"Slower than the model" for an interval whose low end is 1 (low >= 1), in the answer
    cell ``answer`` of a lab whose verdict check tries the student's ``verdict``."""
    return case("a difference claimed for an interval that ends at 1", "test_worst_verdict",
                "ends at 1",
                (answer, "    if low > 1:\n", "    if low >= 1:\n"))


def judged_term_cases(answer, test):
    """The wrong answers every lab that judges its furthest term shares (Amdahl, Jacobi,
    Poisson): in the answer cell ``answer``, whose ``test`` tries the student's ``furthest``."""
    return [interval_upside_down(answer), interval_ends_swapped(answer),
            interval_typed_in(answer), furthest_by_distance(answer, test),
            furthest_keeps_infinite(answer, test), verdict_from_any_overlap(answer),
            verdict_at_one(answer)]


def labs():
    """{lab: its wrong answers} for every lab with a module here."""
    return {p.stem: importlib.import_module(f"wrong_answers.{p.stem}").WRONG
            for p in sorted(Path(__file__).parent.glob("*.py")) if p.stem != "__init__"}
