"""The suite's pytest plugin (``pytest_plugins`` of ``tests/conftest.py``):
shared deployments, where each test runs, the reports every run writes.

Shared deployments. A session-scoped fixture starts a deployment once per xdist worker;
a test that uses it isolates itself by a user, an agent or a session of its own:

- ``distributed``: two Daphne servers, a Celery worker for runs (one slot, ``-P solo``)
  and one for subagent children (prefork, eight slots, prefetch 1) on MariaDB and Redis;
  its default agent answers by ``tests.support.rules.TEST_RULES``;
- ``browser_deployment`` and ``browser`` (``tests/support/browser.py``): one embedded
  server and one Chromium.

A test that kills a process, or needs settings no other test may see, starts a
deployment of its own (``tests/support/deployment.py``).

Where each test runs (``make test``: ``-n 3 --dist loadgroup``). Every test belongs to a
group, and a group runs on one worker: the tests using a shared deployment form one group
(``distributed``, ``browser``), so each is started once per run; every other test is
grouped with its module (its module fixtures start once); an ``xdist_group`` mark names a
group outright. Groups are handed out longest first, by the durations of the last run on
this machine (``var/test-reports/``), else by the ``slow`` mark, so that the workers end
together. The workers tell the controller the groups (``GroupScheduling``).

Reports. Every run writes ``var/test-reports/junit.xml`` (``--junitxml``) and
``var/test-reports/durations.txt``: every test phase by duration, the groups by total,
the run's wall time; ``durations.json`` keeps each test's seconds for the next run's order.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.support import databases
from tests.support.deployment import Deployment
from tests.support.rules import TEST_RULES
from tests.support.services import REPO, require_mariadb_and_redis

REPORTS = REPO / "var" / "test-reports"
SHARED_GROUPS = {"distributed": "distributed", "browser": "browser", "browser_deployment": "browser"}
SLOW_GUESS, QUICK_GUESS = 8.0, 0.1  # seconds, for a test the last run did not time


# --------------------------------------------------------------------------- shared deployments


@pytest.fixture(scope="session")
def distributed(tmp_path_factory) -> Deployment:
    """The distributed deployment this xdist worker shares (see the module's docstring).

    ``NETA_WS_HEARTBEAT_SECONDS`` is long: a socket that closes was closed by what the test
    did, not by a heartbeat's check."""
    require_mariadb_and_redis()
    dep = Deployment(
        tmp_path_factory.mktemp("distributed"), servers=2, database="mysql", redis=True, backend="celery",
        rules=TEST_RULES, extra_env={"NETA_WS_HEARTBEAT_SECONDS": "600"},
    )  # fmt: skip
    try:
        dep.prepare()
        servers = [dep.spawn_server() for _ in range(2)]
        dep.start_workers(
            {"name": "runs", "queues": dep.queue, "pool": "threads", "concurrency": 16},
            {"name": "subagents", "queues": dep.subagent_queue, "concurrency": 8, "options": ("--prefetch-multiplier", "1")},
        )
        for name in servers:
            dep.wait_server(name)
    except BaseException:
        dep.close()
        raise
    yield dep
    dep.close()


# --------------------------------------------------------------------------- where each test runs


def group_of(item) -> str:
    for fixture, group in SHARED_GROUPS.items():
        if fixture in item.fixturenames:
            return group
    return item.nodeid.split("::", 1)[0]


def _last_durations() -> dict[str, float]:
    try:
        return json.loads((REPORTS / "durations.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Give every test its group (an ``xdist_group`` mark wins); order the groups longest
    first; on an xdist worker, tell the controller's scheduler the groups."""
    last = _last_durations()
    seconds: dict[str, float] = {}
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        group = str(marker.args[0] if marker.args else marker.kwargs.get("name", "default")) if marker else group_of(item)
        if group in SHARED_GROUPS.values() and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)  # it starts (or waits for) a shared deployment
        item.stash[GROUP] = group
        guess = SLOW_GUESS if item.get_closest_marker("slow") else QUICK_GUESS
        seconds[item.nodeid] = last.get(item.nodeid, guess)
    _split_browser_group(items, seconds)
    weight: dict[str, float] = defaultdict(float)
    for item in items:
        weight[item.stash[GROUP]] += seconds[item.nodeid]
    items.sort(key=lambda item: -weight[item.stash[GROUP]])  # stable: a group's own order is kept
    groups_file = getattr(config, "workerinput", {}).get("neta_groups_file")
    if groups_file:
        path = Path(f"{groups_file}.{config.workerinput['workerid']}")
        path.write_text(json.dumps({item.nodeid: item.stash[GROUP] for item in items}))


GROUP = pytest.StashKey[str]()
# The browser tests are the longest group by far (a third of a run's test time, mostly
# waiting on the page): they run as this many groups of whole modules, balanced by the last
# run's durations, each on a worker with a browser and a site of its own.
BROWSER_GROUPS = 2


def _split_browser_group(items, seconds: dict[str, float]) -> None:
    modules: dict[str, float] = defaultdict(float)
    for item in items:
        if item.stash[GROUP] == "browser":
            modules[item.nodeid.split("::", 1)[0]] += seconds[item.nodeid]
    load = [0.0] * BROWSER_GROUPS
    bin_of: dict[str, int] = {}
    for module, total in sorted(modules.items(), key=lambda pair: (-pair[1], pair[0])):
        bin_of[module] = load.index(min(load))
        load[bin_of[module]] += total
    for item in items:
        if item.stash[GROUP] == "browser":
            index = bin_of[item.nodeid.split("::", 1)[0]]
            item.stash[GROUP] = "browser" if index == 0 else f"browser-{index + 1}"


class GroupScheduling(LoadScopeScheduling):
    """xdist's ``loadgroup``, by the groups the workers computed (see the module's docstring):
    a group is one unit of work, the units go out in the workers' order (longest first).

    (xdist's own ``loadgroup`` puts the group into the test's node id, which pytest 9 no
    longer lets a plugin change: every test would be a unit of its own.)"""

    def __init__(self, config, log=None, *, groups_file: str):
        super().__init__(config, log)
        self.groups_file = groups_file
        self.groups: dict[str, str] | None = None
        config.option.loadscopereorder = False  # keep the workers' order

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:
            written = sorted(Path(self.groups_file).parent.glob(Path(self.groups_file).name + ".*"))
            self.groups = json.loads(written[0].read_text()) if written else {}
        return self.groups.get(nodeid) or nodeid.split("::", 1)[0]


def _worker_groups(config) -> dict[str, str]:
    """The groups the xdist workers wrote (``XdistGroups``), on the controller."""
    plugin = config.pluginmanager.get_plugin("neta-xdist-groups")
    if plugin is None:
        return {}
    written = sorted(plugin.folder.glob("groups.*"))
    return json.loads(written[0].read_text()) if written else {}


class XdistGroups:
    """On the controller of a ``--dist loadgroup`` run: the scheduler above, and a file for
    each worker to write its groups to."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="neta-xdist-groups-"))
        self.groups_file = str(self.folder / "groups")

    def pytest_configure_node(self, node):
        node.workerinput["neta_groups_file"] = self.groups_file

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config, log):
        return GroupScheduling(config, log, groups_file=self.groups_file)

    def pytest_unconfigure(self, config):
        shutil.rmtree(self.folder, ignore_errors=True)


# --------------------------------------------------------------------------- reports

CPU_AT_START = pytest.StashKey[tuple[float, float]]()


def _cpu_seconds() -> tuple[float, float]:
    """CPU this process used so far, and with its reaped children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = own.ru_utime + own.ru_stime
    return mine, mine + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[CPU_AT_START] = _cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """The test's CPU seconds on its last report: its process's own, and with the children it
    waited for (a child is counted when it is reaped: a shared deployment's servers land on the
    test that stops them)."""
    report = yield
    if call.when == "teardown" and CPU_AT_START in item.stash:
        (own_then, all_then), (own_now, all_now) = item.stash[CPU_AT_START], _cpu_seconds()
        report.user_properties.append(("cpu_seconds", round(all_now - all_then, 3)))
        report.user_properties.append(("own_cpu_seconds", round(own_now - own_then, 3)))
    return report



class Durations:
    """Collects every test phase's duration (on the controller, from every worker)."""

    def __init__(self, config):
        self.config = config
        self.phases: list[tuple[float, str, str]] = []
        self.cpu: dict[str, float] = {}
        self.own_cpu: dict[str, float] = {}
        self.groups: dict[str, str] = {}
        self.workers: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # busy seconds, last report at
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report):
        self.phases.append((report.duration, report.when, report.nodeid))
        properties = dict(report.user_properties)
        if properties.get("cpu_seconds") is not None:
            self.cpu[report.nodeid] = properties["cpu_seconds"]
            self.own_cpu[report.nodeid] = properties.get("own_cpu_seconds", 0.0)
        worker = self.workers[getattr(getattr(report, "node", None), "gateway", None) and report.node.gateway.id or "main"]
        worker[0] += report.duration
        worker[1] = time.monotonic() - self.started

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):  # without xdist: this process collected
        for item in items:
            self.groups[item.nodeid] = item.stash.get(GROUP, "")

    def pytest_sessionfinish(self, session):
        if not self.phases:
            return
        REPORTS.mkdir(parents=True, exist_ok=True)
        groups = self.groups or _worker_groups(self.config)
        per_test: dict[str, float] = defaultdict(float)
        per_group: dict[str, float] = defaultdict(float)
        cpu_group: dict[str, float] = defaultdict(float)
        own_group: dict[str, float] = defaultdict(float)

        def group_of(nodeid: str) -> str:
            return groups.get(nodeid) or nodeid.split("::", 1)[0]

        for duration, _, nodeid in self.phases:
            per_test[nodeid] += duration
            per_group[group_of(nodeid)] += duration
        for nodeid, cpu in self.cpu.items():
            cpu_group[group_of(nodeid)] += cpu
            own_group[group_of(nodeid)] += self.own_cpu.get(nodeid, 0.0)
        wall = time.monotonic() - self.started
        lines = [
            f"wall time {wall:.1f} s; {len(per_test)} tests, {sum(per_test.values()):.1f} s of test time "
            f"(setup + call + teardown), {sum(self.cpu.values()):.1f} CPU seconds "
            f"({sum(self.own_cpu.values()):.1f} in the workers themselves); workers: {os.environ.get('PYTEST_XDIST_WORKER_COUNT') or self.config.getoption('numprocesses', None) or 1}",
            *(f"{name}: {busy:.1f} s in tests, its last one ended at {last:.1f} s" for name, (busy, last) in sorted(self.workers.items())),
            "",
            "groups (one worker each), by total seconds; CPU seconds: the worker's own, and with the children it waited for:",
            *(
                f"{seconds:8.2f}  {own_group[name]:8.2f}  {cpu_group[name]:8.2f}  {name}"
                for name, seconds in sorted(per_group.items(), key=lambda kv: -kv[1])
            ),
            "",
            "tests by the worker's own CPU seconds (the top 40):",
            *(f"{cpu:8.2f}  {nodeid}" for nodeid, cpu in sorted(self.own_cpu.items(), key=lambda kv: -kv[1])[:40]),
            "",
            "test phases, by duration:",
            *(f"{d:8.2f}  {when:<8} {nodeid}" for d, when, nodeid in sorted(self.phases, reverse=True) if d >= 0.005),
        ]
        (REPORTS / "durations.txt").write_text("\n".join(lines) + "\n")
        previous = _last_durations()
        (REPORTS / "durations.json").write_text(json.dumps({**previous, **per_test}, indent=0, sort_keys=True))

    def pytest_terminal_summary(self, terminalreporter):
        if self.phases:
            terminalreporter.write_line(f"durations report: {REPORTS / 'durations.txt'}")


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller writes the reports
        return
    config.pluginmanager.register(Durations(config), "neta-durations")
    if config.getoption("dist", "no") != "no":  # the workers share this run's database templates
        os.environ["TESTS_SUPPORT_RUN"], os.environ["TESTS_SUPPORT_RUN_OWNER"] = databases.RUN, str(os.getpid())
    if config.getoption("dist", "no") == "loadgroup":
        config.pluginmanager.register(XdistGroups(), "neta-xdist-groups")
