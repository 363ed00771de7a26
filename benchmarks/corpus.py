# SPDX-License-Identifier: GPL-3.0-or-later
"""The corpus from the wild the retargeting sweep runs on: characters and clips from public repositories, listed
with their repository, path, commit and licence in benchmarks/corpus/{characters,motion}.json. The files are not
shipped (their licences vary, several forbid it): this finds them again in repository snapshots.

    python -m fullbody_ik.benchmarks.corpus DEST [--mirrors DIR]

extracts every listed file from a snapshot of its repository (a bare git directory under DIR, by default
/work/.mirror, as the search tool's `fetch github:OWNER/NAME` leaves it: DIR/OWNER+NAME/repo), at the listed
commit, into DEST/characters/<file> and DEST/motion/<file>, beside a copy of each manifest; it names the
repositories it could not read (fetch them first) and exits 1 when any file is missing.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
KINDS = ("characters", "motion")


def entries(kind):
    with open(os.path.join(HERE, f"{kind}.json"), encoding="utf-8") as f:
        return json.load(f)


def _git_dir(mirrors, repo):
    base = os.path.join(mirrors, repo.replace("/", "+"))
    for d in (os.path.join(base, "repo", ".git"), os.path.join(base, "repo"), base):
        if os.path.isfile(os.path.join(d, "HEAD")):
            return d
    return None


def extract(entry, mirrors, dest):
    """Writes one entry's file under ``dest``; returns None, or why it could not."""
    git = _git_dir(mirrors, entry["repo"])
    if git is None:
        return f"no snapshot of {entry['repo']} under {mirrors} (fetch github:{entry['repo']})"
    rev = entry.get("commit") or "HEAD"
    proc = subprocess.run(["git", f"--git-dir={git}", "show", f"{rev}:{entry['path']}"], capture_output=True)
    if proc.returncode != 0:
        return f"{entry['repo']}@{rev[:10]} has no {entry['path']}: {proc.stderr.decode(errors='replace').strip()}"
    data = proc.stdout
    if data.startswith(b"version https://git-lfs"):
        return f"{entry['repo']}: {entry['path']} is a Git LFS pointer in the snapshot"
    if entry.get("sha256") and hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return f"{entry['repo']}: {entry['path']} differs from the listed file (sha256)"
    out = os.path.join(dest, entry["file"])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        f.write(data)
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fullbody_ik.benchmarks.corpus", description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", help="where the corpus goes (DEST/characters, DEST/motion)")
    ap.add_argument("--mirrors", default="/work/.mirror", help="the folder of repository snapshots")
    args = ap.parse_args(argv)
    missing = []
    for kind in KINDS:
        dest = os.path.join(args.dest, kind)
        os.makedirs(dest, exist_ok=True)
        shutil.copy(os.path.join(HERE, f"{kind}.json"), os.path.join(dest, "manifest.json"))
        for entry in entries(kind):
            why = extract(entry, args.mirrors, dest)
            if why:
                missing.append(f"{kind} {entry['name']}: {why}")
    total = sum(len(entries(k)) for k in KINDS)
    print(f"{total - len(missing)} of {total} files in {args.dest}")
    for line in missing:
        print(f"  missing: {line}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
