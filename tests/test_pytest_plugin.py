"""labkit's pytest plugin (labkit/testing/plugin.py): found by plain ``pytest`` through its entry point, in a
project outside this repository, against a real three-broker cluster -- the README's own example included."""

from __future__ import annotations

import os
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from conftest import GRADING_TIMEOUT, REPO, java_pids_of, run_patiently
from labkit.errors import LabkitError
from labkit.testing import plugin, runner, topology

#: More tests for the same session: the topic fixtures, the fault helpers, and a second profile as an indirect
#: parameter (kafka_registry is used by lesson 15's contract test).
MORE = '''
import pytest


def test_the_session_cluster_has_three_brokers_and_topics_are_fresh(kafka_cluster, kafka_topic, kafka_topic_factory):
    assert len(kafka_cluster.brokers) == 3
    other = kafka_topic_factory("invoices", partitions=1)
    assert kafka_topic != other and other.startswith("invoices-")
    assert len(kafka_cluster.describe_topic(kafka_topic).partitions) == 3


@pytest.mark.kafka_topic(partitions=1, config={"cleanup.policy": "compact"})
def test_a_marker_shapes_the_topic(kafka_cluster, kafka_topic):
    assert len(kafka_cluster.describe_topic(kafka_topic).partitions) == 1
    assert kafka_cluster.describe_configs("topic", kafka_topic)["cleanup.policy"] == "compact"


def test_a_frozen_follower_leaves_the_isr_and_comes_back(kafka_cluster, kafka_topic, kafka_faults):
    leader = kafka_faults.leader(kafka_topic, 0)
    follower = next(r for r in kafka_cluster.describe_topic(kafka_topic)[0].replicas if r != leader)
    with kafka_faults.frozen(follower):
        producer = kafka_cluster.producer(acks="1")
        producer.produce(kafka_topic, value=b"x", partition=0)
        assert producer.flush(30) == 0
        assert follower not in kafka_faults.wait_for_isr(kafka_topic, partition=0, size=2, timeout=60)
    assert follower in kafka_faults.wait_for_isr(kafka_topic, partition=0)


@pytest.mark.parametrize("kafka_cluster", ["secured-single-broker"], indirect=True)
def test_a_secured_profile_as_a_parameter(kafka_cluster, kafka_topic):
    assert kafka_cluster.security_settings()["security.protocol"] in ("SASL_SSL", "SSL")
    producer = kafka_cluster.producer()
    producer.produce(kafka_topic, value=b"secret")
    assert producer.flush(30) == 0
    assert [r.value for r in kafka_cluster.read_all(kafka_topic)] == [b"secret"]
'''


def readme_example() -> str:
    """The python block of the README's section on the plugin."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Testing your own Kafka applications", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's plugin section has no python example"
    return match.group(1)


def test_plain_pytest_finds_the_plugin_through_its_entry_point():
    found = [e for e in entry_points(group="pytest11") if e.value == "labkit.testing.plugin"]
    assert found, "pyproject.toml registers labkit.testing.plugin under [project.entry-points.pytest11]"
    assert found[0].load() is plugin


def test_the_readme_example_is_about_ten_lines_and_uses_only_the_plugins_fixtures():
    code = readme_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    assert "labkit" not in code, "the example's application and test know nothing of the lab"
    assert {"kafka_cluster", "kafka_topic", "kafka_faults"} <= set(re.findall(r"\bkafka_\w+", code))


def test_topic_names_keep_to_kafkas_characters():
    assert plugin.topic_base("test_x[single-broker/äö1]") == "test_x-single-broker-1"
    assert len(plugin.topic_base("t" * 300)) == 80 and plugin.topic_base("[]") == "topic"


def test_pytest_outcomes_and_properties_come_from_the_junit_report(tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite><testcase name="test_a"><properties><property name="lost" value="0"/></properties>'
        '</testcase><testcase name="test_b[x]"><failure message="AssertionError: 2 lost&#10;more">tb</failure>'
        '</testcase><testcase name="test_c"><skipped message="no broker"/></testcase></testsuite></testsuites>')
    properties = {}
    outcomes, messages = runner.read_junit(report, properties)
    assert outcomes == {"test_a": "passed", "test_b[x]": "failed", "test_c": "skipped"}
    assert messages["test_b[x]"] == "AssertionError: 2 lost" and properties["test_a"] == {"lost": "0"}
    assert runner.read_junit(tmp_path / "missing.xml") == ({}, {})
    assert runner.pytest_command("-q")[3:7] == ["--disable-plugin-autoload", "-p", "kafka_lab", "-p"]


def test_a_topology_test_says_what_failed_in_one_line():
    with pytest.raises(LabkitError, match="topic, key, value, timestamp"):
        topology._inputs([("views", "/home", "{}")])
    output = ("Exception in thread \"main\" java.lang.reflect.InvocationTargetException\n\tat ...\n"
              "Caused by: java.lang.NullPointerException: Topology_abc.build: value is null\n\tat Topology_abc")
    assert topology._reason(output, "Topology_abc") == "java.lang.NullPointerException: your topology.build: value is null"
    assert topology._inputs([("views", None, None, 5)]) == [{"topic": "views", "key": None, "value": None,
                                                            "timestamp": 5}]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(GRADING_TIMEOUT)  # above run_patiently's bound, which stretches on a busy machine
def test_a_project_outside_the_repo_runs_on_three_real_brokers_with_plain_pytest(tmp_path):
    project = tmp_path / "someone-elses-project"
    project.mkdir()
    (project / "test_greeter.py").write_text(readme_example())
    (project / "test_more.py").write_text(MORE)
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LABKIT_"))}
    env.update({"LABKIT_DATA_DIR": str(data), "PYTHONPATH": ""})
    result = run_patiently([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rs"], 600, cwd=project,
                           env=env, capture_output=True, text=True)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "kafka-lab: kafka_cluster starts 'three-brokers'" in out
    assert re.search(r"\b5 passed\b", out), out[-2000:]
    assert not java_pids_of(str(data)), "the session's brokers outlived it"
    assert Path(REPO) not in project.parents, "the project lives outside the repository"
