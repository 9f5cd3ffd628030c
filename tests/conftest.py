"""Test-session wiring: one real Kafka broker per session, fresh ones on request, no silent skips.

Rules this file enforces (see README "Testing"):

* Kafka behaviour is tested against a real Apache Kafka broker started here
  from the Maven Central jars, never a mock. If Java or Maven is missing, the
  tests that need the broker *fail* with a message saying what to install.
* A skipped test is not a passing test: any skip makes the run fail unless
  ``KIP848_ALLOW_SKIPS=1`` is set by a developer on purpose.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

REPO = Path(__file__).resolve().parents[1]
#: The pid of this process, which no other live process has: the end of every ``unique`` name (see the fixture).
RUN_TOKEN = f"p{os.getpid()}"

# Environment for everything below, set before Airflow is first imported.
os.environ.setdefault("KIP848_CACHE_DIR", str(REPO / ".cache"))
# A test that starts a second "worker" process (tests/e2e/test_concurrent_runs.py) shares this home and DB.
# Each pytest-xdist worker (``make test`` runs several) is a session of its own: its own home and SQLite DB, never
# the one its parent process chose (workers inherit the parent's environment).
# The home is reused only by a process of the same session (its owner): a worker's child process inherits both the
# home and PYTEST_XDIST_WORKER, a worker inherits its parent's home under another owner.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
_OWNER = _WORKER or "main"
_AIRFLOW_HOME = Path(
    (os.environ.get("KIP848_TEST_AIRFLOW_HOME") if os.environ.get("KIP848_TEST_AIRFLOW_HOME_OWNER") == _OWNER else None)
    or tempfile.mkdtemp(prefix=f"kip848-airflow-{_OWNER}-"))
os.environ["KIP848_TEST_AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["KIP848_TEST_AIRFLOW_HOME_OWNER"] = _OWNER
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
# the deployment's artifact location (snapshots, reports, audit) for runs that do not name their own
os.environ["KIP848_ARTIFACTS_URL"] = str(_AIRFLOW_HOME / "artifacts")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
# Two DAG bundles: the example DAGs, and DAGs that exist only for tests (dag.test() finds a DAG through
# the bundle that holds its file).
os.environ["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps([
    {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
     "kwargs": {"path": str(REPO / "dags")}},
    {"name": "test-dags", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
     "kwargs": {"path": str(REPO / "tests" / "e2e" / "dags")}},
])
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
# No DAG-file import timeout in the test processes: Airflow's sets SIGALRM and clears it on exit, which cancelled
# pytest-timeout's alarm inside every dag.test(), so a hung end-to-end test (an approval never answered) ran until
# CI's limit instead of failing after 10 minutes (tests/e2e/test_test_timeouts.py).
os.environ["AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT"] = "0"
# Spark JVMs of test jobs: C1 only and the serial collector (tests/spark-conf/spark-defaults.conf says why); the
# launcher JVM spark-submit starts before the driver too. The test Spark cluster sets its daemons' own.
os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "tests" / "spark-conf"))
os.environ.setdefault("SPARK_LAUNCHER_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# The deployment's application controller registry ([kip848] controllers): a test adds an entry per application it
# starts (the ``controllers`` fixture) and its runs name that entry, as a production deployment's would.
os.environ["AIRFLOW__KIP848__CONTROLLERS"] = str(_AIRFLOW_HOME / "controllers.json")
# The fleet DAG's wave slots (KIP848_FLEET_MAX_WAVES, default 6, read when fleet_tasks is imported): two, the
# fewest the tests need. Under dag.test() every unused slot still runs four of its tasks (open, to_validate, judge,
# to_roll_back: their trigger rule is all_done) one after the other, and every test run of the DAG paid for six.
# tests/e2e/test_fleet_migration.py plans three waves (the largest plan a test runs): its third wave is beyond the
# run's slots, the documented path it checks; tests/unit/test_fleet_dag.py pins the shipped default (six) in a
# process without this variable. Child processes (a second worker, the airflow CLI) inherit it, so they parse the
# same DAG. The deploy tier sets its deployment's own (tests/deploy/deployment.py).
os.environ["KIP848_FLEET_MAX_WAVES"] = "2"
# Approvals in the end-to-end tests go through the REST API as an admin; the change-control tests
# (two users, four eyes) switch this off for themselves.
os.environ.setdefault("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True")

from airflow_provider_kip848.kafka.errors import Kip848Error  # noqa: E402
from kip848_harness import schema_checks  # noqa: E402

# dag.test() serializes every DAG several times and each time checks every Param's schema against its meta-schema:
# a quarter of an end-to-end worker's CPU. The test process checks each schema once (kip848_harness/schema_checks.py says
# why this keeps every validation of a value).
schema_checks.install()
from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION  # noqa: E402
from kip848_harness.kafka_cluster import LocalKafka  # noqa: E402

#: test_spark.py and test_spark_cluster.py: one work unit (see _work_unit), marked ``spark``
_SPARK_FILES = "tests/integration/test_spark"
#: The files with tests on the 3-node cluster (``kafka_cluster``): one work unit, so one worker starts the cluster
#: once and stops it after the unit's last test (``pytest_runtest_teardown``) instead of each worker keeping one of
#: its own, three idle JVMs, until the run ends. A test elsewhere that asks for the cluster fails the collection.
CLUSTER_FILES = (
    "tests/integration/test_cluster_faults.py",
    "tests/e2e/test_cluster_dags.py",
    "tests/integration/test_fleet_operator.py",
    "tests/integration/test_instance_roll_faults.py",
    "tests/integration/test_instance_verdicts.py",
    "tests/integration/test_inventory.py",
    "tests/integration/test_platform_watch_cluster.py",
    "tests/integration/test_way_back_load.py",
)
#: The files with tests on the Kubernetes control plane (``kube``): one work unit, so one worker starts the control
#: plane and its node once, and stops them after the unit's last test.
KUBE_FILES = (
    "tests/e2e/test_kubernetes_migrations.py",
    "tests/e2e/test_kubernetes_rolling_by_pod.py",
    "tests/integration/test_kubernetes_by_pod.py",
    "tests/integration/test_kubernetes_controller.py",
)
# The order work units start in when the suite runs on parallel workers. The machine has 2 cores and the heavy units
# (the deploy tier, Spark, end-to-end DAG runs with their Spark validation) are CPU-bound: the deploy tier starts first
# and overlaps the integration files (mostly waiting on brokers and session timeouts), Spark follows, then the
# end-to-end files longest first, and the short unit files fill the workers at the end.
_START_ORDER = (
    "tests/deploy/",
    *CLUSTER_FILES,
    "tests/integration/test_parity.py",
    "tests/integration/test_metrics.py",
    "tests/integration/test_checklist_backing.py",
    "tests/integration/test_operators.py",
    "tests/integration/test_coordinator_load.py",
    "tests/integration/test_bad_input.py",
    "tests/integration/test_faults.py",
    "tests/integration/test_security.py",
)
_THEN = (
    (_SPARK_FILES,),
    ("tests/integration/",),
    (*KUBE_FILES, "tests/e2e/test_fleet_migration.py", "tests/e2e/test_streams_offline_migration.py",
     "tests/e2e/test_consumer_offline_migration.py", "tests/e2e/test_rolling_upgrade.py",
     "tests/e2e/test_change_control.py", "tests/e2e/test_streams_rollback_to_classic.py"),
    ("tests/e2e/",),
    ("tests/unit/",),
)


#: integration tests that take more than 10 s (tests/long_tests.txt, from a measured run): ``make test-fast`` leaves them out
_LONG_TESTS = frozenset(line.strip() for line in (REPO / "tests" / "long_tests.txt").read_text().splitlines()
                        if line.strip() and not line.startswith("#"))


def _relative(item: pytest.Item) -> str:
    return Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()


def _start_rank(path: str) -> tuple[int, int]:
    for rank, prefix in enumerate(_START_ORDER):
        if path.startswith(prefix):
            return (0, rank)
    for group, prefixes in enumerate(_THEN, start=1):
        for rank, prefix in enumerate(prefixes):
            if path.startswith(prefix):
                return (group, rank)
    return (len(_THEN) + 1, 0)


def _work_unit(path: str) -> str:
    """The tests one parallel worker runs together: a file (its module fixtures start once), the whole deploy tier (one
    Airflow deployment), the Spark files (one Spark cluster, and one Ivy cache resolving the connector at a time) and
    the 3-node cluster's files (one cluster)."""
    if path.startswith("tests/deploy/"):
        return "deploy"
    if path.startswith(_SPARK_FILES):
        return "spark"
    if path in CLUSTER_FILES:
        return "cluster"
    if path in KUBE_FILES:
        return "kubernetes"
    return path


class WorkUnitScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with :func:`_work_unit` as the scope: a worker takes a whole unit, units in
    collection order (``--no-loadscope-reorder``). (xdist's ``loadgroup`` marks do not group on pytest 9.2, whose node
    ids no longer come from the attribute xdist rewrites.)"""

    def _split_scope(self, nodeid: str) -> str:
        return _work_unit(nodeid.split("::", 1)[0])


def pytest_xdist_make_scheduler(config: pytest.Config, log) -> WorkUnitScheduling:
    return WorkUnitScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # a stable sort: within a file, tests keep their order
    items.sort(key=lambda item: _start_rank(_relative(item)))
    for item in items:
        path = _relative(item)
        if path.startswith(("tests/integration/", "tests/e2e/", "tests/deploy/")):
            item.add_marker(pytest.mark.integration)
        if path.startswith(("tests/e2e/", "tests/deploy/")):
            item.add_marker(pytest.mark.slow)
        if path.startswith("tests/deploy/"):
            item.add_marker(pytest.mark.deploy)
            # the tier's first test also installs and starts the deployment (minutes on a busy machine)
            item.add_marker(pytest.mark.timeout(1800))
        if "kafka_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)
            if path not in CLUSTER_FILES:
                raise pytest.UsageError(f"{item.nodeid} uses the 3-node cluster: add {path} to CLUSTER_FILES in "
                                        "tests/conftest.py (the cluster's work unit)")
        if path.startswith(_SPARK_FILES):
            item.add_marker(pytest.mark.spark)
        if f"{path}::{item.nodeid.split('::', 1)[1]}" in _LONG_TESTS:
            item.add_marker(pytest.mark.long)


def _reporter(config: pytest.Config):
    return config.pluginmanager.get_plugin("terminalreporter")


def say(config: pytest.Config, line: str) -> None:
    """A line in the run's log, outside output capture (start-up times, tier timings). A parallel worker's terminal
    goes nowhere, so a worker writes to the stderr it shares with the run, prefixed with its name."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if _WORKER:  # fd-level capture holds the worker's fd 2 too: released while the line is written
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            print(f"[{_WORKER}] {line}", file=sys.__stderr__, flush=True)
        return
    reporter = _reporter(config)
    if reporter is not None and capman is not None:
        with capman.global_and_fixture_disabled():
            reporter.write_line(line)


#: Tiers of the per-tier totals, in the order printed: the first whose rule matches a test's marks and path.
TIERS = ("deploy", "spark", "3-node", "e2e", "integration", "unit")
#: Where the run's test times are written (``build/``: never committed), for docs/development.md's table.
DURATIONS_FILE = REPO / "build" / "test-durations.json"
_TIMES: dict[str, dict] = {}


def _tier(nodeid: str, keywords) -> str:
    if "deploy" in keywords:
        return "deploy"
    if "spark" in keywords:
        return "spark"
    if "cluster" in keywords:
        return "3-node"
    for tier in ("e2e", "integration", "unit"):
        if nodeid.startswith(f"tests/{tier}/"):
            return tier
    return "unit"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each test's setup + call + teardown time, by tier (on the run's main process: xdist forwards the reports)."""
    if _WORKER:
        return
    entry = _TIMES.setdefault(report.nodeid, {"tier": _tier(report.nodeid, report.keywords), "seconds": 0.0,
                                              "outcome": "passed"})
    entry["seconds"] += report.duration
    entry["start"] = min(entry.get("start", report.start), report.start)
    entry["stop"] = max(entry.get("stop", report.stop), report.stop)
    if report.failed:
        entry["outcome"] = "failed"


def tier_totals(times: dict[str, dict]) -> dict[str, tuple[int, float, float]]:
    """tier -> (tests, seconds of test time, wall span from its first test's start to its last test's end). Test
    time is worker-seconds: on parallel workers the tiers add up to more than the run's wall time."""
    totals = {}
    for tier in TIERS:
        entries = [e for e in times.values() if e["tier"] == tier]
        span = max((e["stop"] for e in entries), default=0.0) - min((e["start"] for e in entries), default=0.0)
        totals[tier] = (len(entries), sum(e["seconds"] for e in entries), span)
    return totals


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _WORKER or not _TIMES:
        return
    terminalreporter.section("test time by tier")
    for tier, (count, seconds, span) in tier_totals(_TIMES).items():
        if count:
            terminalreporter.write_line(f"{tier:<12} {count:5d} tests {seconds / 60:6.1f} min of test time, "
                                        f"{span / 60:6.1f} min from its first start to its last end")
    DURATIONS_FILE.parent.mkdir(parents=True, exist_ok=True)
    partial = DURATIONS_FILE.with_suffix(".json.partial")
    partial.write_text(json.dumps(_TIMES, indent=1, sort_keys=True))
    partial.replace(DURATIONS_FILE)
    terminalreporter.write_line(f"each test's time: {DURATIONS_FILE.relative_to(REPO)}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = _reporter(session.config)
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped and not os.environ.get("KIP848_ALLOW_SKIPS") and exitstatus == 0:
        reporter.write("\n")
        reporter.write_line(
            f"FAILED: {skipped} test(s) were skipped; a skipped test does not count as passing here "
            "(set KIP848_ALLOW_SKIPS=1 to allow it locally).",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def kafka_version() -> str:
    return os.environ.get("KIP848_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)


def start_or_fail(broker: LocalKafka, config: pytest.Config) -> None:
    """Start ``broker``; on any launcher error fail (never skip) with its one-line reason."""
    try:
        report = broker.start()
    except Kip848Error as exc:
        reason = str(exc)
    else:
        reason = None
    if reason is not None:
        pytest.fail(f"cannot start the real Kafka broker the tests need: {reason}", pytrace=False)
    # Shown in the run's log (outside output capture): version, port and start-to-ready time.
    say(config, f"[kafka] {report.summary()}")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory, kafka_version: str, pytestconfig) -> Iterator[LocalKafka]:
    """The session's shared broker. Tests must use unique topic and group names."""
    broker = LocalKafka(tmp_path_factory.mktemp("kafka-session"), version=kafka_version, die_with_parent=True)
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


class _OnDemandCluster:
    """The session's 3-node cluster, started when a test first asks for it and stopped when the worker moves past the
    cluster's work unit (started again, fresh, should a later test ask: a run of chosen tests in another order)."""

    def __init__(self) -> None:
        self.broker: LocalKafka | None = None

    def get(self, tmp_path_factory: pytest.TempPathFactory, version: str, config: pytest.Config) -> LocalKafka:
        if self.broker is None:
            broker = LocalKafka(tmp_path_factory.mktemp("kafka-cluster"), version=version, nodes=3, heap="384m",
                                die_with_parent=True)
            start_or_fail(broker, config)
            self.broker = broker
        return self.broker

    def stop(self) -> None:
        broker, self.broker = self.broker, None
        if broker is not None:
            broker.stop(timeout=15)


_CLUSTER = _OnDemandCluster()


@pytest.fixture
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory, kafka_version: str, pytestconfig) -> LocalKafka:
    """The session's 3-node cluster (3 combined broker+controller nodes, internal topics on 3 replicas),
    started by the first test that needs it. Tests use unique names and must leave every node running
    (use the ``cluster`` fixture, which restores them)."""
    return _CLUSTER.get(tmp_path_factory, kafka_version, pytestconfig)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    yield
    if _CLUSTER.broker is not None and (nextitem is None or _work_unit(_relative(nextitem)) != "cluster"):
        _CLUSTER.stop()
        say(item.config, f"[kafka] 3-node cluster stopped after {item.nodeid}, the last test of its unit here")
    if _KUBE.plane is not None and (nextitem is None or _work_unit(_relative(nextitem)) != "kubernetes"):
        _KUBE.stop()
        say(item.config, f"[kubernetes] control plane stopped after {item.nodeid}, the last test of its unit here")


def pytest_unconfigure(config: pytest.Config) -> None:
    _CLUSTER.stop()  # a run stopped early (-x, Ctrl-C) leaves no cluster behind
    _KUBE.stop()


@pytest.fixture(scope="module")  # one file uses it: its master and workers stop when the worker moves on
def spark_cluster(tmp_path_factory: pytest.TempPathFactory, pytestconfig):
    """A Spark standalone cluster (one master, two workers) from the installed pyspark, started by the first test of
    the module that needs it and stopped after its last."""
    from kip848_harness.spark_cluster import LocalSparkCluster

    cluster = LocalSparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    try:
        report = cluster.start()
    except Kip848Error as exc:
        pytest.fail(f"cannot start the Spark standalone cluster the tests need: {exc}", pytrace=False)
    say(pytestconfig, f"[spark] {report.summary()}")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def spark_session(pytestconfig):
    """One local SparkSession (with the Kafka connector) for the test session: the validation jobs of DAG runs in this
    process run on it (``spark.session.job_session``) instead of starting and stopping a JVM each (10-20 s and as many
    CPU-seconds a run); the Spark tests read with it. Started by the first test that needs it."""
    from airflow_provider_kip848.spark.session import local_session

    started = time.monotonic()
    session = local_session("kip848-tests")
    say(pytestconfig, f"[spark] local session {session.sparkContext.applicationId} ready in "
                      f"{time.monotonic() - started:.1f} s")
    yield session
    session.stop()


@pytest.fixture
def cluster(kafka_cluster: LocalKafka) -> Iterator[LocalKafka]:
    """The 3-node cluster; after the test, every node killed, stopped or paused by it runs again."""
    from kip848_harness.faults import restore

    restore(kafka_cluster)
    yield kafka_cluster
    restore(kafka_cluster)


@pytest.fixture
def bootstrap(kafka: LocalKafka) -> str:
    return kafka.bootstrap_servers


@pytest.fixture
def fresh_kafka(tmp_path: Path, kafka_version: str, pytestconfig) -> Iterator[Callable[..., LocalKafka]]:
    """Factory for a new cluster of its own (clean state, other version, other tuning); stopped at teardown."""
    started: list[LocalKafka] = []

    def make(version: str | None = None, **kwargs) -> LocalKafka:
        broker = LocalKafka(
            tmp_path / f"kafka-{len(started)}",
            version=version or kafka_version,
            die_with_parent=True,
            **kwargs,
        )
        started.append(broker)
        start_or_fail(broker, pytestconfig)
        return broker

    yield make
    for broker in started:
        broker.stop()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Names unique to this test (topics and groups on the shared broker) and to this run: they end in the pid of
    the process running the test, which no other live process has, so two copies of the suite on one machine
    (rule 5) never share a name that a lookup by command line, a marker or a file name could confuse."""
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
    counter = iter(range(1000))

    def name(prefix: str) -> str:
        return f"{prefix}-{base}-{next(counter)}-{RUN_TOKEN}"

    return name


class RunFiles:
    """Where a test's runs write their files: the deployment's locations, the test's own (a run names none)."""

    def __init__(self, base: Path) -> None:
        #: ``$KIP848_ARTIFACTS_URL``: each run's snapshots and report under ``<root>/<dag_id>/<run_id>/<kind>``
        self.root = base / "artifacts"
        #: ``$KIP848_AUDIT_LOG``: the audit records of every run of the test
        self.audit = base / "audit.jsonl"

    def folder(self, dag_id: str, run_id: str, kind: str = "report") -> Path:
        """The run's own folder of ``kind`` (``report``, ``snapshots``, ``plan`` ...), as the DAGs compute it."""
        from airflow_provider_kip848.changecontrol.runpaths import run_location

        return Path(run_location(str(self.root), dag_id, run_id, kind))

    def report_md(self, dag_id: str, run_id: str) -> str:
        """The run's written ``report.md``."""
        return (self.folder(dag_id, run_id) / "report.md").read_text()


@pytest.fixture
def run_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunFiles:
    """The deployment's artifact location and audit log for this test's runs, in its ``tmp_path`` (the environment
    a worker of a real deployment has; issue 45.1: a run's conf never names them)."""
    files = RunFiles(tmp_path)
    monkeypatch.setenv("KIP848_ARTIFACTS_URL", str(files.root))
    monkeypatch.setenv("KIP848_AUDIT_LOG", str(files.audit))
    return files


@pytest.fixture(scope="session")
def controllers():
    """The session's controller registry file (``[kip848] controllers``): ``controllers.add(name, kind, target)``
    registers an application's controller; a run then names it (``app_controller``)."""
    from kip848_harness.registry import RegistryFile

    return RegistryFile(os.environ["AIRFLOW__KIP848__CONTROLLERS"]).activate()


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """An initialised Airflow metadata DB (SQLite in a temp AIRFLOW_HOME), for dag.test()."""
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)
    return _AIRFLOW_HOME


@pytest.fixture
def native(bootstrap):
    """The native backend (confluent-kafka + kafka-python) on the session broker."""
    from airflow_provider_kip848.kafka.native import KafkaAdmin
    from airflow_provider_kip848.kafka.settings import ClientSettings

    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        yield admin


@pytest.fixture
def cli(bootstrap, kafka_version):
    """The CLI backend (Kafka's own tools from the cached jars) on the session broker."""
    from airflow_provider_kip848.kafka.cli.backend import KafkaCli
    from airflow_provider_kip848.kafka.cli.tools import KafkaTools
    from airflow_provider_kip848.kafka.settings import ClientSettings

    return KafkaCli(ClientSettings(bootstrap), KafkaTools(version=kafka_version))


def wait_until(condition: Callable[[], object], timeout: float = 60.0, what: str = "condition", interval: float = 0.5):
    """Poll ``condition`` until it returns a truthy value; fail the test (never hang) after ``timeout``."""
    from kip848_harness.waiting import wait_until as poll

    try:
        return poll(condition, timeout=timeout, what=what, interval=interval)
    except TimeoutError as exc:
        pytest.fail(str(exc))


def process_cmdlines() -> Iterator[tuple[Path, bytes]]:
    """``(/proc/<pid>, argument list)`` of every process running now (for tests that look for leaked secrets)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            yield proc, (proc / "cmdline").read_bytes()
        except OSError:
            continue


def is_child_of(proc: Path, pid: int) -> bool:
    """Whether the process at ``/proc/<n>`` is a child of ``pid`` (this session's, not another run's); False when gone."""
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
    except (OSError, ValueError, IndexError):
        return False


def set_kafka_connection(monkeypatch, conn_id: str, bootstrap: str, **extra) -> str:
    """Register a ``kafka_admin`` connection the way deployments do: an AIRFLOW_CONN_* variable."""
    import json

    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}",
                       json.dumps({"conn_type": "kafka_admin", "host": bootstrap, "extra": extra}))
    return conn_id


@pytest.fixture
def kafka_conn(monkeypatch, bootstrap) -> str:
    """``kafka_admin_default`` pointing at the session broker."""
    return set_kafka_connection(monkeypatch, "kafka_admin_default", bootstrap)


class RecordingTI:
    """The part of a TaskInstance operators touch outside a DAG run: XCom pushes (no upstream to pull)."""

    def __init__(self) -> None:
        self.xcom: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: object = None, key: str = "return_value", **_: object) -> object:
        return None


@pytest.fixture
def context() -> dict:
    return {"ti": RecordingTI()}


def _platform_or_fail(platform, what: str, config: pytest.Config) -> None:
    """Start an application platform (``supervisor``, ``sshd``); on a launch error fail (never skip) with the reason,
    else show its start-to-ready time in the run's log."""
    try:
        platform.start()
    except (Kip848Error, OSError, subprocess.SubprocessError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    else:
        reason = None
    if reason is not None:
        platform.stop()
        pytest.fail(f"cannot start the {what} the tests need: {reason}", pytrace=False)
    say(config, f"[{what}] ready in {platform.ready_seconds:.2f} s ({platform.workdir})")


@pytest.fixture(scope="session")
def supervisor(tmp_path_factory: pytest.TempPathFactory, pytestconfig):
    """The session's real supervisord (drive it with ``.ctl``/``run_ctl``). Tests add programs under unique names
    and remove them."""
    from kip848_harness.supervisor import LocalSupervisor

    manager = LocalSupervisor(tmp_path_factory.mktemp("supervisor"), die_with_parent=True)
    _platform_or_fail(manager, "supervisord", pytestconfig)
    yield manager
    manager.stop()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory, pytestconfig):
    """The session's real OpenSSH server on 127.0.0.1 (a free port), accepting the current user with its own
    throwaway key; ``connection_uri()`` is the Airflow SSH connection to it."""
    from kip848_harness.sshd import LocalSshd

    server = LocalSshd(tmp_path_factory.mktemp("sshd"), die_with_parent=True)
    _platform_or_fail(server, "sshd", pytestconfig)
    yield server
    server.stop()


class _OnDemandKube:
    """The session's Kubernetes control plane and node, started when a test first asks for them and stopped when the
    worker moves past the Kubernetes work unit (see pytest_runtest_teardown)."""

    def __init__(self) -> None:
        self.plane = None

    def get(self, tmp_path_factory: pytest.TempPathFactory, config: pytest.Config):
        from kip848_harness.kube_control_plane import KubeControlPlane

        if self.plane is None:
            plane = KubeControlPlane(tmp_path_factory.mktemp("kube"))
            _platform_or_fail(plane, "kubernetes control plane", config)
            try:
                node = plane.start_node()
            except (Kip848Error, OSError, TimeoutError) as exc:
                plane.stop()
                pytest.fail(f"cannot start the node agent: {type(exc).__name__}: {exc}", pytrace=False)
            say(config, f"[kubernetes] node {node.name} ready ({node.log_path})")
            self.plane = plane
        return self.plane

    def stop(self) -> None:
        plane, self.plane = self.plane, None
        if plane is not None:
            plane.stop()


_KUBE = _OnDemandKube()


@pytest.fixture
def kube(tmp_path_factory: pytest.TempPathFactory, pytestconfig):
    """The Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager built from their Go modules,
    cached outside the checkout) and one node whose pods run as local processes (kip848_harness.kube_node)."""
    return _KUBE.get(tmp_path_factory, pytestconfig)


@pytest.fixture
def kube_namespace(kube, request: pytest.FixtureRequest):
    """A fresh namespace of the session's control plane for this test (deleted afterwards: its pods stop)."""
    import hashlib

    from kip848_harness.kube_control_plane import KubeNamespace

    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
    namespace = KubeNamespace(kube, f"t{digest}-{RUN_TOKEN}")
    yield namespace
    namespace.delete()
