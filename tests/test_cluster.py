# SPDX-License-Identifier: GPL-3.0-or-later
"""``batch ... --scheduler``: a Dask scheduler and two workers started here as real processes on the loopback
address, real .blend files, the command line as a user runs it; every process a test starts it stops."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

bpy = pytest.importorskip("bpy")
distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

import fullbody_ik  # noqa: E402
from test_bake import FRAMES, tip_error  # noqa: E402
from test_cli import run, save_scene  # noqa: E402

SHIM = """#!{python}
# Stands in for a Blender binary: `blender -b [FILE] -c fullbody_ik COMMAND ARGS` run as Blender's command
# handler would, by python -m fullbody_ik COMMAND [FILE] ARGS (the file opened first), its call logged.
import subprocess, sys
args = sys.argv[1:]
assert args[0] == "-b", args
c = args.index("-c")
files, command, rest = args[1:c], args[c + 2], args[c + 3:]
assert args[c + 1] == "fullbody_ik" and len(files) <= 1, args
with open({log!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
sys.exit(subprocess.call([sys.executable, "-m", "fullbody_ik", command, *files, *rest]))
"""


def _dask(kind, *args, log, env=None):
    """`dask scheduler ...` / `dask worker ...` as a process of its own (its own process group)."""
    exe = os.path.join(os.path.dirname(sys.executable), "dask")
    return subprocess.Popen([exe, kind, *map(str, args)], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)


def _stop(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def cluster(tmp_path):
    """(scheduler address, {worker address: its process}, the log of the Blender binary's calls, the address of
    the worker that has one) of a scheduler and two one-thread workers without nannies (a killed worker stays
    dead). The first worker's machine runs its jobs with a Blender binary (FULLBODY_IK_BLENDER, here a
    stand-in), the second with python -m."""
    procs, log = [], open(tmp_path / "dask.log", "w")
    shim, calls = tmp_path / "blender", tmp_path / "blender_calls.log"
    shim.write_text(SHIM.format(python=sys.executable, log=str(calls)))
    shim.chmod(0o755)
    info = tmp_path / "scheduler.json"
    try:
        procs.append(_dask("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                           "--scheduler-file", info, log=log))
        deadline = time.time() + 60
        while not info.exists() and time.time() < deadline:
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        for env in (dict(os.environ, FULLBODY_IK_BLENDER=str(shim)), None):
            procs.append(_dask("worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                               "--host", "127.0.0.1", "--local-directory", tmp_path / "dask-work", log=log,
                               env=env))
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
            pids = client.run(os.getpid)  # {worker address: pid}
        workers = {a: next(p for p in procs[1:] if p.pid == pid) for a, pid in pids.items()}
        blender = next(a for a, p in workers.items() if p is procs[1])  # the worker with FULLBODY_IK_BLENDER
        yield address, workers, calls, blender
    finally:
        for p in procs:
            _stop(p)
        log.close()
        assert all(p.poll() is not None for p in procs)


def _baked(path):
    """The worst tip error over the baked frames of a saved bake (its file opened as a user would)."""
    fullbody_ik.register()
    try:
        bpy.ops.wm.open_mainfile(filepath=str(path))
        obj, target = bpy.data.objects["Arm"], bpy.data.objects["Target"]
        assert obj.animation_data.action.name.endswith(" IK")
        return max(tip_error(obj, target, f) for f in range(*FRAMES))
    finally:
        fullbody_ik.unregister()


def _leftovers(folder):
    return sorted(f for f in os.listdir(folder) if f.startswith(".") or f.endswith(".blend1"))


def test_a_cluster_bakes_the_good_files_and_reports_the_broken_one(cluster, tmp_path):
    address, _, calls, blender = cluster
    good = [save_scene(tmp_path / f"good{i}.blend") for i in range(2)]
    bad = save_scene(tmp_path / "bad.blend", "target deleted")
    outdir = tmp_path / "baked"
    proc = run("batch", "bake", "--scheduler", address, good[0], bad, good[1], "--output-dir", outdir, "--json")
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert [r["ok"] for r in summary["files"]] == [True, False, True] and summary["failed"] == 1
    assert summary["files"][0]["file"] == good[0]
    assert "was deleted" in summary["files"][1]["error"]
    assert "FAILED" in proc.stderr and "2 of 3 files baked" in proc.stderr and "2 workers" in proc.stderr
    assert "[3/3 finished, 1 failed, 0 running, 0 queued]" in proc.stderr
    for r in summary["files"][::2]:
        assert r["report"]["summary"]["solved_frames"] == r["report"]["summary"]["frames"] > 0
    assert sorted(os.listdir(outdir)) == ["good0_baked.blend", "good1_baked.blend"]
    assert _baked(outdir / "good0_baked.blend") < 2e-4 and _baked(outdir / "good1_baked.blend") < 2e-4
    # each worker ran its files its own way: the first through its Blender binary, the second not
    logged = calls.read_text() if calls.exists() else ""
    for r, f in zip(summary["files"], (good[0], bad, good[1])):
        assert (f in logged) == (r["worker"] == blender), (r["worker"], logged)


def test_a_worker_killed_during_a_task_the_file_is_still_baked_once_completely(cluster, tmp_path):
    address, workers, _, _ = cluster
    scene = save_scene(tmp_path / "shot.blend")
    outdir = tmp_path / "baked"
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    batch = subprocess.Popen([sys.executable, "-m", "fullbody_ik", "batch", "bake", "--scheduler", address, scene,
                              "--output-dir", outdir, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    try:
        # the job's process, a child of the worker running the task: kill that worker while the job runs
        victim, job, deadline = None, None, time.time() + 120
        while victim is None and time.time() < deadline:
            for proc in workers.values():
                children = psutil.Process(proc.pid).children()
                if children:
                    victim, job = proc, children[0]
                    break
            time.sleep(0.05)
        assert victim is not None, "no worker started the job"
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        out, err = batch.communicate(timeout=300)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
    assert batch.returncode == 0, err
    psutil.wait_procs([job], timeout=10)
    assert not job.is_running(), "the killed worker's job ran on"
    summary = json.loads(out)
    (entry,) = summary["files"]
    survivor = next(a for a, p in workers.items() if p is not victim)
    assert entry["ok"] and entry["report"]["summary"]["solved_frames"] == entry["report"]["summary"]["frames"]
    assert entry["worker"] == survivor
    assert os.listdir(outdir) == ["shot_baked.blend"], _leftovers(outdir)  # once: no backup, no partial file
    assert _baked(outdir / "shot_baked.blend") < 2e-4


def test_the_scheduler_option_says_what_is_missing_or_wrong(tmp_path):
    scene = save_scene(tmp_path / "shot.blend")
    blocker = tmp_path / "no_dask"
    (blocker / "distributed").mkdir(parents=True)
    (blocker / "distributed" / "__init__.py").write_text("raise ImportError('No module named distributed')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker))
    proc = subprocess.run([sys.executable, "-m", "fullbody_ik", "batch", "bake", "--scheduler", "local:1", scene],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "pip install 'dask[distributed]'" in proc.stderr
    env = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="3s")
    proc = subprocess.run([sys.executable, "-m", "fullbody_ik", "batch", "bake", "--scheduler", "tcp://127.0.0.1:9",
                           scene], capture_output=True, text=True, env=env, timeout=120)  # nothing listens there
    assert proc.returncode == 1 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in proc.stderr
    with socket.socket() as mute:  # something listens but never answers (a dashboard's port given by mistake)
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        address = "tcp://127.0.0.1:%d" % mute.getsockname()[1]
        start = time.time()
        proc = subprocess.run([sys.executable, "-m", "fullbody_ik", "batch", "bake", "--scheduler", address, scene],
                              capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and "no answer as a scheduler" in proc.stderr, proc.stderr
    assert time.time() - start < 60
    proc = run("batch", "bake", "--scheduler", "local:zero", scene)
    assert proc.returncode == 2 and "local:N" in proc.stderr
    assert not (tmp_path / "shot_baked.blend").exists()


def test_a_local_cluster_for_a_quick_try(tmp_path):
    scene = save_scene(tmp_path / "shot.blend")
    proc = run("batch", "bake", "--scheduler", "local:1", scene, "--frames", "1-6", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "starting a local Dask cluster of 1 worker" in proc.stderr and "1 of 1 files baked" in proc.stderr
    assert json.loads(proc.stdout)["files"][0]["report"]["summary"]["solved_frames"] == 6
    assert sorted(os.listdir(tmp_path)) == ["shot.blend", "shot_baked.blend"]


def test_with_no_worker_the_tasks_wait_and_ctrl_c_cancels_them(tmp_path):
    scene = save_scene(tmp_path / "shot.blend")
    info, log = tmp_path / "scheduler.json", open(tmp_path / "dask.log", "w")
    scheduler = _dask("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file", info,
                      log=log)
    batch = None
    try:
        deadline = time.time() + 60
        while not info.exists() and time.time() < deadline:
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        # (SIGINT's default in the job: a shell's background job starts with it ignored, and so would the batch)
        batch = subprocess.Popen([sys.executable, "-m", "fullbody_ik", "batch", "bake", "--scheduler", address, scene],
                                 stderr=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        lines = []
        while not any("no worker has joined" in ln for ln in lines):
            lines.append(batch.stderr.readline())
            assert lines[-1], "".join(lines)
        batch.send_signal(signal.SIGINT)
        rest = batch.communicate(timeout=60)[1]
        assert batch.returncode == 130, rest
        assert "tasks not started are cancelled" in rest and "Traceback" not in rest
        assert sorted(os.listdir(tmp_path)) == ["dask.log", "scheduler.json", "shot.blend"]
    finally:
        if batch is not None and batch.poll() is None:
            batch.kill()
            batch.wait()
        _stop(scheduler)
        log.close()
