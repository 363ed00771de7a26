# SPDX-License-Identifier: GPL-3.0-or-later
"""The repository is a Blender extension: Blender's validator accepts it, Blender's builder packs it, and it
installs into a user extension repository, enables and unregisters cleanly in the real bpy 5.0.1."""

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
    for platform in m["platforms"]:  # every platform gets its scipy
        assert [w for w in wheels if "scipy" in w and platform in build.wheel_platforms(w)], platform
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
    bpy.context.preferences.extensions.repos.new(name="Test", module="fbik_test", custom_directory=repo_dir,
                                                 source='USER')
    result = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="fbik_test", enable_on_install=True)
    mod = "bl_ext.fbik_test.fullbody_ik"
    site = os.path.join(os.environ["BLENDER_USER_RESOURCES"], "extensions", ".local", "lib",
                        "python%d.%d" % sys.version_info[:2], "site-packages")
    report = {"install": sorted(result), "enabled": list(addon_utils.check(mod)),
              "module_file": importlib.import_module(mod).__file__,
              "solvers": importlib.import_module(mod + ".solvers").Tree.__name__,
              "wheels_installed": sorted(os.listdir(site))}
    bpy.ops.preferences.addon_disable(module=mod)
    report["enabled_after_disable"] = list(addon_utils.check(mod))
    report["wheels_after_disable"] = sorted(os.listdir(site))
    print("REPORT" + json.dumps(report))
""")


def test_build_install_enable_and_unregister(tmp_path):
    """Blender's builder makes this platform's zip; Blender's installer puts it in a user repository,
    installs its scipy wheel, enables it; disabling unregisters it and removes the wheel again."""
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
    assert report["enabled_after_disable"] == [False, False]
    assert report["wheels_after_disable"] == []
