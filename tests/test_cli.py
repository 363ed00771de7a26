# SPDX-License-Identifier: GPL-3.0-or-later
"""The command line as a user runs it: real processes, real .blend files, exit codes, nothing written on
failure."""

import json
import os
import re
import subprocess
import sys

import pytest

bpy = pytest.importorskip("bpy")

import fullbody_ik  # noqa: E402
from fullbody_ik import cli, files  # noqa: E402
from fullbody_ik.errors import Failure, UsageError  # noqa: E402
from test_bake import FRAMES, build_scene, tip_error  # noqa: E402


def save_scene(path, breakage=None):
    obj, target = build_scene()
    if breakage == "no goals":
        obj.fullbody_ik.goals.clear()
    if breakage == "target deleted":
        bpy.data.objects.remove(target)
    elif breakage == "nan":
        target.animation_data.action.layers[0].strips[0].channelbags[0].fcurves[1].keyframe_points[1].co[1] = \
            float("nan")
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    fullbody_ik.unregister()
    return str(path)


def run(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "fullbody_ik", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def scene_file(tmp_path_factory):
    return save_scene(tmp_path_factory.mktemp("cli") / "scene.blend")


def test_bake_writes_the_output_and_a_json_report(scene_file, tmp_path):
    out, png = tmp_path / "out.blend", tmp_path / "report.png"
    proc = run("bake", scene_file, "--armature", "Arm", "--frames", "1-24", "--output", out, "--json",
               "--report", png)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # standard output is the JSON document alone
    assert result["output"] == str(out) and result["report"]["summary"]["frames"] == 24
    assert result["report"]["summary"]["solved_frames"] == 24
    assert "frames with every goal within its tolerance: 24/24" in proc.stderr
    assert os.path.getsize(png) > 1000
    fullbody_ik.register()
    try:
        bpy.ops.wm.open_mainfile(filepath=str(out))
        obj, target = bpy.data.objects["Arm"], bpy.data.objects["Target"]
        assert obj.animation_data.action.name.endswith(" IK")
        assert max(tip_error(obj, target, f) for f in range(*FRAMES)) < 2e-4
    finally:
        fullbody_ik.unregister()


def test_the_armature_is_found_when_only_one_has_goals(scene_file, tmp_path):
    out = tmp_path / "scene_baked.blend"
    proc = run("bake", scene_file, "--frames", "3-6", "--output", out)
    assert proc.returncode == 0, proc.stderr
    assert "frames 3-6 (4 frames" in proc.stderr and out.exists()


@pytest.mark.parametrize("args,code,message", [
    (["--frames", "10-5"], 2, "inverted"),
    (["--frames", "ten"], 2, "FIRST-LAST"),
    (["--step", "0"], 2, "--step"),
    (["--bogus"], 2, "unrecognized"),
    (["--armature", "Nope"], 2, "no armature named 'Nope'"),
    (["--action", "Nope"], 2, "no action named 'Nope'"),
])
def test_bad_arguments_exit_non_zero_and_write_nothing(scene_file, tmp_path, args, code, message):
    out = tmp_path / "out.blend"
    proc = run("bake", scene_file, "--output", out, *args)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert not out.exists()


def test_an_output_over_an_input_or_a_missing_input_is_refused_before_any_work(tmp_path, scene_file):
    """--output naming the job's own input is refused (exit 2), the file left as it was: a bake and a retarget
    wrote over the user's file; a retarget whose source is missing says so before the character is read (its
    importer's log came first)."""
    import hashlib
    import shutil

    scene = tmp_path / "scene.blend"
    shutil.copy(scene_file, scene)
    digest = hashlib.md5(scene.read_bytes()).hexdigest()
    proc = run("bake", scene, "--frames", "3-6", "--output", scene)
    assert proc.returncode == 2 and "is the input" in proc.stderr and "write over it" in proc.stderr, proc.stderr
    character = os.path.join(os.path.dirname(fullbody_ik.__file__), "data", "characters", "mannequiny.glb")
    clip = os.path.join(os.path.dirname(fullbody_ik.__file__), "data", "bvh", "cmu_02_01.bvh")
    proc = run("retarget", clip, scene, "--output", scene)
    assert proc.returncode == 2 and "is the input" in proc.stderr, proc.stderr
    assert hashlib.md5(scene.read_bytes()).hexdigest() == digest
    proc = run("retarget", tmp_path / "gone.bvh", character, "--output", tmp_path / "out.blend")
    assert proc.returncode == 2 and "no such file" in proc.stderr and "glTF" not in proc.stderr, proc.stderr
    goals = tmp_path / "none.json"
    goals.write_text("[]")
    proc = run("bake", scene, "--goals", goals, "--output", tmp_path / "out.blend")
    assert proc.returncode == 2 and "holds an empty list" in proc.stderr, proc.stderr
    proc = run("retarget", clip, character, "--report", tmp_path / "report.json", "--output", tmp_path / "o.blend")
    assert proc.returncode == 2 and "must end in .png" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "o.blend").exists()  # (a plot's name a format it cannot be: refused before the work)


def test_missing_file_and_broken_scenes(tmp_path, scene_file):
    proc = run("bake", tmp_path / "nope.blend", "--output", tmp_path / "out.blend")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    (tmp_path / "text.blend").write_text("not a blend file")
    proc = run("bake", tmp_path / "text.blend", "--output", tmp_path / "out.blend")
    assert proc.returncode == 1 and "cannot open" in proc.stderr and not (tmp_path / "out.blend").exists()
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = run("bake", scene_file, "--frames", "1-3", "--output", blocker / "out.blend")  # its folder is a file
    assert proc.returncode == 2 and "cannot write the output" in proc.stderr
    # Found before any frame is baked, as usage errors (a folder, a name without .blend: found after the bake, exit 1)
    (tmp_path / "folder.blend").mkdir()
    for out, message in ((tmp_path / "folder.blend", "it is a folder"), (tmp_path / "noext", "must end in .blend")):
        proc = run("bake", scene_file, "--frames", "1-3", "--output", out)
        assert proc.returncode == 2 and message in proc.stderr and "Baked" not in proc.stderr, proc.stderr
    for breakage, message in (("target deleted", "was deleted"), ("nan", "NaN or infinite key")):
        path = save_scene(tmp_path / f"{breakage.replace(' ', '_')}.blend", breakage)
        out = tmp_path / "out.blend"
        proc = run("bake", path, "--output", out)
        assert proc.returncode == 1, proc.stderr
        assert message in proc.stderr and "nothing was written" in proc.stderr
        assert not out.exists()


def test_early_failures_name_what_is_wrong_and_json_stays_one_document(tmp_path, scene_file):
    """A file of Blender's default scene (meshes, no armature): one line naming it, exit 1, and standard output
    one JSON document (bpy 5.0.1 printed "Error: Not freed memory blocks" there after it, as the process ended).
    Bad option values exit 2 naming the option; a folder is not "no such file"."""
    bpy.ops.wm.read_factory_settings()
    path = tmp_path / "cube.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    proc = run("bake", path, "--json")
    assert proc.returncode == 1 and "the file holds no armature" in proc.stderr
    assert json.loads(proc.stdout)["error"].startswith("the file holds no armature")
    for option, value in (("--thin", "-1"), ("--continuity", "-0.5"), ("--time-limit", "nan"),
                          ("--time-limit", "-1")):
        proc = run("bake", scene_file, option, value)
        assert proc.returncode == 2 and f"argument {option}" in proc.stderr, (option, proc.stderr)
    proc = run("bake", tmp_path)
    assert proc.returncode == 2 and "is a folder, not a file" in proc.stderr


def test_batch_bakes_in_parallel_and_one_failure_does_not_stop_the_others(tmp_path):
    good = [save_scene(tmp_path / f"good{i}.blend") for i in range(2)]
    bad = save_scene(tmp_path / "bad.blend", "target deleted")
    outdir = tmp_path / "baked"
    proc = run("batch", "bake", "--jobs", "2", good[0], bad, good[1], "--frames", "1-12", "--output-dir", outdir,
               "--json")
    assert proc.returncode == 1
    summary = json.loads(proc.stdout)
    assert [r["ok"] for r in summary["files"]] == [True, False, True] and summary["failed"] == 1
    assert "was deleted" in summary["files"][1]["error"]
    assert (outdir / "good0_baked.blend").exists() and (outdir / "good1_baked.blend").exists()
    assert not (outdir / "bad_baked.blend").exists()
    assert "FAILED" in proc.stderr and "2 of 3 files baked" in proc.stderr


def test_goals_given_on_the_command_line_or_in_a_file_are_baked(tmp_path):
    """A file with no goals baked with --goal (a farm's bake) or a goal file; the output holds the goals, its tip on
    the target; a wrong goal is refused by name, exit 2, nothing written; a batch passes the goals on."""
    scene = save_scene(tmp_path / "nogoals.blend", "no goals")
    out = tmp_path / "out.blend"
    proc = run("bake", scene, "--goal", "b2:position:Target:tail=yes:chain=3", "--frames", "1-12", "--output", out,
               "--json")
    assert proc.returncode == 0, proc.stderr
    goals = tmp_path / "goals.json"
    goals.write_text(json.dumps([{"bone": "b2", "kind": "POSITION", "target": "Target", "use_tail": True}]))
    out2 = tmp_path / "out2.blend"
    proc = run("bake", scene, "--goals", goals, "--frames", "1-12", "--output", out2)
    assert proc.returncode == 0, proc.stderr
    fullbody_ik.register()
    try:
        for path in (out, out2):
            bpy.ops.wm.open_mainfile(filepath=str(path))
            obj, target = bpy.data.objects["Arm"], bpy.data.objects["Target"]
            assert [(g.bone, g.kind, g.target.name) for g in obj.fullbody_ik.goals] == [("b2", "POSITION", "Target")]
            for f in range(1, 13):
                assert tip_error(obj, target, f) < 2e-4, (path, f)
    finally:
        fullbody_ik.unregister()
    for spec, message in (("b9:position:Target", "has no bone 'b9'"), ("b2:teleport:Target", "KIND one of"),
                          ("b2:position:Nothing", "no object named 'Nothing'"), ("b2:position:Target:chain=x",
                                                                                 "chain='x' is not a value")):
        bad = tmp_path / "bad.blend"
        proc = run("bake", scene, "--goal", spec, "--output", bad)
        assert proc.returncode == 2 and message in proc.stderr, (spec, proc.stderr)
        assert not bad.exists()
    proc = run("batch", "bake", scene, "--goal", "b2:position:Target", "--frames", "1-6", "--output-dir",
               tmp_path / "batch", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "batch" / "nogoals_baked.blend").exists()


def test_batch_refuses_two_files_that_would_be_saved_as_one(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "shot.blend").write_text("")
    proc = run("batch", "bake", tmp_path / "a" / "shot.blend", tmp_path / "b" / "shot.blend", "--output-dir",
               tmp_path / "out")
    assert proc.returncode == 2 and "would be saved as" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_blender_command_handler_bakes_the_open_file(tmp_path):
    """What `blender -b scene.blend -c fullbody_ik bake ...` calls, with the file already open."""
    path = tmp_path / "open.blend"
    obj, target = build_scene()
    try:
        bpy.ops.wm.save_as_mainfile(filepath=str(path))
        assert cli.blender_command(["bake", "--frames", "1-6"]) == 0
        assert (tmp_path / "open_baked.blend").exists()
        assert cli.blender_command(["bake", "--frames", "6-1"]) == 2
        assert cli.blender_command(["bake", "--armature", "Target"]) == 2  # (a name the file does not hold)
        assert cli.blender_command(["--help"]) == 0
    finally:
        fullbody_ik.unregister()


def test_parse_frames():
    assert cli.parse_frames("1-250") == (1, 250) and cli.parse_frames("7") == (7, 7)
    assert cli.parse_frames("-5") == (-5, -5) and cli.parse_frames("-10--1") == (-10, -1)  # (Blender's frames can be)
    for bad in ("5-1", "a-b", "1-2-3", "", "1-", "1--", "-1--5"):
        with pytest.raises(UsageError):
            cli.parse_frames(bad)


def test_a_broken_motion_file_says_why_in_one_line(tmp_path):
    """A clip the importer cannot read: one line naming its error, not the importer's traceback (Blender printed
    it twice); an empty, a cut-short and a non-BVH file said so by name, and a frame cut short or holding what is
    not a number, or a frame time that is not positive, by frame and line (the importer's IndexError, or a silent
    clip at 0 s a frame); with --json, standard output holds a JSON document for every failure (it was empty); a
    clip short of the frames it declares is read, with a warning."""
    lines = open(os.path.join(os.path.dirname(fullbody_ik.__file__), "data", "bvh", "cmu_02_01.bvh")).readlines()
    header = lines[:lines.index(next(ln for ln in lines if ln.strip().startswith("Frame Time"))) + 1]
    body = lines[len(header):len(header) + 3]
    broken = tmp_path / "broken.bvh"
    broken.write_text("".join(header).replace("OFFSET 0", "OFFSET zz", 1) + "".join(body))  # a hierarchy the
    # importer cannot read
    character = os.path.join(os.path.dirname(fullbody_ik.__file__), "data", "characters", "mannequiny.glb")
    out = tmp_path / "out.blend"
    proc = run("retarget", broken, character, "--output", out)
    assert proc.returncode == 1 and not out.exists()
    (line,) = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert re.search(r"cannot read the source .*broken\.bvh: the importer failed: \w+Error", line), line
    assert "Traceback" not in proc.stderr, proc.stderr
    proc = run("batch", "retarget", "--target", character, broken, "--json")  # the batch's summary has it whole
    assert proc.returncode == 1
    assert re.search(r"the importer failed: \w+Error", json.loads(proc.stdout)["files"][0]["error"])
    for name, text, message in (("empty.bvh", "", "the BVH .*empty.bvh is empty"),
                                ("cut.bvh", "".join(lines[:40]), "the BVH .*cut.bvh has no motion .*cut short"),
                                ("notes.bvh", "some notes\n", "notes.bvh is not a BVH file"),
                                ("half.bvh", "".join(header + body[:2]) + body[2][:40],
                                 r"frame 3 \(near line \d+\) holds \d+ values, its hierarchy has 96 channels .*cut short"),
                                ("words.bvh", "".join(header + body[:1]) + "x y z\n",
                                 r"frame 2 \(near line \d+\) holds what is not a number \('x'\)"),
                                ("far.bvh", "".join(header + body[:1]) + body[1].replace(body[1].split()[0], "1e300", 1),
                                 r"frame 2 \(near line \d+\) holds 1e\+300, out of any take's range"),
                                ("still.bvh", "".join(header).replace("Frame Time: .0083333", "Frame Time: 0")
                                 + "".join(body), "its Frame Time is 0 \\(a frame lasts a positive time")):
        (tmp_path / name).write_text(text)
        proc = run("retarget", tmp_path / name, character, "--output", out, "--json")
        assert proc.returncode == 1 and not out.exists()
        doc = json.loads(proc.stdout)
        assert not doc["ok"] and doc["exit"] == 1 and re.search(message, doc["error"]), doc
    for args, code in ((["bake", tmp_path / "nope.blend"], 2), (["bake", "--bogus", "x.blend"], 2)):
        proc = run(*args, "--json")
        assert proc.returncode == code and json.loads(proc.stdout)["exit"] == code, proc.stdout
    short = tmp_path / "short.bvh"  # its header says 344 frames
    short.write_text("".join(lines[:len(header) + 20]))
    proc = run("retarget", short, character, "--output", out, "--json", "--no-ik")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "the BVH declares 344 frames and holds 20" in json.loads(proc.stdout)["warnings"][0]
    frames = lines[len(header):len(header) + 20]  # a value that is not a number on its sixth frame: said so
    frames[5] = frames[5].replace(frames[5].split()[4], "nan", 1)
    nan = tmp_path / "nan.bvh"
    nan.write_text("".join(header).replace("Frames: 344", "Frames: 20") + "".join(frames))
    proc = run("retarget", nan, character, "--output", out, "--json", "--no-ik")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any("frame 6 (counted from 1) hold values that are not numbers" in w
               for w in json.loads(proc.stdout)["warnings"]), proc.stdout[-2000:]
    proc = run("batch", "retarget", "--target", character, broken, "--json")  # the batch's summary has it whole
    assert proc.returncode == 1
    assert re.search(r"the importer failed: \w+Error", json.loads(proc.stdout)["files"][0]["error"])


def test_bvh_frames_reads_the_line_endings_blenders_importer_reads(tmp_path):
    """CRLF and old Macs' bare CR (Blender imports both), any case, tabs, no last newline; a Frame Time that is not
    a number is a Failure saying so (it was an unexpected error)."""
    text = open(os.path.join(os.path.dirname(fullbody_ik.__file__), "data", "bvh", "cmu_02_01.bvh")).read()
    for name, variant in (("lf", text), ("crlf", text.replace("\n", "\r\n")), ("cr", text.replace("\n", "\r")),
                          ("case", text.replace("MOTION", "motion").replace("Frame Time:", "FRAME TIME:\t")),
                          ("end", text.rstrip("\n"))):
        (tmp_path / f"{name}.bvh").write_bytes(variant.encode("latin-1"))
        declared, held, seconds, broken = files.bvh_frames(str(tmp_path / f"{name}.bvh"))
        assert declared == held == 344 and abs(1 / seconds - 120) < 0.01 and broken == [], name
    (tmp_path / "e.bvh").write_text(re.sub(r"Frame Time:.*", "Frame Time: e", text))
    with pytest.raises(Failure, match="its Frame Time is not a number"):
        files.bvh_frames(str(tmp_path / "e.bvh"))


def test_a_batch_hands_its_jobs_the_frames_options_and_one_thread_each(tmp_path, monkeypatch):
    """--independent-frames (on by default for retarget) or --no-independent-frames and --threads reach every
    file's job; without --threads a job runs its frames on one thread (the files at once are the batch's
    parallelism)."""
    from fullbody_ik import batchjob, cli

    for command, extra in (("bake", []), ("footplant", ["--terrain", "ground"]),
                           ("retarget", ["--target", str(tmp_path / "char.blend")])):
        args = cli.parser().parse_args(["batch", command, *extra, "--independent-frames", "--threads", "3", "a.blend"])
        options = cli._job("a.blend", args, str(tmp_path / "out.blend"))["options"]
        assert "--independent-frames" in options and "--threads=3" in options, command
        args = cli.parser().parse_args(["batch", command, *extra, "a.blend"])
        options = cli._job("a.blend", args, str(tmp_path / "o.blend"))["options"]
        default = "--independent-frames" if command == "retarget" else "--no-independent-frames"
        assert default in options and not any(o.startswith("--threads") for o in options), command
        # the job parses what it is handed back to the batch's choice, either way
        args = cli.parser().parse_args(["batch", command, *extra, "--no-independent-frames", "a.blend"])
        options = cli._job("a.blend", args, str(tmp_path / "o.blend"))["options"]
        job = cli.parser().parse_args([command, "a.blend", *options])
        assert job.independent_frames is False, command
    # a value that begins with "-" (a negative frame range) reaches the job as one argument
    args = cli.parser().parse_args(["batch", "bake", "a.blend", "--frames=-10--1", "--action=-walk"])
    options = cli._job("a.blend", args, str(tmp_path / "out.blend"))["options"]
    job = cli.parser().parse_args(["bake", "a.blend", *options])
    assert (job.frames, job.action) == ("-10--1", "-walk")
    seen = {}
    monkeypatch.delenv("FULLBODY_IK_THREADS", raising=False)
    monkeypatch.setattr(batchjob.subprocess, "run", lambda cmd, env, **kw: seen.update(env)
                        or subprocess.CompletedProcess(cmd, 2, "", "error: stop"))
    (tmp_path / "a.blend").write_bytes(b"")
    batchjob.run_file({"command": "bake", "file": str(tmp_path / "a.blend"), "output": str(tmp_path / "o.blend"),
                       "options": [], "program": ["python", sys.executable]})
    assert seen["FULLBODY_IK_THREADS"] == "1"
