"""labkit.generators: seeded page views, their late and too-late events, and the exact expected window counts."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from labkit import LabkitError
from labkit import generators as g

WINDOW_MS, DELAY_MS = 60_000, 30_000


def _window_end(ms: int) -> int:
    return ms - ms % WINDOW_MS + WINDOW_MS


def test_same_seed_same_events_other_seed_other_events():
    a, b, c = g.generate_page_views(seed=1), g.generate_page_views(seed=1), g.generate_page_views(seed=2)
    assert a.events == b.events
    assert a.events != c.events
    assert len({e.event_id for e in a}) == len(a), "event ids are unique"


def test_kinds_and_rounds_follow_the_parameters():
    events = g.generate_page_views(seed=3, rounds=6, per_round=20, late_per_round=2, too_late_per_round=1)
    kinds = events.by_kind()
    assert kinds[g.ON_TIME] == 6 * 20
    assert kinds[g.CLOSING] == 1
    assert 0 < kinds[g.LATE] <= 2 * 5          # from round 2 on
    assert 0 < kinds[g.TOO_LATE] <= 1 * 1      # only round 6 can have them (see the docstring)
    assert {e.round for e in events if e.kind == g.TOO_LATE} == {6}
    rounds = events.rounds()
    assert len(rounds) == 7 and rounds[-1][0].kind == g.CLOSING
    assert [e for r in rounds for e in r] == list(events), "rounds keep the send order"


def test_late_events_are_out_of_order_but_inside_the_watermark_too_late_ones_beyond_it():
    events = g.generate_page_views(seed=5)
    newest_before, maxima = None, []
    for r in events.rounds():
        for e in r:
            if e.kind == g.LATE:
                assert e.event_time_ms < newest_before, "a late event is older than one already sent"
                assert _window_end(e.event_time_ms) > newest_before - DELAY_MS, "its window is still open"
            if e.kind == g.TOO_LATE:
                assert _window_end(e.event_time_ms) < maxima[-2] - DELAY_MS, "its window closed a round ago"
        maxima.append(max([e.event_time_ms for e in r] + maxima[-1:]))
        newest_before = maxima[-1]


def test_expected_counts_keep_late_events_and_drop_too_late_ones():
    events = g.generate_page_views(seed=7)
    counts = events.expected_window_counts()
    kinds = events.by_kind()
    assert sum(counts.values()) == kinds[g.ON_TIME] + kinds[g.LATE]
    for (start, page), n in counts.items():
        assert start.second == 0 and start.tzinfo is not None and page in g.PAGES and n > 0
    everything = events.expected_window_counts(closed_only=False)
    assert set(counts) <= set(everything)
    assert sum(everything.values()) == sum(counts.values()) + 1, "only the closing event's window stays open"


def test_an_event_whose_fate_depends_on_batch_boundaries_is_refused():
    base = g.to_ms(g.BASE_TIME)
    r1 = [g.PageView("a", "/home", "u", base + 100_000, 1, g.ON_TIME)]
    r2 = [g.PageView("b", "/home", "u", base + 200_000, 2, g.ON_TIME)]
    # Sent in round 3, window [60 s, 120 s) ends after the watermark of round 1 (70 s) but before that of
    # round 2 (170 s): kept or dropped depending on whether rounds 2 and 3 share a micro-batch.
    r3 = [g.PageView("c", "/home", "u", base + 61_000, 3, g.LATE)]
    with pytest.raises(LabkitError, match="may or may not be dropped"):
        g.expected_window_counts(r1 + r2 + r3)


def test_value_is_the_documented_json():
    e = g.generate_page_views(seed=1).events[0]
    value = json.loads(e.value)
    assert set(value) == {"event_id", "page", "user", "event_time"}
    assert value["event_time"].endswith("Z") and value["event_time"] == g.iso(e.event_time_ms)
    assert e.key == e.page.encode()


@pytest.mark.parametrize("text, ms", [("1 minute", 60_000), ("30 seconds", 30_000), ("500 ms", 500),
                                      ("2 hours", 7_200_000), (1.5, 1500), (timedelta(seconds=3), 3000)])
def test_parse_duration(text, ms):
    assert g.parse_duration(text) == ms


def test_parse_duration_rejects_what_it_cannot_read():
    with pytest.raises(LabkitError, match="Cannot read the duration"):
        g.parse_duration("a while")


def test_window_counts_frame_is_sorted_by_window_and_page():
    counts = g.generate_page_views(seed=2).expected_window_counts()
    frame = g.window_counts_frame(counts)
    assert list(frame.columns) == ["window_start", "page", "count"]
    assert list(zip(frame.window_start, frame.page)) == sorted(zip(frame.window_start, frame.page))
    assert frame["count"].sum() == sum(counts.values())


@pytest.mark.integration
def test_send_delivers_every_event_keyed_by_page(cluster, unique):
    topic = cluster.create_topic(unique("views"), partitions=3)
    events = g.generate_page_views(seed=4, rounds=3)
    g.send(cluster, topic, list(events))
    stored = cluster.read_all(topic)
    assert sorted(json.loads(r.value)["event_id"] for r in stored) == sorted(e.event_id for e in events)
    assert all(json.loads(r.value)["page"] == r.key.decode() for r in stored)


def test_send_to_a_missing_cluster_says_so():
    events = g.generate_page_views(seed=4, rounds=1, per_round=3)
    with pytest.raises(LabkitError, match="not delivered"):
        g.send("127.0.0.1:1", "nowhere", list(events), timeout=3)
