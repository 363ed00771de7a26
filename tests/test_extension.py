# SPDX-License-Identifier: GPL-3.0-or-later
"""The repository is a Blender extension: Blender's validator accepts it, Blender's builder packs it, and it
installs into a user extension repository, enables, solves, bakes and unregisters cleanly in the real bpy: 5.0
(Python 3.11, numpy 1.26) and the newest 5.x (Python 3.13, numpy 2), each with the scipy wheel built for it."""

import ast
import os
import subprocess
import sys
import textwrap
import tomllib

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import build  # noqa: E402


def test_manifest_passes_blenders_validator():
    out = subprocess.run([sys.executable, build.blender_ext_cli(), "validate", ROOT], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_manifest_fields_and_wheels():
    with open(os.path.join(ROOT, "blender_manifest.toml"), "rb") as fh:
        m = tomllib.load(fh)
    assert (m["schema_version"], m["id"], m["name"], m["type"]) == ("1.0.0", "fullbody_ik", "Full-Body IK", "add-on")
    assert m["blender_version_min"] == "5.0.0" and m["license"] == ["SPDX:GPL-3.0-or-later"]
    wheels = m["wheels"]
    assert not [w for w in wheels if os.path.basename(w).lower().startswith("numpy")], "numpy must never ship"
    for platform in m["platforms"]:  # every platform gets its scipy, for each Python Blender 5.x runs
        for py in ("cp311", "cp313"):
            assert [w for w in wheels if "scipy" in w and f"-{py}-" in w and platform in build.wheel_platforms(w)], \
                (platform, py)
            # and numba with its llvmlite, one of each, except where none is built (Windows on ARM, Python 3.11)
            for dist in ("numba", "llvmlite"):
                found = [w for w in wheels if f"/{dist}-" in w and f"-{py}-" in w and platform in build.wheel_platforms(w)]
                assert len(found) == (0 if (platform, py) == ("windows-arm64", "cp311") else 1), (platform, py, dist)
    assert "website" not in m  # none exists yet
    excluded = m["build"]["paths_exclude_pattern"]
    for dev in ("/tests/", "/benchmarks/", "/docs/", "/tools/", "/.ci/", "/.venv/", "/wheels/", "/Makefile"):
        assert dev in excluded


def test_solver_core_imports_without_bpy_and_nothing_above_it():
    code = "import sys; sys.modules['bpy'] = None; sys.modules['mathutils'] = None; import fullbody_ik.solvers"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    solvers = os.path.join(ROOT, "solvers")
    for dirpath, _, files in os.walk(solvers):
        depth = os.path.relpath(dirpath, solvers).count(os.sep) + (dirpath != solvers)
        for f in files:
            if not f.endswith(".py"):
                continue
            tree = ast.parse(open(os.path.join(dirpath, f)).read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    assert node.level <= depth + 1, f"{f} imports above solvers/"
                    names = [node.module or ""]
                else:
                    continue
                for n in names:
                    assert n.split(".")[0] not in ("bpy", "mathutils", "fullbody_ik"), f"{f} imports {n}"


def test_package_root_does_not_import_bpy():
    code = "import sys; sys.modules['bpy'] = None; import fullbody_ik; assert callable(fullbody_ik.register)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr


INSTALL = textwrap.dedent("""
    import importlib, json, os, sys, tempfile
    import bpy
    import addon_utils
    zip_path, repo_dir = sys.argv[1], sys.argv[2]
    site = os.path.join(os.environ["BLENDER_USER_RESOURCES"], "extensions", ".local", "lib",
                        "python%d.%d" % sys.version_info[:2], "site-packages")
    os.makedirs(site, exist_ok=True)  # (a missing folder on sys.path is cached as having nothing)
    sys.path.insert(0, site)  # the shipped wheels first: this environment's own scipy must not stand in for them
    bpy.context.preferences.extensions.repos.new(name="Test", module="fbik_test", custom_directory=repo_dir,
                                                 source='USER')
    result = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="fbik_test", enable_on_install=True)
    mod = "bl_ext.fbik_test.fullbody_ik"
    report = {"install": sorted(result), "enabled": list(addon_utils.check(mod)),
              "module_file": importlib.import_module(mod).__file__,
              "solvers": importlib.import_module(mod + ".solvers").Tree.__name__,
              "wheels_installed": sorted(os.listdir(site))}
    import scipy, numpy
    compiled = importlib.import_module(mod + ".solvers.compiled")
    report["core"] = compiled.status()
    report["numba"] = compiled.numba.__file__ if compiled.numba else ""
    report["numba_cache"] = compiled.numba.config.CACHE_DIR if compiled.numba else ""
    report["scipy"] = scipy.__file__
    report["numpy"] = numpy.__version__
    report["scipy_tags"] = [line.split(":", 1)[1].strip() for line in open(os.path.join(
        site, "scipy-%s.dist-info" % scipy.__version__, "WHEEL")) if line.startswith("Tag:")]
    # Solve one goal and bake two frames with the installed extension, as a user would.
    arm = bpy.data.armatures.new("Arm")
    obj = bpy.data.objects.new("Arm", arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    parent = None
    for i in range(3):
        b = arm.edit_bones.new("b%d" % i)
        b.head, b.tail = (0, 0, i), (0, 0.1 * (i == 1), i + 1)
        if parent is not None:
            b.parent, b.use_connect = parent, True
        parent = b
    bpy.ops.object.mode_set(mode="POSE")
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.point, g.use_tail = "POSITION", "b2", (1.0, 0.5, 2.0), True
    report["solve"] = sorted(bpy.ops.fullbody_ik.solve())
    tip = obj.matrix_world @ obj.pose.bones["b2"].tail
    report["solve_error"] = (tip - __import__("mathutils").Vector((1.0, 0.5, 2.0))).length
    report["bake"] = sorted(bpy.ops.fullbody_ik.bake(frame_start=1, frame_end=2))
    report["baked_action"] = obj.animation_data.action.name
    # The kernels the zip carries, loaded by the solve and the bake: none compiled here.
    kernels = [v for v in vars(compiled).values() if hasattr(v, "stats") and hasattr(v, "py_func")]
    report["kernels_compiled"] = sum(sum(k.stats.cache_misses.values()) for k in kernels)
    report["kernels_loaded"] = sum(sum(k.stats.cache_hits.values()) for k in kernels)
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.ops.preferences.addon_disable(module=mod)
    report["enabled_after_disable"] = list(addon_utils.check(mod))
    report["wheels_after_disable"] = sorted(os.listdir(site))
    print("REPORT" + json.dumps(report))
""")


def test_build_install_enable_and_unregister(tmp_path):
    """Blender's builder makes this platform's zip; Blender's installer puts it in a user repository,
    installs its scipy, numba and llvmlite wheels, enables it (the compiled core from the shipped numba, its cache in
    the extension's user folder); disabling unregisters it and removes the wheels again."""
    zips = build.build(output_dir=str(tmp_path / "dist"))
    assert len(zips) == 1 and zips[0].endswith(".zip")
    import zipfile

    names = zipfile.ZipFile(zips[0]).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names and "solvers/tree.py" in names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "tools/", "docs/", ".ci/", "data/"))]
    assert not [n for n in names if os.path.basename(n).startswith("numpy")]
    script = tmp_path / "install.py"
    script.write_text(INSTALL)
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "blender"))
    repo = tmp_path / "repo"
    repo.mkdir()
    out = subprocess.run([sys.executable, str(script), zips[0], str(repo)], capture_output=True, text=True, env=env,
                         timeout=600)
    line = [l for l in out.stdout.splitlines() if l.startswith("REPORT")]
    assert out.returncode == 0 and line, out.stdout[-3000:] + out.stderr[-3000:]
    import json

    report = json.loads(line[0][len("REPORT"):])
    assert report["install"] == ["FINISHED"]
    assert report["enabled"] == [True, True]
    assert report["module_file"].startswith(str(repo))
    assert report["solvers"] == "Tree"
    assert "scipy" in report["wheels_installed"] and "threadpoolctl.py" in report["wheels_installed"]
    # The compiled core from the shipped numba and llvmlite, its cache in the extension's user folder.
    assert {"numba", "llvmlite"} <= set(report["wheels_installed"])
    assert "extensions" in report["numba"] and report["core"].startswith("compiled")
    assert report["numba_cache"].startswith(str(tmp_path / "blender")) and "fullbody_ik" in report["numba_cache"]
    # The shipped scipy, built for this Python (cp311 in Blender 5.0, cp313 in 5.1+), runs with this numpy.
    py = "cp%d%d" % sys.version_info[:2]
    assert "extensions" in report["scipy"] and all(t.startswith(f"{py}-{py}-") for t in report["scipy_tags"])
    assert report["solve"] == ["FINISHED"] and report["solve_error"] < 1e-3
    assert report["bake"] == ["FINISHED"] and report["baked_action"] == "Arm IK"
    # The zip carries the compiled core (for any CPU of this architecture, this numba and Python): no first compile.
    assert any(n.startswith("numba_cache/") and n.endswith(".nbi") for n in names)
    assert report["kernels_compiled"] == 0 and report["kernels_loaded"] >= 3
    assert report["enabled_after_disable"] == [False, False]
    assert report["wheels_after_disable"] == []
