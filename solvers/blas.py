# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a solve with single-threaded BLAS/LAPACK.

Our linear systems are tiny (6..100 unknowns); a multi-threaded OpenBLAS wakes threads for each of them,
which costs more than the work and, on a busy machine, up to milliseconds per call (measured: a 36x36
solve took 6 ms instead of 17 us with the other core loaded). threadpoolctl (shipped with the extension)
limits the threads for the duration of a solve only; without it, nothing changes.
"""

import contextlib

_controller = None


def single_thread_blas():
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        except Exception:  # not installed, or no BLAS it knows: run as is
            _controller = False
    if not _controller:
        return contextlib.nullcontext()
    return _controller.limit(limits=1, user_api="blas")
