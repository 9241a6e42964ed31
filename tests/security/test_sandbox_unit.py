"""The sandbox module on its own (no cluster): isolation as the tenant code sees it, processes
that die with their task, validated batch frames, and failing closed."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from compiler.errors import ModelError
from compiler.sandbox import (
    SandboxLimits,
    SandboxUnavailable,
    options,
    probe,
    run_task,
    stream_batches,
)
from compiler.sandbox.seccomp import DENIED, build_filter, syscall_numbers
from sam_domain.sandbox import SandboxOptions
from tests.compiler.conftest import file_spec, make_spec
from tests.security.hostile import assert_contained, attack_source, parse_report

ROOT = os.geteuid() == 0
FAST = SandboxLimits(cpu_seconds=30, memory_bytes=2 * 1024**3, wall_seconds=60.0)
# A trace imports torch in the sandbox: 40 s of wall time on two cores shared by eight sessions.
TRACE = SandboxLimits(cpu_seconds=120, memory_bytes=2 * 1024**3, wall_seconds=180.0)


def marker_processes(marker: str) -> list[int]:
    """Host pids whose command line carries `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path("/proc", entry, "cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def first_batch_error(source: str, **kwargs: object) -> ModelError:
    batches = stream_batches(file_spec(), {"data.py": source}, 0, None, FAST, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ModelError) as info:
        next(batches)
    batches.close()
    return info.value


def test_probe_reports_a_complete_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    if not ROOT:  # a plain user's run: sandboxes share its uid only where the operator allows it
        monkeypatch.setattr(options, "_current", SandboxOptions(allow_shared_uid=True))
    found = probe()
    assert found["ok"], found
    assert {"ipc", "mnt", "net", "pid", "user", "uts"} <= set(found["fresh_namespaces"])
    assert found["uid"] == ("pool" if ROOT else "shared with the worker")


def test_every_hostile_attempt_fails_and_every_process_dies(tmp_path: Path) -> None:
    secret = tmp_path / "admin.token"
    secret.write_text("sam-secret-" + uuid.uuid4().hex)
    (tmp_path / "checkpoints").mkdir()
    marker = "sam-attack-" + uuid.uuid4().hex
    source = attack_source(str(tmp_path), [os.getpid(), 1], [6379, 5432], marker, syscall_numbers())
    source += "\ndef make_batch(step, batch_size):\n    raise RuntimeError(run_attacks())\n"
    error = first_batch_error(source)
    report = parse_report(error.message)
    assert_contained(report, pool_uid=ROOT)
    assert secret.read_text() not in error.message
    assert report["daemon"] == "GOT 'spawned'"
    assert report["forks"].startswith("GOT ")
    assert marker_processes(marker) == []  # the setsid daemon and the 30 children died too


def test_process_count_is_limited() -> None:
    marker = "sam-forks-" + uuid.uuid4().hex
    source = attack_source("/nonexistent", [], [], marker, syscall_numbers(), forks=500)
    source += "\ndef make_batch(step, batch_size):\n    raise RuntimeError(run_attacks())\n"
    report = parse_report(first_batch_error(source).message)
    assert int(report["forks"][4:]) < FAST.processes
    assert marker_processes(marker) == []


def test_seccomp_filter_denies_each_listed_call_on_both_architectures() -> None:
    for machine in ("x86_64", "aarch64"):
        numbers = syscall_numbers(machine)
        assert {"setns", "unshare", "mount", "ptrace", "bpf", "userfaultfd"} <= set(DENIED)
        assert all(name in numbers for name in DENIED if name not in ("iopl", "ioperm"))
        program = build_filter(machine)
        assert len(program) % 8 == 0 and len(program) // 8 < 256


HEADER_THEN_SILENCE = """import sys, time
def make_batch(step, batch_size):
    out = sys.stdout.buffer
    header = b'{"dtype": "<f4", "shape": [4, 8]}'
    out.write(len(header).to_bytes(4, "little") + header)
    out.flush()
    time.sleep(300)
"""

HUGE_HEADER = """import sys, time
def make_batch(step, batch_size):
    out = sys.stdout.buffer
    header = b'{"dtype": "<f4", "shape": [4, 67108864]}'
    out.write(len(header).to_bytes(4, "little") + header)
    out.flush()
    time.sleep(300)
"""


def test_a_header_then_silence_ends_at_stop_and_at_the_read_timeout() -> None:
    stop_at = time.monotonic() + 3.0
    batches = stream_batches(
        file_spec(),
        {"data.py": HEADER_THEN_SILENCE},
        0,
        None,
        FAST,
        should_stop=lambda: time.monotonic() > stop_at,
    )
    assert list(batches) == []  # the stream ended (StopIteration) once should_stop said so
    assert time.monotonic() - stop_at < 3.0
    short = SandboxLimits(cpu_seconds=30, memory_bytes=2 * 1024**3, wall_seconds=4.0)
    silent = stream_batches(file_spec(), {"data.py": HEADER_THEN_SILENCE}, 0, None, short)
    with pytest.raises(ModelError, match="produced no batch within 4 s"):
        next(silent)


def test_a_huge_or_misshapen_frame_is_refused_before_it_is_read() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    error = first_batch_error(HUGE_HEADER)
    assert "would take 1073741824 bytes" in error.message
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB
    wrong = "import numpy as np\ndef make_batch(step, batch_size):\n"
    wrong += "    return np.zeros((batch_size + 1, 3)), np.zeros(batch_size + 1)\n"
    assert "batch size 4" in first_batch_error(wrong).message


def test_out_of_range_labels_are_refused() -> None:
    labels = "import numpy as np\ndef make_batch(step, batch_size):\n"
    labels += "    return np.zeros((batch_size, 3)), np.full(batch_size, 7)\n"
    spec = file_spec(task="classification", num_classes=5, input_shape=[3])
    batches = stream_batches(spec, {"data.py": labels}, 0, None, FAST)
    with pytest.raises(ModelError, match=r"outside \[0, 5\)"):
        next(batches)
    batches.close()


def test_a_missing_bwrap_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "_current", SandboxOptions(bwrap="/nonexistent/bwrap"))
    with pytest.raises(SandboxUnavailable) as info:
        run_task("empty", {}, {}, FAST)
    assert info.value.kind == "internal"
    assert "bubblewrap not found at /nonexistent/bwrap" in info.value.message
    found = probe()
    assert not found["ok"] and "bubblewrap not found" in found["missing"]


PROBE = "from compiler.sandbox import probe; import json; print(json.dumps(probe()))"


@pytest.mark.skipif(not ROOT, reason="drops root's capabilities")
def test_without_capabilities_or_as_an_unprivileged_user_it_fails_closed() -> None:
    import json

    runs = {
        "no caps": ["setpriv", "--inh-caps=-all", "--bounding-set=-all"],
        "nobody": ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
    }
    for name, prefix in runs.items():
        done = subprocess.run(
            [*prefix, sys.executable, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parents[2],
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
        assert not found["ok"], (name, found)
        assert "tenant code refused" in found["missing"], (name, found)


def test_an_empty_task_starts_quickly() -> None:
    run_task("empty", {}, {}, FAST)
    start = time.perf_counter()
    run_task("empty", {}, {}, FAST)
    assert time.perf_counter() - start < 5.0  # 100 ms on an idle machine (benchmarks/sandbox.py)


def test_a_cached_compile_never_starts_a_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from compiler import compile_job
    from compiler.sandbox import launcher

    spec = make_spec("mlp")
    first = compile_job(spec, {}, region=(8, 8), cache_dir=tmp_path)
    assert first.summary["sandboxed"] and not first.cache_hit

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached compile started a sandbox")

    monkeypatch.setattr(launcher, "start", refuse)
    again = compile_job(spec, {}, region=(8, 8), cache_dir=tmp_path)
    assert again.cache_hit and again.artifact_dir == first.artifact_dir


FORGED = {
    "link": (
        "import os\nos.symlink('/etc/hostname', '/job/out/result.json')\nos._exit(0)\n",
        "unreadable result.json",
    ),
    "extra_tensor": (
        "import numpy\nfrom torch import nn\n_save = numpy.savez\n"
        "numpy.savez = lambda f, **kw: _save(f, evil=numpy.zeros(3), **kw)\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(784, 10)\n    def forward(self, x):\n"
        "        return self.fc(x)\n",
        "undeclared tensor 'evil'",
    ),
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_forged_trace_outputs_are_refused(case: str) -> None:
    from compiler.sandbox import run_trace
    from tests.compiler.conftest import user_model_spec

    source, expected = FORGED[case]
    with pytest.raises(ModelError, match=expected):
        run_trace(user_model_spec(), {"model.py": source}, TRACE)


def test_a_prestarted_sandbox_serves_exactly_one_trace_with_the_jobs_files() -> None:
    from compiler.sandbox import launcher, run_trace, warm
    from tests.compiler.conftest import user_model_spec
    from tests.compiler.test_frontend_equivalence import USER_MODEL

    warm.warm_sandbox()
    deadline = time.monotonic() + 60
    while warm._slot is None and time.monotonic() < deadline:
        time.sleep(0.1)
    slot = warm._slot
    assert slot is not None
    time.sleep(2)
    assert slot.running.proc.poll() is None  # it waits (its starting thread lives on)
    spec = user_model_spec(model={"kwargs": {"hidden": 8}})
    starts = []
    original = launcher.start
    launcher.start = lambda *a, **k: starts.append(1) or original(*a, **k)  # type: ignore[assignment,func-returns-value]
    try:
        graph, tensors, _ = run_trace(spec, {"model.py": USER_MODEL})
    finally:
        launcher.start = original  # type: ignore[assignment]
    assert len(starts) <= 1  # at most the refill: the trace itself used the waiting sandbox
    assert slot.running.proc.poll() is not None  # it ran this trace and was killed
    assert not slot.scratch.exists()
    assert any(i["role"] == "param" for i in graph["inputs"]) and tensors
    assert warm._slot is not slot  # the next trace gets a fresh one


def test_tenant_code_cannot_pass_its_failure_off_as_a_broken_sandbox() -> None:
    fake = "import os, sys\nsys.stderr.write('bwrap: setting up uid map: denied\\n')\n"
    fake += "sys.stderr.flush()\nos._exit(1)\n"
    error = first_batch_error(fake)
    assert type(error) is ModelError and error.kind == "model_error"
    assert "bwrap: setting up uid map" in error.message


FLOOD = """import os
def make_batch(step, batch_size):
    for i in range(1_000_000):
        folder = f"/job/out/d{i % 7}"  # subdirectories count too
        os.makedirs(folder, exist_ok=True)
        open(f"{folder}/f{i}", "w").close()
    raise RuntimeError("the flood of files was not stopped")
"""
BIG_OUTPUT = """import os
def make_batch(step, batch_size):
    for i in range(3):
        with open(f"/job/out/big{i}", "wb") as handle:
            handle.write(os.urandom(4 * 1024 * 1024))
    import time
    time.sleep(300)
"""


def test_a_flood_of_output_files_fails_the_task_early_and_the_worker_goes_on() -> None:
    started = time.monotonic()
    error = first_batch_error(FLOOD)
    assert "more than 64 files in its output directory" in error.message, error.message
    assert error.details["limit"] == "output"
    # stopped within moments: a million files would take minutes
    assert time.monotonic() - started < 30
    assert run_task("empty", {}, {}, FAST)["ok"]  # the same worker process starts the next task


def test_output_bytes_are_capped_not_only_each_files_size() -> None:
    limits = SandboxLimits(
        cpu_seconds=30, memory_bytes=2 * 1024**3, wall_seconds=60.0, output_bytes=8 * 1024**2
    )
    batches = stream_batches(file_spec(), {"data.py": BIG_OUTPUT}, 0, None, limits)
    started = time.monotonic()
    with pytest.raises(ModelError) as info:
        next(batches)
    batches.close()
    assert "over its cap of 8388608 bytes" in info.value.message, info.value.message
    assert time.monotonic() - started < 30  # killed at once, not after its 300 s sleep


SLEEPING_WORKER = """import json, sys
from compiler.sandbox import SandboxLimits, stream_batches
from compiler.sandbox.options import configure
from sam_domain.sandbox import SandboxOptions
configure(SandboxOptions(allow_shared_uid=True))  # the non-root worker's only way to run a task
spec, marker = json.loads(sys.argv[1]), sys.argv[2]
source = f'''import os, sys, time
def make_batch(step, batch_size):
    for _ in range(3):
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", {marker!r}])
    time.sleep(300)
'''
limits = SandboxLimits(cpu_seconds=600, wall_seconds=600.0)
next(stream_batches(spec, {"data.py": source}, 0, None, limits))
"""


def _descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every process below `pid`."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), fields[19]))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child[0])
    return found


def _alive(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    alive = set()
    for pid, started in processes:
        try:
            fields = Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == started and fields[0] != "Z":
            alive.add((pid, started))
    return alive


@pytest.mark.skipif(not ROOT, reason="runs the worker as root and as uid 1000 in a user namespace")
@pytest.mark.parametrize("who", ["root", "non-root"])
def test_a_sigkilled_worker_leaves_no_sandbox_process(who: str) -> None:
    """The worker dies mid-task (OOM killer, `kill -9`): bwrap, the sandbox's init, the task and
    what it forked die with it. The non-root worker is uid 1000 in a user namespace (what the
    Dockerfile's USER sam gets: no pool uid, so sandbox.allow_shared_uid), since this machine's
    Python is under a 0700 /root."""
    import json

    marker = "sam-orphan-" + uuid.uuid4().hex
    prefix = ["unshare", "--map-user=1000", "--map-group=1000"] if who == "non-root" else []
    worker = subprocess.Popen(
        [*prefix, sys.executable, "-c", SLEEPING_WORKER, json.dumps(file_spec()), marker],
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + 120
        while len(marker_processes(marker)) < 4 and time.monotonic() < deadline:
            assert worker.poll() is None, "the worker exited before its task started"
            time.sleep(0.2)
        assert len(marker_processes(marker)) == 4  # the worker (its argv) and the three forks
        sandbox = _descendants(worker.pid)
        assert len(sandbox) >= 6  # bwrap, its init, the task, its three forks
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + 10
    while _alive(sandbox) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(sandbox), _alive(sandbox)
    assert marker_processes(marker) == []


def test_sandboxes_are_forked_by_the_spawner_helper_and_die_with_it() -> None:
    """The worker does not fork itself to start bwrap (a fork of a worker with torch loaded was
    the largest cost of a start): its spawner helper does, and a helper that dies (as it does
    with the worker) takes the running sandbox and everything the task started with it."""
    import signal

    from compiler.sandbox import launcher, spawner

    marker = "sam-spawned-" + uuid.uuid4().hex
    source = f"""import os, sys, time
def make_batch(step, batch_size):
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", {marker!r}])
    time.sleep(300)
"""
    limits = SandboxLimits(cpu_seconds=600, wall_seconds=600.0)
    batches = stream_batches(file_spec(), {"data.py": source}, 0, None, limits)
    started: list[launcher.Running] = []
    original = launcher.start
    launcher.start = lambda *a, **k: started.append(original(*a, **k)) or started[-1]  # type: ignore[assignment,func-returns-value]
    ended: list[BaseException] = []

    def first_batch() -> None:
        try:
            next(batches)
        except ModelError as exc:  # its sandbox is killed below: the stream ends as a kill
            ended.append(exc)

    try:
        threading.Thread(target=first_batch, daemon=True).start()
        deadline = time.monotonic() + 120
        while not marker_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        launcher.start = original  # type: ignore[assignment]
    assert marker_processes(marker), "the task never started"
    proc = started[0].proc
    assert isinstance(proc, spawner.Spawned)
    helper = spawner._helper
    assert helper is not None and helper.proc.pid != os.getpid()
    parent = int(Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert parent == helper.proc.pid  # bwrap is the helper's child, not the worker's
    os.kill(helper.proc.pid, signal.SIGKILL)
    helper.proc.wait()
    deadline = time.monotonic() + 10
    while marker_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker_processes(marker) == []
    assert proc.wait(10) == -signal.SIGKILL  # the helper's death reads as a kill
    # The next sandbox gets a new helper.
    assert run_task("empty", {}, {}, FAST)["ok"]
    assert spawner._helper is not None and spawner._helper.proc.pid != helper.proc.pid
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ended and "killed" in str(ended[0])
