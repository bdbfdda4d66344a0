"""The classroom (issue 31): its configuration, the hub's settings, a learner's limits, and the class poll.

Unit tests need no broker. The integration tests run the real class poll: a secured single-broker
cluster, a SCRAM user per learner, and the broker refusing a learner who writes anywhere but their own
topic. The whole classroom through JupyterHub and Chromium is ``test_classroom_browser.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from traitlets.config import Config as TraitletsConfig

from labkit import predict
from labkit.app import classroom, hub
from labkit.errors import ClassroomError, LimitError
from labkit.runtime import classlink, limits
from labkit.runtime.librdkafka import quiet
from labkit.waiting import Deadline

CONFIG = Path(__file__).resolve().parents[1] / "environments" / "classroom" / "classroom.toml"


@pytest.fixture
def no_class(monkeypatch, tmp_path):
    for name in (*classlink.ENV, "LABKIT_CLASS_TRAINERS", limits.ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))


def event(topic_owner: str, kind: str, key: str, /, **data) -> classlink.Event:
    return classlink.decode(classlink.PREFIX + topic_owner, json.dumps({"kind": kind, "key": key, **data}).encode())


# ---------------------------------------------------------------------------------------------- configuration
def test_the_shipped_configuration_reads_back(tmp_path):
    cfg = classroom.load_config(CONFIG)
    assert cfg.trainers == ("trainer",) and cfg.group == "kafka-lab" and cfg.poll
    assert cfg.venv == cfg.root / "venv" and cfg.learner_config == cfg.root / "classroom.toml"
    lim = limits.from_config(CONFIG)
    assert (lim.clusters, lim.memory_mb) == (2, 3000) and lim.broker_mb > 0
    with pytest.raises(ClassroomError, match="No classroom configuration"):
        classroom.load_config(tmp_path / "missing.toml")


def test_the_hub_is_configured_with_jupyterhubs_own_parts(tmp_path):
    text = CONFIG.read_text().replace('state = "/srv/kafka-lab/hub"', f'state = "{tmp_path / "state"}"')
    (tmp_path / "c.toml").write_text(text.replace("enabled = true", "enabled = false"))
    cfg = classroom.load_config(tmp_path / "c.toml")
    c = TraitletsConfig()
    assert hub.configure(c, cfg) is None  # no poll: nothing started
    assert oct((tmp_path / "state").stat().st_mode & 0o777) == "0o700"
    auth = c.JupyterHub.authenticator_class
    from firstuseauthenticator import FirstUseAuthenticator
    from jupyterhub.auth import LocalAuthenticator

    assert issubclass(auth, FirstUseAuthenticator) and issubclass(auth, LocalAuthenticator)
    assert c.ClassAuthenticator.create_system_users and "HOME_MODE=0700" in c.ClassAuthenticator.add_user_cmd
    assert c.ClassAuthenticator.admin_users == {"trainer"} and c.ClassAuthenticator.dbm_path.startswith(str(tmp_path))
    assert c.Spawner.cmd[-2:] == ["labkit.app.classroom", "singleuser"]
    assert c.Spawner.environment["LABKIT_CLASSROOM"] == str(cfg.learner_config)
    assert "LABKIT_CLASS_PASSWORD" not in c.Spawner.environment  # per learner, from the poll's hook only
    culler = c.JupyterHub.services[0]
    assert culler["name"] == "idle-culler" and f"--timeout={60 * 60}" in culler["command"]
    assert "delete:servers" in c.JupyterHub.load_roles[0]["scopes"]
    assert c.JupyterHub.hub_port != int(c.ConfigurableHTTPProxy.api_url.rsplit(":", 1)[1])


def test_a_system_user_outside_the_class_group_cannot_log_in(tmp_path):
    cfg = classroom.Config(path=CONFIG, group="nogroup", state=tmp_path)
    auth = hub.authenticator_class(cfg)(dbm_path=str(tmp_path / "p.dbm"))
    assert auth.check_blocked_users("root") is False  # a learner typing "root" would get root's server
    assert auth.check_blocked_users("someone-new-7x") is True  # created in the class group at first login


# ---------------------------------------------------------------------------------------------- without a class
def test_outside_a_classroom_nothing_is_sent_and_the_poll_says_so(no_class):
    assert classlink.link() is None and classlink.publish("prediction", "02.moved", value=1) is None
    q = predict.ask("02.moved", "What share of keys move?", choices=["none", "about 3 in 4"])
    assert q.lock_in("about 3 in 4") is None
    results = predict.class_results("02.moved")
    assert results.answers == {} and "No class poll here" in results.status()
    assert "Your own answer: about 3 in 4" in results._repr_html_()
    with pytest.raises(ClassroomError, match="No class poll"):
        classroom.class_view()
    limits.check_start(3)  # no limits


def test_events_say_who_answered_by_their_topic_never_by_their_payload():
    events = [event("ana", "prediction", "02.moved", value="all"),
              event("ana", "prediction", "02.moved", value="about 3 in 4"),  # a changed answer replaces the old
              event("ben", "prediction", "02.moved", value="none", learner="ana"),  # claims to be ana: it is ben's
              event("tina", "prediction", "02.moved", value="all"),
              event("ben", "outcome", "02.moved", actual="about 3 in 4", right=False),
              event("ana", "lesson", "02", right=3, judged=4), event("ben", "grade", "murmur2", score=5, max_score=6)]
    assert classlink.answers(events, "02.moved", exclude={"tina"}) == {"ana": "about 3 in 4", "ben": "none"}
    assert classlink.outcomes(events, "02.moved") == {"ben": {"actual": "about 3 in 4", "right": False}}
    rows = classlink.progress(events, exclude={"tina"})
    assert rows["ana"]["lessons_done"] == ["02"] and rows["ben"]["grades"] == {"murmur2": "5/6"}
    assert (rows["ben"]["right"], rows["ben"]["judged"]) == (0, 1)
    assert classlink.decode("other.topic", b'{"kind": "prediction"}') is None
    assert classlink.decode(classlink.PREFIX + "ana", b"not json") is None


# ---------------------------------------------------------------------------------------------- limits
def test_limits_say_which_one_and_what_to_stop(monkeypatch):
    strict = limits.Limits(clusters=1, memory_mb=10_000, broker_mb=160)
    monkeypatch.setattr(limits, "running_clusters", lambda under=None: {"/home/ana/.kafka-lab/clusters/c1"})
    with pytest.raises(LimitError, match=r"1 cluster running, the most this class allows at once \(1 per") as err:
        limits.check_start(3, strict)
    assert err.value.limit == "clusters" and "cluster.stop()" in str(err.value)
    monkeypatch.setattr(limits, "running_clusters", lambda under=None: set())
    monkeypatch.setattr(limits, "memory_mb", lambda: 2_700.0)
    with pytest.raises(LimitError, match="about 3,180 MB, over this class's 3,000 MB") as err:
        limits.check_start(3, limits.Limits(clusters=2, memory_mb=3_000, broker_mb=160))
    assert err.value.limit == "memory"
    limits.check_start(1, limits.Limits(clusters=2, memory_mb=3_000, broker_mb=160))


def test_what_limits_measure_is_this_users_own_processes():
    assert limits.memory_mb() > 10  # this test process at least: its PSS
    with open(f"/proc/{os.getpid()}/status") as fh:
        rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    assert 0 < limits.pss_kb(os.getpid()) <= rss  # proportional: shared pages count in part
    assert limits.pss_kb(2**22 + 1) is None  # past pid_max: no such process
    assert all(os.path.isabs(d) for d in limits.running_clusters())


@pytest.mark.integration
def test_a_learner_at_their_cluster_limit_is_told_before_a_jvm_starts(tmp_path, monkeypatch, jvm_pids):
    import labkit

    config = tmp_path / "classroom.toml"
    config.write_text("[learner]\nclusters = 1\nmemory_mb = 100000\n")
    monkeypatch.setenv(limits.ENV, str(config))
    monkeypatch.setenv("LABKIT_DATA_DIR", str(tmp_path / "clusters"))
    first = labkit.start_cluster("single-broker", progress=False)
    try:
        before = jvm_pids(str(tmp_path / "clusters"))
        with pytest.raises(LimitError, match="already have 1 cluster running"):
            labkit.start_cluster("single-broker", progress=False)
        assert jvm_pids(str(tmp_path / "clusters")) == before
    finally:
        first.stop()


# ---------------------------------------------------------------------------------------------- the poll, for real
@pytest.fixture(scope="module")
def poll():
    p = hub.ClassPoll(trainers=("tina",))
    yield p
    p.stop()


def login_of(poll, name: str) -> classlink.ClassLink:
    env = poll.environment(name)
    return classlink.ClassLink(env["LABKIT_CLASS_BOOTSTRAP"], name, env["LABKIT_CLASS_PASSWORD"],
                               env["LABKIT_CLASS_CA"], trainers=("tina",))


def as_learner(monkeypatch, login: classlink.ClassLink) -> None:
    for key, value in zip(classlink.ENV, (login.bootstrap, login.user, login.password, login.ca)):
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LABKIT_CLASS_TRAINERS", ",".join(login.trainers))


@pytest.mark.integration
def test_each_learner_may_write_only_their_own_answers_and_the_trainer_reads_all(poll, monkeypatch, tmp_path):
    from confluent_kafka import Producer

    monkeypatch.setenv("LABKIT_STATE_DIR", str(tmp_path))
    ana, ben, tina = (login_of(poll, n) for n in ("ana", "ben", "tina"))
    assert poll.enrol("ana") == ana.password  # enrolling again changes nothing
    for who, answer in ((ana, "about 3 in 4"), (ben, "all")):
        as_learner(monkeypatch, who)
        q = predict.ask("02.moved", "What share of keys move?", choices=["none", "about 1 in 4", "about 3 in 4", "all"])
        assert q.lock_in(answer) is None, "the answer reached the class cluster"
    q.reveal("about 3 in 4")  # ben reveals: his cluster measured 3 in 4, he said all

    # ana forging an answer for ben: the broker refuses; so does a topic of her own choosing
    refused = []
    producer = Producer({**ana.client_config(), **quiet(), "message.timeout.ms": 8000})
    for topic in (ben.topic, classlink.PREFIX + "ana-2"):
        producer.produce(topic, json.dumps({"kind": "prediction", "key": "02.moved", "value": "none"}).encode(),
                         on_delivery=lambda err, msg: refused.append(err.name() if err else None))
    producer.flush(20)
    assert refused == ["TOPIC_AUTHORIZATION_FAILED"] * 2
    assert classlink.read_events(ana, seconds=3) == []  # a learner cannot read the class's answers

    as_learner(monkeypatch, tina)
    results = predict.class_results("02.moved", seconds=5)
    deadline = Deadline(30)  # a quiet machine's seconds
    while results.answers != {"ana": "about 3 in 4", "ben": "all"} and not deadline.expired():
        results._reader.poll(1.0)
    assert results.answers == {"ana": "about 3 in 4", "ben": "all"}
    assert dict(results.counts()) == {"none": 0, "about 1 in 4": 0, "about 3 in 4": 1, "all": 1}
    assert results.measured() == "about 3 in 4" and "1 of 2 predicted it" in results.status()
    view = classroom.class_view()
    assert sorted(view["learner"]) == ["ana", "ben"] and set(view["lesson"]) == {"02"}


# ---------------------------------------------------------------------------------------------- Kubernetes, linted
K8S = Path(__file__).resolve().parents[1] / "environments" / "classroom"
Z2JH = Path(__file__).resolve().parent / "fixtures" / "z2jh-4.4.0"


def _merged(defaults: dict, ours: dict) -> dict:
    """Helm's coalescing of a chart's defaults with a user's values (maps merge, anything else replaces)."""
    out = dict(defaults)
    for key, value in ours.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def test_the_helm_values_fit_zero_to_jupyterhubs_schema():
    import jsonschema
    import yaml

    ours = yaml.safe_load((K8S / "values.yaml").read_text())
    schema = yaml.safe_load((Z2JH / "values.schema.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(_merged(yaml.safe_load((Z2JH / "values.yaml").read_text()), ours))
    with pytest.raises(jsonschema.ValidationError):  # the schema does catch a wrong key
        jsonschema.Draft7Validator(schema).validate(_merged(yaml.safe_load((Z2JH / "values.yaml").read_text()),
                                                            {"singleuser": {"memroy": {"limit": "1G"}}}))
    single, cfg = ours["singleuser"], classroom.load_config(CONFIG)
    assert single["memory"]["limit"] == f"{cfg.memory_mb // 1000}G", "the pod's limit is classroom.toml's memory_mb"
    assert ours["cull"]["timeout"] == cfg.idle_minutes * 60
    assert ours["hub"]["config"]["Authenticator"]["admin_users"] == list(cfg.trainers)
    assert "enrol_hook(ClassPoll(" in ours["hub"]["extraConfig"]["kafkaLabPoll"]


def test_the_image_recipe_parses_with_dockers_own_parser():
    import dockerfile
    import yaml

    commands = dockerfile.parse_file(str(K8S / "Dockerfile"))
    stages = [c.value[-1] for c in commands if c.cmd == "FROM"]
    assert stages == ["learner", "hub"]
    learner = commands[:next(i for i, c in enumerate(commands) if c.cmd == "FROM" and c.value[-1] == "hub")]
    assert [c.value for c in learner if c.cmd == "USER"] == [("1000",)], "learners never run as root"
    installs = " ".join(" ".join(c.value) for c in learner if c.cmd == "RUN")
    assert "'jupyterhub==5.5.*'" in installs and ".[classroom]" in installs and "labkit setup" in installs
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    assert list(next(c for c in learner if c.cmd == "CMD").value) == values["singleuser"]["cmd"]
    assert values["singleuser"]["image"]["name"].endswith("kafka-lab-learner")
    assert "k8s-hub:4.4.0" in " ".join(next(c for c in commands if c.value[-1] == "hub").value)
