"""Exercises: checks with friendly feedback in the notebook, and a grader a trainer can trust.

In a notebook::

    from labkit.grading import exercise
    ex = exercise("murmur2")
    ex.check(globals())            # visible checks: a short ✓/✗ table with hints (feedback only)

The exercise's last cell, ``ex.grade()``, shows a button that saves the notebook and grades it the way
``labkit grade murmur2`` does from a terminal (:mod:`.selfgrade`). ``labkit grade`` grades one
submission and ``labkit grade DIR`` a whole class (``DIR/<learner>/<exercise>.ipynb``):
static rules on the file, the notebook run in a fresh kernel, every check (hidden ones
too) decided in the grader's process against a fresh cluster (see :mod:`.grader`).
``labkit release OUT`` writes the learner bundle: no reference solutions, no hidden checks.

Where things are: :mod:`.checks` (checks, namespaces, results), :mod:`.rules` (static
rules), :mod:`.exercises` (sources, templates, learner copies), :mod:`.kernel` and
:mod:`.agent` (the line to the learner's kernel), :mod:`.wire` (plain data only),
:mod:`.grader` (one submission), :mod:`.classroom` (a class, and the learner bundle).

Layer: grading, below the app and above everything a lesson uses.
"""

from __future__ import annotations

from .checks import (Check, CheckResult, Exercise, GraderFault, GradingError, LearnerError, LocalNamespace, NotDefined,
                     Results, check, run_check, sibling)
from .exercises import (ANSWER_STUB, BEGIN, CODE_STUB, END, all_exercise_ids, build_learner_copies, exercise,
                        exercise_index, exercises_dir, learner_copy, learner_dir, reference_notebook, template)
from .grader import Report, grade
from .rules import Rules

__all__ = ["ANSWER_STUB", "BEGIN", "CODE_STUB", "END", "Check", "CheckResult", "Exercise", "GraderFault",
           "GradingError", "LearnerError", "LocalNamespace", "NotDefined", "Report", "Results", "Rules",
           "all_exercise_ids", "build_learner_copies", "check", "exercise", "exercise_index", "exercises_dir", "grade",
           "learner_copy", "learner_dir", "reference_notebook", "run_check", "sibling", "template"]
