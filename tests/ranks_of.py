"""ranks_of.py - prints /ranks/NAME of a results file that a run may be writing at that moment,
every rank's or RANK's, space-separated, for the shell tests that signal a run's ranks.

Usage: ranks_of.py NAME PATH [RANK]
A file read in the middle of a flush can be inconsistent (HDF5: "truncated file" while an
extension's flush has moved the end of allocation but not yet written the file's end): the read is
retried every 0.05 s for up to 20 s. Exit status 1, one line, if it never reads.
"""
import os
import sys
import time

os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")  # the run holds the file open
import h5py  # noqa: E402 (after the environment it reads)


def read(name, path, rank):
    with h5py.File(path, "r") as f:
        c = f["ranks/" + name][:]
    c = c if rank is None else c[rank : rank + 1]
    return [v.decode() if isinstance(v, bytes) else v for v in c]


def main():
    if len(sys.argv) not in (3, 4):
        print("usage: ranks_of.py NAME PATH [RANK]", file=sys.stderr)
        return 2
    name, path = sys.argv[1], sys.argv[2]
    rank = int(sys.argv[3]) if len(sys.argv) == 4 else None
    end = time.monotonic() + 20
    while True:
        try:
            print(*read(name, path, rank))
            return 0
        except (OSError, KeyError) as e:
            if time.monotonic() > end:
                print(f"ranks_of.py: {path}: /ranks/{name} unreadable for 20 s: {e}", file=sys.stderr)
                return 1
            time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
