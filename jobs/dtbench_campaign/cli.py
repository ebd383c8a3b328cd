"""Command line ``dtbench-campaign COMMAND SPEC.toml``: plan, submit, status, cancel, collect,
local.

Bad specs and bad arguments are reported as one line on stderr naming the key and the accepted
values, with exit status 2, before anything is written or submitted. A Slurm command that fails
during `submit` stops it (exit 1) after saying which jobs were already submitted.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shlex
import signal
import sys
import time
from typing import Callable, List, Optional

from . import __version__, appendfile, collect as collect_mod, dtoptions, local as local_mod, plan, slurm
from . import status as status_mod
from .spec import Spec, SpecError, check_folder, load

PROG = "dtbench-campaign"


def say(msg: str) -> None:
    print(msg, flush=True)


def error(msg: str) -> None:
    print(f"{PROG}: {' '.join(msg.split())}", file=sys.stderr, flush=True)


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise UsageError(message)


# ---- shared steps --------------------------------------------------------------------------------
def _select(runs: List[plan.Run], only: Optional[List[str]]) -> List[plan.Run]:
    if not only:
        return runs
    chosen = [r for r in runs if any(fnmatch.fnmatchcase(r.id, pat) for pat in only)]
    if not chosen:
        raise SpecError(f"--only: {' '.join(only)} matches no run; accepted: patterns of run names "
                        f"such as {runs[0].id} (see `{PROG} plan`)")
    return chosen


def _coverage(runs: List[plan.Run]) -> List[plan.Run]:
    """Runs that together use every option value, and every rank count with each, once (what
    --dry-run checks)."""
    seen, picked = set(), []
    for r in runs:
        pairs = {(k, repr(v), r.ranks) for k, v in r.options.items()} | {("", "", r.ranks)}
        if not pairs <= seen:
            seen |= pairs
            picked.append(r)
    return picked or runs[:1]


def prepare(args, need_dtbench: bool = True):
    """Spec -> (spec, runs, dtbench): everything checked; raises SpecError."""
    spec = load(args.spec)
    if need_dtbench:
        for line in friction_warnings(spec, os.environ, os.geteuid()):
            print(f"{PROG}: warning: {line}", file=sys.stderr)
    if getattr(args, "results", None):
        spec.output = os.path.abspath(args.results)
    check_folder(spec.output, "--results" if getattr(args, "results", None) else
                 "campaign.output")
    runs = plan.expand(spec)
    plan.check_runs(runs)
    runs = _select(runs, getattr(args, "only", None))
    dtbench = None
    if need_dtbench:
        dtbench = dtoptions.find_dtbench(spec.dtbench)
        if not getattr(args, "no_check", False):
            known = dtoptions.query_help(dtbench)
            dtoptions.check(spec.all_options(), known)
            # dtbench --dry-run --ranks N checks each run as the N ranks it will have (servers,
            # stages, batch shares, --ranks-per-node); an older dtbench without --ranks checks
            # from one process, which cannot judge --ranks-per-node.
            as_ranks = "ranks" in known
            for r in _coverage(runs):
                words = [w for k, v in r.options.items() if as_ranks or k != "ranks-per-node"
                         for w in dtoptions.option_args(k, v)]
                if as_ranks:
                    words += ["--ranks", str(r.ranks)]
                problem = dtoptions.dry_run(dtbench, words)
                if problem:
                    raise SpecError(f"options: run {r.id}: dtbench --dry-run rejects "
                                    f"{shlex.join(words)}: {problem}")
    return spec, runs, dtbench


# Seconds dtbench needs from the launcher's start to its first iteration on a cluster (MPI start-up,
# data, the result file); Slurm's warning signal may also come up to a minute before the asked
# time (it checks limits about every 30-60 s).
STARTUP_S = 60
SIGNAL_JITTER_S = 60


def friction_warnings(spec: Spec, env, euid: int) -> List[str]:
    """Things that are accepted but will likely waste the allocation, one line each."""
    out = []
    room = spec.time_seconds - spec.signal_before - SIGNAL_JITTER_S - STARTUP_S
    if room < 60:
        out.append(f"resources.time {spec.time!r} ({spec.time_seconds} s) is not well above "
                   f"signal_before ({spec.signal_before} s) plus start-up (~{STARTUP_S} s) and "
                   f"Slurm's early warning (up to {SIGNAL_JITTER_S} s): runs may be asked to "
                   "stop before or soon after their first iteration; raise time or lower "
                   "signal_before")
    root_ok = (env.get("OMPI_ALLOW_RUN_AS_ROOT") and env.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")) \
        or "--allow-run-as-root" in spec.launcher_args
    if "mpirun" in spec.launchers and euid == 0 and not root_ok:
        out.append("launcher mpirun will run as root, and Open MPI refuses that unless "
                   "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are exported "
                   "before submitting (or launcher_args has --allow-run-as-root)")
    return out


def _todo(spec: Spec, runs: List[plan.Run], retry: bool) -> List[plan.Run]:
    """Runs to start now: never started ones, and with --retry those whose newest attempt ended
    without completing. Running, pending and completed runs are never started again."""
    known = plan.known_attempts(spec)
    fresh = [r for r in runs if r.id not in known]
    if not retry:
        return fresh
    again = {s.run for s in status_mod.campaign_status(spec, [r for r in runs if r.id in known])
             if s.state in status_mod.RETRY}
    return [r for r in runs if r.id not in known or r.id in again]


# ---- commands ------------------------------------------------------------------------------------
def cmd_plan(args) -> int:
    spec, runs, dtbench = prepare(args)
    dtbench = dtbench or "dtbench"
    known = plan.known_attempts(spec)
    attempts = {r.id: plan.next_attempt(known, r.id) for r in runs}
    say(f"campaign {spec.name}: {len(runs)} runs; results in {spec.output}")
    if args.local:
        hostfile = args.hostfile or spec.hostfile
        hosts = local_mod.read_hostfile(hostfile) if hostfile else None
        extra = shlex.split(args.mpirun_args or "")
        for r in runs:
            out = plan.result_base(spec, r.id, attempts[r.id]) + ".h5"
            cmd = local_mod.mpirun_command(spec, r, dtbench, out, hosts, extra)
            say(f"{r.id}: {shlex.join(cmd)}")
        return 0
    template = plan.find_template(spec)
    max_array = slurm.max_array_size() if slurm.available() else 1001
    jobs = plan.group_jobs(spec, runs, attempts, max_array)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i, job in enumerate(jobs):
        task_file = None
        if job.array:
            task_file = os.path.join(plan.slurm_dir(spec), f"{stamp}-{job.name}.tasks")
        dep = "afterany:<previous job>" if spec.chain and i else None
        cmd = plan.sbatch_command(spec, job, template, dtbench, task_file, dep)
        kind = f"array of {len(job.runs)} runs" if job.array else "1 run"
        say(f"job {i + 1}/{len(jobs)} ({kind}, {job.runs[0].nodes} nodes x "
            f"{job.runs[0].tasks_per_node} tasks):")
        say(f"  {plan.submit_line(plan.job_env(spec, job, dtbench), cmd)}")
        for k, (r, a) in enumerate(zip(job.runs, job.attempts)):
            out = plan.result_base(spec, r.id, a) + ".h5"
            prefix = f"[{k}] " if job.array else ""
            say(f"    {prefix}{r.id}: {shlex.join(plan.launcher_command(spec, r, dtbench, out))}")
    return 0


def cmd_submit(args) -> int:
    spec, runs, dtbench = prepare(args)
    template = plan.find_template(spec)
    if not slurm.available():
        raise SpecError("submit: sbatch and squeue are not on PATH; accepted: a machine with the "
                        f"Slurm client commands (or `{PROG} local`)")
    todo = _todo(spec, runs, args.retry)
    skipped = len(runs) - len(todo)
    if not todo:
        say(f"campaign {spec.name}: nothing to submit ({skipped} runs already submitted; "
            f"`{PROG} status` shows them, --retry resubmits the unfinished ones)")
        return 0
    known = plan.known_attempts(spec)
    attempts = {r.id: plan.next_attempt(known, r.id) for r in todo}
    jobs = plan.group_jobs(spec, todo, attempts, slurm.max_array_size())
    os.makedirs(plan.runs_dir(spec), exist_ok=True)
    os.makedirs(plan.slurm_dir(spec), exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    previous = args.after
    submitted = []
    for job in jobs:
        task_file = None
        if job.array:
            task_file = os.path.join(plan.slurm_dir(spec), f"{stamp}-{job.name}.tasks")
            n = 1
            while os.path.exists(task_file):
                task_file = os.path.join(plan.slurm_dir(spec), f"{stamp}-{job.name}.{n}.tasks")
                n += 1
            with open(task_file, "w") as f:
                f.write("\n".join(plan.task_lines(spec, job)) + "\n")
        dep = f"afterany:{previous}" if previous else None
        cmd = plan.sbatch_command(spec, job, template, dtbench, task_file, dep)
        env = plan.job_env(spec, job, dtbench)
        line = plan.submit_line(env, cmd)  # the whole submission: environment and command
        env["DTBENCH_SUBMIT_LINE"] = line
        try:
            job_id = slurm.sbatch(cmd, env)
        except slurm.SlurmError as e:
            error(f"{e}; submitted before this: {', '.join(submitted) or 'nothing'}")
            return 1
        plan.append_log(spec, {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "job_id": job_id,
                               "array": job.array, "submit_line": line, "task_file": task_file,
                               "tasks": [{"index": k, "run": r.id, "attempt": a}
                                         for k, (r, a) in enumerate(zip(job.runs, job.attempts))]})
        submitted.append(job_id)
        previous = job_id if spec.chain else previous
        say(f"submitted job {job_id}: {len(job.runs)} run{'s' if len(job.runs) > 1 else ''} "
            f"({job.name})")
    say(f"campaign {spec.name}: {len(todo)} runs in {len(submitted)} jobs"
        + (f"; {skipped} runs were already submitted" if skipped else ""))
    return 0


def _print_table(rows: List[status_mod.RunStatus]) -> None:
    width = max([len(r.run) for r in rows] + [3])
    say(f"{'RUN':<{width}}  {'TRY':>3}  {'JOB':<10}  {'STATE':<13}  {'ITERS':>11}  DETAIL")
    for r in rows:
        iters = "" if r.iterations is None else f"{r.iterations}/{r.iters_total}"
        say(f"{r.run:<{width}}  {r.attempt or '':>3}  {r.job:<10}  {r.state:<13}  {iters:>11}  "
            f"{r.detail}")


def _counts(rows: List[status_mod.RunStatus]) -> str:
    counts: dict = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    order = sorted(counts.items(), key=lambda x: status_mod.STATES.index(x[0]))
    return ", ".join(f"{n} {s}" for s, n in order)


def progress_line(rows: List[status_mod.RunStatus], waited: float) -> str:
    """One line while --wait waits: the states, and the iterations of the runs under way
    (kept in the file of the total, and how many were completed where the file says so and
    more were completed than kept)."""
    active = [r for r in rows if r.state in ("running", "completing")]

    def one(r: status_mod.RunStatus) -> str:
        kept = r.iterations if r.iterations is not None else "?"
        text = f"{r.run} {kept}/{r.iters_total if r.iters_total is not None else '?'}"
        if r.iterations_completed is not None and r.iterations_completed != r.iterations:
            text += f" ({r.iterations_completed} completed)"
        return text
    shown = ", ".join(one(r) for r in active[:4])
    more = f" and {len(active) - 4} more" if len(active) > 4 else ""
    return (f"waiting {waited:.0f} s: {_counts(rows)}"
            + (f" (iterations: {shown}{more})" if shown else ""))


def cmd_status(args) -> int:
    spec, runs, _ = prepare(args, need_dtbench=False)
    rows = status_mod.campaign_status(spec, runs, all_attempts=args.all_attempts)
    start, last = time.monotonic(), ""
    while args.wait and any(r.state in status_mod.UNDER_WAY for r in rows):
        line = progress_line(rows, time.monotonic() - start)
        if line.split(":", 1)[1] != last:   # on stderr: stdout keeps the table or --json
            print(f"{PROG}: {line}", file=sys.stderr, flush=True)
            last = line.split(":", 1)[1]
        time.sleep(args.interval)  # --wait: until no run is pending, running or completing
        rows = status_mod.campaign_status(spec, runs, all_attempts=args.all_attempts)
    if args.json:
        import json
        print(json.dumps([r.as_dict() for r in rows], indent=1))
        return 0
    _print_table(rows)
    say(f"{len(rows)} {'attempts' if args.all_attempts else 'runs'}: {_counts(rows)}")
    return 0


def cmd_cancel(args) -> int:
    spec, runs, _ = prepare(args, need_dtbench=False)
    rows = status_mod.campaign_status(spec, runs)
    failed = 0
    for r in rows:
        if r.state not in ("pending", "running") or r.job in ("", "local"):
            continue
        # A running job is asked through its batch shell (SIGUSR2, see slurm/dtbench.sbatch):
        # dtbench stops after the current iteration and closes its file. Pending ones just go.
        graceful = r.state == "running" and not args.now
        problem = slurm.scancel(r.job, "USR2" if graceful else None)
        if problem:
            error(f"scancel {r.job} ({r.run}): {problem}")
            failed += 1
        else:
            what = "asked to stop after its current iteration" if graceful else "cancelled"
            say(f"{r.run}: job {r.job} {what}")
    return 1 if failed else 0


def cmd_collect(args) -> int:
    spec, runs, _ = prepare(args, need_dtbench=False)
    rows = status_mod.campaign_status(spec, runs, all_attempts=True)
    dest = os.path.abspath(args.to or os.path.join(spec.output, "collected"))
    check_folder(dest, "--to")
    n, index, left_out = collect_mod.collect(spec, runs, rows, dest, args.completed_only)
    for line in left_out:
        say(f"left out {line}")
    say(f"{n} result files in {dest}; index {index}")
    say(f"next: dtbench-analyze scaling {dest}")
    return 0


def cmd_local(args) -> int:
    spec, runs, dtbench = prepare(args)
    hostfile = args.hostfile or spec.hostfile
    hosts = local_mod.read_hostfile(hostfile) if hostfile else None
    extra = shlex.split(args.mpirun_args or "")
    todo = _todo(spec, runs, args.retry)
    known = plan.known_attempts(spec)
    attempts = {r.id: plan.next_attempt(known, r.id) for r in todo}
    # Every command is built (and so checked) before the first run starts.
    cmds = {r.id: local_mod.mpirun_command(spec, r, dtbench,
                                           plan.result_base(spec, r.id, attempts[r.id]) + ".h5",
                                           hosts, extra) for r in todo}
    if len(todo) < len(runs):
        say(f"{len(runs) - len(todo)} runs already have results or are running: left alone")
    stop = local_mod._Stop()
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    failed = 0
    try:
        for r in todo:
            res = local_mod.run_one(spec, r, attempts[r.id], cmds[r.id], stop, say,
                                    time_limit=not args.no_time_limit)
            st = status_mod.attempt_status(spec, r.id, attempts[r.id], "local", {})
            say(f"{r.id}: {st.state}" + (f" ({st.detail})" if st.detail else "")
                + f", exit {res['exit_code']}")
            failed += st.state not in ("completed", "stopped early")
            if stop.signal:
                say(f"stopped by signal {stop.signal}: the remaining runs were not started")
                return 1
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 1 if failed else 0


NO_CHECK = "do not ask dtbench to check the options"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Plan, submit, watch and collect dtbench campaigns "
                                      "(TOML specs, see jobs/README.md).")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    def add(name: str, func: Callable, help_text: str, only: bool = True):
        c = sub.add_parser(name, help=help_text, description=help_text)
        c.add_argument("spec", help="campaign spec (TOML)")
        c.add_argument("--results", metavar="DIR",
                       help="the campaign's folder, instead of campaign.output")
        if only:
            c.add_argument("--only", action="append", metavar="GLOB",
                           help="only runs whose name matches (repeatable)")
        c.set_defaults(func=func)
        return c

    c = add("plan", cmd_plan, "print every job and run it would submit, with the exact commands")
    c.add_argument("--local", action="store_true", help="show the mpirun commands of `local`")
    c.add_argument("--hostfile", help="with --local: Open MPI hostfile")
    c.add_argument("--mpirun-args", help="with --local: extra mpirun arguments (one string)")
    c.add_argument("--no-check", action="store_true", help=NO_CHECK)
    c = add("submit", cmd_submit, "submit the runs that have not been submitted yet")
    c.add_argument("--retry", action="store_true",
                   help="also resubmit runs whose newest attempt ended without completing "
                        "(into new files)")
    c.add_argument("--after", metavar="JOBID",
                   help="every job waits for this one (afterany); with resources.chain the first")
    c.add_argument("--no-check", action="store_true", help=NO_CHECK)
    c = add("status", cmd_status,
            "state of every run (Slurm when it knows the job, else the files)")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("--all-attempts", action="store_true", help="every attempt, not only the newest")
    c.add_argument("--wait", action="store_true",
                   help="wait until no run is pending, running or completing (a line on stderr "
                        "when something changed), then print")
    c.add_argument("--interval", type=float, default=5.0, metavar="S",
                   help="seconds between looks with --wait (default 5)")
    c = add("cancel", cmd_cancel,
            "stop running jobs after their current iteration, drop pending ones")
    c.add_argument("--now", action="store_true", help="plain scancel (SIGTERM to everything)")
    c = add("collect", cmd_collect, "gather one result file per run and index.csv into a folder")
    c.add_argument("--to", metavar="DIR", help="folder (default: OUTPUT/collected)")
    c.add_argument("--completed-only", action="store_true", help="leave out incomplete runs")
    c = add("local", cmd_local, "run the campaign with mpirun on this machine, no Slurm")
    c.add_argument("--hostfile", help="Open MPI hostfile: a run on N nodes uses its first N hosts")
    c.add_argument("--mpirun-args", help="extra mpirun arguments (one string)")
    c.add_argument("--retry", action="store_true", help="also rerun runs that did not complete")
    c.add_argument("--no-time-limit", action="store_true", help="ignore resources.time")
    c.add_argument("--no-check", action="store_true", help=NO_CHECK)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    appendfile.new_command()
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except UsageError as e:
        error(str(e))
        return 2
    except SpecError as e:
        spec = getattr(locals().get("args"), "spec", "")
        error(f"{spec}: {e}" if spec else str(e))
        return 2
    except BrokenPipeError:
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
