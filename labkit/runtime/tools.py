"""Kafka's own command-line tools, run from the cached jars.

Every Kafka course and FAQ uses ``kafka-topics``, ``kafka-consumer-groups``,
``kafka-dump-log`` and friends. ``run_tool("kafka-topics", "--list", cluster=c)``
runs the real tool (the same Java class the ``bin/*.sh`` script runs) with
``--bootstrap-server`` pointing at the lab cluster unless you give one.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from . import classdata
from .distribution import Distribution, ensure_distribution
from .jvm import find_java
from .environment import kafka_spec
from ..errors import ToolError

if TYPE_CHECKING:
    from .protocols import ClusterLike

#: Tool name (as in Kafka's bin/ directory, without .sh) -> (main class, takes --bootstrap-server); a class
#: that moved between releases is "new|old": the first one the distribution's jars hold runs.
TOOLS: dict[str, tuple[str, bool]] = {
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand", True),
    # Kafka 4.4 moved it from the core jar to kafka-tools (kafka.admin.ConfigCommand is gone there).
    "kafka-configs": ("org.apache.kafka.tools.ConfigCommand|kafka.admin.ConfigCommand", True),
    "kafka-consumer-groups": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", True),
    "kafka-share-groups": ("org.apache.kafka.tools.consumer.group.ShareGroupCommand", True),
    "kafka-streams-groups": ("org.apache.kafka.tools.streams.StreamsGroupCommand", True),
    "kafka-streams-application-reset": ("org.apache.kafka.tools.StreamsResetter", True),
    "kafka-console-producer": ("org.apache.kafka.tools.ConsoleProducer", True),
    "kafka-console-consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer", True),
    "kafka-producer-perf-test": ("org.apache.kafka.tools.ProducerPerformance", True),
    "kafka-consumer-perf-test": ("org.apache.kafka.tools.ConsumerPerformance", True),
    "kafka-dump-log": ("org.apache.kafka.tools.DumpLogSegments", False),
    "kafka-acls": ("org.apache.kafka.tools.AclCommand", True),
    "kafka-metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand", True),
    "kafka-log-dirs": ("org.apache.kafka.tools.LogDirsCommand", True),
    "kafka-leader-election": ("org.apache.kafka.tools.LeaderElectionCommand", True),
    "kafka-reassign-partitions": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", True),
    "kafka-get-offsets": ("org.apache.kafka.tools.GetOffsetShell", True),
    "kafka-transactions": ("org.apache.kafka.tools.TransactionsCommand", True),
    "kafka-features": ("org.apache.kafka.tools.FeatureCommand", True),
    "kafka-delete-records": ("org.apache.kafka.tools.DeleteRecordsCommand", True),
    "kafka-broker-api-versions": ("org.apache.kafka.tools.BrokerApiVersionsCommand", True),
    "kafka-cluster": ("org.apache.kafka.tools.ClusterTool", True),
    "kafka-verifiable-producer": ("org.apache.kafka.tools.VerifiableProducer", True),
    "kafka-verifiable-consumer": ("org.apache.kafka.tools.VerifiableConsumer", True),
    "kafka-e2e-latency": ("org.apache.kafka.tools.EndToEndLatency", False),
    "kafka-storage": ("kafka.tools.StorageTool", False),
}
#: Tools whose --bootstrap-server comes after their sub-command (``kafka-cluster unregister --bootstrap-server ...``).
SUBCOMMAND_FIRST = frozenset({"kafka-cluster"})




@dataclass(frozen=True)
class ToolResult:
    """What a tool printed and how it exited."""

    tool: str
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return self.stdout

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows the output, not a repr
        p.text(self.stdout.rstrip() + (("\n" + self.stderr.rstrip()) if self.returncode else ""))

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


def tool_names() -> list[str]:
    return sorted(TOOLS)


def _tool_name(tool: str) -> str:
    name = tool[:-3] if tool.endswith(".sh") else tool
    if not name.startswith("kafka-"):
        name = "kafka-" + name
    if name not in TOOLS:
        short = {t[len("kafka-"):]: t for t in TOOLS}
        close = [short[c] for c in difflib.get_close_matches(name[len("kafka-"):], short, n=3, cutoff=0.6)]
        maybe = f" Did you mean {', '.join(close)}?" if close else ""
        raise ToolError(f"Unknown Kafka tool {tool!r}.{maybe}", f"Available tools: {', '.join(tool_names())}.")
    return name


def _main_class(tool: str, dist: Distribution) -> tuple[str, bool]:
    main_class, takes_bootstrap = TOOLS[_tool_name(tool)]
    candidates = main_class.split("|")
    if len(candidates) > 1:
        main_class = next((c for c in candidates if _has_class(dist, c)), candidates[-1])
    return main_class, takes_bootstrap


@lru_cache(maxsize=None)
def _classes(dist: Distribution) -> frozenset[str]:
    """Every class name in the distribution's Kafka jars (``kafka_*`` and ``kafka-tools*``)."""
    names: set[str] = set()
    for jar in dist.jars():
        if jar.name.startswith(("kafka_", "kafka-tools")):
            with zipfile.ZipFile(jar) as zf:
                names.update(n[:-len(".class")].replace("/", ".") for n in zf.namelist() if n.endswith(".class"))
    return frozenset(names)


def _has_class(dist: Distribution, name: str) -> bool:
    return name in _classes(dist)


def tool_command(tool: str, args: Sequence[str], bootstrap_servers: Optional[str] = None,
                 command_config: Optional[Path] = None, archive_dump: Optional[Path] = None,
                 version: Optional[str] = None) -> list[str]:
    """The java command line that runs ``tool`` with ``args`` (``--bootstrap-server`` and, on a secured
    cluster, ``--command-config`` added when the tool takes them and ``args`` do not give them).

    It maps the tools' class-data archive when ``labkit setup`` built one (:mod:`labkit.runtime.classdata`);
    ``archive_dump`` makes it write one instead; ``version`` runs another cached Kafka version's tool."""
    name = _tool_name(tool)
    dist = ensure_distribution(version=version)
    main_class, takes_bootstrap = _main_class(name, dist)
    args = list(args)
    asks_help = any(a in ("-h", "--help", "--version") for a in args)
    # --broker-list is the old spelling of --bootstrap-server, except for kafka-reassign-partitions --generate,
    # where it lists broker ids.
    old = ("--broker-list",) if name != "kafka-reassign-partitions" else ()
    given = any(a.startswith(("--bootstrap-server", "--bootstrap-controller", *old)) for a in args)
    if bootstrap_servers and takes_bootstrap and not given and not asks_help:
        at = 1 if name in SUBCOMMAND_FIRST and args else 0
        args = args[:at] + ["--bootstrap-server", bootstrap_servers] + args[at:]
    if command_config and takes_bootstrap and not asks_help and "--command-config" not in args:
        args += ["--command-config", str(command_config)]
    return java_tool_command(dist, main_class, args, archive_dump=archive_dump)


def java_tool_command(dist: Distribution, main_class: str, args: Sequence[str] = (), extra_jars: Sequence[Path] = (),
                      archive_dump: Optional[Path] = None) -> list[str]:
    """The java command line that runs ``main_class`` as Kafka's tools run: their heap and options, their
    class-data archive (``archive_dump``: write one instead), and their class path with ``extra_jars`` after it
    (an archive maps when the class path starts with the one it was written with)."""
    spec = kafka_spec()
    cp, archive = classdata.tool_setup(dist)
    sharing = classdata.dump_options(archive_dump) if archive_dump else classdata.use_options(archive)
    return [str(find_java().executable), f"-Xmx{spec.tool_heap}", *spec.tool_options, *sharing,
            f"-Dlog4j2.configurationFile={spec.tools_log4j_config}",
            "-cp", os.pathsep.join([cp, *map(str, extra_jars)]), main_class, *args]


def run_tool(tool: str, *args: str, cluster: Optional["ClusterLike"] = None, bootstrap_servers: Optional[str] = None,
             check: bool = True, timeout: float = 120.0, input: Optional[str] = None,
             version: Optional[str] = None) -> ToolResult:
    """Run a Kafka command-line tool and return its output.

    ``cluster`` (or ``bootstrap_servers``) supplies ``--bootstrap-server`` when the
    tool takes one and ``args`` do not (and on a secured cluster the admin's
    ``--command-config``). With ``check=True`` a non-zero exit raises
    :class:`ToolError` carrying the tool's output. ``version`` runs that cached Kafka version's tool
    (after a rolling upgrade, the new release's ``kafka-features`` knows the new metadata versions).
    """
    bootstrap = bootstrap_servers or (cluster.bootstrap_servers if cluster is not None else None)
    config = cluster.tool_config() if cluster is not None and not bootstrap_servers else None
    cmd = tool_command(tool, [str(a) for a in args], bootstrap, config, version=version)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{tool} did not finish within {timeout:.0f}s.",
                        "Consumers and producers need a limit (e.g. --max-messages or --timeout-ms).") from exc
    result = ToolResult(tool, tuple(str(a) for a in args), proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        first = next((line for line in message if line.strip()), "no output")
        raise ToolError(f"{tool} exited with code {proc.returncode}: {first}",
                        f"Run `labkit kafka {tool} --help` for its options.", returncode=proc.returncode,
                        output=proc.stdout + proc.stderr)
    return result
