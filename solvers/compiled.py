# SPDX-License-Identifier: GPL-3.0-or-later
"""The compiled path (numba): the whole Levenberg-Marquardt solve in machine code, for the problems it covers.

numpy's per-call overhead, not arithmetic, is what a solve of a 7-joint arm spends its time on (about 0.25 ms
an iteration in ``lm``); compiling only FK and the Jacobian gains 2x at most, so the loop itself is compiled:
FK, residuals, Jacobian, the damped step within the limits, the projection, the shorter-step search and the
stopping rules of :func:`solvers.lm.run`, one formula each, the same law. The numpy path stays the reference
(tests require the same FK and Jacobians to 1e-9 and solutions as good) and the fallback: where numba is not
installed, where it is switched off (``FULLBODY_IK_NUMPY=1`` or :func:`set_enabled`), and for what this does
not cover yet, which :func:`kernel` says by returning None.

Covered: trees of revolute, continuous, prismatic and fixed joints (URDF robots; ``Tree.from_urdf``), Blender
bones with Blender's IK settings (unlimited balls, swing and twist or elbows with their limits and locks, one-axis
hinges, stiffness, IK stretch) and free roots, with Position, Orientation, Pose, LookAt, Distance, Displacement
and JointValue goals. Not yet: JointFunction goals (a user's Python function): those problems run on numpy.

The compile happens once per machine (``cache=True``; the cache in ``NUMBA_CACHE_DIR`` (in Blender: the
extension's user folder), else the user's cache folder, else a temporary one); :func:`warm` runs it on a small
problem. In Blender's UI :func:`warm_in_background` runs it in another process while the numpy path serves, so
the UI never waits for it; the extension ships numba and llvmlite for each platform and Python that has them.
The kernels are compiled for the generic CPU of the architecture (portable), and the zip built on a platform
carries them compiled (``numba_cache/``, tools/build.py): installed there, a first use loads them
(:func:`adopt_shipped_cache`) and nothing is compiled.
"""

import functools
import hashlib
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from itertools import chain
from threading import get_ident
from types import FunctionType, SimpleNamespace

import numpy as np

from .joints import BallModel, FreeModel, ScalarModel, StretchModel, SwingTwistModel
from .objectives import Displacement, Distance, JointValue, LookAt, Orientation, Pose, Position
from .problem import Result
from .rotations import jl_inverse_coefficient

_COVERED_MODELS = (ScalarModel, BallModel, SwingTwistModel, FreeModel, StretchModel)
_COVERED_GOALS = frozenset((Position, Orientation, Pose, LookAt, Displacement, JointValue, Distance))

_enabled = not os.environ.get("FULLBODY_IK_NUMPY")
# What a cold compile's helper process may compile meanwhile (warm: _start_helper; _helper_plan), each with all it
# calls, for the types this compile calls it with (_helper_signatures): evaluate, the LM step within the limits, a
# restart's new start; the compile here waits for each where it needs it (njit's typing hook: _await_helper).
HELPER_PART = ("evaluate", "_constrained_step", "_next_start")
_helping = bool(os.environ.get("FULLBODY_IK_HELPER_TOKEN"))  # this process is such a helper
try:
    import numba

    if not numba.config.CACHE_DIR:  # cache=True needs a writable folder (a read-only install has none)
        for base in (os.path.join(os.path.expanduser("~"), ".cache"), tempfile.gettempdir()):
            folder = os.path.join(base, "fullbody_ik", "numba")
            try:
                os.makedirs(folder, exist_ok=True)
                if os.access(folder, os.W_OK):
                    numba.config.CACHE_DIR = folder
                    break
            except OSError:
                continue
    if not os.environ.get("NUMBA_CPU_NAME"):
        # Code for any CPU of this architecture, not this one's own: the cache is then portable, so an extension
        # zip ships it compiled (tools/build.py; adopt_shipped_cache) and a first use loads it instead of
        # compiling (the core 25 s, everything 46 s on our test machine). Measured: solves 2-5 % slower than with
        # this CPU's own code (Table I arms, the CMU bake). Process-wide in numba: another add-on's kernels are
        # compiled alike (NUMBA_CPU_NAME chooses).
        numba.config.CPU_NAME, numba.config.CPU_FEATURES = "generic", ""

    from numba.core.types import unliteral

    def njit(leaf=False, entry=False, **options):
        """numba's njit, releasing the GIL (frames solved in threads run at once: tracking.Frames), and compiled
        once per argument type, not once more per constant passed (numba types a constant argument as its value:
        evaluate(..., True, ...) and evaluate(..., False, ...) were two compiles of evaluate and all it calls).

        ``leaf``: a function that makes no array (it writes into those it is given, returns none; scalars it may)
        compiled without numba's reference counting (its ``_nrt=False``): every view it takes (``W[i]``, ``T[3]``) was a
        counted reference, an atomic increment and decrement; without them FK costs 31 % less (kuka). Making
        an array there fails to compile (numba: NRT required), so the rule is checked by the compiler.

        ``entry``: called from Python (restarts_kernel, judge, project_packed, memetic). The others are called
        only from compiled code and compiled without the wrappers Python would call them through (CPython's and a
        C function's): those wrappers were some 6 s of the core's cold compile (35.8 -> 29.5 s). Tests call them
        through python_callable.

        ``inline="always"`` (numba's own option; fk_into, generators, _project_into, _step_into): compiled into each
        caller. A call passes every field of every array in its tuples (the tree's T holds 23 arrays, some 200
        words): those four, called in each LM iteration, cost 5-18 % of a Table I solve as calls. Inlined, they
        cost the core's cold compile 3-5 s in mean (docs/performance.md)."""
        if leaf:
            options["_nrt"] = False
        if not entry:
            options.update(no_cpython_wrapper=True, no_cfunc_wrapper=True)

        def compile_(function):
            dispatcher = numba.njit(function, **{"nogil": True, **options})
            resolve = dispatcher.get_call_template
            name = function.__name__
            helped = name in HELPER_PART

            def get_call_template(args, kws):  # (how a call from compiled code is typed)
                args = tuple(map(unliteral, args))
                if helped and not dispatcher.overloads:  # (a cold compile: warm's helper may compile it)
                    try:
                        _await_helper(name)
                    except Exception:  # (the helper is help, never a failure: compiled here)
                        pass
                template = resolve(args, {k: unliteral(v) for k, v in kws.items()})
                if helped and _helping:
                    _helped(name)
                return template

            dispatcher.get_call_template = get_call_template
            return dispatcher
        return compile_

    _twins = {}

    def python_callable(function):
        """A compiled function that is not an entry point (njit's ``entry``), callable from Python: a twin of it
        compiled with the wrappers (cached apart, under its own name), made once per process. For tests."""
        twin = _twins.get(function)
        if twin is None:
            f = function.py_func
            copy = FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
            copy.__qualname__ = f"{f.__qualname__}__from_python"
            options = {k: v for k, v in function.targetoptions.items() if k not in ("no_cpython_wrapper",
                                                                                  "no_cfunc_wrapper", "nopython")}
            twin = _twins[function] = numba.njit(copy, cache=True, **options)
        return twin
except Exception:  # not installed, or its llvmlite cannot load here: the numpy path serves
    numba = None

    def njit(leaf=False, entry=False, **options):
        return lambda function: function

    def python_callable(function):
        return function


BACKGROUND_LIMIT = 900.0  # seconds: a background compile still running then is stopped (numpy serves)
_background = None  # the compile running in another process (warm_in_background): (process, start time, log)
_background_error = ""
_memetic_error = ""  # the background compile failed after the core was ready: the memetic solver runs on numpy


def available():
    """True when the compiled path can run (numba importable), is not switched off, and is not being compiled in
    the background (meanwhile the numpy path serves)."""
    return numba is not None and _enabled and (_background is None or not compiling())  # (a solve asks: no call
    # when nothing compiles in the background)


def compiling():
    """Whether warm_in_background's compile of the core (every solver but the memetic one) is still running (looked
    at now)."""
    background = _background  # (threads solving frames ask too: read it once)
    if not _background_running() or background is None:
        return False
    if not background[3]:  # the core's stamp, looked for until it is there
        background[3] = os.path.exists(_warm_stamp())
    return not background[3]


def memetic_compiling():
    """Whether the memetic solver's compiled part is not ready: warm_in_background's compile is still running (it
    compiles that part last), or it failed there. Meanwhile that solver runs on numpy."""
    return _background_running() or bool(_memetic_error)


def _background_running():
    global _background, _background_error
    background = _background
    if background is None:
        return False
    global _memetic_error
    process, started, log, core_ready = background
    if process.poll() is None:
        if time.monotonic() - started < BACKGROUND_LIMIT:
            return True
        process.kill()  # hung: given up, numpy serves this session
        process.wait()
    _background = None
    if process.returncode != 0:  # numpy serves this session; the reason is on the console and in the status
        tail = _tail(log)
        if core_ready or os.path.exists(_warm_stamp()):  # the core compiled: only the memetic solver's part failed
            _memetic_error = f"exit code {process.returncode}"
            print(f"Full-Body IK: the memetic solver's compiled part could not be compiled ({_memetic_error}); it "
                  f"runs on numpy.\n{tail}")
            return False
        _background_error = f"exit code {process.returncode}"
        set_enabled(False)
        print(f"Full-Body IK: the compiled core could not be compiled ({_background_error}); the numpy path serves."
              f"\n{tail}")
    return False


def status():
    """What serves the solves, in a few words (the UI shows it)."""
    if numba is None:
        return "numpy (numba is not installed here)"
    if compiling():
        return f"numpy while the compiled core compiles ({time.monotonic() - _background[1]:.0f} s; once per machine)"
    if _background_error:
        return f"numpy (the compiled core failed to compile: {_background_error})"
    if not _enabled:
        return "numpy (the compiled core is switched off)"
    if _memetic_error:
        return f"compiled; the memetic solver on numpy (its part failed to compile: {_memetic_error})"
    if memetic_compiling():
        return (f"compiled; the memetic solver on numpy while its part compiles ({time.monotonic() - _background[1]:.0f}"
                " s; once per machine)")
    return "compiled"


def _warm_stamp(part="core"):
    """The file warm() leaves in the cache folder when it has compiled a part ("core", then "memetic"): this source
    (its content, as numba's cache keys it), numba, Python and CPU compiled there already."""
    return os.path.join(numba.config.CACHE_DIR, f"warm-{part}-{cache_tag()}-{_source_hash()}.ok")


def cache_tag():
    """What a compiled cache is good for besides the source: numba's version, Python's, the CPU's name (generic:
    any of this architecture)."""
    return f"{numba.__version__}-py{sys.version_info[0]}{sys.version_info[1]}-{numba.config.CPU_NAME or 'host'}"


@functools.lru_cache(maxsize=None)
def _source_hash():
    """This source's content (and rotations', compiled here too), once a process: the status line asks often."""
    from . import rotations

    digest = hashlib.sha256()
    for path in (__file__, rotations.__file__):
        with open(path, "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()[:16]


SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "numba_cache")
_adopted = False  # this process copied the shipped kernels into the cache folder


def adopt_shipped_cache(shipped=SHIPPED):
    """Copy the kernels compiled when the extension was built (``shipped``/cache_tag(): tools/build.py, for this
    numba, Python and CPU name; its SOURCE file names the source they were compiled from) into the cache folder,
    when it holds none of this source yet: the first solve (or warm) then loads them, about a second, instead of
    compiling. The warm stamps are not copied: warm() writes them once the kernels have loaded here (where numba
    cannot use them, a different target, it compiles as without them, and says so). Each file is written under a
    temporary name and renamed (processes starting at once never read half a file). Returns whether it did."""
    global _adopted
    folder = os.path.join(shipped, cache_tag())
    if numba is None or not os.path.isdir(folder) or os.path.exists(_warm_stamp("core")):
        return False
    try:
        with open(os.path.join(folder, "SOURCE")) as fh:
            if fh.read().strip() != _source_hash():
                return False  # built from another source
    except OSError:
        return False
    from numba.core.caching import _CacheLocator

    target = os.path.join(numba.config.CACHE_DIR, _CacheLocator.get_suitable_cache_subpath(__file__))
    try:
        os.makedirs(target, exist_ok=True)
        _copy_files(folder, [name for name in os.listdir(folder) if name.endswith((".nbi", ".nbc"))], target)
    except OSError as e:  # a folder that cannot be written, a full disk: compiled on first use instead
        print(f"Full-Body IK: the shipped compiled core could not be copied to {target} ({e})")
        return False
    _adopted = True
    return True


def _copy_files(source, names, target):
    """Copy the files ``names`` from the folder ``source`` into ``target``, in that order, each under a temporary
    name and then renamed (a process starting at once never reads half a file); an OSError stops it, no part left."""
    for name in names:
        partial = os.path.join(target, f".{name}.{os.getpid()}.part")
        try:
            shutil.copyfile(os.path.join(source, name), partial)
            os.replace(partial, os.path.join(target, name))
        except OSError:
            if os.path.exists(partial):
                os.remove(partial)
            raise


def _tail(log):
    """The last 2000 characters of the file ``log`` ("" when it cannot be read)."""
    try:
        with open(log) as fh:
            return fh.read()[-2000:]
    except OSError:
        return ""


def warm_in_background():
    """Compile the kernels in another process (into the on-disk cache) while this one goes on with the numpy
    path, when the cache does not hold them yet: Blender's UI never waits for a compile. Returns whether a
    compile was started; available() turns true when it has finished (this process then loads the cache)."""
    global _background
    if not available() or _background is not None or _memetic_error or os.path.exists(_warm_stamp("memetic")):
        return False  # (a compile still running for its memetic part, or failed there this session: not again)
    log = os.path.join(numba.config.CACHE_DIR, "warm.log")
    process = _python_process("warm()", log)
    if process is None:  # no interpreter to run, no folder to write: compiled on first use instead
        print("Full-Body IK: the compiled core cannot compile in the background; it will on first use.")
        return False
    _background = [process, time.monotonic(), log, False]  # False: the core's stamp not seen yet
    return True


def _python_process(call, log, env=()):
    """Another Python process running ``call`` (code, e.g. "warm()") in this module, its output into the file ``log``,
    numba's cache folder this one's (unless ``env`` says another); None when it cannot start (the reason printed)."""
    import subprocess

    # This module by its own name (an extension's is bl_ext.<repository>.<id>...): its parent packages made
    # importable in the other process from their paths here (they may be namespaces Blender set up).
    parents = __name__.split(".")[:-1]
    packages = []
    for k in range(1, len(parents)):
        module = sys.modules.get(".".join(parents[:k]))
        namespace = module is not None and getattr(module, "__file__", None) is None
        if namespace and getattr(module, "__path__", None) is not None:
            packages.append((module.__name__, list(module.__path__)))
    code = ("import importlib, sys, types\n"
            f"for name, path in {packages!r}:\n"
            "    m = types.ModuleType(name); m.__path__ = path; sys.modules[name] = m\n"
            f"importlib.import_module({__name__!r}).{call}\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": numba.config.CACHE_DIR,
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **dict(env)}
    try:
        with open(log, "w") as fh:
            return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except (OSError, ValueError) as e:
        print(f"Full-Body IK: could not start a Python process ({e})")
        return None


def set_enabled(flag):
    """Switch the compiled path on or off for this process (off: every solve runs on numpy)."""
    global _enabled
    _enabled = bool(flag)


# The LM damping's multiplier mu (lm.run): W_N = mu (E_k + w_N) I. It starts at DAMPING_START, a tenth of paper
# 001's damping (mu = 1), is halved after each full step down to DAMPING_FLOOR (Marquardt's rule: the damping
# shrinks while the model serves) and raised by 1/t when a step of fraction t was usable. With mu held at 1 the
# six Table I arms took 15-30 iterations in median; halving from 1, 9-15; starting at 0.1, 7-13 (Table II's
# setups 12-21 % fewer in mean; paper 001's sweep and random targets: the same residuals on every case; starting
# at 0.01 measured the same as 0.1).
DAMPING_FLOOR = 0.01
DAMPING_START = 0.1
# When a search stalls (lm.run's ``stall``): the error of the goals not yet met fell by less than the fraction
# 1 - ratio over the last ``stall`` iterations. Alone (a tracking frame's search, with no restart to go to), 1 %.
# With restarts one search after another (search: solve's several starts, compiled), 20 % over two
# iterations: near a solution LM's error falls by far more than that per iteration, and a search that slows so is
# at a local minimum or on limits more often than not. Against 1 % over five iterations: Table I's arms ran 13-23 %
# fewer iterations in mean (franka 28.9 -> 22.8, baxter 26.5 -> 20.4 per solve, 1000 targets each), their median
# solve 4-16 % faster; Table II's setups 13-21 % fewer iterations; all solved as before. (numpy's batch of starts
# keeps 1 % over five: lm.run_multistart.)
STALL_RATIO = 0.99
RESTART_STALL, RESTART_STALL_RATIO = 2, 0.8
# Status codes of _lm (restarts_kernel's and lm_kernel's last search), and the messages they stand for.
MESSAGES = ("every objective within tolerance", "budget exhausted",
            "converged (no step decreases the error: local minimum or limits)", "stalled (local minimum or limits)",
            "converged (step or residual change below tolerance)")
# Link kinds: a scalar joint (URDF's, a one-axis bone), an unlimited bone (rotation vector), a bone with limits or
# locks (swing and twist, or Blender's elbow), a free root (translation, rotation vector).
_NONE, _REVOLUTE, _PRISMATIC, _BALL, _SWING, _FREE = 0, 1, 2, 3, 4, 5
# Goal kinds: a link's position, orientation or look direction (any of them); a displacement; a joint value;
# a least distance between two points (Distance).
_CARTESIAN, _DISPLACEMENT, _JOINT_VALUE, _DISTANCE = 0, 1, 2, 3
# A goal packed (Kernel): its scalars (kind, link, slot, rows, has position, has rotation, has look, sqrt weight,
# position tolerance, angle tolerance), then offset, position target, look axis (3 each), rotation target (9).
_GOAL_SCALARS = 10
_GOAL_FLOATS = _GOAL_SCALARS + 18


def _tree_arrays(tree):
    """The tree packed for the kernels, once per tree (its joints do not change; its origins may, and are read at
    each solve): (ti, tf, tb), one flat array per type, that _tree reads as (parent, kind, axis, var, cols, elbow,
    angle limits, limited, swing lo, swing hi, nearest, clip lower, clip upper, continuous, weights, ancestors,
    var_link, stretch_var, anchor, full-turn joints' range (n, 2; NaN for other variables), the random starts' lower
    bounds and spans (Tree.sample_lower, Tree.span)). Packed, a kernel call
    unboxes 4 arrays for the tree, not 20 (75 ns each)."""
    arrays = tree.__dict__.get("_compiled_arrays")
    if arrays is not None:
        return arrays
    L = len(tree.link_names)
    kind, axis, var = np.zeros(L, dtype=np.int64), np.zeros((L, 3)), np.full(L, -1, dtype=np.int64)
    cols, elbow = np.full((L, 3), -1, dtype=np.int64), np.full(L, -1, dtype=np.int64)
    angle_limits, limited = np.zeros((L, 3, 2)), np.zeros((L, 3), dtype=np.bool_)
    swing_lo, swing_hi = np.zeros((L, 2)), np.zeros((L, 2))
    continuous = np.zeros(tree.n, dtype=np.bool_)
    turn = np.full((tree.n, 2), np.nan)
    stretch_var = np.full(L, -1, dtype=np.int64)
    nearest = False
    for m in tree.models:
        for row, frame in enumerate(m.frames):
            if type(m) is StretchModel:  # a second model on the bone's link: its own variable, not the joint's
                stretch_var[frame] = m.vars[row, 0]
                continue
            var[frame] = m.vars[row, 0]
            if type(m) is ScalarModel:
                axis[frame] = m.axes[row]
                kind[frame] = _PRISMATIC if m.prismatic[row] else _REVOLUTE
                continuous[m.vars[row, 0]] = bool(m.continuous[row])
                if m.full_turn[row]:
                    turn[m.vars[row, 0]] = m.joints[row].lower, m.joints[row].upper
            elif type(m) is BallModel:
                kind[frame] = _BALL
            elif type(m) is FreeModel:
                kind[frame] = _FREE
            elif type(m) is SwingTwistModel:
                kind[frame] = _SWING
                for a, k in m.col.items():
                    cols[frame, a] = m.vars[row, k]
                if m.elbow:
                    elbow[frame] = 0 if 0 in m.col else 2
                angle_limits[frame], limited[frame] = m.angle_limits[row], m.limited[row]
                swing_lo[frame], swing_hi[frame] = m.swing_lo[row], m.swing_hi[row]
                nearest = bool(m.nearest)
            else:
                raise TypeError(f"the compiled path does not cover {type(m).__name__}")
    # anchor[i, k]: the child of link k whose subtree holds link i (-1: none; a stretching k moves it by its offset)
    anchor = np.full((L, L), -1, dtype=np.int64)
    for i in range(1, L):
        anchor[i] = anchor[tree.parent[i]]
        anchor[i, tree.parent[i]] = i
    flat = lambda dtype, *parts: np.ascontiguousarray(  # noqa: E731
        np.concatenate([np.asarray(p, dtype=dtype).ravel() for p in parts]))
    arrays = tree._compiled_arrays = (
        flat(np.int64, [L, tree.n], tree.parent, kind, var, cols, elbow, stretch_var, anchor, tree.var_link),
        flat(float, axis, angle_limits, swing_lo, swing_hi, tree._clip_lower, tree._clip_upper, tree.weights, turn,
             tree.sample_lower, tree.span()),
        flat(np.bool_, [nearest], limited, continuous, tree.ancestors))
    return arrays


def _with_origins(tree):
    """The kernels' packed tree (tp): _tree_arrays and the tree's origins as they are now (a rig's may change: in
    place, read by the kernels as they are, or a new array, packed anew)."""
    known = tree.__dict__
    tp, arrays = known.get("_compiled_tp"), known.get("_compiled_arrays")
    if tp is not None and arrays is not None and tp[3] is tree.origin and tp[0] is arrays[0]:  # (each solve: no call)
        return tp
    arrays = _tree_arrays(tree)
    if tp is None or tp[3] is not tree.origin or tp[0] is not arrays[0]:
        tp = arrays + (np.ascontiguousarray(tree.origin, dtype=float),)
        if tp[3] is tree.origin:  # (float64, contiguous: the tree's own array, kept)
            tree._compiled_tp = tp
    return tp


_ZERO3, _ZERO9 = [0.0] * 3, [0.0] * 9
_FLOAT64 = np.dtype(np.float64)


def _no_references(tree):
    """A Kernel's references and their indices for goals without a Displacement: two empty arrays, made once per
    tree."""
    none = tree.__dict__.get("_compiled_no_references")
    if none is None:
        none = tree._compiled_no_references = (np.empty((0, tree.n)), np.empty((0, tree.n), dtype=np.int64))
    return none


def _kept(tree, gp):
    """(Work, in_a_row (1,)) of this tree in this thread: Kernel.work's, and search's count of partial restarts in a
    row (it sets it to 0 first), kept on the tree, per thread (_compiled_works), the last thread's also in one tuple
    found in one look-up (_compiled_last: a solve asks; three look-ups and _with_origins cost 1 us of a 34 us
    Table I solve)."""
    known = tree.__dict__
    last = known.get("_compiled_last")
    if last is not None and last[0] == get_ident() and last[1] is tree.origin and \
            last[2] is known.get("_compiled_arrays"):
        return last[3]
    tp = _with_origins(tree)
    works = known.get("_compiled_works")
    if works is None:
        works = tree._compiled_works = {}
    thread = get_ident()
    kept = works.get(thread)
    if kept is None or kept[0] is not tp:
        kept = works[thread] = (tp, (make_work(tp, gp, CHUNK), np.zeros(1, dtype=np.int64)))
    arrays = known.get("_compiled_arrays")
    if tp[3] is tree.origin and arrays is not None and tp[0] is arrays[0]:  # (else tp is a copy of the origins made
        # for this solve: packed again at the next)
        tree._compiled_last = (thread, tp[3], arrays, kept[1])
    return kept[1]


class Kernel:
    """A problem encoded as arrays for the compiled functions: the tree packed (``arrays()[0]``, read by _tree as
    links' parents, origins, joint kinds, axes, variables, limits; bounds, weights, ancestors) and the goals packed
    (``arrays()[1]``, read by _goals as kind, link, offset, position and rotation targets, look axis, sqrt weight,
    tolerances, rows; displacements' references). ``tree_arrays()`` and ``goal_arrays()`` are those tuples, for
    the kernels' inner functions (tests)."""

    def __init__(self, tree, objectives):
        self.tree = tree
        self._judged = None
        if _pose_packing and type(objectives) is list and len(objectives) == 1 and type(objectives[0]) is Pose:  # (a
            # Table I solve's one Pose: the same array and checks as the loop below makes, written by compiled code:
            # a list of its 28 floats and np.array of it cost 4.4 us of a 40 us ur5 solve, this 2.4)
            o = objectives[0]
            position, orientation = o.position, o.orientation
            tp, ta = float(position.tolerance), float(orientation.tolerance)
            self._checks = [(True, tp, True, ta, False, True)]
            gf = np.empty(_GOAL_FLOATS)
            _pack_pose(gf, tree.link_index[o.link], math.sqrt(o.weight), tp, ta, position.offset, position.target,
                       orientation.target)
            self._gp = (gf, *_no_references(tree))
            return
        scalars, offsets, targets, looks, rotations = [], [], [], [], []  # per goal: _GOAL_SCALARS; offset,
        # position target, look axis (3 each); rotation target (9)
        checks = []  # per goal, what result and key judge: (needs its error, tolerance, its angle, tolerance,
        # the error reported is the angle, a Pose's two errors)
        references, indices = [], []
        link = tree.link_index.__getitem__
        inf = math.inf
        for o in objectives:
            t = type(o)
            w = math.sqrt(o.weight)
            offset, target, look, R = _ZERO3, _ZERO3, _ZERO3, _ZERO9
            if t is Displacement:
                # (None: every variable in order, the usual continuity goal's; its index row made once, below)
                idx = None if o.joints is None and o.reference.shape[0] == tree.n else \
                    o._indices(SimpleNamespace(tree=tree))
                s = (_DISPLACEMENT, 0, len(references), tree.n if idx is None else len(idx), False, False, False, w,
                     float(o.tolerance), inf)
                references.append(o.reference)
                indices.append(idx)
            elif t is Distance:  # its other link in slot (-1: a fixed point), other point in the position target,
                # least distance in the look axis' first entry
                s = (_DISTANCE, link(o.link), -1 if o.other_link is None else link(o.other_link), 1, False, False,
                     False, w, float(o.tolerance), inf)
                offset, target, look = o.point.tolist(), o.other_point.tolist(), [o.min_distance, 0.0, 0.0]
            elif t is JointValue:
                s = (_JOINT_VALUE, 0, tree.var(o.joint), 1, False, False, False, w, float(o.tolerance), inf)
                target = [o.value, 0.0, 0.0]
            else:
                position = o.position if t is Pose else o if t is Position else None
                orientation = o.orientation if t is Pose else o if t is Orientation else None
                looking = t is LookAt  # its target in the position target, its tolerance (an angle) in tol_R
                rows = 3 * ((position is not None) + (orientation is not None) + looking)
                s = (_CARTESIAN, link(o.link), 0, rows, position is not None, orientation is not None, looking, w,
                     inf if position is None else float(position.tolerance),
                     float(o.tolerance) if looking else inf if orientation is None else float(orientation.tolerance))
                if position is not None:
                    offset, target = position.offset.tolist(), position.target.tolist()
                if looking:
                    target, look = o.target.tolist(), o.axis.tolist()
                if orientation is not None:
                    R = orientation.target.ravel().tolist()
            scalars.append(s)
            offsets.append(offset)
            targets.append(target)
            looks.append(look)
            rotations.append(R)
            checks.append((s[4] or s[0] != _CARTESIAN, s[8], s[5] or s[6], s[9], t is Orientation or t is LookAt,
                           t is Pose))
        self._checks = checks
        if references:  # (a copy: a caller's read-only array is a type of its own to numba, compiled anew)
            refs = np.array(references, dtype=float).reshape(len(references), tree.n)
            if len(indices) == 1 and indices[0] is None:  # (a tracking frame's continuity: its row made once)
                idx = tree.__dict__.get("_compiled_every_variable")
                if idx is None:
                    idx = tree._compiled_every_variable = np.arange(tree.n, dtype=np.int64).reshape(1, tree.n)
            else:
                idx = np.full((len(indices), max([tree.n] + [len(i) for i in indices if i is not None])), -1,
                              dtype=np.int64)
                for row, i in enumerate(indices):
                    i = np.arange(tree.n) if i is None else i
                    idx[row, :len(i)] = i
        else:  # (most problems)
            refs, idx = _no_references(tree)
        # one float array, field after field (_goals reads it): the scalars, offsets, position targets, look axes,
        # rotation targets; one array made, not 16 (a tracking frame builds a Kernel per solve)
        if len(scalars) == 1:  # (one goal, a Table I solve: the same list, 1 us sooner)
            flat = [*scalars[0], *offsets[0], *targets[0], *looks[0], *rotations[0]]
        else:
            flat = list(chain(*zip(*scalars), *offsets, *targets, *looks, *rotations))
        self._gp = (np.array(flat, dtype=float), refs, idx)

    def arrays(self):
        """The kernels' arguments: (tree packed with its origins as they are now, goals packed)."""
        return _with_origins(self.tree), self._gp

    def work(self):
        """restarts_kernel's Work for this tree in this thread (make_work), kept on the tree: made anew for a tree
        whose origins are a new array (packed anew: _with_origins). One per thread: frames solved at once in
        threads (tracking.Frames) never share work spaces."""
        return _kept(self.tree, self._gp)[0]

    def tree_arrays(self):
        """The tree's tuple the kernels' inner functions take (made by _tree: for tests)."""
        return python_callable(_tree)(_with_origins(self.tree))

    def goal_arrays(self):
        """The goals' tuple the kernels' inner functions take (made by _goals: for tests)."""
        return python_callable(_goals)(self._gp)

    def judge(self, q):
        """(errors (G, 2), cost) at q: what the kernel that returned q (the array itself) judged there (search keeps
        it in ``_judged``), else evaluated."""
        known = self._judged
        if known is not None and known[0] is q:
            return known[1], known[2]
        return judge(np.ascontiguousarray(q, dtype=float), _with_origins(self.tree), self._gp)

    def key(self, q):
        """(not every goal met, cost) at q: how solve ranks the answers of its searches."""
        errors, cost = self.judge(q)
        return not all(_met(self._checks, errors)), float(cost)

    def result(self, q, method, budget, message, restarts=0):
        """The Result of q judged by the compiled evaluation (the numpy objectives' errors, tolerances and cost:
        tested equal), without a numpy FK; its per-goal lists made when first read (_JudgedResult)."""
        known = self._judged
        if known is not None and known[0] is q:  # (the kernel's own judgement of its answer: every goal met)
            errors, cost, met = known[1], known[2], known[3]
        else:
            errors, cost = self.judge(q)
            met = all(_met(self._checks, errors))
        return _JudgedResult.judged(q, met, budget.iterations, budget.elapsed(), message, method, float(cost),
                                    restarts, errors, self._checks)


def _met(checks, errors):
    """Each goal met (a list) by its errors (G, 2) and Kernel's checks (_goal_met's rule)."""
    return [(not p or ep <= tp) and (not a or ea <= ta) for (p, tp, a, ta, _, _), (ep, ea) in
            zip(checks, errors.tolist())]


class _JudgedResult(Result):
    """Kernel.result's Result: ``errors``, ``satisfied`` and ``details`` made from the kernel's errors (G, 2) and
    the goals' checks when first read, the same as Result's (most callers read ``success`` and ``q``: making the
    three at once, and freeing them, cost 3-4 us of a 40 us Table I solve). ``elites``: none. Made by ``judged``:
    its ``__init__`` is Result's, so ``dataclasses.replace`` makes one with every field given."""

    @classmethod
    def judged(cls, q, success, iterations, elapsed, message, method, cost, restarts, goal_errors, checks):
        self = object.__new__(cls)
        self.q, self.success, self.iterations, self.elapsed, self.message = q, success, iterations, elapsed, message
        self.method, self.cost, self.restarts = method, cost, restarts
        self._goal_errors, self._checks = goal_errors, checks
        return self

    @functools.cached_property
    def errors(self):
        return np.array([ea if angle else ep for (_, _, _, _, angle, _), (ep, ea) in
                         zip(self._checks, self._goal_errors.tolist())])

    @functools.cached_property
    def satisfied(self):
        return _met(self._checks, self._goal_errors)

    @functools.cached_property
    def details(self):
        return [{"error": ep, "angular_error": ea} if pose else {"error": ea if angle else ep} for
                (_, _, _, _, angle, pose), (ep, ea) in zip(self._checks, self._goal_errors.tolist())]

    @functools.cached_property
    def elites(self):
        return []


@njit(cache=True, leaf=True, entry=True)
def _pack_pose(gf, link, sqrt_w, tol_p, tol_R, offset, target, R):
    """A lone Pose packed into gf (_GOAL_FLOATS), as Kernel packs any goal: kind, link, slot, rows, has position,
    has rotation, has look axis, sqrt weight, tolerances; offset, position target, look axis (none), rotation
    target. (Compiled: making the list of these floats and an array of it cost Python twice as long.)"""
    gf[0], gf[1], gf[2], gf[3], gf[4], gf[5], gf[6] = _CARTESIAN, link, 0.0, 6.0, 1.0, 1.0, 0.0
    gf[7], gf[8], gf[9] = sqrt_w, tol_p, tol_R
    for i in range(3):
        gf[10 + i], gf[13 + i], gf[16 + i] = offset[i], target[i], 0.0
        for j in range(3):
            gf[19 + 3 * i + j] = R[i, j]


_pose_packing = False  # Kernel packs a lone Pose with _pack_pose: once warm has it compiled (or loaded), where it
# costs a cold compile 0.4 s while the helper compiles (a helper packs in Python: its plan is not waited on)


def covers_tree(tree):
    """Whether the compiled path is on and covers this tree's joints (known once per tree)."""
    if not available():
        return False
    known = tree.__dict__.get("_compiled_covers")
    if known is None:
        known = tree._compiled_covers = all(type(m) in _COVERED_MODELS for m in tree.models)
    return known


def covers(tree, objectives):
    """Whether the compiled path is on and covers this tree and these objectives."""
    # (covers_tree's answer kept on the tree, read here while nothing changed it: a solve asks, and two calls cost
    # 0.3 us of its 34)
    if tree.__dict__.get("_compiled_covers") is not True or not _enabled or _background is not None:
        if not covers_tree(tree):
            return False
    for o in objectives:  # (a loop, not all() over a generator: a solve asks)
        if type(o) not in _COVERED_GOALS:
            return False
    return True


def project_one(tree, q):
    """Tree.project of one configuration, compiled; None when the compiled path does not cover the tree."""
    if not covers_tree(tree):
        return None
    return project_packed(np.ascontiguousarray(q, dtype=float), _with_origins(tree))


def kernel(problem):
    """The Kernel of a problem when the compiled path covers it and is on, else None (numpy serves)."""
    k = problem.__dict__.get("_kernel")
    if k is None or not _enabled:  # (a problem's kernel made, the path was on and covered it)
        if not covers(problem.tree, problem.objectives):
            return None
        if k is None:
            k = problem._kernel = Kernel(problem.tree, problem.objectives)
    return k


# -- the packed arguments --------------------------------------------------------------------------------------

@njit(cache=True)
def _tree(tp):
    """The tree's tuple from its packed arrays (views, no copy): (parent, origins, kind, axis, var, cols, elbow,
    angle limits, limited, swing lo, swing hi, nearest, clip lower, clip upper, continuous, weights, ancestors,
    var_link, stretch_var, anchor, turn, sample lower, sample span); see _tree_arrays."""
    ti, tf, tb, origin = tp
    L, n = ti[0], ti[1]
    o = 2
    parent, kind, var = ti[o:o + L], ti[o + L:o + 2 * L], ti[o + 2 * L:o + 3 * L]
    o += 3 * L
    cols = ti[o:o + 3 * L].reshape((L, 3))
    o += 3 * L
    elbow, stretch_var = ti[o:o + L], ti[o + L:o + 2 * L]
    o += 2 * L
    anchor = ti[o:o + L * L].reshape((L, L))
    var_link = ti[o + L * L:o + L * L + n]
    axis, angle_limits = tf[:3 * L].reshape((L, 3)), tf[3 * L:9 * L].reshape((L, 3, 2))
    swing_lo, swing_hi = tf[9 * L:11 * L].reshape((L, 2)), tf[11 * L:13 * L].reshape((L, 2))
    o = 13 * L
    clip_lower, clip_upper, weights = tf[o:o + n], tf[o + n:o + 2 * n], tf[o + 2 * n:o + 3 * n]
    turn = tf[o + 3 * n:o + 5 * n].reshape((n, 2))
    sample_lower, sample_span = tf[o + 5 * n:o + 6 * n], tf[o + 6 * n:o + 7 * n]
    nearest, limited = tb[0], tb[1:1 + 3 * L].reshape((L, 3))
    continuous, ancestors = tb[1 + 3 * L:1 + 3 * L + n], tb[1 + 3 * L + n:1 + 3 * L + n + L * n].reshape((L, n))
    return (parent, origin, kind, axis, var, cols, elbow, angle_limits, limited, swing_lo, swing_hi, nearest,
            clip_lower, clip_upper, continuous, weights, ancestors, var_link, stretch_var, anchor, turn, sample_lower,
            sample_span)


@njit(cache=True)
def _goals(gp):
    """The goals' tuple from their packed arrays: (kind, links, slot, offsets, targets_p, targets_R, has_p, has_R,
    has_L, look_axes, sqrt_w, tol_p, tol_R, rows, references, indices); see Kernel."""
    gf, references, indices = gp
    G = gf.shape[0] // _GOAL_FLOATS
    ints = gf[:4 * G].astype(np.int64)
    flags = gf[4 * G:7 * G] != 0.0
    o = _GOAL_SCALARS * G
    return (ints[:G], ints[G:2 * G], ints[2 * G:3 * G], gf[o:o + 3 * G].reshape((G, 3)),
            gf[o + 3 * G:o + 6 * G].reshape((G, 3)), gf[o + 9 * G:o + 18 * G].reshape((G, 3, 3)), flags[:G],
            flags[G:2 * G], flags[2 * G:3 * G], gf[o + 6 * G:o + 9 * G].reshape((G, 3)), gf[7 * G:8 * G],
            gf[8 * G:9 * G], gf[9 * G:10 * G], ints[3 * G:4 * G], references, indices)


# -- kinematics ---------------------------------------------------------------------------------------------

@njit(cache=True, leaf=True)
def _copy(dst, src):
    """dst[...] = src for C-contiguous arrays of one size, element by element: numba's array slice assignment
    compiles its shape-mismatch message (string formatting), some 3 s of a first compile. (``.flat`` of a C array
    is its memory in order; ``reshape(-1)`` called numba's helper, 55 ns a copy against 6: FK copies twice.)"""
    if dst.size != src.size:  # (no bounds checks in compiled code: a size that differs would write astray)
        raise ValueError("_copy: the arrays' sizes differ")
    for i in range(src.size):
        dst.flat[i] = src.flat[i]


@njit(cache=True)
def _exp_coefficients(theta):
    """(sin t / t, (1 - cos t) / t^2, (t - sin t) / t^3), with rotations._exp_coefficients' series near 0."""
    if theta < 1e-6:
        t2 = theta * theta
        return 1.0 - t2 / 6.0, 0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0
    s = math.sin(theta)
    return s / theta, (1.0 - math.cos(theta)) / (theta * theta), (theta - s) / (theta * theta * theta)


@njit(cache=True, leaf=True)
def _so3(x, y, z, first, second, out):
    """I + first K + second K^2 for K = [(x, y, z)]x into out (3, 3): exp (Rodrigues) or the left Jacobian."""
    xx, yy, zz = x * x, y * y, z * z
    out[0, 0] = 1.0 - second * (yy + zz)
    out[1, 1] = 1.0 - second * (xx + zz)
    out[2, 2] = 1.0 - second * (xx + yy)
    out[0, 1], out[1, 0] = -first * z + second * x * y, first * z + second * x * y
    out[0, 2], out[2, 0] = first * y + second * x * z, -first * y + second * x * z
    out[1, 2], out[2, 1] = -first * x + second * y * z, first * x + second * y * z


@njit(cache=True, leaf=True)
def _exp_so3(x, y, z, out):
    a, b, _ = _exp_coefficients(math.sqrt(x * x + y * y + z * z))
    _so3(x, y, z, a, b, out)


@njit(cache=True, leaf=True)
def _left_jacobian(x, y, z, out):
    """J_l of the rotation vector (x, y, z): its columns are the world angular velocities per unit change."""
    _, b, c = _exp_coefficients(math.sqrt(x * x + y * y + z * z))
    _so3(x, y, z, b, c, out)


@njit(cache=True, leaf=True)
def _axis_rotation(a, t, out):
    """Rotation by t about the local X (0), Y (1) or Z (2) axis into out (3, 3) (rotations.axis_rotation)."""
    c, s = math.cos(t), math.sin(t)
    out[:, :] = 0.0
    i, j = (1, 2) if a == 0 else (2, 0) if a == 1 else (0, 1)
    out[a, a] = 1.0
    out[i, i], out[j, j], out[i, j], out[j, i] = c, c, -s, s


@njit(cache=True, leaf=True)
def _joint_rotation(q, i, kind, var, cols, elbow, R, A, B):
    """The rotation link i's joint adds (not scalar joints) into R (3, 3); A, B (3, 3) work space. A swing-twist
    bone: exp(sx X + sz Z) RotY(ty); an elbow: RotA(angle) RotY(ty) (joints.SwingTwistModel); a ball or free root:
    exp of its rotation vector."""
    if kind[i] == _BALL:
        v = var[i]
        _exp_so3(q[v], q[v + 1], q[v + 2], R)
        return
    if kind[i] == _FREE:
        v = var[i] + 3
        _exp_so3(q[v], q[v + 1], q[v + 2], R)
        return
    if elbow[i] >= 0:
        _axis_rotation(elbow[i], q[cols[i, elbow[i]]], A)
    else:
        _exp_so3(q[cols[i, 0]], 0.0, q[cols[i, 2]], A)
    if cols[i, 1] < 0:
        _copy(R, A)
        return
    _axis_rotation(1, q[cols[i, 1]], B)
    for r in range(3):
        for c in range(3):
            R[r, c] = A[r, 0] * B[0, c] + A[r, 1] * B[1, c] + A[r, 2] * B[2, c]


@njit(cache=True, leaf=True)
def _affine(A, B, out):
    """out = A B for affine 4x4 matrices (last rows 0 0 0 1, as every frame here): 36 products, not 64; 9 when B
    does not rotate (a joint origin without rpy, as most of a URDF's and many bones')."""
    if B[0, 0] == 1.0 and B[1, 1] == 1.0 and B[2, 2] == 1.0 and B[0, 1] == 0.0 and B[0, 2] == 0.0 and \
            B[1, 0] == 0.0 and B[1, 2] == 0.0 and B[2, 0] == 0.0 and B[2, 1] == 0.0:
        for i in range(3):
            a0, a1, a2 = A[i, 0], A[i, 1], A[i, 2]
            out[i, 0], out[i, 1], out[i, 2] = a0, a1, a2
            out[i, 3] = a0 * B[0, 3] + a1 * B[1, 3] + a2 * B[2, 3] + A[i, 3]
    else:
        for i in range(3):
            a0, a1, a2 = A[i, 0], A[i, 1], A[i, 2]
            for j in range(3):
                out[i, j] = a0 * B[0, j] + a1 * B[1, j] + a2 * B[2, j]
            out[i, 3] = a0 * B[0, 3] + a1 * B[1, 3] + a2 * B[2, 3] + A[i, 3]
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@njit(cache=True, leaf=True)
def _coordinate_axis(axis):
    """0, 1 or 2 when the unit vector ``axis`` is +-X, +-Y or +-Z (its other entries exactly 0), else -1."""
    x, y, z = axis[0], axis[1], axis[2]
    return 0 if y == 0.0 and z == 0.0 else 1 if x == 0.0 and z == 0.0 else 2 if x == 0.0 and y == 0.0 else -1


@njit(cache=True, leaf=True, inline="always")
def fk_into(q, T, W, Pre, R, A, B):
    """World matrices of every link into W (L, 4, 4) (links in the tree's order, parents first; a stretching bone's
    scaled by its stretch), and each joint's frame (the parent's world matrix times the joint's origin, without a
    stretching parent's scale) into Pre (L, 4, 4): W_i = Pre_i [f R_i | t_i] for the joint's rotation R_i,
    translation t_i and stretch f. R, A, B (3, 3) are work space."""
    parent, origin, kind, axis, var, cols, elbow = T[0], T[1], T[2], T[3], T[4], T[5], T[6]
    L = parent.shape[0]
    _copy(W[0], origin[0])
    _copy(Pre[0], origin[0])
    stretch_var = T[18]
    for i in range(1, L):
        P, Wi = Pre[i], W[i]
        _affine(W[parent[i]], origin[i], P)
        k = kind[i]
        a = _coordinate_axis(axis[i]) if k == _REVOLUTE and stretch_var[i] < 0 else -1
        if a >= 0:  # a turn about +-X, +-Y or +-Z (most URDF joints): two of P's columns turned, not P R (45 products)
            t = axis[i, a] * q[var[i]]
            c, s = math.cos(t), math.sin(t)
            j, m = (1, 2) if a == 0 else (2, 0) if a == 1 else (0, 1)
            for r in range(3):
                pj, pm = P[r, j], P[r, m]
                Wi[r, a], Wi[r, j], Wi[r, m], Wi[r, 3] = P[r, a], c * pj + s * pm, c * pm - s * pj, P[r, 3]
        else:
            if k == _NONE or k == _PRISMATIC:
                R[:, :] = 0.0
                R[0, 0] = R[1, 1] = R[2, 2] = 1.0
            elif k == _REVOLUTE:  # R = I + sin q K + (1 - cos q) K^2, K = [axis]x
                t = q[var[i]]
                _so3(axis[i, 0], axis[i, 1], axis[i, 2], math.sin(t), 1.0 - math.cos(t), R)
            else:
                _joint_rotation(q, i, kind, var, cols, elbow, R, A, B)
            tx = ty = tz = 0.0
            if k == _PRISMATIC:
                t = q[var[i]]
                tx, ty, tz = t * axis[i, 0], t * axis[i, 1], t * axis[i, 2]
            elif k == _FREE:
                v = var[i]
                tx, ty, tz = q[v], q[v + 1], q[v + 2]
            f = max(q[stretch_var[i]], 1e-9) if stretch_var[i] >= 0 else 1.0  # IK stretch: a scale after the rotation
            for r in range(3):
                p0, p1, p2 = P[r, 0], P[r, 1], P[r, 2]
                for c in range(3):
                    Wi[r, c] = f * (p0 * R[0, c] + p1 * R[1, c] + p2 * R[2, c])
                Wi[r, 3] = p0 * tx + p1 * ty + p2 * tz + P[r, 3]
        Wi[3, 0], Wi[3, 1], Wi[3, 2], Wi[3, 3] = 0.0, 0.0, 0.0, 1.0
        sp = stretch_var[parent[i]]
        if sp >= 0:  # a stretching parent scales its child's offsets, not the child's frame
            f = 1.0 / max(q[sp], 1e-9)
            for r in range(3):
                for c in range(3):
                    Wi[r, c] *= f
                    P[r, c] *= f


@njit(cache=True)
def fk(q, T):
    """(L, 4, 4) world matrices of every link."""
    L = T[0].shape[0]
    W, Pre = np.empty((L, 4, 4)), np.empty((L, 4, 4))
    fk_into(q, T, W, Pre, np.empty((3, 3)), np.empty((3, 3)), np.empty((3, 3)))
    return W


@njit(cache=True, leaf=True, inline="always")
def generators(q, T, W, Pre, omega, linear, centre, rotational, Jl, A):
    """Per variable: the world angular velocity (omega) or linear velocity (linear) of its link per unit change,
    and the point it turns about (centre), as State.generators (joints.*Model.generators). Jl, A (3, 3): work
    space."""
    kind, axis, var, cols, elbow, var_link, stretch_var = T[2], T[3], T[4], T[5], T[6], T[17], T[18]
    for v in range(q.shape[0]):
        i = var_link[v]
        Wi, Pi = W[i], Pre[i]
        for k in range(3):
            centre[v, k] = Wi[k, 3]
            omega[v, k] = 0.0
            linear[v, k] = 0.0
        k = kind[i]
        rotational[v] = k != _PRISMATIC
        if stretch_var[i] == v:  # a stretch turns nothing; how it moves a point depends on the point: _rate
            rotational[v] = False
            continue
        if k == _REVOLUTE or k == _PRISMATIC:  # a fixed axis: turned by its own motion as by the joint frame
            f = 1.0 / max(q[stretch_var[i]], 1e-9) if stretch_var[i] >= 0 else 1.0  # (axes do not scale)
            for r in range(3):
                d = f * (Wi[r, 0] * axis[i, 0] + Wi[r, 1] * axis[i, 1] + Wi[r, 2] * axis[i, 2])
                if k == _REVOLUTE:
                    omega[v, r] = d
                else:
                    linear[v, r] = d
            continue
        if k == _FREE and v < var[i] + 3:  # translation: along the joint frame's axes
            rotational[v] = False
            for r in range(3):
                linear[v, r] = Pi[r, v - var[i]]
            continue
        if k == _BALL or k == _FREE:  # rotation vector: the joint frame times the left Jacobian's column
            first = var[i] if k == _BALL else var[i] + 3
            _left_jacobian(q[first], q[first + 1], q[first + 2], Jl)
            c = v - first
            for r in range(3):
                omega[v, r] = Pi[r, 0] * Jl[0, c] + Pi[r, 1] * Jl[1, c] + Pi[r, 2] * Jl[2, c]
            continue
        # A swing-twist bone: which of its axes this variable is.
        a = 0 if cols[i, 0] == v else 1 if cols[i, 1] == v else 2
        if elbow[i] >= 0:
            if a == 1:  # the twist turns about the swung bone axis
                _axis_rotation(elbow[i], q[cols[i, elbow[i]]], A)
                for r in range(3):
                    omega[v, r] = Pi[r, 0] * A[0, 1] + Pi[r, 1] * A[1, 1] + Pi[r, 2] * A[2, 1]
            else:
                for r in range(3):
                    omega[v, r] = Pi[r, a]
            continue
        sx, sz = q[cols[i, 0]], q[cols[i, 2]]
        if a == 1:
            _exp_so3(sx, 0.0, sz, A)
            c = 1
        else:
            _left_jacobian(sx, 0.0, sz, A)
            c = a
        for r in range(3):
            omega[v, r] = Pi[r, 0] * A[0, c] + Pi[r, 1] * A[1, c] + Pi[r, 2] * A[2, c]


@njit(cache=True, leaf=True)
def _log_so3(M, out):
    """Rotation vector of M (paper 001 eq. 21-22), the near-pi case from the symmetric part (rotations.log_so3)."""
    lx, ly, lz = M[2, 1] - M[1, 2], M[0, 2] - M[2, 0], M[1, 0] - M[0, 1]
    ln = math.sqrt(lx * lx + ly * ly + lz * lz)
    theta = math.atan2(ln, M[0, 0] + M[1, 1] + M[2, 2] - 1.0)
    if theta <= math.pi - 1e-3:
        scale = 0.5 if ln < 1e-12 else theta / ln
        out[0], out[1], out[2] = lx * scale, ly * scale, lz * scale
        return theta
    c = math.cos(theta)
    best, k = -1.0, 0
    for i in range(3):
        d = max(((M[i, i] + M[i, i]) * 0.5 - c) / (1.0 - c), 0.0)
        if d > best:
            best, k = d, i
    for j in range(3):
        out[j] = ((M[k, j] + M[j, k]) * 0.5 - (c if j == k else 0.0)) / (1.0 - c)
    sign = 1.0 if out[0] * lx + out[1] * ly + out[2] * lz >= 0.0 else -1.0
    scale = sign * theta / math.sqrt(out[0] * out[0] + out[1] * out[1] + out[2] * out[2])
    for j in range(3):
        out[j] *= scale
    return theta


_jl_coefficient = njit(cache=True)(jl_inverse_coefficient)  # the numpy path's formula, compiled


@njit(cache=True, leaf=True)
def _jl_inverse(v, out):
    """J_l(v)^-1 = I - K/2 + (1/t^2 - (1 + cos t) / (2 t sin t)) K^2 (rotations.left_jacobian_inverse_so3)."""
    d = _jl_coefficient(math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]))
    _so3(v[0], v[1], v[2], -0.5, d, out)


@njit(cache=True, leaf=True)
def _rate(v, link, point, q, T, W, out):
    """Into out (3,): the velocity of a point fixed to ``link`` per unit of the stretch variable v of bone k: k's
    stretch moves the subtree of each child of k by the child's head offset / s, and a point on k itself by its
    offset from k's head / s (Tree.link_jacobians, State.point_jacobian)."""
    k = T[17][v]
    A = T[19][link, k]
    s = max(q[v], 1e-9)
    for r in range(3):
        out[r] = ((W[A, r, 3] if A >= 0 else point[r]) - W[k, r, 3]) / s


# -- objectives -----------------------------------------------------------------------------------------------

@njit(cache=True)
def workspace(n, L, G):
    """evaluate's work space for the goals G: world and joint frames (2, L, 4, 4), generators (3, n, 3) and their
    kinds (n,), 3-vectors (7, 3), 3x3 matrices (3, 3, 3); and, for the LM's step (_lm, _dual_workspace), per
    residual row the one variable it depends on (Displacement, JointValue) or -1 (m,)."""
    row_var = np.empty(size(G), dtype=np.int64)
    _row_variables(G, row_var, True)
    return (np.empty((2, L, 4, 4)), np.empty((3, n, 3)), np.zeros(n, dtype=np.bool_), np.empty((7, 3)),
            np.empty((3, 3, 3)), row_var)


@njit(cache=True, leaf=True)
def _row_variables(G, row_var, write):
    """Per residual row (evaluate's order), the one variable it depends on: a Displacement row its variable, a
    JointValue its joint's; -1 for the rows of every other goal. Written into row_var (``write``), or compared with
    it (a kept work space's: restarts_kernel). Returns whether row_var held them."""
    kind, slot, rows, indices = G[0], G[2], G[13], G[15]
    row = 0
    same = True
    for g in range(kind.shape[0]):
        for k in range(rows[g]):
            v = indices[slot[g], k] if kind[g] == _DISPLACEMENT else slot[g] if kind[g] == _JOINT_VALUE else -1
            if write:
                row_var[row + k] = v
            else:
                same = same and row_var[row + k] == v
        row += rows[g]
    return same


@njit(cache=True, leaf=True)
def size(G):
    """Rows of the residual."""
    return int(G[13].sum())


@njit(cache=True, leaf=True)
def evaluate(q, T, G, ws, r, J, want_jacobian, errors):
    """FK of q, then the weighted residuals into r (m,) and, when asked, their Jacobian into J (m, n): Position
    rows p - target, Orientation rows log(R R_d^T) with J_l^-1 omega, LookAt rows V - d, Displacement rows
    q - reference, JointValue rows q_j - value (the numpy objectives' formulas); each goal's error and angle
    into errors (G, 2). Returns (every goal met, unmet: sum w |r|^2 / 2 over the goals not met)."""
    frames, gen, rotational, vectors, matrices = ws[0], ws[1], ws[2], ws[3], ws[4]
    W, Pre = frames[0], frames[1]
    Rm, Ji = matrices[0], matrices[1]
    fk_into(q, T, W, Pre, Rm, Ji, matrices[2])
    ancestors, var_link, stretch_var = T[16], T[17], T[18]
    (gkind, links, slot, offsets, targets_p, targets_R, has_p, has_R, has_L, look_axes, sqrt_w, tol_p, tol_R, rows,
     references, indices) = G
    n = q.shape[0]
    omega, linear, centre = gen[0], gen[1], gen[2]
    if want_jacobian:
        generators(q, T, W, Pre, omega, linear, centre, rotational, Rm, Ji)  # (their work space until the goals)
        for k in range(J.shape[0]):
            for v in range(n):
                J[k, v] = 0.0
    row = 0
    met_all = True
    unmet = 0.0
    phi, p, a, d, Vl, dl, dp = vectors[0], vectors[1], vectors[2], vectors[3], vectors[4], vectors[5], vectors[6]
    for g in range(links.shape[0]):
        w = sqrt_w[g]
        if gkind[g] == _DISTANCE:
            e = _distance(g, q, T, G, W, want_jacobian, omega, linear, centre, rotational, r, J, row, w, p, d, a)
            errors[g, 0] = e
            row += 1
            if not e <= tol_p[g]:
                met_all = False
                unmet += 0.5 * w * w * e * e
            continue
        if gkind[g] != _CARTESIAN:
            sq = 0.0
            if gkind[g] == _DISPLACEMENT:
                for k in range(rows[g]):
                    v = indices[slot[g], k]
                    x = q[v] - references[slot[g], v]
                    r[row + k] = w * x
                    sq += x * x
                    if want_jacobian:
                        J[row + k, v] = w
            else:
                x = q[slot[g]] - targets_p[g, 0]
                r[row] = w * x
                sq = x * x
                if want_jacobian:
                    J[row, slot[g]] = w
            errors[g, 0] = math.sqrt(sq)
            row += rows[g]
            if not errors[g, 0] <= tol_p[g]:
                met_all = False
                unmet += 0.5 * w * w * sq
            continue
        Wg = W[links[g]]
        for k in range(3):
            p[k] = Wg[k, 3] + Wg[k, 0] * offsets[g, 0] + Wg[k, 1] * offsets[g, 1] + Wg[k, 2] * offsets[g, 2]
        sv = stretch_var[links[g]]
        rs = 1.0 / max(q[sv], 1e-9) if sv >= 0 else 1.0  # a stretching bone's rotation, without its scale
        sq, ok = 0.0, True
        rp, rR = -1, -1
        if has_p[g]:
            e = 0.0
            for k in range(3):
                x = p[k] - targets_p[g, k]
                r[row + k] = w * x
                e += x * x
            sq += e
            errors[g, 0] = math.sqrt(e)
            ok = ok and errors[g, 0] <= tol_p[g]
            rp = row
            row += 3
        if has_R[g]:
            for i in range(3):
                for j in range(3):
                    Rm[i, j] = rs * (Wg[i, 0] * targets_R[g, j, 0] + Wg[i, 1] * targets_R[g, j, 1] +
                                     Wg[i, 2] * targets_R[g, j, 2])
            theta = _log_so3(Rm, phi)
            for k in range(3):
                r[row + k] = w * phi[k]
            sq += theta * theta
            errors[g, 1] = theta
            ok = ok and theta <= tol_R[g]
            rR = row
            row += 3
            if want_jacobian:
                _jl_inverse(phi, Ji)
        rL, dist, far = -1, 1.0, False
        if has_L[g]:  # LookAt: r = V - d, V the link's axis, d the unit direction to the target
            dist = 0.0
            for k in range(3):
                Vl[k] = rs * (Wg[k, 0] * look_axes[g, 0] + Wg[k, 1] * look_axes[g, 1] + Wg[k, 2] * look_axes[g, 2])
                dl[k] = targets_p[g, k] - Wg[k, 3]
                dist += dl[k] * dl[k]
            dist = math.sqrt(dist)
            far = dist > 1e-12
            e = 0.0
            for k in range(3):
                dl[k] = dl[k] / max(dist, 1e-12) if far else Vl[k]
                r[row + k] = w * (Vl[k] - dl[k])
                e += (Vl[k] - dl[k]) ** 2
            sq += e
            angle = 2.0 * math.asin(min(max(0.5 * math.sqrt(e), 0.0), 1.0))
            errors[g, 1] = angle
            ok = ok and angle <= tol_R[g]
            rL = row
            row += 3
        if not ok:
            met_all = False
            unmet += 0.5 * w * w * sq
        if not want_jacobian:
            continue
        for v in range(n):
            if not ancestors[links[g], v]:
                continue
            if stretch_var[var_link[v]] == v:  # IK stretch: moves points, turns nothing
                if rp >= 0:
                    _rate(v, links[g], p, q, T, W, d)
                    for k in range(3):
                        J[rp + k, v] = w * d[k]
                if rL >= 0:
                    for k in range(3):
                        a[k] = Wg[k, 3]
                    _rate(v, links[g], a, q, T, W, dp)
                    dd = dl[0] * dp[0] + dl[1] * dp[1] + dl[2] * dp[2]
                    for k in range(3):
                        J[rL + k, v] = w * ((dp[k] - dl[k] * dd) / dist if far else 0.0)
                continue
            turns = rotational[v]
            for k in range(3):
                a[k] = omega[v, k]
            if rp >= 0:
                if turns:  # omega x (p - centre)
                    for k in range(3):
                        d[k] = p[k] - centre[v, k]
                    J[rp, v] = w * (a[1] * d[2] - a[2] * d[1])
                    J[rp + 1, v] = w * (a[2] * d[0] - a[0] * d[2])
                    J[rp + 2, v] = w * (a[0] * d[1] - a[1] * d[0])
                else:
                    for k in range(3):
                        J[rp + k, v] = w * linear[v, k]
            if rR >= 0 and turns:
                for k in range(3):
                    J[rR + k, v] = w * (Ji[k, 0] * a[0] + Ji[k, 1] * a[1] + Ji[k, 2] * a[2])
            if rL >= 0:  # dV - dd: omega x V + (I - d d^T) dp / |T - p|, dp the link origin's velocity
                if turns:
                    for k in range(3):
                        d[k] = Wg[k, 3] - centre[v, k]
                    dp[0] = a[1] * d[2] - a[2] * d[1]
                    dp[1] = a[2] * d[0] - a[0] * d[2]
                    dp[2] = a[0] * d[1] - a[1] * d[0]
                else:
                    dp[0], dp[1], dp[2] = linear[v, 0], linear[v, 1], linear[v, 2]
                dd = dl[0] * dp[0] + dl[1] * dp[1] + dl[2] * dp[2]
                for k in range(3):
                    col = (dp[k] - dl[k] * dd) / dist if far else 0.0
                    if turns:
                        col += (a[(k + 1) % 3] * Vl[(k + 2) % 3] - a[(k + 2) % 3] * Vl[(k + 1) % 3])
                    J[rL + k, v] = w * col
    return met_all, unmet


@njit(cache=True, leaf=True)
def _distance(g, q, T, G, W, want_jacobian, omega, linear, centre, rotational, r, J, row, w, a, b, rate):
    """Distance's row: r = w max(0, d_min - |a - b|), a the link's point, b the other link's or a fixed one; while
    too close, its gradient -u^T (J_a - J_b), u = (a - b) / |a - b| (objectives.Distance). Returns the error.
    a, b, rate (3,) are work space."""
    ancestors, links, slot, offsets, targets_p, look_axes = T[16], G[1], G[2], G[3], G[4], G[9]
    link, other = links[g], slot[g]
    Wa = W[link]
    for k in range(3):
        a[k] = Wa[k, 3] + Wa[k, 0] * offsets[g, 0] + Wa[k, 1] * offsets[g, 1] + Wa[k, 2] * offsets[g, 2]
        if other >= 0:
            Wb = W[other]
            b[k] = Wb[k, 3] + Wb[k, 0] * targets_p[g, 0] + Wb[k, 1] * targets_p[g, 1] + Wb[k, 2] * targets_p[g, 2]
        else:
            b[k] = targets_p[g, k]
    ux, uy, uz = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    dist = math.sqrt(ux * ux + uy * uy + uz * uz)
    if dist > 1e-12:
        ux, uy, uz = ux / dist, uy / dist, uz / dist
    else:
        ux, uy, uz = 1.0, 0.0, 0.0
    c = look_axes[g, 0] - dist
    e = max(c, 0.0)
    r[row] = w * e
    if want_jacobian and c > 0.0:
        for v in range(omega.shape[0]):
            s = 0.0
            stretch = T[18][T[17][v]] == v
            for side in range(2):
                link_v, point, sign = (link, a, 1.0) if side == 0 else (other, b, -1.0)
                if link_v < 0 or not ancestors[link_v, v]:
                    continue
                if stretch:
                    _rate(v, link_v, point, q, T, W, rate)
                    jx, jy, jz = rate[0], rate[1], rate[2]
                elif rotational[v]:
                    dx, dy, dz = point[0] - centre[v, 0], point[1] - centre[v, 1], point[2] - centre[v, 2]
                    jx = omega[v, 1] * dz - omega[v, 2] * dy
                    jy = omega[v, 2] * dx - omega[v, 0] * dz
                    jz = omega[v, 0] * dy - omega[v, 1] * dx
                else:
                    jx, jy, jz = linear[v, 0], linear[v, 1], linear[v, 2]
                s += sign * (ux * jx + uy * jy + uz * jz)
            J[row, v] = -w * s
    return e


# -- feasibility ------------------------------------------------------------------------------------------------

@njit(cache=True)
def _wrap_angle(a):
    """joints.wrap_angle: into [-pi, pi)."""
    x = a + math.pi
    return x - 2.0 * math.pi * math.floor(x / (2.0 * math.pi)) - math.pi


@njit(cache=True, leaf=True)
def _wrap_vector(out, first, count):
    """joints.wrap_rotation_vector on out[first:first + count] in place: the same rotation, norm <= pi."""
    s = 0.0
    for k in range(count):
        s += out[first + k] * out[first + k]
    norm = math.sqrt(s)
    if norm > math.pi + 1e-9:
        f = _wrap_angle(norm) / norm
        for k in range(count):
            out[first + k] *= f


@njit(cache=True, leaf=True)
def _nearest_on_ellipse(x, z, a, b):
    """joints._nearest_on_ellipse for one point in the first quadrant (Newton on t, 20 steps)."""
    a2, b2 = a * a, b * b
    t = 0.0
    for _ in range(20):
        u, v = a * x / (t + a2), b * z / (t + b2)
        F = u * u + v * v - 1.0
        dF = -2.0 * (u * u / (t + a2) + v * v / (t + b2))
        t = max(t - F / (dF if dF < 0.0 else -1.0), 0.0)
    return a2 * x / (t + a2), b2 * z / (t + b2)


@njit(cache=True, leaf=True)
def _project_swing(out, i, T):
    """SwingTwistModel.project for link i: twist clipped (limited) or wrapped; an elbow's angle likewise; a swing
    wrapped to at most pi, then Blender's EllipseClamp in quaternion components (radial, or to the nearest point)
    and each limited component's range (joints.swing_clamp)."""
    cols, elbow, angle_limits, limited, swing_lo, swing_hi, nearest = T[5], T[6], T[7], T[8], T[9], T[10], T[11]
    for a in (1, elbow[i]):
        if a < 0 or cols[i, a] < 0:
            continue
        v = cols[i, a]
        if limited[i, a]:
            out[v] = min(max(out[v], angle_limits[i, a, 0]), angle_limits[i, a, 1])
        else:
            out[v] = _wrap_angle(out[v])
    if elbow[i] >= 0:
        return
    vx, vz = cols[i, 0], cols[i, 2]
    sx, sz = out[vx], out[vz]
    theta = math.sqrt(sx * sx + sz * sz)
    if theta > math.pi + 1e-9:
        f = _wrap_angle(theta) / theta
        sx, sz = sx * f, sz * f
        theta = math.sqrt(sx * sx + sz * sz)
    k = 0.5 if theta < 1e-9 else math.sin(0.5 * theta) / theta
    x, z = sx * k, sz * k
    lo_x, lo_z, hi_x, hi_z = swing_lo[i, 0], swing_lo[i, 1], swing_hi[i, 0], swing_hi[i, 1]
    lim_x, lim_z = limited[i, 0], limited[i, 2]
    xl = -lo_x if x < 0.0 else hi_x
    zl = -lo_z if z < 0.0 else hi_z
    degenerate = xl <= 1e-12 or zl <= 1e-12
    scale = 1.0
    nx, nz = x, z
    if lim_x and lim_z and not degenerate:
        rho = (x / xl) ** 2 + (z / zl) ** 2
        if rho > 1.0:
            if nearest:
                px, pz = _nearest_on_ellipse(abs(x), abs(z), xl, zl)
                nx, nz = math.copysign(px, x) if x != 0.0 else 0.0, math.copysign(pz, z) if z != 0.0 else 0.0
            else:
                scale = 1.0 / math.sqrt(rho)
    if lim_x:
        nx = min(max(nx * scale, lo_x), hi_x)
    if lim_z:
        nz = min(max(nz * scale, lo_z), hi_z)
    if nx != x or nz != z:  # moved by the clamp: back through arcsin (only then: its round trip is not exact)
        rr = math.sqrt(nx * nx + nz * nz)
        f = 2.0 if rr < 1e-12 else 2.0 * math.asin(min(rr, 1.0)) / rr
        sx, sz = nx * f, nz * f
    out[vx], out[vz] = sx, sz


@njit(cache=True)
def project(q, T):
    """Tree.project: non-finite values to 0, clipped to the box bounds, continuous joints wrapped, full-turn
    joints outside their range wrapped into it, rotation vectors (balls, free roots) wrapped to at most pi, bones'
    swing and twist limits as Blender keeps them."""
    out = np.empty_like(q)
    _project_into(q, T, out)
    return out


@njit(cache=True, entry=True)
def project_packed(q, tp):
    """project, from Python: the tree packed."""
    return project(q, _tree(tp))


@njit(cache=True, leaf=True, inline="always")
def _project_into(q, T, out):
    """project(q) into out (which may be q itself)."""
    kind, var, lower, upper, continuous, turn = T[2], T[4], T[12], T[13], T[14], T[20]
    for v in range(q.shape[0]):
        x = q[v] if np.isfinite(q[v]) else 0.0
        x = min(max(x, lower[v]), upper[v])
        if continuous[v]:
            x = _wrap_angle(x)
        elif x > turn[v, 1]:  # the fewest whole turns back into the range (False for NaN: not a full-turn joint)
            x = max(turn[v, 1] - (turn[v, 1] - x) % (2.0 * math.pi), turn[v, 0])  # (a span 1e-9 short of 2 pi)
        elif x < turn[v, 0]:
            x = min(turn[v, 0] + (x - turn[v, 0]) % (2.0 * math.pi), turn[v, 1])
        out[v] = x
    for i in range(kind.shape[0]):
        if kind[i] == _BALL:
            _wrap_vector(out, var[i], 3)
        elif kind[i] == _FREE:
            _wrap_vector(out, var[i] + 3, 3)
        elif kind[i] == _SWING:
            _project_swing(out, i, T)


@njit(cache=True, leaf=True)
def _limit_normal(q, i, T, N):
    """SwingTwistModel.limit_normals for link i: whether its swing rests on its limit (ellipse, or the one limited
    component's range), and then its outward normal in (sx, sz) into N (2,)."""
    cols, elbow, limited, swing_lo, swing_hi = T[5], T[6], T[8], T[9], T[10]
    if elbow[i] >= 0 or cols[i, 0] < 0 or cols[i, 2] < 0 or not (limited[i, 0] or limited[i, 2]):
        return False
    sx, sz = q[cols[i, 0]], q[cols[i, 2]]
    theta = math.sqrt(sx * sx + sz * sz)
    small = theta < 1e-9
    a = 0.5 if small else math.sin(0.5 * theta) / theta
    x, z = sx * a, sz * a
    lim_x = max(-swing_lo[i, 0] if x < 0 else swing_hi[i, 0], 1e-9)
    lim_z = max(-swing_lo[i, 1] if z < 0 else swing_hi[i, 1], 1e-9)
    both = limited[i, 0] and limited[i, 2]
    if both:
        g = (x / lim_x) ** 2 + (z / lim_z) ** 2
    elif limited[i, 0]:
        g = abs(x) / lim_x
    else:
        g = abs(z) / lim_z
    if g < 1.0 - 1e-6:
        return False
    sgx = 1.0 if x > 0 else -1.0 if x < 0 else 0.0
    sgz = 1.0 if z > 0 else -1.0 if z < 0 else 0.0
    if both:
        gx, gz = 2 * x / lim_x ** 2, 2 * z / lim_z ** 2
    elif limited[i, 0]:
        gx, gz = sgx / lim_x, 0.0
    else:
        gx, gz = 0.0, sgz / lim_z
    b = 0.5 * math.cos(0.5 * theta)
    ux, uz = (0.0, 0.0) if small else (sx / theta, sz / theta)
    ug = ux * gx + uz * gz
    N[0], N[1] = a * gx + (b - a) * ux * ug, a * gz + (b - a) * uz * ug
    return True


@njit(cache=True, leaf=True)
def _slide(q, dq, T, on_limit, normals, blocks, sliding):
    """Tree.tangent_projector grown in place. P = I - sum nu nu^T is block diagonal: a 2x2 block per sliding swing
    on its (sx, sz) variables (blocks (L, 2, 2), sliding (L,) which links have one). Each swing on its limit
    (on_limit, normals from _limit_normal) that dq pushes outward and P does not slide along yet (its block still
    the identity) is added, nu its normal in the scaled variables, normalized. Returns whether P grew."""
    cols, D = T[5], T[15]
    grew = False
    for i in range(on_limit.shape[0]):
        if not on_limit[i]:
            continue
        a, b = cols[i, 0], cols[i, 2]
        if not sliding[i]:
            blocks[i, 0, 0], blocks[i, 0, 1], blocks[i, 1, 0], blocks[i, 1, 1] = 1.0, 0.0, 0.0, 1.0
        fresh = blocks[i, 0, 0] > 1.0 - 1e-12 and blocks[i, 1, 1] > 1.0 - 1e-12 and abs(blocks[i, 0, 1]) < 1e-12
        if dq[a] * normals[i, 0] + dq[b] * normals[i, 1] <= 0.0 or not fresh:
            continue
        n0, n1 = normals[i, 0] * D[a], normals[i, 1] * D[b]
        norm = max(math.sqrt(n0 * n0 + n1 * n1), 1e-300)
        n0, n1 = n0 / norm, n1 / norm
        blocks[i, 0, 0] -= n0 * n0
        blocks[i, 0, 1] -= n0 * n1
        blocks[i, 1, 0] -= n1 * n0
        blocks[i, 1, 1] -= n1 * n1
        sliding[i] = True
        grew = True
    return grew


@njit(cache=True, leaf=True)
def _project_rows(M, cols, blocks, sliding):
    """M <- P M for the block diagonal P of _slide (M (n, k), a vector as (n, 1))."""
    for i in range(sliding.shape[0]):
        if not sliding[i]:
            continue
        a, b = cols[i, 0], cols[i, 2]
        B = blocks[i]
        for j in range(M.shape[1]):
            x, z = M[a, j], M[b, j]
            M[a, j], M[b, j] = B[0, 0] * x + B[0, 1] * z, B[1, 0] * x + B[1, 1] * z


# -- the Levenberg-Marquardt step and loop -------------------------------------------------------------------

@njit(cache=True, leaf=True)
def _spd_solve(H, b, x, Lc, y):
    """x = H^-1 b for a symmetric positive definite H (Cholesky; H is J^T J + lambda I); Lc (n, n) and y (n,)
    are work space."""
    n = H.shape[0]
    for j in range(n):  # (Lc's diagonal holds 1 / L_jj: one division a column, not one an entry)
        s = H[j, j]
        for k in range(j):
            s -= Lc[j, k] * Lc[j, k]
        inv = 1.0 / math.sqrt(max(s, 1e-300))
        Lc[j, j] = inv
        for i in range(j + 1, n):
            s = H[i, j]
            for k in range(j):
                s -= Lc[i, k] * Lc[j, k]
            Lc[i, j] = s * inv
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= Lc[i, k] * y[k]
        y[i] = s * Lc[i, i]
    for i in range(n - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, n):
            s -= Lc[k, i] * x[k]
        x[i] = s * Lc[i, i]


@njit(cache=True, leaf=True)
def _normal_equations(J, r, D, row_var, N, grad):
    """N = J_D^T J_D and grad = J_D^T r for J_D = J diag(D): dense rows in full, a row with one variable
    (Displacement, JointValue: row_var) on the diagonal only."""
    m, n = J.shape
    N[:, :] = 0.0
    grad[:] = 0.0
    for k in range(m):
        v = row_var[k]
        if v >= 0:
            x = J[k, v] * D[v]
            N[v, v] += x * x
            grad[v] += x * r[k]
            continue
        for i in range(n):
            a = J[k, i] * D[i]
            if a == 0.0:
                continue
            grad[i] += a * r[k]
            for j in range(i, n):
                N[i, j] += a * J[k, j] * D[j]
    for i in range(n):
        for j in range(i + 1, n):
            N[j, i] = N[i, j]


@njit(cache=True, leaf=True)
def _damped_step(N, grad, lam, D, held, cols, blocks, sliding, any_sliding, dq, H, b, Lc, y):
    """dq = -D P (J_r^T J_r + lam I)^-1 J_r^T r, J_r = J_D with the held variables' columns removed, times P when
    swings slide along their limits (lm.constrained_step; eq. 11-12), from N = J_D^T J_D and grad = J_D^T r (so
    J_r^T J_r = P N_h P and J_r^T r = P grad_h, P symmetric and block diagonal: _slide); held variables do not
    move. H, Lc (n, n) and b, y (n,) are work space."""
    n = N.shape[0]
    for i in range(n):
        for j in range(n):
            H[i, j] = 0.0 if (held[i] or held[j]) else N[i, j]
        b[i] = 0.0 if held[i] else -grad[i]
    if any_sliding:
        _project_rows(H, cols, blocks, sliding)  # P H
        Ht = H.T  # (P H) P = (P (P H)^T)^T, P symmetric
        _project_rows(Ht, cols, blocks, sliding)
        _project_rows(b.reshape((n, 1)), cols, blocks, sliding)
    for i in range(n):
        H[i, i] += lam
    _spd_solve(H, b, dq, Lc, y)
    if any_sliding:
        _project_rows(dq.reshape((n, 1)), cols, blocks, sliding)
    for i in range(n):
        dq[i] = 0.0 if held[i] else D[i] * dq[i]


@njit(cache=True)
def _dual_workspace(row_var, n, L, always):
    """_dual_step's work space: the dense rows' indices (every row but the one-variable ones of row_var), and
    arrays for their m_d x m_d system; empty arrays, unless ``always``, when _use_dual says the normal equations
    cost less (the memetic solver runs lm_kernel once per elite and generation)."""
    md = 0
    for v in row_var:
        md += v < 0
    if not always and not _use_dual(md, n):
        n = L = md = 0
    dense = np.empty(md, dtype=np.int64)
    k = 0
    for i in range(row_var.shape[0]):
        if row_var[i] < 0 and k < md:  # (none when unused: md is then 0)
            dense[k] = i
            k += 1
    # (few arrays, each a stack: a long tuple costs compile time in every function it passes through; the last:
    # _constrained_step's held variables and sliding swings before they grew, for _dual_resolve)
    return (dense, np.empty((3, n)), np.empty((2, md, n)), np.empty((2, md, md)), np.empty((5, md)),
            np.zeros(n + L, dtype=np.bool_))


@njit(cache=True)
def _use_dual(md, n):
    """Whether _dual_step costs less than _damped_step: its m_d^2 n + m_d^3 / 6 per solve against the normal
    equations' m_d n^2 / 2 and n^3 / 6 (the human rig tracked on 5 goals: 21 rows, 96 variables)."""
    return md * md * n + md ** 3 / 6.0 < n ** 3 / 6.0 + md * n * n / 2.0


@njit(cache=True, leaf=True)
def _sparse_rows(J, r, D, row_var, c, gs):
    """The one-variable rows' (Displacement, JointValue) share of J_D^T J_D (diagonal: c) and of J_D^T r (gs)."""
    c[:] = 0.0
    gs[:] = 0.0
    for k in range(row_var.shape[0]):
        v = row_var[k]
        if v >= 0:
            x = J[k, v] * D[v]
            c[v] += x * x
            gs[v] += x * r[k]


@njit(cache=True, fastmath=True, leaf=True)
def _dot(a, b):
    """a . b, its sum in any order (vectorized: most of _dual_step's time; np.dot's BLAS call costs more at these
    sizes and needs reference counts)."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@njit(cache=True, leaf=True)
def _dual_unit(v, w, i, J, D, held, blocks, dense, lam, dw):
    """One unit of _dual_step's system into its columns of A, B = (Lambda^-1 A^T)^T and g = Lambda^-1 P Z g_s: a
    variable v alone (i < 0), or the swing (v, w) of link i sliding along its limit (its block of P, i; Lambda's
    2x2 block inverted: M)."""
    vectors, AB = dw[1], dw[2]
    c, gs, g = vectors[0], vectors[1], vectors[2]
    A, B = AB[0], AB[1]
    md = dense.shape[0]
    if i < 0:
        h = held[v]
        inv = 1.0 / ((0.0 if h else c[v]) + lam)
        for k in range(md):
            a = 0.0 if h else J[dense[k], v] * D[v]
            A[k, v] = a
            B[k, v] = inv * a
        g[v] = 0.0 if h else inv * gs[v]
        return
    P = blocks[i]
    ca, cb = 0.0 if held[v] else c[v], 0.0 if held[w] else c[w]
    p = P[0, 0] * P[0, 0] * ca + P[0, 1] * P[1, 0] * cb + lam  # Lambda's block: P diag(ca, cb) P + lam I
    s = P[0, 0] * P[0, 1] * ca + P[0, 1] * P[1, 1] * cb
    t = P[1, 0] * P[1, 0] * ca + P[1, 1] * P[1, 1] * cb + lam
    det = max(p * t - s * s, 1e-300)
    m00, m01, m11 = t / det, -s / det, p / det  # M, symmetric
    for k in range(md):
        x = 0.0 if held[v] else J[dense[k], v] * D[v]
        z = 0.0 if held[w] else J[dense[k], w] * D[w]
        x, z = P[0, 0] * x + P[0, 1] * z, P[1, 0] * x + P[1, 1] * z
        A[k, v], A[k, w] = x, z
        B[k, v], B[k, w] = m00 * x + m01 * z, m01 * x + m11 * z
    x, z = 0.0 if held[v] else gs[v], 0.0 if held[w] else gs[w]
    x, z = P[0, 0] * x + P[0, 1] * z, P[1, 0] * x + P[1, 1] * z
    g[v], g[w] = m00 * x + m01 * z, m01 * x + m11 * z


@njit(cache=True, leaf=True)
def _dual_add(sign, v, w, dw):
    """K += sign A_u B_u^T (its lower triangle: what _spd_solve reads) and rhs -= sign A_u g_u for the unit u of
    _dual_unit (its columns v, and w >= 0)."""
    AB, KL, small, g = dw[2], dw[3], dw[4], dw[1][2]
    A, B, K, rhs = AB[0], AB[1], KL[0], small[0]
    a, b = small[3], small[4]  # (B's columns, contiguous)
    md = K.shape[0]
    for k in range(md):
        a[k] = B[k, v]
        b[k] = B[k, w] if w >= 0 else 0.0
    for k in range(md):
        x, z = sign * A[k, v], sign * A[k, w] if w >= 0 else 0.0
        rhs[k] -= x * g[v] + (z * g[w] if w >= 0 else 0.0)
        Kk = K[k]
        if w >= 0:
            for m in range(k + 1):
                Kk[m] += x * a[m] + z * b[m]
        else:
            for m in range(k + 1):
                Kk[m] += x * a[m]


@njit(cache=True, leaf=True)
def _dual_step(J, r, lam, D, held, cols, blocks, sliding, any_sliding, dq, dw):
    """_damped_step's dq solved on the goals' side: with A = J_d D Z P (the dense rows d, Z dropping the held
    variables, P sliding swings along their limits), Lambda = P Z C Z P + lam I (C the one-variable rows' diagonal:
    Lambda is block diagonal) and g = P Z g_s their gradient, the step's system (A^T A + Lambda) x = -(A^T r_d + g)
    is, by Woodbury's identity, x = -Lambda^-1 (A^T y + g) with (I + A Lambda^-1 A^T) y = r_d - A Lambda^-1 g: an
    m_d x m_d system where _damped_step has an n x n one (the same x in exact arithmetic; _use_dual chooses).
    The system is a sum over the units of _dual_unit (variables, sliding swings): _dual_resolve updates it."""
    dense, AB, KL, small = dw[0], dw[2], dw[3], dw[4]
    A, B, K, rhs = AB[0], AB[1], KL[0], small[0]
    g = dw[1][2]
    n, md = D.shape[0], dense.shape[0]
    for v in range(n):
        _dual_unit(v, -1, -1, J, D, held, blocks, dense, lam, dw)
    if any_sliding:
        for i in range(sliding.shape[0]):
            if sliding[i]:
                _dual_unit(cols[i, 0], cols[i, 2], i, J, D, held, blocks, dense, lam, dw)
    for k in range(md):
        for m in range(k, md):
            K[k, m] = K[m, k] = _dot(A[k], B[m])
        K[k, k] += 1.0
        rhs[k] = r[dense[k]] - _dot(A[k], g)  # (A Lambda^-1 g)
    _dual_solve(D, held, cols, blocks, sliding, any_sliding, dq, dw)


@njit(cache=True, leaf=True)
def _dual_replace(v, w, i, J, D, held, blocks, dense, lam, dw):
    """The unit (v, w, i) of _dual_unit taken out of _dual_step's system with the columns it had, and put back with
    those of the present state."""
    _dual_add(-1.0, v, w, dw)
    _dual_unit(v, w, i, J, D, held, blocks, dense, lam, dw)
    _dual_add(1.0, v, w, dw)


@njit(cache=True, leaf=True)
def _dual_resolve(lam, J, D, held, was_held, cols, blocks, sliding, was_sliding, dq, dw):
    """_dual_step again after the held variables or the sliding swings grew (from was_held, was_sliding): only the
    units that changed taken out of its system and put back (rank-one and rank-two updates of K, m_d^2 each, not
    the m_d^2 n of a new system: a tracked human's constrained step solves 2.3 times on average)."""
    dense = dw[0]
    any_sliding = False
    for i in range(sliding.shape[0]):  # the sliding swings: new ones (their two variables alone until now, taken
        # out as a pair), and those with a variable newly held
        if not sliding[i]:
            continue
        any_sliding = True
        a, b = cols[i, 0], cols[i, 2]
        if not was_sliding[i] or held[a] != was_held[a] or held[b] != was_held[b]:
            _dual_replace(a, b, i, J, D, held, blocks, dense, lam, dw)
            was_held[a], was_held[b] = held[a], held[b]  # (done)
    for v in range(D.shape[0]):  # the variables alone newly held
        if held[v] != was_held[v]:
            _dual_replace(v, -1, -1, J, D, held, blocks, dense, lam, dw)
    _dual_solve(D, held, cols, blocks, sliding, any_sliding, dq, dw)


@njit(cache=True, leaf=True)
def _dual_solve(D, held, cols, blocks, sliding, any_sliding, dq, dw):
    """dq from _dual_step's system: K y = rhs, dq = -D P (g + B^T y), the held variables' 0."""
    KL, small, B, g = dw[3], dw[4], dw[2][1], dw[1][2]
    K, Lk, rhs, yk, tk = KL[0], KL[1], small[0], small[1], small[2]
    n, md = D.shape[0], K.shape[0]
    _spd_solve(K, rhs, yk, Lk, tk)
    for i in range(n):
        s = g[i]
        for k in range(md):
            s += B[k, i] * yk[k]
        dq[i] = -s
    if any_sliding:
        _project_rows(dq.reshape((n, 1)), cols, blocks, sliding)
    for i in range(n):
        dq[i] = 0.0 if held[i] else D[i] * dq[i]


@njit(cache=True, leaf=True)
def _constrained_step(q, J, r, lam, T, held, on_limit, normals, blocks, sliding, dq, dual, pw, dw):
    """The damped step into dq, then lm.constrained_step: re-solved while it pushes against limits q rests on,
    growing the active set (at most three times): box-bounded variables on a bound it pushes outward are held,
    swings on their limit ellipse it pushes outward slide along it. Each solve is _dual_step's or _damped_step's
    (``dual``; pw: the normal equations' N, grad and their work space)."""
    lower, upper, cols, D = T[12], T[13], T[5], T[15]
    N, grad, H, b, Lc, y = pw
    n, L = q.shape[0], sliding.shape[0]
    before = dw[5]  # (the dual side's: held, then sliding, as the last solve had them)
    held[:] = False
    sliding[:] = False
    any_sliding = False
    for attempt in range(4):
        if not dual:
            _damped_step(N, grad, lam, D, held, cols, blocks, sliding, any_sliding, dq, H, b, Lc, y)
        elif attempt == 0:
            _dual_step(J, r, lam, D, held, cols, blocks, sliding, any_sliding, dq, dw)
        else:
            _dual_resolve(lam, J, D, held, before[:n], cols, blocks, sliding, before[n:], dq, dw)
        if attempt == 3:
            return
        if dual:
            for v in range(n):
                before[v] = held[v]
            for i in range(L):
                before[n + i] = sliding[i]
        grew = False
        for v in range(n):
            h = (q[v] <= lower[v] + 1e-12 and dq[v] < 0.0) or (q[v] >= upper[v] - 1e-12 and dq[v] > 0.0)
            if h and not held[v]:
                held[v] = True
                grew = True
        if on_limit.any() and _slide(q, dq, T, on_limit, normals, blocks, sliding):
            any_sliding = grew = True
        if not grew:
            return


@njit(cache=True, leaf=True)
def _goal_met(G, errors, g):
    """Whether goal g is met by its error and angle (Kernel.key's rule)."""
    kind, has_p, has_R, has_L, tol_p, tol_R = G[0], G[6], G[7], G[8], G[11], G[12]
    return ((not (has_p[g] or kind[g] != _CARTESIAN) or errors[g, 0] <= tol_p[g])
            and (not (has_R[g] or has_L[g]) or errors[g, 1] <= tol_R[g]))


@njit(cache=True, leaf=True)
def _end(status, it, met, E, q, errors, trail, stall, stall_ratio, G, q_out, errors_out, stuck):
    """_lm's end: q and errors into q_out and errors_out, the stuck goals into stuck; (status, it, met, E)."""
    _copy(q_out, q)
    _copy(errors_out, errors)
    _stuck(trail, it, stall, stall_ratio, errors, G, stuck)
    return status, it, met, E


@njit(cache=True, leaf=True)
def _stuck(trail, it, stall, stall_ratio, errors, G, out):
    """_lm's stuck goals at iteration it into out (G,) (see there)."""
    for g in range(errors.shape[0]):
        out[g] = False
        if _goal_met(G, errors, g):
            continue
        out[g] = True
        if stall > 0 and it >= stall:
            old = trail[it - stall, g]
            if errors[g, 0] ** 2 + errors[g, 1] ** 2 < stall_ratio * (old[0] ** 2 + old[1] ** 2):
                out[g] = False
    if not out.any():  # the sum stalled, no goal alone: every unmet goal
        for g in range(errors.shape[0]):
            out[g] = not _goal_met(G, errors, g)


@njit(cache=True, leaf=True)
def _largest_change(a, b):
    """max |a - b| over the entries of two vectors."""
    out = 0.0
    for v in range(a.shape[0]):
        out = max(out, abs(a[v] - b[v]))
    return out


@njit(cache=True, leaf=True, inline="always")
def _step_into(q, t, dq, T, out):
    """out = project(q + t dq)."""
    for v in range(q.shape[0]):
        out[v] = q[v] + t * dq[v]
    _project_into(out, T, out)


_entry_points = {}  # dispatcher -> its compiled function's own entry point, for the arguments' types _direct had


def _direct(dispatcher, *args):
    """dispatcher(*args), past numba's typing of each argument once the dispatcher has run for their types: the
    entry point of the compiled function it ran. Typing the Work alone is a call into Python (1.2 us of a Table I
    solve's 45). Only for calls whose arguments' types are the same on every call, as search's are (its arrays made
    by it and by Kernel with their dtypes, dimensions and layouts; scalars are converted by value); a function
    that is not numba's is called as it is."""
    entry = _entry_points.get(dispatcher)
    if entry is not None:
        return entry(*args)
    out = dispatcher(*args)
    overloads = getattr(dispatcher, "overloads", None)
    if overloads is not None:
        ran = overloads.get(tuple(dispatcher.typeof_pyval(a) for a in args))
        if ran is not None:
            _entry_points[dispatcher] = ran.entry_point
    return out


def lm_kernel(q, max_iterations, stall, stall_ratio, damping_bias, damping_scale, damping_start, step_tol, residual_tol,
              backtracks, work, gp):
    """One _lm search from Python (the memetic solver's exploitation, tests; solve's LM goes through search), with
    the Kernel's work (Kernel.work) and goals packed: restarts_kernel allowed no new start
    (one entry point compiled, not two: each compiles _lm and all it calls anew, 2 s). Returns (q, status: an index
    of MESSAGES, iterations, every goal met, E, each goal's error and angle at q (G, 2))."""
    q = np.array(q, dtype=np.float64)  # (a copy written into: the caller's left as it is)
    errors = np.empty((gp[0].shape[0] // _GOAL_FLOATS, 2))
    met, E, _, iterations, _, status = restarts_kernel(q, np.zeros(1, dtype=np.int64), 0, max_iterations, 0, -1, stall,
                                                       stall_ratio, damping_bias, damping_scale, damping_start,
                                                       step_tol, residual_tol, backtracks, work, gp, q.copy(), errors)
    return q, status, iterations, met, E, errors


@njit(cache=True)
def _lm_workspace(n, L, G, max_iterations):
    """_lm's work space, made for a restarts_kernel call and kept for the next ones while it fits (_fits; its searches
    share it): evaluate's (workspace), the
    dual step's (_dual_workspace) or the normal equations' (6 arrays), configurations (4, n: q, q_new, trial, dq),
    residuals (2, m), Jacobians (2, m, n), goals' errors (2, G, 2), swings' blocks (L, 2, 2) and limit normals
    (L, 2), flags (2 L + n: sliding, on limit, held), the unmet goals' sum (max_iterations + 1) and each goal's
    error and angle (max_iterations + 1, G, 2) at each iteration."""
    m, goals = size(G), G[1].shape[0]
    ws = workspace(n, L, G)
    dw = _dual_workspace(ws[5], n, L, False)
    w = 0 if dw[1].shape[1] > 0 else n  # (the normal equations' arrays, unused on the dual side)
    pw = (np.empty((w, w)), np.empty(w), np.empty((w, w)), np.empty(w), np.empty((w, w)), np.empty(w))
    return (ws, dw, pw, np.empty((4, n)), np.empty((2, m)), np.empty((2, m, n)), np.zeros((2, goals, 2)),
            np.empty((L, 2, 2)), np.zeros((L, 2)), np.zeros(2 * L + n, dtype=np.bool_), np.empty(max_iterations + 1),
            np.empty((max_iterations + 1, goals, 2)))


@njit(cache=True)
def _restarts_workspace(n, goals):
    """restarts_kernel's own: configurations (4, n: a search's start, its answer, the best answer, a random draw),
    errors (2, G, 2: the search's, the best answer's), the stuck goals (G,) and _restart's free variables (n,)."""
    return np.empty((4, n)), np.zeros((2, goals, 2)), np.zeros(goals, dtype=np.bool_), np.zeros(n, dtype=np.bool_)


@njit(cache=True, leaf=True)
def _fits(lw, G, max_iterations):
    """Whether _lm_workspace's lw serves the goals G for max_iterations: as many goals, rows on the same variables
    (the same dual or normal equations' step), room for the iterations."""
    row_var, errs, history = lw[0][5], lw[6], lw[10]
    return errs.shape[1] == G[1].shape[0] and history.shape[0] > max_iterations and row_var.shape[0] == size(G) \
        and _row_variables(G, row_var, False)


SHORTER_STEP_GRID = (1.0, 0.8, 0.6, 0.45, 0.3, 0.2, 0.12, 0.06, 0.02)  # the step lengths lm.shorter_step and _lm try
# for the longest one inside the bounds


@njit(cache=True, leaf=True)
def _lm(q0, max_iterations, stall, stall_ratio, damping_bias, damping_scale, damping_start, step_tol, residual_tol,
        backtracks, T, G, lw, q_out, errors_out, stuck):
    """solvers.lm.run compiled, from P(q0): q <- P(q + D dq), (J^T J + W_N) dq = -J^T r, W_N = mu (E_k + w_N) I
    (paper 001 eq. 11-15), the step solved within the limits it pushes against, a shorter step when the full one is
    worse (mu from ``damping_start``, raised by 1/t for the usable fraction t, halved after full steps down to
    DAMPING_FLOOR), the same stopping rules. lw: _lm_workspace's (for at least max_iterations).
    Writes the answer q into q_out, each goal's error and angle at q into errors_out (G, 2), and the goals stuck at
    q into stuck (G,): not met, and error^2 + angle^2 fell by less than the fraction 1 - ``stall_ratio`` over the
    last ``stall`` iterations (every unmet goal when fewer ran, or when none is stuck alone). Returns (status: an
    index of MESSAGES, iterations, every goal met, E = |r|^2 / 2). The search stalls (status 3) when the unmet
    goals' sum fell by less than that. (Without reference counts, as all it calls: its arrays come from
    _lm_workspace, made once for all the searches of a kernel call.)"""
    n, L = q0.shape[0], T[0].shape[0]
    ws, dw, pw, qs, rs, Js, errs, blocks, normals, flags, history, trail = lw
    # (q and q_new: two buffers swapped when a step is taken, as r and r_new, J and J_new, errors and errors_new)
    q, q_new, trial, dq = qs[0], qs[1], qs[2], qs[3]
    r, r_new, J, J_new, errors, errors_new = rs[0], rs[1], Js[0], Js[1], errs[0], errs[1]
    sliding, on_limit, held = flags[:L], flags[L:2 * L], flags[2 * L:]  # (shared by a call's searches: sliding
    # and held reset by _constrained_step, on_limit set at each iteration where there are swings)
    _project_into(q0, T, q)  # (a seed as given: solve leaves its projection to here)
    D = T[15]
    met, unmet = evaluate(q, T, G, ws, r, J, True, errors)
    dual = dw[1].shape[1] > 0  # (its work space made: the goals' side is cheaper)
    E = 0.5 * _dot(r, r)
    history[0] = unmet
    _copy(trail[0], errors)
    mu = damping_start
    it = 0
    kind, row_var, N, grad = T[2], ws[5], pw[0], pw[1]
    dense_rows, dense_gs = dw[1][0], dw[1][1]
    swings = False
    for i in range(L):
        swings |= kind[i] == _SWING
    G_count = errors.shape[0]
    while True:
        if met:
            return _end(0, it, met, E, q, errors, trail, stall, stall_ratio, G, q_out, errors_out, stuck)
        if it >= max_iterations:
            return _end(1, it, met, E, q, errors, trail, stall, stall_ratio, G, q_out, errors_out, stuck)
        it += 1
        if dual:  # what every solve of this iteration's step shares
            _sparse_rows(J, r, D, row_var, dense_rows, dense_gs)
        else:
            _normal_equations(J, r, D, row_var, N, grad)
        lam = mu * (damping_scale * E + damping_bias)
        if swings:
            for i in range(L):
                on_limit[i] = kind[i] == _SWING and _limit_normal(q, i, T, normals[i])
        _constrained_step(q, J, r, lam, T, held, on_limit, normals, blocks, sliding, dq, dual, pw, dw)
        _step_into(q, 1.0, dq, T, q_new)
        # the trial point evaluated with its Jacobian: taken (most steps), it is the next iterate's
        met_new, unmet_new = evaluate(q_new, T, G, ws, r_new, J_new, True, errors_new)
        E_new = 0.5 * _dot(r_new, r_new)
        if E_new > E:  # shorter_step: the halvings and the longest grid step that stays inside the bounds
            inside_t = -1.0
            for t in SHORTER_STEP_GRID:
                for v in range(n):
                    trial[v] = q[v] + t * dq[v]
                _project_into(trial, T, q_new)
                if _largest_change(q_new, trial) <= 1e-12:
                    inside_t = t
                    break
            best_E, best_t = np.inf, -1.0
            halved = False  # (the halvings searched: lm.shorter_step's rule)
            for k in range(backtracks + 1):
                t = inside_t if k == backtracks else -1.0 if halved else 0.5 ** (k + 1)
                if t <= 0.0 or t == 1.0:  # (the full step, inside: known worse)
                    continue
                _step_into(q, t, dq, T, trial)
                evaluate(trial, T, G, ws, r_new, J_new, False, errors_new)
                Et = 0.5 * _dot(r_new, r_new)
                if Et < best_E:
                    best_E, best_t = Et, t
                elif best_E <= E:
                    halved = True
            if not best_E <= E:
                return _end(2, it, met, E, q, errors, trail, stall, stall_ratio, G, q_out, errors_out, stuck)
            _step_into(q, best_t, dq, T, q_new)
            longest = 1e-300
            for v in range(n):
                longest = max(longest, abs(dq[v]))
            step = min(_largest_change(q_new, q) / longest, best_t)  # (lm.run)
            mu = min(mu / max(step, 1e-3), 1e8)
            met, unmet = evaluate(q_new, T, G, ws, r, J, True, errors)
        else:
            mu = max(mu / 2.0, DAMPING_FLOOR)
            r, r_new = r_new, r
            J, J_new = J_new, J
            errors, errors_new = errors_new, errors
            met, unmet = met_new, unmet_new
        moved = _largest_change(q_new, q)
        E_prev = E
        E = 0.5 * _dot(r, r)
        change = abs(math.sqrt(2.0 * E) - math.sqrt(2.0 * E_prev))
        q, q_new = q_new, q
        history[it] = unmet
        for g in range(G_count):
            trail[it, g, 0], trail[it, g, 1] = errors[g, 0], errors[g, 1]
        if stall > 0 and it >= stall and history[it] > stall_ratio * history[it - stall] and history[it - stall] > 0.0:
            return _end(3, it, met, E, q, errors, trail, stall, stall_ratio, G, q_out, errors_out, stuck)
        if moved < step_tol or change < residual_tol:
            return _end(0 if met else 4, it, met, E, q, errors, trail, stall, stall_ratio, G, q_out, errors_out,
                        stuck)


@njit(cache=True, leaf=True)
def _uses(G, T, g, v):
    """Whether goal g depends on variable v. A position goal at its link's origin (a bone's head) does not
    depend on that link's own turn and stretch: a restart left them alone (a restart of a head goal spun the head
    bone by 98 degrees between two frames of a bake, moving nothing the goals see)."""
    kind, links, slot, offsets, has_R, has_L, rows, indices = G[0], G[1], G[2], G[3], G[7], G[8], G[13], G[15]
    joint, var, ancestors, var_link, stretch_var = T[2], T[4], T[16], T[17], T[18]
    if kind[g] == _CARTESIAN:
        i = links[g]
        if not ancestors[i, v]:
            return False
        if var_link[v] != i or has_R[g] or has_L[g] or offsets[g, 0] != 0.0 or offsets[g, 1] != 0.0 or \
                offsets[g, 2] != 0.0:
            return True
        # the link's own variable, the goal at its origin: only a translation moves that
        return joint[i] == _PRISMATIC or (joint[i] == _FREE and v < var[i] + 3 and stretch_var[i] != v)
    if kind[g] == _DISTANCE:
        return ancestors[links[g], v] or (slot[g] >= 0 and ancestors[slot[g], v])
    if kind[g] == _JOINT_VALUE:
        return slot[g] == v
    for k in range(rows[g]):
        if indices[slot[g], k] == v:
            return True
    return False


@njit(cache=True, leaf=True)
def _serves(stuck, v, T, G):
    """(whether variable v serves a stuck goal, whether it serves another)."""
    serves_stuck, serves_other = False, False
    for g in range(stuck.shape[0]):
        if _uses(G, T, g, v):
            if stuck[g]:
                serves_stuck = True
            else:
                serves_other = True
    return serves_stuck, serves_other


@njit(cache=True, leaf=True)
def _restart(q, seed, stuck, level, T, G, free, out):
    """A new start from q: at level 0, q with the variables that serve stuck goals and no other goal taken from
    seed (on a tree each limb's search fails or succeeds on its own: restarting every limb for one multiplies the
    chances against); at level 1 (also when no variable serves the stuck goals alone), every variable that serves
    a stuck goal (the shared ones too: a spine that keeps a hand out of reach); at level 2, or when that would
    change no variable or every one, the whole seed; but level 2 is level 0 when no variable serves both a stuck goal
    and another (limbs on a fixed root: a whole start would only undo the limbs met; robotisOP2's four 6-DOF limbs
    met 160 of 200 sets of four poses within 10 ms, 196 without). The start into out; free (n,) is work space. Returns
    whether it is partial."""
    n = q.shape[0]
    if level == 2:
        level = 0
        for v in range(n):
            serves_stuck, serves_other = _serves(stuck, v, T, G)
            if serves_stuck and serves_other:
                level = 2
                break
    while level < 2:
        count = 0
        for v in range(n):
            serves_stuck, serves_other = _serves(stuck, v, T, G)
            free[v] = serves_stuck and (level == 1 or not serves_other)
            count += free[v]
        if 0 < count < n:
            for v in range(n):
                out[v] = seed[v] if free[v] else q[v]
            _project_into(out, T, out)
            return True
        level = 1 if count == 0 and level == 0 else 2
    _copy(out, seed)
    return False


@njit(cache=True, leaf=True)
def _next_start(q, seed, stuck, in_a_row, partial, T, G, free, out):
    """_restart at the level due, into out: 0 and 1 in turn for at most ``partial`` partial restarts in a row
    (in_a_row (1,) counts them, updated), then 2 (whole)."""
    was_partial = _restart(q, seed, stuck, in_a_row[0] % 2 if in_a_row[0] < partial else 2, T, G, free, out)
    in_a_row[0] = in_a_row[0] + 1 if was_partial else 0


@njit(cache=True, leaf=True)
def _random_into(out, T):
    """A random feasible configuration into out (Tree.random_configurations: uniform in each variable's range,
    then projected)."""
    low, span = T[21], T[22]
    for v in range(out.shape[0]):
        out[v] = low[v] + np.random.random() * span[v]
    _project_into(out, T, out)


if numba is not None:
    from numba.core import types as _types
    from numba.experimental import structref

    @structref.register
    class _WorkType(_types.StructRef):
        def preprocess_fields(self, fields):
            return tuple((name, _types.unliteral(t)) for name, t in fields)

    class Work(structref.StructRefProxy):
        """restarts_kernel's arrays kept between its calls (Kernel.work: one per tree and thread): the tree's tuple
        (_tree), _lm's work space (_lm_workspace) and its own (_restarts_workspace). Kept, a Table I solve's kernel
        call makes none of them (some 30 arrays and 40 views: 3 us of its 10 before its first iteration)."""

    structref.define_proxy(Work, _WorkType, ["T", "lw", "kw"])


@njit(cache=True, entry=True)
def make_work(tp, gp, max_iterations):
    """A Work for the packed tree tp, its work spaces made for the goals gp and max_iterations (restarts_kernel makes
    them anew for goals or iterations they do not fit)."""
    T, G = _tree(tp), _goals(gp)
    n = T[12].shape[0]  # (clip_lower: a bound per variable)
    return Work(T, _lm_workspace(n, T[0].shape[0], G, max_iterations), _restarts_workspace(n, G[1].shape[0]))


@njit(cache=True, leaf=True)
def _zero(a):
    """Every entry of a C-contiguous array set to 0 (``.flat``: as _copy)."""
    for i in range(a.size):
        a.flat[i] = 0.0


@njit(cache=True, entry=True)
def restarts_kernel(q, in_a_row, partial, max_iterations, max_starts, seed, stall, stall_ratio, damping_bias,
                    damping_scale, damping_start, step_tol, residual_tol, backtracks, work, gp, best_out, errors_out):
    """_lm from q, then restarted from random feasible configurations (_random_into, numba's generator seeded
    with ``seed`` at the first draw when it is >= 0) in turn (_next_start; each search given up when it stalls),
    until one meets every goal, max_iterations run out, or ``max_starts`` new starts were made (< 0: no limit).
    in_a_row (1,) counts the partial restarts in a row, across calls; work: the tree's Work (Kernel.work), its work
    spaces made anew when they do not fit the goals gp (_fits). Writes the best q into best_out (n,), its errors
    into errors_out (G, 2), and into q the search's q when the iterations ran out (to go on from; the next
    search's start when the last one ended with them), else the last answer. Returns (the best q's met, E, new starts
    made, iterations, whether the iterations ran out, the last search's status (an index of MESSAGES)): scalars,
    the arrays the caller's (each array returned to Python cost 1 us, numba unpickling its type there)."""
    T, G = work.T, _goals(gp)
    n, goals = q.shape[0], G[1].shape[0]
    if not _fits(work.lw, G, max_iterations):
        work.lw = _lm_workspace(n, T[0].shape[0], G, max(max_iterations, CHUNK))
        work.kw = _restarts_workspace(n, goals)
    lw, kw = work.lw, work.kw
    # (each search from start; its answer into q_end, errors and stuck; the best answer copied out)
    qs, es, stuck, free = kw
    start, q_end, best_q, draw = qs[0], qs[1], qs[2], qs[3]
    errors, best_errors = es[0], es[1]
    _copy(start, q)
    _zero(lw[6])  # (a goal's angle is written only by goals that have one: none left from another call's goals)
    _zero(es)
    total, used = 0, 0
    best_met, best_E = False, np.inf
    while True:
        status, its, met, E = _lm(start, max_iterations - total, stall, stall_ratio, damping_bias, damping_scale,
                                  damping_start, step_tol, residual_tol, backtracks, T, G, lw, q_end, errors, stuck)
        total += its
        if used == 0 or best_E != best_E or (met and not best_met) or (met == best_met and E < best_E):  # (the
            # first search's even when its E is not a number, and replaced then)
            _copy(best_q, q_end)
            _copy(best_errors, errors)
            best_met, best_E = met, E
        if met or status == 1 or 0 <= max_starts <= used:  # (status 1: the search itself ran out, the next call
            # goes on with it)
            go_on, ran_out = q_end, status == 1 and not met
            break
        if used == 0 and seed >= 0:  # (seeded at the first draw: most solves make none, and seeding costs 1 us)
            np.random.seed(seed)
        _random_into(draw, T)
        _next_start(q_end, draw, stuck, in_a_row, partial, T, G, free, start)
        used += 1
        if total >= max_iterations:  # it ended (stalled) with the iterations: the next call begins the next search
            go_on, ran_out = start, True
            break
    _copy(q, go_on)
    _copy(best_out, best_q)
    _copy(errors_out, best_errors)
    return best_met, best_E, used, total, ran_out, status


@njit(cache=True, entry=True)
def judge(q, tp, gp):
    """(errors (G, 2): each goal's error and angle, cost sum w |r|^2 / 2) at q (the tree and goals packed)."""
    T, G = _tree(tp), _goals(gp)
    r, J = np.empty(size(G)), np.empty((0, 0))
    errors = np.zeros((G[1].shape[0], 2))
    evaluate(q, T, G, workspace(q.shape[0], T[0].shape[0], G), r, J, False, errors)
    return errors, 0.5 * np.dot(r, r)


# -- the solver methods' compiled runs --------------------------------------------------------------------------

PARTIAL_RESTARTS = 10  # restarts of the stuck goals' variables alone in a row, at most, before a whole one
CHUNK = 200  # iterations per kernel call at most: the wall-clock budget is checked between calls


def _chunk(budget, now, per):
    """Iterations for the next kernel call (0: none, the budget is spent): CHUNK without a deadline, else about
    half of what the time left (from ``now``) allows at ``per``, the tree's measured seconds per iteration (16
    before any is measured: None), at least 4: a 72-variable rig's iteration costs about 0.25 ms, so 200 of them
    could overrun a drag step's budget by 50 ms. (An int: the kernel's argument.)"""
    most, deadline = budget.max_iterations, budget.deadline
    left = CHUNK if most is None else CHUNK if most - budget.iterations > CHUNK else most - budget.iterations
    if deadline is None or left <= 0:
        return left
    seconds = deadline - now
    if seconds <= 0.0:
        return 0
    if per is None:
        return 16 if left > 16 else left
    allowed = int(0.5 * seconds / per)
    least = 4 if left > 4 else left
    return least if allowed < least else left if allowed > left else allowed


def kernel_seed(rng):
    """A seed for numba's generator (the kernels' random starts) from a solve's rng: a Generator, a seed or None;
    the same rng gives the same seed (an int is its own, without making a Generator: that costs more than a
    compiled solve)."""
    if type(rng) is int or isinstance(rng, np.integer):  # (bool, an int's subclass, is not a seed)
        return int(rng) % 2**32
    if rng is None:
        rng = _entropy
    elif not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(rng)
    return int(rng.integers(2**32))


_entropy = np.random.default_rng()  # rng=None: fresh starts each solve


def settings(stall=0, stall_ratio=STALL_RATIO, damping_bias=1e-3, damping_scale=1.0, damping_start=DAMPING_START,
             step_tol=1e-12, residual_tol=1e-12, backtracks=8):
    """search's LM settings as restarts_kernel takes them: (stall, stall ratio, damping bias, damping scale, first
    damping, step tolerance, residual tolerance, backtracks), each of its type (an int where a float belongs would
    make numba compile the kernel anew, 25 s)."""
    return (int(stall or 0), float(stall_ratio), float(damping_bias), float(damping_scale), float(damping_start),
            float(step_tol), float(residual_tol), int(backtracks))


DEFAULT_SETTINGS = settings()


def search(k, q, budget, seed=-1, max_restarts=0, lm_settings=DEFAULT_SETTINGS):
    """The compiled LM (restarts_kernel) while ``budget`` lasts: _lm from q, then, ``max_restarts`` times at most
    (10**9: while the budget lasts), from random feasible configurations drawn in the kernel (numba's generator
    seeded with ``seed`` at the first draw when it is >= 0), until one meets every goal. ``lm_settings``: settings()'s
    tuple; a search is given up when it stalls (its ``stall`` > 0); a restart changes only the variables of the goals
    stuck (at most PARTIAL_RESTARTS times in a row, then all: _restart). The wall clock is looked at between kernel
    calls (a kernel cannot read it), each given about half the iterations the time left allows at this tree's
    measured cost per iteration (_chunk); iterations count into ``budget``. Returns (q, message, new starts made):
    the first answer that meets every goal, else the best."""
    gp, tree = k._gp, k.tree
    work, in_a_row = _kept(tree, gp)
    in_a_row[0] = 0
    # (a copy: the kernel writes into it where to go on from; flat and C-ordered, as _direct's entry point reads it)
    q = q.copy() if type(q) is np.ndarray and q.ndim == 1 and q.dtype == _FLOAT64 else \
        np.array(q, dtype=np.float64).reshape(-1)
    n, goals = tree.n, len(k._checks)
    limited = max_restarts < 10**9
    best_q, best_key, count, status = q, (True, math.inf), 0, None  # (status: the last kernel's; None: none ran)
    per = tree.__dict__.get("_compiled_iteration_seconds")  # (the tree's cost per iteration, a running mean)
    now = time.perf_counter()
    while True:
        left = _chunk(budget, now, per)
        if left <= 0:
            break
        start = now
        found, errors = np.empty(n), np.empty((goals, 2))
        met, E, used, iterations, ran_out, status = _direct(
            restarts_kernel, q, in_a_row, PARTIAL_RESTARTS, left, max_restarts - count if limited else -1, seed,
            *lm_settings, work, gp, found, errors)
        now = time.perf_counter()
        if iterations:
            per = (now - start) / iterations if per is None else 0.8 * per + 0.2 * (now - start) / iterations
            tree._compiled_iteration_seconds = per
        budget.iterations += iterations
        if used:  # (the generator, seeded at the kernel's first draw, goes on in the next call)
            seed = -1
            count += used
        if (not met, E) < best_key:
            best_q, best_key = found, (not met, E)
            k._judged = (found, errors, E, met)  # (judge's: key and result need not evaluate it again)
        if met or not ran_out:  # (not run out, not met: the starts allowed are made)
            break
    if best_key[1] == math.inf:  # no kernel ran (the budget ended first), or nothing finite came of it
        if status is not None and not count:  # (one search: its own reason, as it ended)
            return q, MESSAGES[status], count
        q = project_packed(q, _with_origins(tree))
        return q, MESSAGES[1] if k.key(q)[0] else MESSAGES[0], count
    # the only search's own reason when it ended by itself (status 1: the iterations ran out)
    message = MESSAGES[0] if not best_key[0] else MESSAGES[status] if not count else \
        MESSAGES[1] if budget.exhausted() else MESSAGES[3]
    if count:
        message += f" (best of {count + 1} starts)"
    return best_q, message, count


# -- the memetic solver (paper 000), compiled --------------------------------------------------------------------

@njit(cache=True)
def _omega_squared(q, T, G, chain, ws, r, J, errors, grad):
    """(Omega^2, every goal met) at q: paper 000 eq. 14, the weighted mean of the squared eq. 15 losses (as
    memetic.Fitness: a position's pi d / sqrt((L + d)(lambda + d)), L its chain's length (``chain`` (links,)),
    lambda |p|; an angle for an orientation and a look-at; sum |x* - x| for a displacement; |x* - x| for a joint
    value; a Distance's residual (LM's) where numpy's has the barrier 1 / (d - d_min)). With grad (n,) not empty
    (and J (m, n)), its gradient into grad. Not finite: 1e300."""
    want = grad.shape[0] > 0
    met, _ = evaluate(q, T, G, ws, r, J, want, errors)
    W = ws[0][0]
    gkind, links, slot, offsets, targets_p, has_p, has_R, has_L, sqrt_w, rows, references, indices = \
        G[0], G[1], G[2], G[3], G[4], G[6], G[7], G[8], G[10], G[13], G[14], G[15]
    n = q.shape[0]
    total, count, row = 0.0, 0, 0
    if want:
        grad[:] = 0.0
    for g in range(links.shape[0]):
        w = sqrt_w[g]
        wt = w * w
        if gkind[g] == _DISTANCE:
            e = errors[g, 0]
            total += wt * e * e
            count += 1
            if want and e > 0.0:
                for v in range(n):
                    grad[v] += 2.0 * r[row] * J[row, v]
            row += 1
            continue
        if gkind[g] == _DISPLACEMENT:
            a = 0.0
            for k in range(rows[g]):
                a += abs(q[indices[slot[g], k]] - references[slot[g], indices[slot[g], k]])
            total += wt * a * a
            count += 1
            if want:
                for k in range(rows[g]):
                    v = indices[slot[g], k]
                    grad[v] += 2.0 * wt * a * np.sign(q[v] - references[slot[g], v])
            row += rows[g]
            continue
        if gkind[g] == _JOINT_VALUE:
            x = q[slot[g]] - targets_p[g, 0]
            total += wt * x * x
            count += 1
            if want:
                grad[slot[g]] += 2.0 * wt * x
            row += 1
            continue
        if has_p[g]:
            Wg = W[links[g]]
            px = Wg[0, 3] + Wg[0, 0] * offsets[g, 0] + Wg[0, 1] * offsets[g, 1] + Wg[0, 2] * offsets[g, 2]
            py = Wg[1, 3] + Wg[1, 0] * offsets[g, 0] + Wg[1, 1] * offsets[g, 1] + Wg[1, 2] * offsets[g, 2]
            pz = Wg[2, 3] + Wg[2, 0] * offsets[g, 0] + Wg[2, 1] * offsets[g, 1] + Wg[2, 2] * offsets[g, 2]
            d, lam, length = errors[g, 0], math.sqrt(px * px + py * py + pz * pz), chain[links[g]]
            s = math.sqrt((length + d) * (lam + d) + 1e-300)
            f = math.pi * d / s
            total += wt * f * f
            count += 1
            if want and w > 0.0 and d > 0.0:  # (at d = 0, f = 0: no gradient)
                s3 = max(s * s * s, 1e-300)  # (numba raises on a division by zero, where numpy gives inf)
                df_dd = math.pi / s - math.pi * d * 0.5 * ((lam + d) + (length + d)) / s3
                df_dl = -math.pi * d * 0.5 * (length + d) / s3
                cd = df_dd / max(w * d, 1e-300)  # d d = (p - t)^T dp / d, dp = J rows / w
                cl = df_dl / max(w * lam, 1e-300) if lam > 0.0 else 0.0  # d lambda = p^T dp / lambda
                for v in range(n):
                    dd = (r[row] * J[row, v] + r[row + 1] * J[row + 1, v] + r[row + 2] * J[row + 2, v]) / w
                    dl = px * J[row, v] + py * J[row + 1, v] + pz * J[row + 2, v]
                    grad[v] += 2.0 * wt * f * (cd * dd + cl * dl)
            row += 3
        if has_R[g]:  # the angle |phi|, phi = r / w: d angle = phi^T J_phi / |phi|
            a = errors[g, 1]
            total += wt * a * a
            count += 1
            if want and a > 0.0:
                for v in range(n):
                    grad[v] += 2.0 * (r[row] * J[row, v] + r[row + 1] * J[row + 1, v] + r[row + 2] * J[row + 2, v])
            row += 3
        if has_L[g]:  # the angle 2 asin(|e| / 2), e = r / w = V - d
            a = errors[g, 1]
            total += wt * a * a
            count += 1
            e = math.sqrt(r[row] ** 2 + r[row + 1] ** 2 + r[row + 2] ** 2) / w if w > 0.0 else 0.0
            if want and e > 0.0:
                c = 2.0 * a / (e * math.sqrt(max(1.0 - 0.25 * e * e, 1e-12)))
                for v in range(n):
                    grad[v] += c * (r[row] * J[row, v] + r[row + 1] * J[row + 1, v] + r[row + 2] * J[row + 2, v])
            row += 3
    out = total / max(count, 1)
    if want:
        grad /= max(count, 1)
    if not out < 1e300:  # NaN or inf
        out = 1e300
        if want:
            grad[:] = 0.0
    return out, met


@njit(cache=True)
def _fitness(q, T, G, chain, ws, r, J, errors):
    """(Omega, every goal met) at q (_omega_squared's root)."""
    f, met = _omega_squared(q, T, G, chain, ws, r, J, errors, np.empty(0))
    return math.sqrt(f), met


@njit(cache=True)
def _sort(X, M, phi):
    order = np.argsort(phi, kind="mergesort")  # stable, as the numpy path's
    _copy(X, X[order])
    _copy(M, M[order])
    _copy(phi, phi[order])


@njit(cache=True)
def _initialise(X, M, phi, first, T, G, chain, ws, r, J, errors):
    """Eq. 16: ``first`` and random feasible individuals, no momentum, sorted by fitness."""
    _copy(X[0], first)
    for p in range(1, X.shape[0]):
        _random_into(X[p], T)
    M[:] = 0.0
    for p in range(X.shape[0]):
        phi[p] = _fitness(X[p], T, G, chain, ws, r, J, errors)[0]
    _sort(X, M, phi)


@njit(cache=True)
def _start(X, M, phi, first, T, G, chain):
    """The first population (eq. 16) from ``first``, into X, M (momentum) and phi, sorted."""
    ws, r, J, errors = _memetic_workspace(X.shape[1], T, G)
    _initialise(X, M, phi, first, T, G, chain, ws, r, J, errors)


@njit(cache=True)
def _memetic_workspace(n, T, G):
    m = size(G)
    return workspace(n, T[0].shape[0], G), np.empty(m), np.empty((0, 0)), np.zeros((G[1].shape[0], 2))


@njit(cache=True)
def _extinction(phi):
    """Eq. 18 for a sorted population: xi_i = (phi_i + phi_min ((i - 1)/(P - 1) - 1)) / phi_max, in [0, 1]."""
    P = phi.shape[0]
    out = np.zeros(P)
    if not (np.isfinite(phi[-1]) and phi[-1] > 0.0):
        return out
    for i in range(P):
        out[i] = min(max((phi[i] + phi[0] * (i / max(P - 1, 1) - 1.0)) / phi[-1], 0.0), 1.0)
    return out


@njit(cache=True)
def _rank_pick(available, count, cum):
    """One of available[:count] (sorted by fitness) drawn with weight count - rank; cum: the weights' running
    sums."""
    u = np.random.random() * cum[count - 1]
    return available[min(np.searchsorted(cum[:count], u, side="right"), count - 1)]


PROGRESS = 0.99  # a generation makes progress (no wipe-out, eq. 24) when it lowers the best phi or an exploited
# elite's by more than 1 %: LM creeping along a limit lowers them a little at every generation, and the population
# would never be wiped out (measured on a bone tree with four goals: 47 -> 66 of 100 seeds solved within 15
# generations, elites only)


@njit(cache=True)
def _adopt_elites(X, M, phi, X_new, T, G, chain, ws, r, J, errors):
    """Eq. 22: each elite i replaced by its exploited x'_i when that is fitter, its momentum then
    g_i <- U(0,1) g_i + (x'_i - x_i). Returns (any elite improved by PROGRESS, the fittest x' meeting every goal or
    -1)."""
    improved, solved, solved_f = False, -1, np.inf
    for e in range(X_new.shape[0]):
        f, met = _fitness(X_new[e], T, G, chain, ws, r, J, errors)
        if met and f < solved_f:
            solved, solved_f = e, f
        if f < phi[e]:
            for v in range(X.shape[1]):
                M[e, v] = np.random.random() * M[e, v] + (X_new[e, v] - X[e, v])
            improved = improved or f < PROGRESS * phi[e]
            _copy(X[e], X_new[e])
            phi[e] = f
    return improved, solved


@njit(cache=True)
def _offspring(X, M, phi, xi, elites, waves, T, G, chain, ws, r, J, errors):
    """Eq. 17-20 and 23: the population after the elites replaced by children of the population as it is (its
    ranks, extinction factors xi), bred in ``waves`` (each wave's parents beaten by a child leave the mating pool,
    niching by pre-selection, before the next wave); then sorted. xi: the extinction factors (eq. 18) of the
    population as it was sorted before the elites' exploitation. (memetic.run's offspring, one child at a time.)"""
    P, n = X.shape
    C = P - elites
    span = T[22]  # (the sampling spans: the mutation's scale)
    pool = np.ones(P, dtype=np.bool_)
    Xo, Mo, phio = np.empty((C, n)), np.empty((C, n)), np.empty(C)
    parents = np.empty((C, 2), dtype=np.int64)
    available, cum = np.empty(P, dtype=np.int64), np.empty(P)
    x, g = np.empty(n), np.empty(n)
    count_waves = max(1, min(waves, C))
    start = 0
    for w in range(count_waves):
        m = C // count_waves + (1 if w < C % count_waves else 0)  # np.array_split's sizes
        A = 0
        for p in range(P):
            if pool[p]:
                available[A] = p
                A += 1
        for a in range(A):  # running sums of the weights A - rank
            cum[a] = (a + 1) * A - a * (a + 1) // 2
        for c in range(start, start + m):
            if A == 0:
                _random_into(Xo[c], T)
                Mo[c] = 0.0
                phio[c] = _fitness(Xo[c], T, G, chain, ws, r, J, errors)[0]
                parents[c] = -1
                continue
            p1, p2 = _rank_pick(available, A, cum), _rank_pick(available, A, cum)
            proto = _rank_pick(available, A, cum)
            rate = (xi[p1] * (n - 1) + 1.0) / n  # eq. 19
            size_ = 0.5 * (xi[p1] + xi[p2])
            for v in range(n):
                x[v] = X[p1, v] + np.random.random() * (X[p2, v] - X[p1, v])  # eq. 17: I_U(x^P1, x^P2) + g
                g[v] = np.random.random() * M[p1, v] + np.random.random() * M[p2, v]
                x[v] += g[v]
                if np.random.random() < rate:  # eq. 19: mutation scaled by the parents' extinction
                    delta = np.random.uniform(-1.0, 1.0) * size_ * span[v]
                    x[v] += delta
                    g[v] += delta
                a_ = np.random.random()  # eq. 20: adoption from the parents' mean and a prototype
                step = (1.0 - a_) * np.random.random() * (0.5 * (X[p1, v] + X[p2, v]) - x[v]) + \
                    a_ * np.random.random() * (X[proto, v] - x[v])
                x[v] += step
                g[v] += step
            feasible = project(x, T)  # genes constrained (wrap, clip, swing ellipse)
            for v in range(n):
                Mo[c, v] = g[v] + feasible[v] - x[v]
            _copy(Xo[c], feasible)
            phio[c] = _fitness(feasible, T, G, chain, ws, r, J, errors)[0]
            parents[c, 0], parents[c, 1] = p1, p2
        for c in range(start, start + m):  # eq. 23: niching by pre-selection
            for k in range(2):
                if parents[c, k] >= 0 and phio[c] < phi[parents[c, k]]:
                    pool[parents[c, k]] = False
        start += m
    _copy(X[elites:], Xo)
    _copy(M[elites:], Mo)
    _copy(phi[elites:], phio)
    _sort(X, M, phi)


@njit(cache=True)
def _generation(X, M, phi, best, best_phi, X_new, waves, T, G, chain):
    """One generation of Algorithm 1 (X, M, phi sorted; best, best_phi (1,)) given the elites' exploited points X_new
    (eq. 22; LM's or L-BFGS-B's, run by the caller): their adoption, offspring, the solution updated, and when
    neither made progress (PROGRESS), the population wiped out around it (eq. 24). Returns whether best meets every
    goal."""
    ws, r, J, errors = _memetic_workspace(X.shape[1], T, G)
    xi = _extinction(phi)  # (eq. 18 on the population as sorted, before the elites change)
    elite_improved, solved = _adopt_elites(X, M, phi, X_new, T, G, chain, ws, r, J, errors)
    if solved >= 0:
        _copy(best, X_new[solved])
        best_phi[0] = _fitness(best, T, G, chain, ws, r, J, errors)[0]
        return True
    _offspring(X, M, phi, xi, X_new.shape[0], waves, T, G, chain, ws, r, J, errors)
    improved = phi[0] < PROGRESS * best_phi[0]  # (the best creeping forward does not hold off the wipe-out either)
    if phi[0] < best_phi[0]:
        _copy(best, X[0])
        best_phi[0] = phi[0]
    if not improved and not elite_improved:  # eq. 24: wiped out around the solution
        _initialise(X, M, phi, best, T, G, chain, ws, r, J, errors)
    return _fitness(best, T, G, chain, ws, r, J, errors)[1]


@njit(cache=True)
def _fitness_rows(Q, f, grad, met, T, G, chain):
    """Omega^2 of each row of Q into f, its gradient into grad, every goal met into met."""
    n, m = Q.shape[1], size(G)
    ws = workspace(n, T[0].shape[0], G)
    r, J, errors = np.empty(m), np.empty((m, n)), np.zeros((G[1].shape[0], 2))
    for p in range(Q.shape[0]):
        f[p], met[p] = _omega_squared(Q[p], T, G, chain, ws, r, J, errors, grad[p])


_START, _GENERATION, _FITNESS = 0, 1, 2  # memetic's tasks


@njit(cache=True, entry=True)
def memetic(task, X, M, phi, best, best_phi, X_new, grad, met, seed, waves, tp, gp, chain):
    """The compiled memetic solver's one entry point (an entry point compiles everything it calls anew, some 10 s
    each): with numba's random numbers seeded by ``seed``,
    - _START: the first population (eq. 16) from ``best`` into X, M (momentum), phi, sorted;
    - _GENERATION: one generation given the elites' exploited points X_new (eq. 22: LM's or L-BFGS-B's, run by
      the caller: an LM inside this entry point would compile it anew, another 30 s);
    - _FITNESS: Omega^2 of each row of X_new into phi, its gradient into grad, whether it meets every goal into met.
    Returns (generations run, whether best meets every goal). The tree and goals packed (Kernel.arrays)."""
    T, G = _tree(tp), _goals(gp)
    np.random.seed(seed)
    if task == _START:
        _start(X, M, phi, best, T, G, chain)
        return 0, False
    if task == _GENERATION:
        return 1, _generation(X, M, phi, best, best_phi, X_new, waves, T, G, chain)
    _fitness_rows(X_new, phi, grad, met, T, G, chain)
    return 0, False


def fitness_gradients(Q, tp, gp, chain):
    """(Omega^2 (P,), its gradient (P, n), every goal met (P,)) of each row of Q: what L-BFGS-B minimises in the
    exploitation (eq. 21; Omega^2 has Omega's minimisers and no kink at zero)."""
    Q = np.ascontiguousarray(Q, dtype=float)
    P, n = Q.shape
    f, grad, met = np.empty(P), np.empty((P, n)), np.zeros(P, dtype=bool)
    empty = np.empty((0, n))
    memetic(_FITNESS, empty, empty, f, np.empty(n), np.empty(1), Q, grad, met, 0, 0, tp, gp,
            chain)
    return f, grad, met


def run_memetic(k, problem, q0, budget, rng, population, elites, exploit, exploit_iterations, waves, clock):
    """solvers.memetic.run on the compiled kernels: (q, message, elites). Each generation: the elites exploited by
    lm_kernel's iterations, or by scipy's L-BFGS-B (the elites in lockstep) on the compiled fitness and gradient;
    then the rest of the generation compiled (memetic). ``max_iterations`` counts generations; ``clock`` also gets
    "compiled": True and the exploitation used."""
    from . import lbfgsb, lm
    from .memetic import _distinct_elites

    tree = problem.tree
    tp, gp = k.arrays()
    work = k.work() if exploit == "lm" else None
    rng = np.random.default_rng(rng)
    P, E, n = population, elites, tree.n
    X, M, phi = np.empty((P, n)), np.empty((P, n)), np.empty(P)
    seed = lambda: int(rng.integers(2**31 - 1))  # noqa: E731 (numba's generator, seeded from ours at each call)
    chain = tree.chain_length(np.arange(len(tree.link_names)))
    none, no_grad, no_met = np.empty((0, n)), np.empty((0, n)), np.zeros(0, dtype=bool)
    best, best_phi = np.ascontiguousarray(q0, dtype=float).copy(), np.empty(1)

    def call(task, X_new):
        return memetic(task, X, M, phi, best, best_phi, X_new, no_grad, no_met, seed(), waves, tp, gp, chain)

    bias = float(lm.bias(tree))
    call(_START, none)
    best[:], best_phi[0] = X[0], phi[0]
    met = not k.key(best)[0]
    fg = lambda Q: fitness_gradients(Q, tp, gp, chain)  # noqa: E731
    elites_space = np.empty((E, n))
    clock["compiled"], clock["exploit"] = True, exploit
    while not met and not budget.exhausted():
        budget.tick()
        start = time.perf_counter()
        if exploit == "lm":  # each elite's LM iterations (lm_kernel), while the time lasts
            for e in range(E):
                elites_space[e] = X[e] if budget.past_deadline() else \
                    lm_kernel(X[e], exploit_iterations, 0, 1.0, bias, 1.0, DAMPING_START, 1e-12, 1e-12, 8,
                              work, gp)[0]
            X_new = elites_space
        else:  # scipy's L-BFGS-B, the elites in lockstep, on the compiled fitness and gradient
            X_new, _, _ = lbfgsb.minimize_batch(fg, X[:E].copy(), tree._clip_lower, tree._clip_upper,
                                                exploit_iterations, deadline=budget.past_deadline)
            X_new = np.ascontiguousarray(tree.project(X_new))
        exploited = time.perf_counter()
        clock["exploitation"] += exploited - start
        met = call(_GENERATION, X_new)[1]
        clock["offspring"] += time.perf_counter() - exploited
    message = "every objective within tolerance" if met else "budget exhausted"
    return best, message, _distinct_elites(X, phi, E, best, best_phi[0])


_prepared = set()  # the parts compiled or loaded in this process
_prepare_lock = threading.Lock()


def prepare(part):
    """Compile (or load from the cache) the kernels of ``part`` ("core", or "memetic": the core too) once per
    process, before a solve starts its clock (solve calls it): a first solve's budget is not spent compiling (a cold
    compile of the core takes 25 s on our test machine, a frame's budget 10 ms; a batch bake's first frame with the
    memetic solver missed its goals by 41 mm, its 0.3 s gone to the compile). Nothing while a background compile
    has the part (numpy serves)."""
    if part in _prepared or not available() or (part == "memetic" and memetic_compiling()):
        return
    with _prepare_lock:  # frames solved in threads (tracking.Frames) may ask at once: one compiles, the others wait
        if part not in _prepared:
            _prepare(part)


def _prepare(part):
    cold = not os.path.exists(_warm_stamp(part))
    what = "kernels" if part == "memetic" else "core"
    if cold and _adopted:  # shipped: a load, unless numba cannot use them here
        print(f"Full-Body IK: loading the solver's {what} shipped with the extension (compiling it instead, about "
              "25-50 s once on our test machine, where this one cannot use them)...", file=sys.stderr, flush=True)
    elif cold:  # a first compile is long: say so rather than seem to hang
        print(f"Full-Body IK: compiling the solver's {what} (once per machine and version, 25-50 s on our test "
              "machine; later runs load it in under a second)...", file=sys.stderr, flush=True)
    seconds = warm(part)
    if cold:
        print(f"Full-Body IK: {'ready' if _adopted else 'compiled'} in {seconds:.0f} s", file=sys.stderr, flush=True)
    _prepared.update(("core", part))


def _warm_problem():
    """The small problem warm compiles the kernels on: (tree, problem), three joints of each kind, a Pose goal."""
    from .objectives import Pose
    from .problem import Problem
    from .tree import Joint, Tree

    T = np.eye(4)
    T[2, 3] = 0.3
    joints = [Joint("j1", "revolute", "base", "l1", T, (0, 0, 1), -3.0, 3.0),
              Joint("j2", "prismatic", "l1", "l2", T, (1, 0, 0), -1.0, 1.0),
              Joint("j3", "continuous", "l2", "l3", T, (0, 1, 0))]
    tree = Tree(joints)
    return tree, Problem(tree, [Pose("l3", tree.fk(np.array([0.3, 0.2, 0.1]))["l3"])])


def warm(part="memetic"):
    """Compile (or load from the cache) the kernels by solving a small problem: the core's (part "core"), then the
    memetic solver's (part "memetic", the default: every kernel); the first solve of a session then costs no
    compile. A cold compile has a helper process compile evaluate, judge and the memetic solver's part meanwhile,
    where the machine has another core (_start_helper). Returns the seconds it took."""
    global _pose_packing
    from .problem import Budget

    start = time.perf_counter()
    if not available():
        return 0.0
    tree, problem = _warm_problem()
    k = kernel(problem)
    helper = _start_helper(part)
    try:
        # (what needs no evaluate first: the helper compiles it meanwhile; then LM, waiting for it there)
        k.work()
        q = project_one(tree, np.zeros(3))
        q, _, _ = search(k, q, Budget(None, 50))  # every entry point: LM, restarts, judging, projection
        search(k, np.zeros(3), Budget(None, 20), kernel_seed(0), 10, settings(RESTART_STALL, RESTART_STALL_RATIO))
        _pack_pose(np.empty(_GOAL_FLOATS), 0, 1.0, 1.0, 1.0, np.zeros(3), np.zeros(3), np.eye(3))
        _pose_packing = True
        _await_helper("judge")
        k.result(q, "lm", Budget(), "")
        k.key(q)
        _stamp("core")
        if part != "core":
            _await_helper("memetic")
            for exploit in ("lm", "lbfgsb"):  # last (some 20 s cold): the memetic solver's generations
                run_memetic(k, problem, np.zeros(3), Budget(None, 2), 0, 8, 2, exploit, 3, 2,
                            {"exploitation": 0.0, "offspring": 0.0})
            _stamp("memetic")
        _finish_helper(helper)
    finally:
        _finish_helper(helper, kill=True)
    return time.perf_counter() - start


HELPER_WAIT = 180.0  # seconds: the longest a compile waits for its helper (then it compiles the part itself)
_helper = None  # the helper of this process's cold compile: (process, its folder, deadline, its plan: _helper_plan)


def _start_helper(part):
    """When the core is cold here (no warm stamp, no shipped kernels) and this process may use two cores or more: a
    process compiling functions of the core and, for ``part`` "memetic", the memetic solver's entry point
    (_helper_plan), while this one compiles the rest (measured: docs/solvers.md). It compiles into a cache folder
    of its own, a short path in the temporary folder (numba's index of a function written by two processes at once
    could lose or mismatch an entry); this process copies each function's files from there when it is ready
    (_await_helper). ``FULLBODY_IK_COMPILE_HELPER=0`` turns it off.
    Returns the helper (for _finish_helper) or None."""
    global _helper
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if (_helping or _helper is not None or os.environ.get("FULLBODY_IK_COMPILE_HELPER") == "0" or _adopted
            or cores < 2 or os.path.exists(_warm_stamp("core"))):
        return None
    for old in os.listdir(tempfile.gettempdir()):  # (a helper whose compile was killed: it ended by its deadline)
        path = os.path.join(tempfile.gettempdir(), old)
        try:
            if old.startswith("fbik-helper-") and time.time() - os.path.getmtime(path) > 2 * HELPER_WAIT:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass
    try:
        folder = tempfile.mkdtemp(prefix="fbik-helper-")
    except OSError:
        return None
    process = _python_process(f"_compile_helper({part!r})", os.path.join(folder, "helper.log"),
                              {"FULLBODY_IK_HELPER_TOKEN": "1", "NUMBA_CACHE_DIR": folder})
    if process is None:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    _helper = (process, folder, time.monotonic() + HELPER_WAIT, _helper_plan(part))
    return _helper


def _helper_plan(part):
    """What the helper of a cold compile of ``part`` compiles, in order: for the core, evaluate, the LM step within
    the limits, a restart's new start (HELPER_PART: this process waits for each in turn as its LM reaches it, about
    3 s in all: measured), then judge; for everything (Blender's compile in the background, where the core's solvers
    serve as soon as the core is compiled), the same but judge, which this process compiles, then the memetic
    solver's entry point (some 25 s)."""
    return (*HELPER_PART, "judge") if part == "core" else (*HELPER_PART, "memetic")


def _finish_helper(helper, kill=False):
    """Wait for the helper to end (until its deadline), or, ``kill``, stop it if it still runs; then take what it
    compiled that this process has not, forget it and remove its folder."""
    global _helper
    if helper is None or _helper is not helper:
        return
    process, folder, deadline, _ = helper
    if not kill:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except Exception:  # (its deadline passed: stopped below)
            pass
    if process.poll() is None:
        process.kill()
        process.wait()
    elif process.returncode != 0:  # (what it had not compiled was compiled here)
        print(f"Full-Body IK: the compile's helper process failed (exit code {process.returncode}); compiled here "
              f"instead. Its output:\n{_tail(os.path.join(folder, 'helper.log'))}", file=sys.stderr)
    else:  # what else it compiled (the functions evaluate and the memetic solver call), for later compiles here
        _adopt_helped(folder)
    _helper = None
    shutil.rmtree(folder, ignore_errors=True)


def _compile_helper(part):
    """The helper's work (in its own process, its own cache folder): _helper_plan(part) compiled in order on warm's
    problem, each said to be in the cache as soon as it is (_helped); the memetic solver's entry point with a
    generation exploited by L-BFGS-B (no LM). It ends itself at its deadline, or when the compile that started it has
    ended (its parent gone)."""
    from .problem import Budget

    parent, deadline = os.getppid(), time.monotonic() + HELPER_WAIT

    def watch():
        while time.monotonic() < deadline and os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
    tree, problem = _warm_problem()
    k = Kernel(tree, problem.objectives)
    plan, failed = _helper_plan(part), False
    signatures = _helper_signatures(k, [name for name in plan if name in HELPER_PART])
    for name in plan:
        try:
            if name in HELPER_PART:  # (its types not found, a KeyError: the compile waiting for it does it)
                globals()[name].compile(signatures[name])
            elif name == "judge":
                k.judge(np.zeros(tree.n))
            else:
                run_memetic(k, problem, np.zeros(tree.n), Budget(None, 1), 0, 8, 2, "lbfgsb", 3, 2,
                            {"exploitation": 0.0, "offspring": 0.0})
        except Exception:  # (the rest of the plan still helps; the compile waiting for this one does it itself)
            traceback.print_exc()
            failed = True
        _helped(name)  # (done, or given up: the compile waiting goes on at once)
    if failed:
        raise SystemExit("the helper could not compile all of its plan (above): compiled by the compile it helped")


class _Reached(Exception):
    """A function run as Python (_as_python) reached the call it was run for."""


def _helper_signatures(k, names=HELPER_PART):
    """{name: the argument types the core's compile calls it with} for ``names`` of HELPER_PART, from warm's first
    search on the kernel k: restarts_kernel run as Python (_as_python) up to each call. Compiling a function with
    its types, not through the function that calls it, spares compiling what makes its arguments (some 2.5 s for
    evaluate: _tree, _goals, workspace), which the compile waiting for it compiles itself. A name missing from the
    answer was not reached (its traceback printed)."""
    tp, gp = k.arrays()
    q, found = np.zeros(k.tree.n), {}

    def reached(name):
        def call(*args):
            found[name] = tuple(unliteral(numba.typeof(a)) for a in args)
            raise _Reached
        return call

    stalled = lambda *args: (3, 1, False, 1.0)  # noqa: E731 (a search stalled at once: restarts_kernel starts anew)
    for name in names:  # (each as warm's first search reaches it: _lm's own calls, a new start after a stall)
        space = _as_python({"Work": lambda T, lw, kw: SimpleNamespace(T=T, lw=lw, kw=kw), name: reached(name),
                            **({"_lm": stalled} if name == "_next_start" else {})})
        try:
            with np.errstate(all="ignore"):  # (values of no interest: empty memory)
                space["restarts_kernel"](q, np.zeros(1, dtype=np.int64), PARTIAL_RESTARTS, CHUNK, 1, -1,
                                         *DEFAULT_SETTINGS, space["make_work"](tp, gp, CHUNK), gp, q.copy(),
                                         np.zeros((len(k._checks), 2)))
        except _Reached:
            pass
        except Exception:  # (not found: the compile that would wait for it compiles it itself)
            traceback.print_exc()
    return found


def _as_python(replaced):
    """This module's globals with each compiled function as its Python source (numpy's arrays in numba's place:
    the same dtypes, dimensions and layouts), calling the others as theirs, and the names in ``replaced`` as given."""
    from numba.core.registry import CPUDispatcher

    space = dict(globals())
    for name, value in list(space.items()):
        if isinstance(value, CPUDispatcher):
            f = value.py_func  # (one of another module, _jl_coefficient's, as it is: it calls none of ours)
            space[name] = f if f.__globals__ is not globals() else \
                FunctionType(f.__code__, space, f.__name__, f.__defaults__, f.__closure__)
    space.update(replaced)
    return space


def _helped(name):
    """In a helper: ``name`` is compiled and in its cache (a marker there, written once)."""
    marker = os.path.join(numba.config.CACHE_DIR, f"{name}.ok")
    if not os.path.exists(marker):
        try:
            with open(marker, "w"):
                pass
        except OSError:  # (the compile waiting for it goes on when this process ends)
            pass


def _await_helper(name):
    """Before compiling ``name`` (one of HELPER_PART, when a call to it is typed; judge; memetic): where this
    process's helper compiles it (its plan) and this process's cache does not hold it already, while the helper runs
    and has not said it is in its cache, wait (until its deadline); then take its files (the compile loads them), or,
    where the helper failed, let the compile do the work here."""
    helper = _helper
    if helper is None or name not in helper[3] or _current(globals()[name]):
        return
    process, folder, deadline, _ = helper
    marker = os.path.join(folder, f"{name}.ok")
    while not os.path.exists(marker) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if os.path.exists(marker):
        _adopt_helped(folder, name)


def _current(dispatcher):
    """Whether this process's cache folder holds an index of the compiled function for this source (numba's own
    reading of it: an index of an earlier source, left there, does not count)."""
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except Exception:
        return False


def _adopt_helped(folder, name=None):
    """Copy the compiled function ``name``'s cache files (its index and data; None: every function of this module
    the helper compiled) from the helper's cache ``folder`` into this process's, where this one has not compiled or
    loaded it and its cache holds no index of it for this source (each file under a temporary name, then renamed)."""
    from numba.core.caching import _CacheLocator
    from numba.core.registry import CPUDispatcher

    subpath = _CacheLocator.get_suitable_cache_subpath(__file__)
    source, target = os.path.join(folder, subpath), os.path.join(numba.config.CACHE_DIR, subpath)
    try:
        there = os.listdir(source)
        os.makedirs(target, exist_ok=True)
    except OSError:  # (nothing compiled there, or no folder here: compiled here instead)
        return
    functions = [globals()[name]] if name else [f for f in globals().values() if isinstance(f, CPUDispatcher)]
    for function in functions:
        try:
            # (numba's names: <module>.<function>-<line>.pyXY.nbi, its data <...>.pyXY.<k>.nbc)
            index = function._cache._cache_file._index_name
            if index not in there or function.overloads or _current(function):
                continue
            base = index[:-len(".nbi")] + "."
            # (the index last: what it names is there before it is)
            _copy_files(source, [f for f in there if f.startswith(base) and f.endswith(".nbc")] + [index], target)
        except Exception:  # (this one not copied: compiled here when needed)
            pass


def _stamp(part):
    try:
        with open(_warm_stamp(part), "w"):
            pass
    except OSError:  # a cache folder that cannot be written: nothing to remember
        pass


if numba is not None and _enabled:  # an installed extension's first import: its shipped kernels, if any
    adopt_shipped_cache()
