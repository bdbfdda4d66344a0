"""Hidden checks of test_the_app (the grader's only): four more faulty versions of the application, each
breaking one promise of its contract. Loading this module adds them to ``checks.VERSIONS``, so the grader
runs the learner's tests against them too."""

from __future__ import annotations

from labkit.grading import check, sibling

checks = sibling(__file__)

_COMMIT = "            consumer.commit(asynchronous=False)\n"
_FLUSH = ("            if producer.flush(30):\n"
          "                raise RuntimeError(\"invoices not delivered: stop without committing (a restart sends them)\")\n")

COMMIT_FIRST = checks.fault(
    "commit_before_processing", "the offsets of a batch are committed before its orders are invoiced",
    (_FLUSH + _COMMIT, _FLUSH),
    ("            last = time.monotonic()\n            for msg in batch:\n",
     "            last = time.monotonic()\n" + _COMMIT + "            for msg in batch:\n"))
NOT_FLUSHED = checks.fault(
    "never_flushed", "the producer is never flushed before the commit: invoices still waiting in its queue "
    "when the app stops or dies are lost, their orders committed", (_FLUSH, ""))
NO_RETRY = checks.fault(
    "no_retry_on_a_full_queue", "an invoice is dropped when the producer's local queue is full (BufferError, a "
    "transient error) instead of being sent again",
    ("        except BufferError:  # the local queue is full: send what waits in it, then try again\n"
     "            producer.flush()\n",
     "        except BufferError:  # the local queue is full: this invoice is skipped\n            return\n"))
LATEST = checks.fault(
    "latest_for_a_new_group", "a new group starts at the end of the topic (auto.offset.reset=latest): orders sent "
    "before the first start are never invoiced",
    ('"auto.offset.reset": "earliest"', '"auto.offset.reset": "latest"'))


@check("catches_commit_before_processing", points=2, hidden=True)
def catches_commit_before_processing(ns):
    """A test fails against a version that commits a batch's offsets before invoicing its orders (kill it
    mid-batch, start it again: the rest of that batch is never invoiced)."""
    checks.caught(ns, COMMIT_FIRST)


@check("catches_a_producer_never_flushed", points=2, hidden=True)
def catches_a_producer_never_flushed(ns):
    """A test fails against a version that never flushes its producer before committing (the invoices still
    in its queue when it stops are lost)."""
    checks.caught(ns, NOT_FLUSHED)


@check("catches_no_retry_on_a_transient_error", points=2, hidden=True)
def catches_no_retry_on_a_transient_error(ns):
    """A test fails against a version that drops an invoice when the producer's queue is full instead of
    retrying (a burst of orders)."""
    checks.caught(ns, NO_RETRY)


@check("catches_latest_for_a_new_group", points=2, hidden=True)
def catches_latest_for_a_new_group(ns):
    """A test fails against a version whose new group starts at the end of the orders topic
    (``auto.offset.reset=latest``)."""
    checks.caught(ns, LATEST)
