"""Kafka Lab's consumer-group reader: a child process that answers one JSON request per line.

Started by :class:`labkit.view.groupread.GroupReader` as ``python groupreader.py CONFIG``
(the client config as JSON). Each request line names the groups to describe (or
none: list them all first); each answer line holds their state, members with
their partitions, and committed offsets. It exits when its stdin closes, so it
never outlives the kernel that started it.

Why a child process: librdkafka can take down the whole process in the
coordinator-based admin requests (DescribeConsumerGroups, ListConsumerGroupOffsets)
when a coordinator dies or moves, which is exactly what lessons do: an assertion
in rd_kafka_admin_coord_response_parse (librdkafka PR #5397) and a NULL dereference
in rd_kafka_handle_OffsetFetch on NOT_COORDINATOR (librdkafka issue #5040), both
reproduced here with a live view while killing and pausing brokers. Here such a
crash costs one answer (the parent restarts the reader), not the learner's kernel.

An answer says whether a request ``timed_out``, and of each group whether its
request failed ``passing`` (its coordinator moved); after either the parent
replaces this process, so the next request starts with a new client. librdkafka keeps each group's coordinator in a cache whose entries
in use do not expire (``metadata.max.age.ms``, 15 min; rdkafka_coord.c): after the
coordinator is killed, a request can wait for that dead broker to come back
instead of asking who took over, and the next request on a client whose request
timed out this way has aborted the process (``rd_kafka_enq_once_del_source_return:
Assertion `eonce->refcnt > 0'``), in 4 of 6 coordinator kills under load. And
when the coordinator moves while both brokers live (a restarted broker takes its
__consumer_offsets partitions back), DescribeConsumerGroups answers the group's
NOT_COORDINATOR without clearing the entry: the same client asked the old
coordinator again for 20 s, every answer NOT_COORDINATOR (tests/test_rebalancing.py).
A new client asks FindCoordinator afresh.

This file imports nothing from labkit, so it starts fast and runs as a plain script.
"""

import json
import sys
import time


def timed_out(exc: BaseException) -> bool:
    """The request got no answer in time (the future's wait or librdkafka's own request timeout)."""
    err = exc.args[0] if exc.args else None
    return isinstance(exc, TimeoutError) or (hasattr(err, "name") and err.name() == "_TIMED_OUT")


#: Errors of a group whose coordinator is moving (its broker died or restarted, leaders were rebalanced) or has not
#: answered yet: asked again by a new client (the parent replaces this process), the new coordinator answers.
PASSING = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT",
           "_TIMED_OUT", "_TRANSPORT")


def passing(exc: BaseException) -> bool:
    """The request failed because the group's coordinator is moving or did not answer: asking again will do."""
    err = exc.args[0] if exc.args else None
    return isinstance(exc, TimeoutError) or (hasattr(err, "name") and err.name() in PASSING)


def failed(out: dict, group: dict, exc: BaseException, what: str = "") -> None:
    """A request about ``group`` failed: its error, whether a new client asking again will do, and a timeout."""
    group["error"], group["passing"] = what + reason(exc), passing(exc)
    out["timed_out"] |= timed_out(exc)


def reason(exc: BaseException) -> str:
    """A short reason for a failed request: a Kafka error's text (or its name when the text says nothing)."""
    err = exc.args[0] if exc.args else None
    if hasattr(err, "name") and hasattr(err, "str"):
        text = err.str().strip()
        return text if text and not text.endswith(":") else err.name().strip("_").lower().replace("_", " ")
    return "timed out" if isinstance(exc, TimeoutError) else (str(exc) or type(exc).__name__)


def answer(admin, request: dict) -> dict:
    """Read the groups one request asks for; failures become the answer's ``error`` fields."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException

    end = time.monotonic() + request["timeout"]

    def left() -> float:
        return max(end - time.monotonic(), 0.05)

    out: dict = {"listed": None, "groups": [], "error": None, "timed_out": False}
    try:
        ids = request["groups"]
        if ids is None:
            try:
                listing = admin.list_consumer_groups(request_timeout=left()).result(timeout=left())
                ids = out["listed"] = sorted(g.group_id for g in listing.valid
                                             if not g.group_id.startswith(request["ignore"]))
            except Exception as exc:  # noqa: BLE001 - a broker that does not answer: describe the groups known so far
                out["error"] = "listing: " + reason(exc)
                ids = request["known"]
            end = time.monotonic() + request["timeout"]
        if ids:
            described = admin.describe_consumer_groups(ids, request_timeout=left())
            for gid in ids:
                group: dict = {"id": gid, "state": "unknown", "members": [], "committed": [], "error": None,
                               "passing": False}
                out["groups"].append(group)
                try:
                    desc = described[gid].result(timeout=left())
                except KafkaException as exc:
                    if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                        group["state"] = "not found"
                    else:
                        failed(out, group, exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - the child reports every failure to its parent as text
                    failed(out, group, exc)
                    continue
                group["state"] = (getattr(desc.state, "name", None) or str(desc.state)).lower()
                group["coordinator"] = desc.coordinator.id if desc.coordinator is not None else None
                group["members"] = [[m.member_id, m.client_id, m.host,
                                     [[tp.topic, tp.partition] for tp in
                                      (m.assignment.topic_partitions if m.assignment else [])]]
                                    for m in desc.members]
                try:
                    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)],
                                                            request_timeout=left())[gid].result(timeout=left())
                    group["committed"] = [[tp.topic, tp.partition, tp.offset] for tp in got.topic_partitions
                                          if tp.offset >= 0]
                except Exception as exc:  # noqa: BLE001 - the child reports every failure to its parent as text
                    failed(out, group, exc, "offsets: ")
    except Exception as exc:  # noqa: BLE001 - the child reports every failure to its parent as text
        out["error"] = reason(exc)
        out["failed"] = True
        out["timed_out"] |= timed_out(exc)
    return out


def main() -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(json.loads(sys.argv[1]))
    for line in sys.stdin:
        print(json.dumps(answer(admin, json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
