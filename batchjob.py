# SPDX-License-Identifier: GPL-3.0-or-later
"""One file of a batch job, run where it is sent: a process of this machine's batch (``--jobs``) or a task on a
Dask worker (``--scheduler``). The standard library only: Dask ships this module to its workers by value, so a
worker needs dask and a way to run the job (the pip ``bpy`` module with this extension, or a Blender binary with
it installed), not this package on its path.

The job runs in a child process and saves its result under a temporary name beside the output, renamed to the
output once the child has finished: a job killed midway (its worker died) leaves no half-written output, and a
retry elsewhere writes the file once, complete. The child dies with the process that started it (Linux), so a
killed worker leaves no job running on."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

BLENDER = "FULLBODY_IK_BLENDER"  # a worker-side setting: the Blender binary to run jobs with (else: python -m)
EXIT_USAGE = 2
_PART = ".part-"


def program(blender=None):
    """How this machine runs a job: ("blender", binary) when a Blender binary is given or set in the environment
    (FULLBODY_IK_BLENDER), else ("python", this interpreter) for ``python -m fullbody_ik`` with the pip bpy."""
    blender = blender or os.environ.get(BLENDER)
    return ("blender", blender) if blender else ("python", sys.executable)


def command(spec, prog, output):
    """The child's command line: spec's command on its file with its options, the result saved as output."""
    kind, path = prog
    name, file = spec["command"], spec["file"]
    if kind == "blender":  # the extension runs as Blender's command; bake and footplant open the file first
        head = [path, "-b"] + ([file] if name != "retarget" else []) + ["-c", "fullbody_ik", name] + \
            ([file] if name == "retarget" else [])
    else:
        head = [path, "-m", "fullbody_ik", name, file]
    return head + list(spec["options"]) + ["--output", output, "--json"]


def part_name(output):
    """A temporary name beside output, distinct for each attempt."""
    folder, base = os.path.split(output)
    stem = os.path.splitext(base)[0]
    return os.path.join(folder, f".{stem}{_PART}{uuid.uuid4().hex[:12]}.blend")


def _stale_parts(output):
    """Temporary files of earlier attempts at output (a worker killed while its job saved)."""
    folder, base = os.path.split(output)
    prefix = f".{os.path.splitext(base)[0]}{_PART}"
    try:
        return [os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(prefix)]
    except OSError:
        return []


def _die_with_parent():  # in the child, before exec: SIGKILL when the process that started it dies (Linux)
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_file(spec):
    """Run one file's job; returns its entry: file, ok, exit, seconds, the job's JSON report when it ran (also
    when it missed its goals: exit 1, result kept), error (a failure's message), output, host. Never raises for
    the file's own failures."""
    file, output = spec["file"], spec["output"]
    start = time.perf_counter()
    entry = {"file": file, "ok": False, "exit": EXIT_USAGE, "seconds": 0.0, "host": socket.gethostname()}
    try:  # on a Dask worker: which one
        from distributed import get_worker

        entry["worker"] = get_worker().address
    except Exception:  # not on a worker (this machine's batch), or no dask here
        pass
    if not os.path.isfile(file):
        return dict(entry, error=f"no such file: {file}")
    try:
        os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    except OSError as e:
        return dict(entry, error=f"cannot write the output {output}: {e.strerror}")
    part = part_name(output)
    # Files run at once are the batch's parallelism: one thread each (--threads says otherwise).
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               FULLBODY_IK_THREADS=os.environ.get("FULLBODY_IK_THREADS", "1"))
    prog = tuple(spec["program"]) if spec.get("program") else program()
    try:
        proc = subprocess.run(command(spec, prog, part), env=env, capture_output=True, text=True,
                              preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    except OSError as e:  # the program itself cannot start (a wrong FULLBODY_IK_BLENDER)
        return dict(entry, error=f"cannot run {prog[1]}: {e.strerror}", seconds=time.perf_counter() - start)
    entry.update(ok=proc.returncode == 0, exit=proc.returncode, seconds=time.perf_counter() - start)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if lines:  # a job that ran: its report, also when it missed its goals (exit 1, result kept)
        entry.update(json.loads(lines[-1]))
        entry["ok"] = proc.returncode == 0 and entry.get("ok", True)
    if not entry["ok"] and "error" not in entry:
        errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
        entry["error"] = (errors[-1].split("error:", 1)[1].strip() if errors
                          else (proc.stderr.strip().splitlines() or ["(no message)"])[-1])
    try:
        if os.path.exists(part):
            if lines:  # complete: the job saved it and said so
                os.replace(part, output)
                entry["output"] = output
            else:
                os.remove(part)
    except OSError as e:
        entry.update(ok=False, error=f"cannot move the result to {output}: {e.strerror}")
    for stale in _stale_parts(output):  # an earlier attempt's, killed while saving
        if stale != part:
            try:
                os.remove(stale)
            except OSError:
                pass
    return entry
