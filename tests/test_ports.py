"""labkit.runtime.ports: a port one lab process picked is never handed to another until it lets go or dies;
labkit.backends.nativenode: a node serves once its JVM, not an earlier one, logged the end of its start-up."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from labkit.backends.nativenode import NativeNode
from labkit.cluster import Broker
from labkit.runtime import ports

HOLDER = textwrap.dedent("""
    import sys
    from labkit.runtime.ports import free_ports
    print(*free_ports(3), flush=True)
    sys.stdin.read()  # hold them until the parent closes our stdin (or kills us)
""")


def _holder():
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, [int(p) for p in proc.stdout.readline().split()]


def test_a_port_another_lab_process_holds_is_not_handed_out_until_it_dies():
    where = ports._reservations()
    proc, held = _holder()
    try:
        assert len(set(held)) == 3
        assert not any(ports._reserve(p, where) for p in held), "held by a live process: not ours to take"
        mine = ports.free_ports(20)
        assert not set(mine) & set(held)
        ports.release_ports(mine)
    finally:
        proc.kill()
        proc.wait()
    assert all(ports._reserve(p, where) for p in held), "the kernel dropped a dead process's reservations"
    ports.release_ports(held)


def test_released_ports_can_be_picked_again_and_never_twice_at_once():
    first = ports.free_ports(5)
    again = ports.free_ports(5)
    assert len(set(first) | set(again)) == 10, "a port this process holds is not handed out twice"
    ports.release_ports(first)
    proc, held = _holder()  # another process may now take what this one let go of
    try:
        assert not set(held) & set(again)
    finally:
        proc.stdin.close()
        proc.wait(10)
    ports.release_ports(again)


def test_a_node_serves_once_its_own_jvm_logged_the_end_of_start_up(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    node = NativeNode(Broker(id=1, host="127.0.0.1", port=1), {}, dir=tmp_path)
    assert not node.serving(), "no log yet"
    node.log_path.write_text("[10:00:00,000] INFO [BrokerServer id=1] Transition from STARTING to STARTED\n"
                             "[10:00:09,000] INFO [BrokerServer id=1] Transition from STARTED to SHUTTING_DOWN\n")
    node.log_start, node.started = node.log_path.stat().st_size, False  # what a restart (_launch) records
    assert not node.serving(), "the last JVM's start-up is not this one's"
    with node.log_path.open("a") as fh:
        fh.write("[10:00:20,000] INFO [BrokerLifecycleManager id=1] Successfully registered broker 1\n")
    assert not node.serving(), "registered (listed in the metadata) is not serving"
    with node.log_path.open("a") as fh:
        fh.write("[10:00:21,000] INFO [BrokerServer id=1] Transition from STARTING to ")  # half a line so far
    assert not node.serving()
    with node.log_path.open("a") as fh:
        fh.write("STARTED (BrokerServer)\n")
    assert node.serving(), "read on from where the last look ended, the line the last look saw half of included"
