"""Ask before you show (issue 25): no lesson states a prediction's answer before it asks the question.

Read from the lesson sources (``scripts/lessons/*.py``) with ``ast``, no broker: each ``nb.md(...)`` is a
markdown cell, each ``nb.code(...)`` a code cell whose source is parsed for ``predict.ask(...)`` and
``.reveal(...)``. A choice question's reveal declares its right answer when the lesson knows it before the run
(``expected="..."``, one of the choices, or the literal it reveals) or says the run measures it
(``expected=predict.MEASURED``); the question's own cell never holds it, and a known answer's text must not be
in the markdown between the previous reveal and the ask. Also: every question is revealed later, and its
choices fit the prediction widget's buttons.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest

from labkit import predict

LESSONS = sorted((Path(__file__).resolve().parents[1] / "scripts" / "lessons").glob("[0-9][0-9]_*.py"))
#: The widget's ToggleButtons are 148 px (ipywidgets' --jp-widgets-inline-width-short) with 10 px padding each
#: side and an ellipsis past that: "an authorization error" showed as "an authorization …" (issue 26), 17
#: characters of a 13 px font.
WIDGET_CHARS = 18


@dataclass
class Ask:
    id: str
    cell: int
    line: int
    variable: Optional[str]
    choices: Any = None            # the evaluated choices, or None (not a choice question / not a literal)
    choices_literal: bool = False
    #: the ``answer=`` the ask itself was given (there is none: the question's cell must not hold the answer)
    answer_node: Optional[ast.expr] = None
    kind: str = "number"


@dataclass
class Lesson:
    path: Path
    #: (cell index, "markdown" | "code", text)
    cells: list[tuple[int, str, str]] = field(default_factory=list)
    asks: list[Ask] = field(default_factory=list)
    #: (cell index, name, the call) of every ``name.reveal(...)``, in order
    reveal_calls: list[tuple[int, str, ast.Call]] = field(default_factory=list)

    def first_reveal(self, ask: "Ask") -> Optional[ast.Call]:
        """The first ``<ask's variable>.reveal(...)`` in the question's cell or after it, or None."""
        return next((call for cell, name, call in self.reveal_calls if cell >= ask.cell and name == ask.variable),
                    None)


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
        return list(range(*[ast.literal_eval(a) for a in node.args]))
    return ast.literal_eval(node)


def _is_ask(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "ask"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "predict")


def read_lesson(path: Path) -> Lesson:
    """The lesson's cells in order, with its asks and reveals (the source's nb.md / nb.code calls)."""
    lesson = Lesson(path)
    for statement in ast.parse(path.read_text()).body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "nb"
                and call.func.attr in ("md", "code")):
            continue
        text = ast.literal_eval(call.args[0])
        index = len(lesson.cells)
        lesson.cells.append((index, "markdown" if call.func.attr == "md" else "code", text))
        if call.func.attr == "code":
            _read_code(lesson, index, text)
    return lesson


def _read_code(lesson: Lesson, index: int, source: str) -> None:
    import textwrap

    tree = ast.parse(textwrap.dedent(source))
    bound: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_ask(node.value) and isinstance(node.targets[0], ast.Name):
            bound[id(node.value)] = node.targets[0].id
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reveal"
                and isinstance(node.func.value, ast.Name)):
            lesson.reveal_calls.append((index, node.func.value.id, node))
    for node in ast.walk(tree):
        if not _is_ask(node):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        ask = Ask(id=ast.literal_eval(node.args[0]), cell=index, line=node.lineno, variable=bound.get(id(node)))
        if "kind" in keywords:
            ask.kind = ast.literal_eval(keywords["kind"])
        if "choices" in keywords:
            ask.kind = "choice"
            try:
                ask.choices, ask.choices_literal = _literal(keywords["choices"]), True
            except ValueError:
                ask.choices = None
        ask.answer_node = keywords.get("answer")
        lesson.asks.append(ask)


def _declared_answer(lesson: Lesson, ask: Ask) -> Any:
    """The known answer (a literal), ``predict.MEASURED``, or a test failure saying what is wrong: read from the
    question's first reveal (its ``expected=``, else the literal it reveals), never from the question's cell."""
    where = f"{ask.id} (cell {ask.cell}, line {ask.line} of the cell)"
    if ask.answer_node is not None:
        raise AssertionError(f"{where}: the question's cell holds its answer (answer=): say it in the reveal, "
                             "expected=\"<the right choice>\"")
    reveal = lesson.first_reveal(ask)
    node = None if reveal is None else {k.arg: k.value for k in reveal.keywords}.get("expected")
    if node is None and reveal is not None and reveal.args and isinstance(reveal.args[0], ast.Constant):
        node = reveal.args[0]  # a reveal of a literal: the lesson knew the answer
    if node is None:
        raise AssertionError(f"{where}: a choice question's reveal declares its answer: expected=\"<the right "
                             "choice>\" when it is known before the run, or expected=predict.MEASURED when the run "
                             "decides it")
    if isinstance(node, ast.Attribute) and node.attr == "MEASURED" and isinstance(node.value, ast.Name) \
            and node.value.id == "predict":
        return predict.MEASURED
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise AssertionError(f"{where}: expected= must be a literal (or predict.MEASURED), so this test can "
                             f"read it: {ast.unparse(node)}") from None


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", "")).strip().lower()


def states(markdown: str, answer: Any) -> bool:
    """Whether ``markdown`` contains ``answer``'s text (a number only as a token of its own)."""
    label = _normal(predict._fmt(answer))
    text = _normal(markdown)
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return re.search(rf"(?<![\w.=,\-]){re.escape(label)}(?![\w.,%]|\.\d)", text) is not None
    return label in text


def markdown_before(lesson: Lesson, ask: Ask) -> str:
    """The markdown cells after the last code cell with a reveal before the ask's cell, up to that cell."""
    start = max((cell for cell, _, _ in lesson.reveal_calls if cell < ask.cell), default=-1)
    return "\n\n".join(text for i, kind, text in lesson.cells if start < i < ask.cell and kind == "markdown")


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_no_known_answer_is_stated_before_its_question(path):
    lesson = read_lesson(path)
    problems = []
    for ask in lesson.asks:
        if ask.kind != "choice":
            continue
        try:
            answer = _declared_answer(lesson, ask)
        except AssertionError as exc:
            problems.append(str(exc))
            continue
        if answer is predict.MEASURED:
            continue
        if ask.choices_literal and str(answer) not in [str(c) for c in ask.choices]:
            problems.append(f"{ask.id}: answer {answer!r} is not one of its choices {ask.choices}")
        if states(markdown_before(lesson, ask), answer):
            problems.append(f"{ask.id}: the markdown before the question already says its answer "
                            f"{predict._fmt(answer)!r}: move the explanation after the reveal")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_question_is_revealed_after_it_is_asked(path):
    lesson = read_lesson(path)
    unrevealed = [ask.id for ask in lesson.asks
                  if ask.variable is None or lesson.first_reveal(ask) is None]
    assert not unrevealed, f"{path.name}: asked but never revealed after (or not bound to a name): {unrevealed}"


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_choices_fit_the_widget(path):
    lesson = read_lesson(path)
    long = [(ask.id, predict._fmt(c)) for ask in lesson.asks if ask.choices_literal and ask.choices
            for c in ask.choices if len(predict._fmt(c)) > WIDGET_CHARS]
    assert not long, (f"{path.name}: choices longer than {WIDGET_CHARS} characters are cut off in the widget; "
                      f"put the detail in the question: {long}")


# ------------------------------------------------------------------ the test itself cannot be fooled
def _lesson_from(tmp_path: Path, source: str) -> Lesson:
    path = tmp_path / "99_probe.py"
    path.write_text(source)
    return read_lesson(path)


PROBE = '''
nb.md("""{before}""")
nb.code("""
q = predict.ask("99.q", "How are offsets numbered?", choices=["per partition", "per topic"]{ask})
q
""")
nb.code("""
q.reveal(by_partition{expected})
""")
'''


def _problems(tmp_path, before, expected, ask=""):
    lesson = _lesson_from(tmp_path, PROBE.format(before=before, expected=expected, ask=ask))
    [ask] = lesson.asks
    declared = _declared_answer(lesson, ask)
    return declared, states(markdown_before(lesson, ask), declared)


def test_the_check_finds_an_answer_in_the_markdown_before_its_question(tmp_path):
    assert _problems(tmp_path, "Offsets are counted **per  partition**.", ', expected="per partition"')[1]
    assert not _problems(tmp_path, "Offsets are positions.", ', expected="per partition"')[1]
    with pytest.raises(AssertionError, match="declares its answer"):
        _problems(tmp_path, "", "")
    with pytest.raises(AssertionError, match="must be a literal"):
        _problems(tmp_path, "", ", expected=ANSWER")
    assert _problems(tmp_path, "per partition", ", expected=predict.MEASURED")[0] is predict.MEASURED
    with pytest.raises(AssertionError, match="question's cell holds its answer"):
        _problems(tmp_path, "", ', expected="per partition"', ask=', answer="per partition"')
    literal = _lesson_from(tmp_path, PROBE.format(before="", ask="", expected="").replace("by_partition",
                                                                                       '"per partition"'))
    assert _declared_answer(literal, literal.asks[0]) == "per partition"  # a reveal of a literal declares it


def test_markdown_before_an_earlier_reveal_does_not_count(tmp_path):
    source = PROBE.format(before="per partition", ask="", expected=', expected="per partition"') + '''
nb.md("""Next question.""")
nb.code("""
r = predict.ask("99.r", "Again?", choices=["per partition", "per topic"])
r
""")
nb.code("""
r.reveal("per partition")
""")
'''
    lesson = _lesson_from(tmp_path, source)
    assert markdown_before(lesson, lesson.asks[1]) == "Next question."


def test_numbers_match_only_as_tokens_of_their_own():
    assert states("With two brokers down, 0 records are acknowledged.", 0)
    assert not states("`acks=0` waits for nothing; 10 records, 1.5 s, 100 %", 0)
    assert not states("3,000 records", 3)
    assert states("all 3 brokers", 3)


def test_an_expected_answer_must_be_a_choice_and_a_differing_run_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    with pytest.raises(ValueError, match="one of its choices"):
        predict.ask("99.bad", "?", choices=["a", "b"]).reveal("a", expected="c")
    with pytest.raises(ValueError, match="one of its choices"):
        predict.ask("99.number", "?").reveal(3, expected=3)
    with pytest.raises(TypeError):
        predict.ask("99.given-away", "?", choices=["a", "b"], answer="a")  # the question never carries it
    q = predict.ask("99.known", "?", choices=[0, 50, 100])
    assert "expects" not in repr(q.reveal(0, "refused", expected=0))
    assert "did not do what the lesson expects, 0" in repr(q.reveal(100, "refused", expected=0))
    measured = predict.ask("99.measured", "?", choices=["a", "b"])
    assert "expects" not in repr(measured.reveal("b", "it depends", expected=predict.MEASURED))
