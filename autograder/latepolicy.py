"""The course's late-submission policy (configured in nbgrader_config.py).

A notebook handed in after its lab's due date loses ``fraction_per_day`` of its score for
every started day of lateness; after ``zero_after_days`` days it scores 0. A lab without a
due date is never late. Set a due date with

    python autograder/grade.py duedate LAB "2026-12-01 17:00:00 Europe/Rome"

and a student's hand-in time is the ``timestamp.txt`` beside the submitted notebook
(nbgrader's convention; ``collect`` writes it).
"""
import math

from nbgrader.plugins.latesubmission import LateSubmissionPlugin
from traitlets import Float


class PerDayPenalty(LateSubmissionPlugin):
    fraction_per_day = Float(0.1, help="share of the score lost per started day late"
                             ).tag(config=True)
    zero_after_days = Float(7, help="days late after which the notebook scores 0"
                            ).tag(config=True)

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        if total_seconds_late <= 0:
            return None
        days = total_seconds_late / 86400.0
        penalty = score if days > self.zero_after_days else \
            min(score, score * self.fraction_per_day * math.ceil(days))
        self.log.info("%s is %.2f days late: penalty %.2f of %.2f", student_id, days, penalty,
                      score)
        return penalty


def describe(plugin_config):
    """The policy in words, from the configured values."""
    fraction = plugin_config.get("fraction_per_day", PerDayPenalty.fraction_per_day.default_value)
    zero = plugin_config.get("zero_after_days", PerDayPenalty.zero_after_days.default_value)
    return (f"{fraction:.0%} of the notebook's score per started day late; "
            f"0 after {zero:g} days")
