"""Hidden checks of streaming_aggregation (the grader's only): longer streams generated now, for a window and a
watermark delay chosen now, with late and too-late events, and a restart from the checkpoint."""

from __future__ import annotations

from labkit.grading import check, harness, sibling

checks = sibling(__file__)


def with_barely_late_views(events):
    """``events`` (made with ``closing=False``) plus four rounds: one view that moves event time on to ``M``
    (a window boundary ``W`` plus half the delay ``D``), one a second behind it, then two views at ``W`` - D/6
    and ``W`` - 2D/5, and a closing view.

    The two are late, but by less than ``D``: a watermark of ``D`` (``M`` - D = ``W`` - D/2) keeps them, while
    a third of it (``W`` + D/6) has already closed their window. The generator's own late views are older but
    still in an open window, so they cannot tell the right delay from a shorter one. (With lesson 07's 30 s:
    ``W`` + 15 s, and views at ``W`` - 5 s and ``W`` - 12 s.)
    """
    import dataclasses

    from labkit.generators import CLOSING, LATE, ON_TIME, PageView

    views = list(events.events)
    last_round = max(e.round for e in views)
    newest = max(e.event_time_ms for e in views)
    window = int(checks.length(events.window).total_seconds() * 1000)
    delay = int(checks.length(events.watermark).total_seconds() * 1000)
    boundary = ((newest + delay) // window + 1) * window   # W, a window boundary past newest + D
    ahead = boundary + delay // 2                           # M
    pages = list(events.params.get("pages") or ("/home", "/search", "/product", "/cart"))

    def view(n: int, page: str, t: int, r: int, kind: str):
        return PageView(f"pv-{events.seed}-edge-{n}", page, "user-00", t, last_round + r, kind)

    views += [view(1, pages[0], ahead, 1, ON_TIME), view(2, pages[0], ahead - 1_000, 2, LATE),
              view(3, pages[1 % len(pages)], boundary - delay // 6, 3, LATE),
              view(4, pages[2 % len(pages)], boundary - 2 * delay // 5, 3, LATE),
              view(5, pages[0], ahead + window + delay + 1_000, 4, CLOSING)]
    result = dataclasses.replace(events, events=tuple(views))
    result.expected_window_counts()  # raises if any view's fate depended on how Spark cuts micro-batches
    return result


@check("late_and_too_late_events", points=4, hidden=True)
def late_and_too_late_events(ns):
    """A fresh generated stream on a 3-partition topic, for a window and delay chosen at grade time, sent in
    rounds with processAllAvailable between them: late events inside the watermark are counted (also two
    only a sixth and two fifths of the delay behind it), too-late ones are dropped, and every window reaches
    the results topic exactly once with exactly the expected count."""
    harness.attempted(ns, "windowed_counts", "to_kafka_records", "start_query")
    events = with_barely_late_views(checks.stream(rounds=5, per_round=25, too_late_per_round=4, closing=False))
    got = checks.run_stream(ns, events)
    checks.compare(got, events.expected_window_counts(),
                   duplicate_hint="use output mode append: each window is written once, when the watermark passes "
                                  "its end",
                   too_many_hint="events beyond the watermark were counted: is the watermark the delay given, on "
                                 "event_time?",
                   too_few_hint="late events inside the watermark were lost, or the topic was not read from the "
                                "earliest offset: is the watermark the delay given, on event_time?",
                   window=checks.length(events.window))


@check("restarts_from_checkpoint", points=3, hidden=True)
def restarts_from_checkpoint(ns):
    """The query is stopped mid-stream and started again with the same checkpoint: it goes on where it
    stopped, so no window is lost or written twice and the counts stay exact."""
    harness.attempted(ns, "windowed_counts", "to_kafka_records", "start_query")
    events = checks.stream(rounds=5, per_round=20)
    got = checks.run_stream(ns, events, restart_after=4)  # the first windows are on the results topic by then,
    # and round 5 brings too-late events a query that lost its watermark would count
    checks.compare(got, events.expected_window_counts(),
                   duplicate_hint="after a restart the query must go on from the checkpoint it was given "
                                  "(option checkpointLocation = checkpoint)",
                   too_many_hint="events were counted twice after the restart: use the checkpoint you were given",
                   too_few_hint="windows lost their counts after the restart: use the checkpoint you were given",
                   window=checks.length(events.window))
