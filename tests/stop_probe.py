"""stop_probe.py - starts dtbench, sends its ranks a signal at a chosen moment, and reports how
the run ended: the shell tests of stops (test_start_signal.sh, test_setup_stop.sh) use it.

Usage: stop_probe.py --signal TERM|USR1 --ranks N --when WHEN [--timeout S] -- PROGRAM ARGS...
  --ranks 0    PROGRAM alone; N > 0: $MPIRUN -np N PROGRAM ARGS
  --when exec:MS    MS milliseconds after every rank was first seen (a scan of /proc, as pgrep
                    does, finds a process named dtbench whose arguments hold ARGS' --output)
         fd:REGEX   once a rank holds an open file whose path matches REGEX
         rss:MIB    once a rank's resident memory reaches MIB
Prints one line: rc=EXIT latency_s=SECONDS maxrss_mib=MIB (the launched process's exit status,
negative for a signal; seconds from the signal to its end; its largest resident memory, alone
only, else 0). Exit status 1 when the ranks never appeared or the run outlived --timeout.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time


def ranks(marker, skip):
    """Processes named dtbench with marker among their arguments (not the launcher)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == skip:
            continue
        try:
            with open(f"/proc/{d}/comm") as f:
                if f.read().strip() != "dtbench":
                    continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        found.append(int(d))
    return found


def holds(pid, pattern):
    try:
        return any(pattern.search(os.readlink(f"/proc/{pid}/fd/{fd}"))
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def resident_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Child:
    """The launched process, reaped with wait4 (for its resident memory) exactly once."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr)
        self.status = self.usage = None

    def ended(self):
        if self.status is None:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.status, self.usage = status, usage
        return self.status is not None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--signal", required=True, choices=["TERM", "USR1"])
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--when", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    marker = cmd[cmd.index("--output") + 1].encode()
    if a.ranks > 0:
        cmd = [os.environ.get("MPIRUN", "mpirun"), "-np", str(a.ranks)] + cmd
    kind, _, arg = a.when.partition(":")
    want = max(a.ranks, 1)
    child = Child(cmd)
    deadline = time.monotonic() + 60
    found = []
    while len(found) < want:
        if time.monotonic() > deadline or child.ended():
            print(f"stop_probe: the {want} rank(s) never appeared (found {found})")
            child.proc.kill()
            return 1
        found = ranks(marker, child.proc.pid if a.ranks > 0 else -1)
    if kind == "exec":
        time.sleep(float(arg) / 1000)
    else:
        pattern = re.compile(arg) if kind == "fd" else None
        while not child.ended():
            if any(holds(p, pattern) if pattern else resident_mib(p) >= float(arg) for p in found):
                break
            time.sleep(0.002)
    if child.ended():
        print(f"stop_probe: the run ended before the signal ({a.when})")
        return 1
    sent = time.monotonic()
    for p in found:
        try:
            os.kill(p, getattr(signal, "SIG" + a.signal))
        except ProcessLookupError:
            pass
    end = sent + a.timeout
    while not child.ended():
        if time.monotonic() > end:
            print(f"stop_probe: still running {a.timeout} s after SIG{a.signal}")
            child.proc.kill()
            return 1
        time.sleep(0.005)
    latency = time.monotonic() - sent
    rc = os.waitstatus_to_exitcode(child.status)
    rss = child.usage.ru_maxrss / 1024 if a.ranks == 0 else 0
    print(f"rc={rc} latency_s={latency:.3f} maxrss_mib={rss:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
