"""How many learners fit: lessons run through the classroom's JupyterHub, N learners at once (issue 31).

    sudo .venv/bin/python benchmarks/classroom.py --lesson 00 --learners 1 2 4 6 [--stress 0] [--json PATH]

Needs root and the class environment (`make setup-classroom`). It starts a hub of its own (a free port, its own
state, learners' group and user names, removed afterwards: nothing of a real class is touched), logs N learners
in over HTTP (first-use passwords: a system user each), and runs the lesson in every learner's own JupyterLab at
the same time, every code cell through the Jupyter server's kernel websocket, as a browser would. For each step N:
failures (the first failing cell and its error, as `soak.py` reports them), wall time, and per learner the
CPU-seconds (everything under the learner's user id, reaped children included) and the peak memory (PSS summed
over their processes, sampled every second). The ramp stops at the first N with a failure. `--stress K` adds K
busy CPU hogs (soak.py's) beside the class.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import reporting  # noqa: E402
from benchmarks.soak import Run, hogs, table  # noqa: E402
from labkit.app import classroom  # noqa: E402
from labkit.runtime import limits, processes  # noqa: E402

RESULTS = HERE / "results"
SHIPPED = HERE.parent / "environments" / "classroom" / "classroom.toml"


# ---------------------------------------------------------------------------------------------- a learner, over HTTP
class Learner:
    """A learner through the hub without a browser: log in (first use), spawn, run a notebook's code cells."""

    def __init__(self, base: str, name: str) -> None:
        import requests

        self.base, self.name = base, name
        self.http = requests.Session()
        self.http.get(f"{base}/hub/login")
        self.http.post(f"{base}/hub/login", data={"username": name, "password": f"{name}-first-use",
                                                  "_xsrf": self.http.cookies.get("_xsrf", path="/hub/")})

    def spawn(self, timeout: float = 600) -> None:
        self.http.get(f"{self.base}/hub/spawn")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.http.get(f"{self.base}/user/{self.name}/lab")  # completes the OAuth dance once the server is up
            if self.http.get(f"{self.base}/user/{self.name}/api/status").status_code == 200:
                return
            time.sleep(2)
        raise TimeoutError(f"{self.name}'s server did not start within {timeout:.0f} s")

    def run_notebook(self, notebook: Path, cell_timeout: float = 900) -> tuple[str, str]:
        """Every code cell in order, in a fresh kernel; ("", "") or (failing cell, error)."""
        import asyncio

        import nbformat
        from tornado import httpclient, websocket

        xsrf = self.http.cookies.get("_xsrf", path=f"/user/{self.name}/")
        kernel = self.http.post(f"{self.base}/user/{self.name}/api/kernels", json={"name": "python3"},
                                headers={"X-XSRFToken": xsrf}).json()["id"]
        cells = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
        cookie = "; ".join(f"{c.name}={c.value}" for c in self.http.cookies)
        url = f"{self.base.replace('http', 'ws')}/user/{self.name}/api/kernels/{kernel}/channels"

        async def go() -> tuple[str, str]:
            ws = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers={"Cookie": cookie}))
            session = uuid.uuid4().hex
            try:
                for i, cell in enumerate(cells):
                    msg_id = uuid.uuid4().hex
                    await ws.write_message(json.dumps({
                        "header": {"msg_id": msg_id, "username": self.name, "session": session,
                                   "msg_type": "execute_request", "version": "5.3"}, "parent_header": {},
                        "metadata": {}, "channel": "shell",
                        "content": {"code": cell.source, "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
                    deadline = time.monotonic() + cell_timeout
                    while True:
                        raw = await asyncio.wait_for(ws.read_message(), timeout=max(1, deadline - time.monotonic()))
                        if raw is None:
                            return f"cell {i}", "the kernel's connection closed"
                        msg = json.loads(raw)
                        if msg.get("parent_header", {}).get("msg_id") != msg_id:
                            continue
                        if msg["msg_type"] == "error":
                            return f"cell {i}", f"{msg['content']['ename']}: {msg['content']['evalue'][:300]}"
                        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                            break
                return "", ""
            except asyncio.TimeoutError:
                return f"cell {i}", f"no answer within {cell_timeout:.0f} s"
            finally:
                ws.close()
                self.http.delete(f"{self.base}/user/{self.name}/api/kernels/{kernel}", headers={"X-XSRFToken": xsrf})

        return asyncio.run(go())


# ---------------------------------------------------------------------------------------------- what a learner costs
def cpu_seconds(uid: int) -> float:
    """CPU of everything the user runs, and of what those processes reaped (utime + stime + cutime + cstime)."""
    return sum(processes.cpu_seconds(int(pid)) or 0.0 for pid in limits.pids_of(uid))


def pss_mb(uid: int) -> float:
    return sum(limits.pss_kb(pid) or 0 for pid in limits.pids_of(uid)) / 1024


# ---------------------------------------------------------------------------------------------- a hub of its own
class BenchHub:
    def __init__(self, work: Path) -> None:
        shipped = classroom.load_config(SHIPPED)
        self.tag, self.port = secrets.token_hex(2), reporting_free_port()
        self.group = f"klbench-{self.tag}"
        self.config = work / "classroom.toml"
        self.trainer = f"benchtrainer-{self.tag}"  # the hub makes its admins' system users at start-up
        self.config.write_text(SHIPPED.read_text().replace('group = "kafka-lab"', f'group = "{self.group}"')
                               .replace('trainers = ["trainer"]', f'trainers = ["{self.trainer}"]')
                               .replace('ip = "0.0.0.0"', 'ip = "127.0.0.1"').replace("port = 8000", f"port = {self.port}")
                               .replace("memory_mb = 3000", "memory_mb = 100000")
                               .replace('state = "/srv/kafka-lab/hub"', f'state = "{work / "state"}"'))
        subprocess.run(["groupadd", "--system", self.group], check=True)
        self.log = (work / "hub.log").open("w")
        self.proc = subprocess.Popen([str(shipped.venv / "bin" / "labkit"), "classroom", "serve", "--config",
                                      str(self.config)], stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.base, self.users = f"http://127.0.0.1:{self.port}", []
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"{self.base}/hub/api/", timeout=2)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the hub did not start; see {work / 'hub.log'}") from None
                time.sleep(1)

    def learner(self, i: int) -> Learner:
        name = f"bench{i:02d}-{self.tag}"
        self.users.append(name)
        return Learner(self.base, name)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        for name in [*self.users, self.trainer]:
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        subprocess.run(["groupdel", self.group], capture_output=True)
        self.log.close()


def reporting_free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------- one step
def step(hub: BenchHub, lesson: str, n: int, first: int) -> dict:
    learners = [hub.learner(first + i) for i in range(n)]
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(lambda learner: learner.spawn(), learners))
    uids = [pwd.getpwnam(learner.name).pw_uid for learner in learners]
    notebooks = [Path(pwd.getpwnam(learner.name).pw_dir) / classroom.LAB_DIR for learner in learners]
    cpu0 = [cpu_seconds(uid) for uid in uids]
    peaks, halt = [0.0] * n, threading.Event()

    def sample() -> None:
        while not halt.is_set():
            for i, uid in enumerate(uids):
                peaks[i] = max(peaks[i], pss_mb(uid))
            halt.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    load0, t0 = os.getloadavg()[0], time.monotonic()

    def one(i: int) -> Run:
        start = time.monotonic()
        notebook = next(notebooks[i].glob(f"{lesson}_*.ipynb"))
        cell, error = learners[i].run_notebook(notebook)
        return Run("lesson", notebook.stem, not error, time.monotonic() - start, load0, os.getloadavg()[0], cell, error)

    with ThreadPoolExecutor(n) as pool:
        runs = list(pool.map(one, range(n)))
    halt.set()
    sampler.join()
    cpu = [cpu_seconds(uid) - c0 for uid, c0 in zip(uids, cpu0)]
    for learner in learners:  # their servers go (and their brokers with them) before the next step
        learner.http.delete(f"{hub.base}/hub/api/users/{learner.name}/server",
                            headers={"X-XSRFToken": learner.http.cookies.get("_xsrf", path="/hub/")})
    return {"learners": n, "failures": sum(not r.passed for r in runs), "wall_s": time.monotonic() - t0,
            "cpu_s_per_learner": cpu, "peak_pss_mb_per_learner": peaks, "load_before": load0,
            "load_after": os.getloadavg()[0], "runs": [r.__dict__ for r in runs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lesson", action="append", required=True, help="lesson number, e.g. 00 (repeatable)")
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 2, 4, 6, 8])
    parser.add_argument("--stress", type=int, default=0)
    parser.add_argument("--json", default=str(RESULTS / "classroom.json"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("benchmarks/classroom.py creates a system user per learner: run it as root.", file=sys.stderr)
        return 2
    import tempfile

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the hub, its servers and users still go
    report = {"machine": reporting.machine(), "lessons": {}}
    work = Path(tempfile.mkdtemp(prefix="klbench-"))
    hub, hog_procs = BenchHub(work), hogs(args.stress)
    try:
        first = 1
        for lesson in args.lesson:
            steps = []
            for n in args.learners:
                result = step(hub, lesson, n, first)
                first += n
                steps.append(result)
                print(f"lesson {lesson}, {n} learner(s) at once: {result['failures']} failed, "
                      f"{result['wall_s']:.0f} s, CPU-s per learner median "
                      f"{statistics.median(result['cpu_s_per_learner']):.0f}, peak PSS per learner median "
                      f"{statistics.median(result['peak_pss_mb_per_learner']):.0f} MB, load "
                      f"{result['load_before']:.1f} -> {result['load_after']:.1f}", flush=True)
                if result["failures"]:
                    print(table([Run(**r) for r in result["runs"]]))
                    break
            ok = [s["learners"] for s in steps if not s["failures"]]
            report["lessons"][lesson] = {"steps": steps, "most_without_failure": max(ok) if ok else 0}
            print(f"lesson {lesson}: most learners at once without a failure: {max(ok) if ok else 0}")
    finally:
        for hog in hog_procs:
            hog.kill()
        hub.close()
    reporting.write(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
