# SPDX-License-Identifier: GPL-3.0-or-later
"""``python -m fullbody_ik ...``: the command line with the pip bpy module (see cli.py)."""

import sys


def _main():
    from fullbody_ik.cli import main, parser

    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        parser().print_help()
        return 0 if argv else 2
    import fullbody_ik

    fullbody_ik.register()
    return main(argv)


if __name__ == "__main__":
    sys.exit(_main())
