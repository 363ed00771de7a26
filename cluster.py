# SPDX-License-Identifier: GPL-3.0-or-later
"""``batch ... --scheduler ADDRESS``: the files of a batch job as tasks on a Dask cluster (``distributed``).

One task per file, each :func:`batchjob.run_file` on a worker: the job runs the way that worker's machine runs
jobs (``FULLBODY_IK_BLENDER`` set there: that Blender binary, else ``python -m fullbody_ik`` with the pip bpy),
reading and writing on storage both sides see, its result saved under a temporary name and renamed when
complete. A file's failure is its task's result, not an exception, so it never stops the others; a worker that
dies while running a task has the task run again on another (Dask's own rescheduling, up to the scheduler's
``distributed.scheduler.allowed-failures``, 3 by default), and the file is still written once. dask is imported
here only: the extension does not ship it."""

import signal
import threading
import time
import uuid

from .errors import Failure, UsageError

POLL = 10.0  # seconds between progress lines while nothing finishes
TICK = 0.2  # seconds the wait for a finished task lasts at most: a Ctrl-C is acted on within it


def _distributed():
    try:
        import cloudpickle
        import distributed
    except ImportError as e:
        raise UsageError(f"--scheduler needs Dask's distributed scheduler, which is not installed here ({e}): "
                         "pip install 'dask[distributed]' (in the Python that runs this command; the workers "
                         "need it too)") from None
    return distributed, cloudpickle


def _connect(distributed, address, log):
    """(client, the LocalCluster started for local:N or None)."""
    cluster = None
    if address.startswith("local:"):
        try:
            n = int(address[len("local:"):])
        except ValueError:
            n = 0
        if n < 1:
            raise UsageError(f"--scheduler local:N expects N, the workers to start, 1 or more (got {address!r})")
        log(f"starting a local Dask cluster of {n} worker processes")
        # a task's job is a child process of its own: one thread per worker
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        address = cluster.scheduler_address
    # distributed.comm.timeouts.connect (30 s) bounds the wait, except when something else answers there (the
    # dashboard's web server, 8787: the handshake then waits for ever), so a thread makes the deadline sure
    import dask

    seconds = dask.utils.parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    out = {}

    def connect():
        try:
            out["client"] = distributed.Client(address)
        except Exception as e:  # refused, unreachable, not a scheduler
            out["error"] = e

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(seconds + 5.0)
    if "client" not in out:
        if cluster is not None:
            cluster.close()
        why = out.get("error") or f"no answer as a scheduler within {seconds + 5.0:.0f} s (a scheduler's " \
            "address is its port, 8786 by default, not its dashboard's, 8787)"
        raise Failure(f"cannot reach the Dask scheduler at {address}: {why}")
    return out["client"], cluster


def run_on_dask(address, jobs, command, log):
    """Run ``jobs`` (batchjob specs) as tasks of the scheduler at ``address`` (or local:N); returns (their
    entries in the order given, a description of where they ran). Logs progress: each file as it finishes and,
    while none does, every POLL seconds how many are finished, failed, running and queued."""
    distributed, cloudpickle = _distributed()
    from . import batchjob

    cloudpickle.register_pickle_by_value(batchjob)  # workers need dask and a way to run jobs, not this package
    client, cluster = _connect(distributed, address, log)
    futures = []
    interrupted = []
    restore = _defer_interrupts(interrupted)
    try:
        workers = client.scheduler_info().get("workers", {})
        where = f"Dask scheduler {client.scheduler.address}, {len(workers)} workers"
        log(f"{command}: {len(jobs)} files to the {where}")
        if not workers:
            log("  (no worker has joined the scheduler yet: the tasks wait for one)")
        run = uuid.uuid4().hex[:8]
        futures = [client.submit(batchjob.run_file, job, pure=False, key=f"fullbody_ik-{command}-{run}-{i}")
                   for i, job in enumerate(jobs)]
        index = {f.key: i for i, f in enumerate(futures)}
        results = [None] * len(jobs)
        pending, failed, started = set(futures), 0, time.perf_counter()
        told = started
        while pending:
            if interrupted:  # (Ctrl-C, deferred to here: see _defer_interrupts)
                raise KeyboardInterrupt
            try:
                done, pending = distributed.wait(pending, timeout=TICK, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = ()
            for f in done:
                i = index[f.key]
                results[i] = entry = _entry(f, jobs[i], started)
                failed += not entry["ok"]
                log(f"  {'done' if entry['ok'] else 'FAILED'}: {jobs[i]['file']} "
                    f"({entry.get('worker', '?')}, {entry['seconds']:.1f} s)")
            if done or time.perf_counter() - told >= POLL:
                log("  " + _progress(client, futures, pending, failed))
                told = time.perf_counter()
        if interrupted:
            raise KeyboardInterrupt
        return results, where
    except KeyboardInterrupt:
        log("interrupted: the tasks not started are cancelled; a job already running ends on its own and "
            "saves its result")
        _quiet_after_interrupt()
        raise
    finally:
        restore()  # (a second Ctrl-C while the tasks are cancelled interrupts at once: the user insists)
        if futures:
            client.cancel([f for f in futures if not f.done()])
        client.close()
        if cluster is not None:
            cluster.close()


def _defer_interrupts(flag):
    """Ctrl-C while the batch talks to the cluster: recorded in ``flag`` (a list) and acted on by run_on_dask's
    loop, not raised wherever Python happens to be. Raised inside dask's own code (a Future being made, one of its
    callbacks), it left half-made objects whose clean-up printed tracebacks at exit (seen in CI under Python 3.13:
    "'Future' object has no attribute '_client'"). Returns what restores the previous handler (nothing to do off
    the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:  # (ignored, or a handler of the caller's: theirs stays)
        return lambda: None
    signal.signal(signal.SIGINT, lambda signum, frame: flag.append(signum))
    return lambda: signal.signal(signal.SIGINT, previous)


def _quiet_after_interrupt():
    """Ctrl-C can stop distributed.wait halfway through one of dask's own callbacks; when the client then closes,
    tornado logs that callback's error with a traceback (seen once, in a CI run on Python 3.13: "cannot access free variable
    'future'"), which says nothing to the user: dask's and tornado's logs are silenced for the shutdown."""
    import logging

    for name in ("tornado.application", "tornado.general", "asyncio", "distributed"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _entry(future, job, started):
    """The task's entry; a task the cluster could not run (its workers died each time, the scheduler went
    away) is the file's failure, with the cluster's reason."""
    if future.status == "finished":
        try:
            return future.result()
        except Exception as e:  # lost between finishing and being fetched
            error = e
    else:
        try:
            error = future.exception()
        except Exception as e:  # cancelled: the scheduler went away
            error = e
    return {"file": job["file"], "ok": False, "exit": 1, "seconds": time.perf_counter() - started,
            "error": f"the cluster could not run it: {type(error).__name__}: {error}"}


def _progress(client, futures, pending, failed):
    keys = {f.key for f in pending}
    try:  # a worker is handed a few tasks ahead; it runs as many at once as it has threads
        threads = {w: info["nthreads"] for w, info in client.scheduler_info()["workers"].items()}
        running = sum(min(sum(k in keys for k in tasks), threads.get(w, 0))
                      for w, tasks in client.processing().items())
    except Exception:  # the scheduler is gone: the futures say so when they finish
        running = 0
    finished = len(futures) - len(pending)
    return f"[{finished}/{len(futures)} finished, {failed} failed, {running} running, " \
           f"{len(pending) - running} queued]"
