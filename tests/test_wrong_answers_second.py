"""The wrong answers of the labs in tests/test_wrong_answers.py's ``SECOND``, in a file of
their own so that another pytest worker runs them (the workers take whole files)."""
from __future__ import annotations

import pytest

from test_wrong_answers import SECOND, WRONG, each_wrong_answer_loses_only_its_own_points


@pytest.mark.slow
@pytest.mark.parametrize("lab", [lab for lab in SECOND if lab in WRONG])
def test_each_wrong_answer_loses_only_its_own_points(lab, tmp_path, monkeypatch):
    each_wrong_answer_loses_only_its_own_points(lab, tmp_path, monkeypatch)


def test_every_lab_with_wrong_answers_runs_in_one_of_the_two_files():
    assert set(SECOND) <= set(WRONG), f"no wrong answers for {set(SECOND) - set(WRONG)}"
