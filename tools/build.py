# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the installable extension zips with Blender's own builder (``bl_pkg/cli/blender_ext.py``).

    python tools/build.py --all-platforms     # one zip per platform of the manifest, into dist/
    python tools/build.py                     # only this machine's platform
    python tools/build.py --validate-only     # Blender's manifest validator

The scipy wheels the manifest lists are downloaded from PyPI into ``wheels/`` (pip's cache makes this
cheap after the first time); numpy is never shipped, Blender bundles it.
"""

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "blender_manifest.toml")
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv*", "dist", "out", "wheels", "__pycache__", ".hypothesis",
                                     ".pytest_cache", "*.pyc")


def blender_ext_cli():
    """Path of Blender's extension command line, shipped inside the bpy wheel."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bpy is not installed: run `make venv` first")
    base = spec.submodule_search_locations[0]
    for version in sorted(os.listdir(base), reverse=True):
        path = os.path.join(base, version, "scripts", "addons_core", "bl_pkg", "cli", "blender_ext.py")
        if os.path.exists(path):
            return path
    raise SystemExit(f"blender_ext.py not found under {base}")


def manifest():
    with open(MANIFEST, "rb") as fh:
        return tomllib.load(fh)


def this_platform():
    sys.path.insert(0, os.path.dirname(blender_ext_cli()))
    import blender_ext  # noqa: E402

    return blender_ext.platform_from_this_system()


def wheel_platforms(wheel):
    sys.path.insert(0, os.path.dirname(blender_ext_cli()))
    import blender_ext  # noqa: E402

    tag = os.path.basename(wheel)[:-4].split("-")[-1]
    if tag == "any":
        return set(manifest()["platforms"])
    return {p for t in tag.split(".") for p in blender_ext.blender_platforms_from_wheel_platform(t)}


def download_wheels(wheels, dest):
    """pip download each wheel named in the manifest (exact file names, no dependencies)."""
    os.makedirs(dest, exist_ok=True)
    for wheel in wheels:
        name = os.path.basename(wheel)
        if os.path.exists(os.path.join(dest, name)):
            continue
        dist, version, py, abi, plat = re.match(r"([^-]+)-([^-]+)-([^-]+)-([^-]+)-(.+)\.whl", name).groups()
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--dest", dest, f"{dist}=={version}"]
        if plat != "any":
            cmd += ["--python-version", py[2:3] + "." + py[3:], "--implementation", "cp", "--abi", abi]
            for p in plat.split("."):
                cmd += ["--platform", p]
        subprocess.run(cmd, check=True)
        if not os.path.exists(os.path.join(dest, name)):
            raise SystemExit(f"pip did not produce {name} (got {sorted(os.listdir(dest))})")


def validate(source=ROOT):
    subprocess.run([sys.executable, blender_ext_cli(), "validate", source], check=True)


def compile_cache(dest, pythons=(sys.executable,)):
    """The compiled solver core (every part), compiled by each of ``pythons`` for the generic CPU of this machine's
    architecture, laid out as solvers.compiled.adopt_shipped_cache reads it: ``dest``/<cache tag>/ (this source's
    kernels' cache files, and SOURCE: the source's hash). The compile reuses the user's cache folder (a warm one makes this a load).
    Returns the tags made."""
    code = ("import json, os, numba\n"
            "from numba.core.caching import _CacheLocator\n"
            "from fullbody_ik.solvers import compiled\n"
            "compiled.warm('memetic')\n"
            "sub = _CacheLocator.get_suitable_cache_subpath(compiled.__file__)\n"
            "kernels = [v.py_func for v in vars(compiled).values() if hasattr(v, 'py_func') and hasattr(v, 'stats')]\n"
            "names = sorted({'%s.%s-%d.' % (os.path.splitext(os.path.basename(f.__code__.co_filename))[0],\n"
            "                               f.__qualname__, f.__code__.co_firstlineno) for f in kernels})\n"
            "print('CACHE' + json.dumps([compiled.cache_tag(), numba.config.CACHE_DIR, sub, names,\n"
            "                            compiled._source_hash()]))\n")
    tags = []
    for python in pythons:
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("CACHE")]
        if out.returncode or not lines:
            raise SystemExit(f"compiling the solver core with {python} failed:\n{out.stderr[-3000:]}")
        tag, cache, sub, kernels, source = json.loads(lines[-1][len("CACHE"):])
        folder = os.path.join(dest, tag)
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(os.path.join(cache, sub)):  # this source's kernels only (the folder keeps old ones)
            if name.endswith((".nbi", ".nbc")) and name.startswith(tuple(kernels)):
                shutil.copyfile(os.path.join(cache, sub, name), os.path.join(folder, name))
        with open(os.path.join(folder, "SOURCE"), "w") as fh:  # the source they were compiled from
            fh.write(source + "\n")
        tags.append(tag)
    return tags


def build(platforms=None, output_dir=None, cache_pythons=(sys.executable,)):
    """Build zips for ``platforms`` (default: this one) into ``output_dir``; returns their paths. This machine's
    platform's zip carries the solver core compiled by ``cache_pythons`` (none: compiled on first use)."""
    data = manifest()
    platforms = platforms or [this_platform()]
    unknown = set(platforms) - set(data["platforms"])
    if unknown:
        raise SystemExit(f"platforms not in the manifest: {sorted(unknown)}")
    wheels = [w for w in data.get("wheels", []) if wheel_platforms(w) & set(platforms)]
    if any(w.split("/")[-1].startswith("numpy-") for w in wheels):
        raise SystemExit("numpy must never be shipped: Blender bundles it")
    output_dir = os.path.abspath(output_dir or os.path.join(ROOT, "dist"))
    os.makedirs(output_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as stage:
        src = os.path.join(stage, data["id"])
        shutil.copytree(ROOT, src, ignore=COPY_IGNORE)
        download_wheels(wheels, os.path.join(ROOT, "wheels"))
        shutil.copytree(os.path.join(ROOT, "wheels"), os.path.join(src, "wheels"),
                        ignore=lambda d, names: [n for n in names if "./wheels/" + n not in wheels])
        # The staged manifest lists only the platforms being built (and their wheels).
        text = open(os.path.join(src, "blender_manifest.toml")).read()
        text = re.sub(r"(?ms)^platforms = \[.*?\]", "platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]",
                      text)
        text = re.sub(r"(?ms)^wheels = \[.*?^\]", "wheels = [\n" + "".join(f'  "{w}",\n' for w in wheels) + "]",
                      text)
        host = this_platform()
        for group in ([p for p in platforms if p != host], [p for p in platforms if p == host]):
            if not group:
                continue
            if group == [host] and cache_pythons:  # the compiled core, for this platform's zip only
                compile_cache(os.path.join(src, "numba_cache"), cache_pythons)
            with open(os.path.join(src, "blender_manifest.toml"), "w") as fh:
                fh.write(re.sub(r"(?ms)^platforms = \[.*?\]",
                                "platforms = [" + ", ".join(f'"{p}"' for p in group) + "]", text))
            subprocess.run([sys.executable, blender_ext_cli(), "build", "--source-dir", src, "--output-dir",
                            output_dir, "--split-platforms"], check=True)
    zips = [os.path.join(output_dir, f"{data['id']}-{data['version']}-{p.replace('-', '_')}.zip") for p in platforms]
    missing = [z for z in zips if not os.path.exists(z)]
    if missing:
        raise SystemExit(f"the builder did not produce {missing}")
    return zips


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all-platforms", action="store_true", help="every platform of the manifest")
    ap.add_argument("--platform", action="append", help="a Blender platform such as linux-x64 (repeatable)")
    ap.add_argument("--output-dir", default=os.path.join(ROOT, "dist"))
    ap.add_argument("--validate-only", action="store_true")
    ap.add_argument("--cache-python", action="append", metavar="PYTHON",
                    help="an interpreter (with this repository's numba) that compiles the solver core shipped in this "
                         "platform's zip, one per Python version (default: this one)")
    ap.add_argument("--no-cache", action="store_true", help="ship no compiled core (compiled on first use)")
    args = ap.parse_args()
    validate()
    if args.validate_only:
        return
    platforms = manifest()["platforms"] if args.all_platforms else args.platform
    pythons = () if args.no_cache else tuple(args.cache_python or [sys.executable])
    for path in build(platforms, args.output_dir, pythons):
        print(f"built {path} ({os.path.getsize(path) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
