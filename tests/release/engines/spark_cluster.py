"""A real Spark standalone cluster on 127.0.0.1, for tests and benchmarks (not a test file).

pyspark's wheel carries ``sbin/spark-daemon.sh`` — what Spark's ``start-master.sh`` and
``start-worker.sh`` run — but not those two wrappers, so :class:`StandaloneCluster` runs
``spark-daemon.sh start org.apache.spark.deploy.master.Master 1 --host 127.0.0.1 …`` and
one ``… deploy.worker.Worker N spark://127.0.0.1:PORT`` per worker, each in the
foreground (``SPARK_NO_DAEMONIZE``) so that the processes are this object's children and
are stopped with it, its logs and pid files in a directory of its own.  A worker is a
separate JVM with its own cores and memory; the executors of an application run in them,
not in the driver: what a cluster of machines does, on one machine.

Used by ``tests/release/engines/test_spark_cluster.py`` and ``benchmarks/bench_spark_cluster.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

__all__ = ["StandaloneCluster", "spark_home"]


def spark_home() -> Path:
    """The Spark installation pyspark runs (``SPARK_HOME``, or pyspark's own directory)."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1 (module docstring).

    ``with StandaloneCluster(tmp, workers=2) as c: SparkEngine(master=c.url, …)``.
    ``cores`` and ``memory`` are each worker's.  Start-up waits until the master reports
    every worker ``ALIVE`` (at most ``timeout`` seconds, else ``RuntimeError`` with the
    logs' last lines).
    """

    def __init__(
        self,
        directory: Path,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        timeout: float = 180.0,
    ) -> None:
        self.directory = Path(directory)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.timeout = timeout
        self.port = _free_port()
        self.ui_port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen[bytes]] = []

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_NO_DAEMONIZE="1",
            SPARK_LOG_DIR=str(self.directory / "logs"),
            SPARK_PID_DIR=str(self.directory / "pids"),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_WORKER_DIR=str(self.directory / "work"),
            SPARK_IDENT_STRING=f"dpgauss-{self.port}",
        )
        return env

    def _daemon(self, cls: str, number: int, *args: str) -> None:
        script = spark_home() / "sbin" / "spark-daemon.sh"
        log = open(self.directory / f"{cls.rsplit('.', 1)[-1]}-{number}.out", "wb")
        proc = subprocess.Popen(
            ["bash", str(script), "start", cls, str(number), *args],
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole in __exit__
        )
        self._procs.append(proc)

    def status(self) -> dict:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.loads(r.read().decode("utf-8"))

    def sessions(self) -> set[int]:
        """The session ids of the master and the workers (the executors the workers start
        are in their sessions): for measuring the cluster's CPU from ``/proc``."""
        return {proc.pid for proc in self._procs}  # each started its own session

    def alive_workers(self) -> int:
        try:
            workers = self.status().get("workers", [])
        except OSError:
            return 0
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def __enter__(self) -> StandaloneCluster:
        for sub in ("logs", "pids", "work"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        self._daemon(
            "org.apache.spark.deploy.master.Master",
            1,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        for i in range(1, self.workers + 1):
            self._daemon(
                "org.apache.spark.deploy.worker.Worker",
                i,
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(_free_port()),
                self.url,
            )
        deadline = time.monotonic() + self.timeout
        while self.alive_workers() < self.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._procs):
                self.__exit__(None, None, None)
                raise RuntimeError(
                    f"the standalone cluster did not start ({self.alive_workers()} of "
                    f"{self.workers} workers alive): {self._log_tail()}"
                )
            time.sleep(0.5)
        return self

    def _log_tail(self) -> str:
        out = []
        for f in sorted(self.directory.glob("*.out")):
            lines = f.read_text(errors="replace").strip().splitlines()
            out.append(f"{f.name}: " + " | ".join(lines[-3:]))
        return "; ".join(out)

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self._procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()
