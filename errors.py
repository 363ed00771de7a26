# SPDX-License-Identifier: GPL-3.0-or-later
"""How a job that cannot run ends: a usage error (bad arguments, or a name the file does not hold; exit 2) or a
failure (the job cannot be done with this input, or ran and missed its checks; exit 1). The command line, batch
jobs and the Dask cluster raise and read these."""


class UsageError(Exception):
    """Bad arguments: exit code 2."""


class Failure(Exception):
    """The job cannot be done with this input: exit code 1."""
