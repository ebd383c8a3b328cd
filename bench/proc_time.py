#!/usr/bin/env python3
"""proc_time.py - wall times of a program's start, for bench/start_stop.sh (standard library
only: it runs under the system's python3, which may have neither h5py nor numpy).

  version-ms PROGRAM                  ms from starting ``PROGRAM --version`` to its exit, %.3f
  setup-s PROGRAM OUTPUT ARGS...      s from starting ``PROGRAM ARGS... --output OUTPUT`` to its
                                      line "model fcn5: ..." (the model is built), %.3f; then
                                      the program is killed
"""

import subprocess
import sys
import time


def version_ms(program):
    t = time.perf_counter()
    subprocess.run([program, "--version"], stdout=subprocess.DEVNULL, check=True)
    print(f"{(time.perf_counter() - t) * 1000:.3f}")


def setup_s(program, output, args):
    t = time.perf_counter()
    p = subprocess.Popen([program] + args + ["--output", output],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        if line.startswith("model fcn5:"):
            print(f"{time.perf_counter() - t:.3f}")
            break
    p.kill()
    p.wait()


def main(argv):
    if len(argv) == 2 and argv[0] == "version-ms":
        version_ms(argv[1])
    elif len(argv) >= 3 and argv[0] == "setup-s":
        setup_s(argv[1], argv[2], argv[3:])
    else:
        print("usage: proc_time.py version-ms PROGRAM | setup-s PROGRAM OUTPUT ARGS...",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
