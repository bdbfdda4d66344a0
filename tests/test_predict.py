"""labkit.predict and labkit.runtime.learner: predictions locked in, judged at the reveal, summed up per lesson."""

from __future__ import annotations

import json

import pytest

from labkit.runtime import learner
from labkit import predict


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(predict, "_ASKED", {})
    return tmp_path


def test_a_number_is_right_within_its_tolerance_and_the_outcome_is_kept(state):
    q = predict.ask("04.lost", "How many acknowledged records are lost?", tolerance=2)
    assert q.value is None
    q.lock_in(3)
    assert q.value == 3
    out = q.reveal(5, "two brokers were down")
    assert out.right and "✓ right" in out._repr_html_() and "two brokers were down" in repr(out)
    saved = json.loads((state / "learner.json").read_text())["predictions"]["04.lost"]
    assert (saved["value"], saved["actual"], saved["right"], saved["lesson"]) == (3, 5, True, "04")
    assert not predict.ask("04.lost", "again", tolerance=1).reveal(5).right


def test_relative_tolerance_choices_yes_no_and_custom_judges():
    rate = predict.ask("04.rate", "records/s", within=0.25)
    rate.lock_in(1000)
    assert rate.reveal(1200).right and not rate.reveal(1400).right
    pick = predict.ask("02.partition", "which partition?", choices=range(6))
    pick.lock_in(3)
    assert pick.reveal(3).right and not pick.reveal(4).right
    yes = predict.ask("03.lost", "lose anything?", kind="yes/no")
    yes.lock_in(False)
    assert yes.reveal(False).right
    odd = predict.ask("05.odd", "an odd number?", judge=lambda p, a: p % 2 == a % 2)
    odd.lock_in(7)
    assert odd.reveal(3).right
    with pytest.raises(ValueError, match="lesson"):
        predict.ask("nolesson", "?")


def test_an_unanswered_prediction_is_skipped_and_the_summary_counts_it():
    a, b, c = (predict.ask(f"06.q{i}", f"question {i}") for i in range(3))
    a.lock_in(1)
    b.lock_in(2)
    assert a.reveal(1).right and not b.reveal(3).right
    skipped = c.reveal(4)
    assert skipped.right is None and "skipped" in repr(skipped)
    done = predict.summary("06")
    assert repr(done) == "Your predictions in this lesson: 1 of 2 right (1 skipped)."
    assert learner.load()["lessons"]["06"]["done"]
    assert "none made" in repr(predict.summary("07"))


def test_headless_rendering_shows_the_question_and_never_waits():
    q = predict.ask("01.offsets", "What offset does the 100th record get?")
    bundle = q._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "open this notebook in JupyterLab" in bundle["text/html"]
    q.lock_in(99)
    assert "locked in: <b>99</b>" in q._repr_mimebundle_()["text/html"]


def test_the_widget_locks_in_and_can_be_changed():
    q = predict.ask("02.hot", "How many records land on the hottest partition?")
    box = q._widget()
    field, button = box.children[1].children[0], box.children[1].children[-1]
    field.value = 42.0
    button.click()
    assert q.value == 42 and field.disabled and button.description == "Change"
    button.click()
    assert not field.disabled
    field.value = 40.0
    button.click()
    assert q.value == 40


def test_a_numpy_scalar_outcome_is_recorded_as_plain_python(state):
    import numpy as np

    q = predict.ask("07.counted", "counted?", kind="yes/no")
    q.lock_in(True)
    out = q.reveal(np.bool_(True))
    assert out.right and out.actual is True
    n = predict.ask("07.rows", "rows?", tolerance=0)
    n.lock_in(50)
    assert n.reveal(np.int64(50)).right
    assert json.loads((state / "learner.json").read_text())["predictions"]["07.rows"]["actual"] == 50
