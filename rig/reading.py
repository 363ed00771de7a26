# SPDX-License-Identifier: GPL-3.0-or-later
"""What a job reads of a rig's structure once: within ``one_job()``, ``remembered(key, read)`` reads a thing (an
armature's feet, the bones its constraints follow) the first time it is asked for and hands the same back after,
as a job does not change the rig's structure while it runs (a retarget reads the feet to map, scale and plant them;
a Solve reads the controls to free and to judge them). Outside a job every call reads again: the user may have
changed the rig between two."""

import functools
from contextlib import contextmanager

_JOBS = []  # what each job in progress has read, innermost last: {key: value}


@contextmanager
def one_job():
    """A job: what is remembered within it is read once (nested jobs share the outermost's)."""
    _JOBS.append(_JOBS[-1] if _JOBS else {})
    try:
        yield
    finally:
        _JOBS.pop()


def remembered(key, read):
    """``read()``, once per job for ``key`` (hashable; name the armature in it, by its ``as_pointer()``)."""
    if not _JOBS:
        return read()
    known = _JOBS[-1]
    if key not in known:
        known[key] = read()
    return known[key]


def one_job_each_call(fn):
    """``fn`` with each call one job (one_job)."""
    @functools.wraps(fn)
    def job(*args, **kwargs):
        with one_job():
            return fn(*args, **kwargs)
    return job
