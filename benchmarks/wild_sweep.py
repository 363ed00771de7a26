# SPDX-License-Identifier: GPL-3.0-or-later
"""Every character x clip pair through the real command line, each result judged and looked at.

Characters: CORPUS/characters/manifest.json (the corpus from the wild, put in CORPUS by ``benchmarks/corpus.py``;
CORPUS is --corpus, else $FULLBODY_IK_CORPUS, else /work/corpus) and the repo's own characters (data/characters:
mannequiny.glb, Quaternius_Male_Casual.fbx); clips: CORPUS/motion/manifest.json and the CMU clips in data/bvh.
Each pair runs as a subprocess,

    python -m fullbody_ik retarget CLIP CHARACTER --output DIR/PAIR.blend --json --clip-rate scene

its exit code, the end of its standard error and its JSON recorded; a saved result is then judged
(``benchmarks/retarget_judge.py``, its own measures) and a small contact sheet rendered (4 frames mid-clip,
``benchmarks/contact_sheet.py``). A pair that fails is a row with its error, never left out. Writes DIR/results.json
(updated as pairs finish) and DIR/table.md.

With ``--terrain KIND`` each character stands on a terrain made to its size (saved with it in DIR/CHAR.KIND.blend:
terraces, steps rising in rings around where it stands, so that any walk climbs them; slope; noise; dem), the
retarget plants the feet on it (``--terrain Terrain``) and the judge measures the skin over it by raycast.

    python -m fullbody_ik.benchmarks.wild_sweep [--characters NAME,...] [--clips NAME,...] [--limit N]
        [--corpus DIR] [--out DIR] [--jobs N] [--timeout S] [--resume] [--terrain terraces|slope|noise|dem]
"""

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
SHARED_CHARACTERS = os.path.join(REPO, "data", "characters")
SHARED_BVH = os.path.join(REPO, "data", "bvh")
CHARACTER_EXT = (".glb", ".gltf", ".fbx", ".blend")
CLIP_EXT = (".bvh", ".fbx", ".glb", ".gltf", ".blend")
_PREPARING = threading.Lock()  # (one terrain file a character, made once)
PASS_KEYS = {"target_object": "--target-object", "source_object": "--source-object", "action": "--action",
             "frames": "--frames", "bvh_scale": "--bvh-scale", "source_map": "--source-map",
             "target_map": "--target-map"}


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def product_python():
    """The interpreter the product runs in: $FULLBODY_IK_PYTHON (a sweep's --python: another Blender's bpy), else
    the repo's .venv, else this one."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    venv = os.path.join(here, ".venv", "bin", "python")
    return os.environ.get("FULLBODY_IK_PYTHON") or (venv if os.path.exists(venv) else sys.executable)


def _slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60] or "x"


def read_manifest(path, exts):
    """Entries of a corpus manifest, tolerant of its shape: a list (or {"items"/"characters"/"clips"/...: list},
    or {name: entry}) of paths or dicts naming a file ("path", "file", "local_path", ...). Returns
    ([{"name", "path", "options", "entry"}], [problems])."""
    if not os.path.exists(path):
        return [], []
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return [], [f"{path}: unreadable ({e})"]
    base = os.path.dirname(path)
    items = data
    if isinstance(data, dict):
        for k in ("items", "entries", "characters", "clips", "motions", "motion", "files", "assets"):
            if isinstance(data.get(k), (list, dict)):
                items = data[k]
                break
    if isinstance(items, dict):
        items = [dict(v, name=v.get("name", k)) if isinstance(v, dict) else {"name": k, "path": v}
                 for k, v in items.items()]
    out, problems = [], []
    for it in items if isinstance(items, list) else []:
        if isinstance(it, str):
            it = {"path": it}
        if not isinstance(it, dict):
            continue
        cands = [it.get(k) for k in ("file", "local_path", "local", "filepath", "filename", "path", "output", "dest",
                                     "relpath")]
        cands += [v for v in it.values() if isinstance(v, str) and v.lower().endswith(exts)]
        cands = [v for v in cands if isinstance(v, str) and v]
        full_of = lambda v: v if os.path.isabs(v) else os.path.join(base, v)  # noqa: E731
        p = next((v for v in cands if os.path.isfile(full_of(v))), cands[0] if cands else None)
        name = str(it.get("name") or it.get("id") or (os.path.splitext(os.path.basename(p))[0] if p else "?"))
        if p is None:
            problems.append(f"{path}: entry {name!r} names no file")
            continue
        full = full_of(p)
        if not os.path.exists(full):
            problems.append(f"{path}: entry {name!r}: {full} is missing")
            continue
        if not full.lower().endswith(exts):
            problems.append(f"{path}: entry {name!r}: {full} is not one of {', '.join(exts)}")
            continue
        opts = {k: it[k] for k in PASS_KEYS if it.get(k) not in (None, "")}
        if not re.fullmatch(r"\s*-?\d+\s*-\s*-?\d+\s*", str(opts.get("frames", "0-0"))):
            opts.pop("frames", None)  # (a manifest's "frames" may be a count, not a FIRST-LAST range)
        if not isinstance(opts.get("bvh_scale", 1.0), (int, float)):
            opts.pop("bvh_scale", None)
        many = it.get("actions_in_file")
        if "action" in opts and isinstance(many, list) and len(many) <= 1:
            opts.pop("action")  # (its only clip: named, it can clash with the character's own action's name)
        out.append({"name": name, "path": os.path.abspath(full), "options": opts, "entry": it})
    return out, problems


def discover(char_filter=None, clip_filter=None, corpus="/work/corpus"):
    CORPUS_CHARACTERS = os.path.join(corpus, "characters", "manifest.json")  # noqa: N806
    CORPUS_MOTION = os.path.join(corpus, "motion", "manifest.json")  # noqa: N806
    chars, p1 = read_manifest(CORPUS_CHARACTERS, CHARACTER_EXT)
    files = os.path.join(os.path.dirname(CORPUS_CHARACTERS), "files")
    if not os.path.exists(CORPUS_CHARACTERS) and os.path.isdir(files):  # (the corpus being gathered: its files)
        p1.append(f"{CORPUS_CHARACTERS} not there yet: the characters in {files} are used")
        for f in sorted(glob.glob(os.path.join(files, "*"))):
            if f.lower().endswith(CHARACTER_EXT):
                chars.append({"name": os.path.splitext(os.path.basename(f))[0], "path": os.path.abspath(f),
                              "options": {}, "entry": {"globbed": True}})
    known = {c["entry"].get("sha256") for c in chars if isinstance(c["entry"], dict)}
    for f in sorted(glob.glob(os.path.join(SHARED_CHARACTERS, "*"))):
        if f.lower().endswith(CHARACTER_EXT) and not any(c["path"] == os.path.abspath(f) for c in chars) \
                and _sha256(f) not in known:  # (a corpus file the repo also ships is swept once)
            chars.append({"name": os.path.splitext(os.path.basename(f))[0], "path": os.path.abspath(f),
                          "options": {}, "entry": {"shared": True}})
    clips, p2 = read_manifest(CORPUS_MOTION, CLIP_EXT)
    for f in sorted(glob.glob(os.path.join(SHARED_BVH, "cmu_*.bvh"))):
        if not any(c["path"] == os.path.abspath(f) for c in clips):
            clips.append({"name": os.path.splitext(os.path.basename(f))[0], "path": os.path.abspath(f),
                          "options": {}, "entry": {"shared": True}})

    def keep(items, filt):
        if not filt:
            return items
        words = [w.strip().lower() for w in filt.split(",") if w.strip()]
        return [i for i in items if any(w in i["name"].lower() or w in os.path.basename(i["path"]).lower()
                                        for w in words)]

    # unique names
    for group in (chars, clips):
        seen = {}
        for i in group:
            n = _slug(i["name"])
            seen[n] = seen.get(n, 0) + 1
            i["slug"] = n if seen[n] == 1 else f"{n}_{seen[n]}"
    return keep(chars, char_filter), keep(clips, clip_filter), p1 + p2


def _tail(text, lines=12):
    keep = [ln for ln in text.splitlines() if ln.strip() and "%" not in ln[-6:]]
    return "\n".join(keep[-lines:])


def _run(cmd, timeout, cwd=None):
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err + f"\n(timed out after {timeout:.0f} s)", time.perf_counter() - t0


def _json_of(stdout):
    s = stdout.strip()
    if not s:
        return None
    try:
        return json.loads(s)
    except ValueError:
        i = s.find("{")
        try:
            return json.loads(s[i:]) if i >= 0 else None
        except ValueError:
            return None


TERRAINS = ("terraces", "slope", "noise", "dem")
TERRAIN_OBJECT = "Terrain"


def terrain_height(kind, size):
    """height(x, y) (vectorized, about the character's own place) of a terrain for a character ``size`` high:
    CMU-sized steps, slope and bumps scaled from a 1.7 m person's."""
    from fullbody_ik.tools import scenes

    s = size / 1.7
    if kind == "terraces":  # 15 cm steps 60 cm deep, in rings: a walk in any direction climbs them
        return lambda X, Y: s * 0.15 * np.floor(np.hypot(X, Y) / (0.6 * s) + 0.5)
    if kind == "slope":
        return scenes.slope(10.0, along=(0.6, 0.8))
    if kind == "noise":  # +-5 cm bumps about 80 cm across
        rng = np.random.default_rng(7)
        k, ph = rng.normal(size=(8, 2)) * 2 * np.pi / (0.8 * s), rng.uniform(0, 2 * np.pi, 8)
        return lambda X, Y: s * 0.0125 * sum(np.sin(k[i, 0] * X + k[i, 1] * Y + ph[i]) for i in range(8))
    dem = scenes.height_map(0.3, 10.0)
    return lambda X, Y: s * dem(X / s, Y / s)


def prepare_terrain(character, kind, blend, target_object=None):
    """(in this process, with bpy) the character and a terrain under it, made to its size, saved as ``blend``."""
    import bpy

    from fullbody_ik.files import load
    from fullbody_ik.tools import scenes

    bpy.ops.wm.read_homefile(use_empty=True)
    added, _ = load(bpy, character, "character")
    arms = [o for o in added if o.type == "ARMATURE" and (not target_object or o.name == target_object)]
    arm = max(arms, key=lambda a: len(a.data.bones))
    W = np.array(arm.matrix_world)
    heads = np.array([W @ np.append(np.array(b.head_local), 1.0) for b in arm.data.bones])[:, :3]
    size = float(np.ptp(heads[:, 2]))
    where = heads[:, :2].mean(axis=0)
    h = terrain_height(kind, size)
    ground = float(heads[:, 2].min())  # (the terrain's level at the character: its lowest joint's)
    terrain = scenes.terrain_mesh(bpy, TERRAIN_OBJECT, lambda X, Y: ground + h(X - where[0], Y - where[1]),
                                  size=(12 * size, 12 * size), resolution=size / 34, center=where)
    terrain.name = TERRAIN_OBJECT
    bpy.ops.wm.save_as_mainfile(filepath=blend)


def run_pair(char, clip, out_dir, timeout, resume=False, sheet=True, rejudge=False, terrain=None):
    py = product_python()
    name = f"{clip['slug']}__{char['slug']}"
    base = os.path.join(out_dir, name)
    row = {"pair": name, "character": char["name"], "character_path": char["path"], "clip": clip["name"],
           "clip_path": clip["path"], "terrain": terrain}
    if resume and os.path.exists(base + ".row.json"):
        with open(base + ".row.json", encoding="utf-8") as f:
            return json.load(f)
    blend = base + ".blend"
    target = char["path"]
    if terrain:
        target = os.path.join(out_dir, f"{char['slug']}.{terrain}.blend")
        with _PREPARING:
            if not os.path.exists(target):
                code, _, err, _ = _run([py, "-m", "fullbody_ik.benchmarks.wild_sweep", "--prepare-terrain",
                                        char["path"], terrain, target, char["options"].get("target_object") or ""],
                                       timeout)
                if code != 0:
                    row.update(exit=None, error="terrain: " + _tail(err, 3))
                    return row
    cmd = [py, "-m", "fullbody_ik", "retarget", clip["path"], target, "--output", blend, "--json",
           "--clip-rate", "scene"] + (["--terrain", TERRAIN_OBJECT] if terrain else [])
    for k, v in {**clip["options"], **char["options"]}.items():
        if (k in ("source_object", "action", "frames", "bvh_scale", "source_map") and k in clip["options"]) or \
                (k in ("target_object", "target_map") and k in char["options"]):
            cmd += [PASS_KEYS[k], str(v)]
    row["command"] = " ".join(cmd)
    old = None
    if rejudge and os.path.exists(base + ".row.json"):
        with open(base + ".row.json", encoding="utf-8") as f:
            old = json.load(f)
    if old is not None and "exit" in old:  # (the product's run kept: judged and looked at again)
        row.update(exit=old["exit"], seconds=old.get("seconds"), stderr_tail=old.get("stderr_tail", ""))
        doc = None
        if os.path.exists(base + ".json"):
            with open(base + ".json", encoding="utf-8") as f:
                doc = json.load(f)
        out = json.dumps(doc) if doc is not None else ""
        err = old.get("stderr_tail", "")
        code = old["exit"]
    else:
        code, out, err, secs = _run(cmd, timeout)
        row.update(exit=code, seconds=round(secs, 2), stderr_tail=_tail(err))
    doc = _json_of(out)
    row["product"] = None
    if doc is not None:
        with open(base + ".json", "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
        rep = doc.get("report") or {}
        feet = rep.get("feet") or {}
        row["product"] = {"ok": doc.get("ok"), "error": doc.get("error"), "verdict": feet.get("verdict"),
                          "warnings": doc.get("warnings"), "scale": rep.get("scale"),
                          "frames": rep.get("frames"), "mapping_roles": len(rep.get("mapping") or [])}
    if code is None:
        row["error"] = f"timed out after {timeout:.0f} s"
    elif code != 0 and not (doc and doc.get("report")):
        row["error"] = (doc or {}).get("error") or _tail(err, 3) or f"exit {code}"
    if os.path.exists(blend) and doc is not None and doc.get("report"):
        jcmd = [py, "-m", "fullbody_ik.benchmarks.retarget_judge", "--source", clip["path"], "--result", blend,
                "--report", base + ".json", "--json", "--out", base + ".judge.json"] + \
            (["--terrain", TERRAIN_OBJECT] if terrain else [])
        jc, jout, jerr, jsecs = _run(jcmd, timeout)
        judged = _json_of(jout) if jc == 0 else None
        row["judge"] = judged
        row["judge_seconds"] = round(jsecs, 2)
        if judged is None:
            row["judge_error"] = _tail(jerr, 6) or f"exit {jc}"
        if sheet:
            scmd = [py, "-m", "fullbody_ik.benchmarks.contact_sheet", blend, "--report", base + ".json",
                    "--count", "4", "--span", "0.3-0.7", "--size", "240", "--label", f"{clip['slug']} on "
                    f"{char['slug']}", "-o", base + ".sheet.png"] + (["--terrain", TERRAIN_OBJECT] if terrain else [])
            sc, sout, serr, _ = _run(scmd, timeout)
            row["sheet"] = base + ".sheet.png" if sc == 0 and os.path.exists(base + ".sheet.png") else None
            if row["sheet"] is None:
                row["sheet_error"] = _tail(serr, 4) or f"exit {sc}"
    with open(base + ".row.json", "w", encoding="utf-8") as f:
        json.dump(row, f, indent=1)
    return row


def _f(x, d=1):
    return "-" if x is None else f"{x:.{d}f}"


def _cell(row):
    """The judge's figures, short, and the aims it missed."""
    j = row.get("judge")
    if not j:
        return ["-"] * 9 + [row.get("judge_error", "not judged").replace("\n", " ")[:120] if row.get("blend", True)
                            else "-"]
    lim = j["limbs_deg"]
    ov = lim.get("overall") or {}
    hands = [lim[k]["mean"] for k in ("left hand", "right hand") if lim.get(k)]
    feet = j["feet"]

    def both(key, sub, d=1):
        return "/".join(_f((feet[s][key] or {}).get(sub) if s in feet and feet[s][key] else None, d)
                        for s in ("left", "right"))

    sk = both("skate_mm_per_frame", "mean", 2) + " vs " + both("skate_source_scaled_mm_per_frame", "mean", 2)
    clr = "/".join(_f(feet[s]["clearance_diff_mm"]["p95_abs"]) if s in feet else "-" for s in ("left", "right"))
    sw = "/".join(_f(feet[s]["swing_ratio"]["median"], 2) if s in feet else "-" for s in ("left", "right"))
    inv = sum(v["result_inverted_frames"] for v in j["hinges"].values())
    inv_s = sum(v["source_inverted_frames"] or 0 for v in j["hinges"].values())
    ph = j["pelvis_height_over_leg"]
    missed = j["aims_missed"]
    short = "; ".join(missed[:6]) + (f"; +{len(missed) - 6} more" if len(missed) > 6 else "")
    return [f"{_f(ov.get('mean'))}/{_f(ov.get('p95'))}", "/".join(_f(h, 0) for h in hands) or "-", sk,
            both("ankle_spread_mm", "max"), clr, sw, f"{_f(ph['result'], 2)}/{_f(ph['source'], 2)}",
            _f(j["root_travel"]["path_ratio"], 2), f"{inv}/{inv_s}", short or "none"]


def write_table(rows, problems, path):
    head = ["pair", "exit", "product verdict", "limbs mean/p95 deg", "hands deg L/R", "skate L/R vs src scaled mm/fr",
            "ankle spread max mm L/R", "clearance diff p95 mm L/R", "swing peak ratio L/R", "pelvis h/leg res/src",
            "travel ratio", "bent-wrong frames res/src", "aims missed (why)", "sheet"]
    lines = ["# Retargeting sweep: every character x clip, judged independently", "",
             f"{len(rows)} pairs, {time.strftime('%Y-%m-%d %H:%M:%S')}. Product: `python -m fullbody_ik retarget CLIP "
             "CHAR --clip-rate scene --json`; judge: `benchmarks/retarget_judge.py` (aims: limb mean <= 10 deg, p95 <= "
             "25; ankle spread <= 10 mm; skate <= the scaled source's; swing peak ratio 0.8-1.25; clearance vs source "
             "within 3 mm p95). Hands (wrist to fingers) are measured beside the limbs, outside the overall.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        p = r.get("product") or {}
        if r.get("error"):
            verdict = "ERROR: " + str(r["error"]).replace("\n", " ").replace("|", "/")[:200]
        else:
            verdict = ("ok" if p.get("ok") else "NOT ok") + ": " + str(p.get("verdict") or "").replace("|", "/")[:80]
        cells = _cell(r) if not r.get("error") or r.get("judge") else ["-"] * 10
        sheet = f"[png]({os.path.basename(r['sheet'])})" if r.get("sheet") else "-"
        lines.append("| " + " | ".join([r["pair"], str(r.get("exit")), verdict] +
                                       [str(c).replace("|", "/") for c in cells] + [sheet]) + " |")
    if problems:
        lines += ["", "Manifest entries not run:", ""] + [f"- {p}" for p in problems]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fullbody_ik.benchmarks.wild_sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--characters", help="only characters whose name or file contains one of these (comma list)")
    ap.add_argument("--clips", help="only clips whose name or file contains one of these (comma list)")
    ap.add_argument("--limit", type=int, help="at most this many pairs")
    ap.add_argument("--corpus", default=os.environ.get("FULLBODY_IK_CORPUS", "/work/corpus"),
                    help="the corpus from the wild (benchmarks/corpus.py puts it there; default $FULLBODY_IK_CORPUS, "
                         "else /work/corpus)")
    ap.add_argument("--out", default=os.path.join(REPO, "out", "wild_sweep"),
                    help="the folder for results (default out/wild_sweep in the repo, not tracked)")
    ap.add_argument("--jobs", "-j", type=int, default=2, help="pairs at once (default 2)")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds for each step of a pair (default 1200)")
    ap.add_argument("--resume", action="store_true", help="reuse the pairs already done in --out")
    ap.add_argument("--rejudge", action="store_true", help="keep the product's results in --out, judge them (and "
                    "render their sheets) again")
    ap.add_argument("--no-sheets", action="store_true", help="no contact sheets")
    ap.add_argument("--list", action="store_true", help="list the pairs and stop")
    ap.add_argument("--python", help="the Python whose bpy runs the product (default the repo's .venv: bpy 5.0; "
                    ".venv-5.2/bin/python for Blender 5.2)")
    ap.add_argument("--terrain", choices=TERRAINS, help="plant each character on a terrain of this kind made to its "
                    "size (default: its own floor)")
    ap.add_argument("--prepare-terrain", nargs=4, metavar=("CHARACTER", "KIND", "OUT", "OBJECT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.prepare_terrain:
        character, kind, out, obj = args.prepare_terrain
        prepare_terrain(character, kind, out, obj or None)
        return 0
    if args.python:
        os.environ["FULLBODY_IK_PYTHON"] = os.path.abspath(args.python)
    chars, clips, problems = discover(args.characters, args.clips, args.corpus)
    pairs = [(c, m) for m in clips for c in chars]
    if args.limit:
        pairs = pairs[:args.limit]
    print(f"{len(chars)} characters x {len(clips)} clips: {len(pairs)} pairs", file=sys.stderr)
    for p in problems:
        print("  not run: " + p, file=sys.stderr)
    if args.list:
        for c, m in pairs:
            print(f"{m['slug']}__{c['slug']}\t{m['path']}\t{c['path']}")
        return 0
    os.makedirs(args.out, exist_ok=True)
    rows = [None] * len(pairs)
    lock = threading.Lock()

    def save():
        done = [r for r in rows if r is not None]
        with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
            json.dump({"pairs": done, "manifest_problems": problems}, f, indent=1)
        write_table(done, problems, os.path.join(args.out, "table.md"))

    def one(k):
        c, m = pairs[k]
        try:
            r = run_pair(c, m, args.out, args.timeout, args.resume and not args.rejudge, not args.no_sheets,
                         args.rejudge, args.terrain)
        except Exception as e:  # (a row, never a lost pair)
            r = {"pair": f"{m['slug']}__{c['slug']}", "character": c["name"], "clip": m["name"], "exit": None,
                 "error": f"sweep error: {type(e).__name__}: {e}"}
        with lock:
            rows[k] = r
            save()
            j = r.get("judge") or {}
            print(f"[{sum(x is not None for x in rows)}/{len(rows)}] {r['pair']}: exit {r.get('exit')}"
                  f"{' ERROR ' + str(r['error'])[:100] if r.get('error') else ''}"
                  f"{' | ' + j['summary'] if j.get('summary') else ''}", file=sys.stderr, flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        list(ex.map(one, range(len(pairs))))
    save()
    print(os.path.join(args.out, "table.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
