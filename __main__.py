# SPDX-License-Identifier: GPL-3.0-or-later
"""``python -m fullbody_ik ...``: the command line with the pip bpy module (see cli.py)."""

import os
import sys


def _main():
    from fullbody_ik.cli import main, parser

    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        parser().print_help()
        return 0 if argv else 2
    import fullbody_ik

    fullbody_ik.register()
    code = main(argv)
    # The one document (--json) is out: what prints on standard output from here on, as the process exits, goes to
    # standard error (bpy 5.0.1 prints "Error: Not freed memory blocks: ..." there after a job that failed early on a
    # file with meshes, and a farm parsing standard output read two documents).
    sys.stdout.flush()
    os.dup2(2, 1)
    return code


if __name__ == "__main__":
    sys.exit(_main())
