"""Planning: a checked spec becomes the list of runs (the sweep, minus exclusions, times repeats),
each with a stable name, its dtbench options and, per attempt, its own result files; runs are
grouped into Slurm jobs (one array per node count) with the exact sbatch command.

Result layout under the campaign's output folder:
    runs/RUN.aK.h5     result file of attempt K of run RUN (.out: its output, .state: the job's
                       own record, written by slurm/dtbench.sbatch or by `local`)
    slurm/             task files of job arrays, and Slurm's own output files
    submissions.jsonl  one line per submitted job: job id, array index -> run and attempt,
                       submit line
A new attempt always gets new files: nothing is ever written over an earlier result.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional

from . import appendfile, dtoptions
from .spec import (BATCH_PER_RANK, DEFAULT_PS_RANKS, MAX_RUNS, PS_RANKS_PER_NODE, Spec,
                   SpecError, Sweep)

SAFE = re.compile(r"[^A-Za-z0-9.+-]+")
ATTEMPT_RE = re.compile(r"^(?P<run>.+)\.a(?P<attempt>\d+)\.(?:h5|state|out)$")


@dataclass
class Run:
    id: str
    nodes: int
    tasks_per_node: int
    gpus_per_node: int
    launcher: str
    repeat: int
    options: Dict[str, Any]  # dtbench option -> value, in the spec's order
    factors: Dict[str, Any] = field(default_factory=dict)  # every key of the sweep -> value
    sweep: str = ""  # the [[sweep]] table's name ("" without sweeps)

    @property
    def ranks(self) -> int:
        return self.nodes * self.tasks_per_node

    def dtbench_args(self) -> List[str]:
        args: List[str] = []
        for k, v in self.options.items():
            args += dtoptions.option_args(k, v)
        return args


@dataclass
class Job:
    """One sbatch submission: a single run or an array of runs with the same resources."""
    name: str
    runs: List[Run]
    attempts: List[int]
    array: bool


def _label(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return SAFE.sub("-", str(v)).strip("-") or "x"


def _matches(ex: Dict[str, Any], point: Dict[str, Any]) -> bool:
    for k, want in ex.items():
        got = point.get(k)
        wants = want if isinstance(want, list) else [want]
        if got not in wants:
            return False
    return True


def _dims(spec: Spec, sw: Sweep) -> List[tuple]:
    dims: List[tuple] = [("nodes", sw.nodes), ("tasks_per_node", sw.tasks_per_node),
                         ("gpus_per_node", sw.gpus_per_node), ("launcher", spec.launchers)]
    dims += [(k, v) for k, v in sw.options.items()]
    dims.append(("repeat", list(range(spec.repeats))))
    return dims


def run_options(sw: Sweep, point: Dict[str, Any]) -> Dict[str, Any]:
    """A run's dtbench options, in the spec's order, the campaign's own keys (spec.DERIVED)
    turned into dtbench's: ps_ranks_per_node x nodes parameter servers, and batch_per_rank x the
    ranks that train (all but the servers of --exchange async) as the global batch."""
    options: Dict[str, Any] = {}
    for k in sw.options:
        if k == PS_RANKS_PER_NODE:
            options["ps-ranks"] = point[k] * point["nodes"]
        else:
            options["batch" if k == BATCH_PER_RANK else k] = point[k]
    if BATCH_PER_RANK in sw.options:
        ranks = point["nodes"] * point["tasks_per_node"]
        servers = options.get("ps-ranks", DEFAULT_PS_RANKS) \
            if options.get("exchange") == "async" else 0
        servers = servers if isinstance(servers, int) and 0 <= servers < ranks else 0
        options["batch"] = point[BATCH_PER_RANK] * (ranks - servers)
    return options


def expand(spec: Spec) -> List[Run]:
    """Every run of the campaign, in a stable order (sweeps in the spec's order; in each, nodes
    outermost, repeats innermost)."""
    total = 0
    for sw in spec.sweeps:
        size = 1
        for _, values in _dims(spec, sw):
            size *= len(values)
        total += size
    if total > MAX_RUNS:
        sizes = " + ".join(" x ".join(f"{len(v)} {k}" for k, v in _dims(spec, sw) if len(v) > 1)
                           for sw in spec.sweeps)
        raise SpecError(f"campaign: the sweep makes {total} runs ({sizes}); accepted: at most "
                        f"{MAX_RUNS} (fewer values or repeats)")
    runs: List[Run] = []
    seen: Dict[str, Dict[str, Any]] = {}
    used_excludes: set = set()
    for sw in spec.sweeps:
        runs += _expand_sweep(spec, sw, seen, used_excludes)
    unused = [i for i in range(len(spec.excludes)) if i not in used_excludes]
    if unused:
        i = unused[0]
        raise SpecError(f"exclude[{i}]: {spec.excludes[i]} matches no run; accepted: values that "
                        "occur in the sweep")
    if not runs:
        raise SpecError("exclude: every run is excluded; accepted: exclusions that leave runs")
    return runs


def _expand_sweep(spec: Spec, sw: Sweep, seen: Dict[str, Dict[str, Any]],
                  used_excludes: set) -> List[Run]:
    dims = _dims(spec, sw)
    swept = [k for k, v in dims if len(v) > 1]
    runs: List[Run] = []
    for combo in itertools.product(*(v for _, v in dims)):
        point = dict(zip((k for k, _ in dims), combo))
        if sw.name:
            point["sweep"] = sw.name
        hit = [i for i, ex in enumerate(spec.excludes) if _matches(ex, point)]
        if hit:
            used_excludes.update(hit)
            continue
        parts = [sw.name] if sw.name else []
        parts.append(f"n{point['nodes']}x{point['tasks_per_node']}")
        if "gpus_per_node" in swept or point["gpus_per_node"]:
            parts.append(f"g{point['gpus_per_node']}")
        for k in swept:
            if k in ("nodes", "tasks_per_node", "gpus_per_node", "repeat"):
                continue
            parts.append(_label(point[k]) if k == "launcher" else f"{k}-{_label(point[k])}")
        if spec.repeats > 1:
            parts.append(f"r{point['repeat']}")
        rid = "_".join(parts)
        if rid in seen:
            raise SpecError(f"options: the runs {seen[rid]} and {point} get the same name {rid!r}; "
                            "accepted: values that differ in letters, digits, '.', '+' or '-'")
        seen[rid] = point
        runs.append(Run(rid, point["nodes"], point["tasks_per_node"], point["gpus_per_node"],
                        point["launcher"], point["repeat"], run_options(sw, point),
                        {k: point[k] for k, _ in dims}, sw.name))
    return runs


def check_runs(runs: List[Run]) -> None:
    """The rule that needs no dtbench (it also holds with --no-check): the global batch is split
    evenly across the ranks that train, all of them but the --ps-ranks parameter servers
    (dtbench --dry-run --ranks N then checks every rule exactly)."""
    for r in runs:
        b = r.options.get("batch")
        ps = r.options.get("ps-ranks", 0)
        ps = ps if isinstance(ps, int) and 0 <= ps < r.ranks else 0
        workers = r.ranks - ps
        if isinstance(b, int) and not isinstance(b, bool) and b % workers:
            who = f"{r.ranks} ranks" if not ps else f"{workers} workers: {r.ranks} ranks minus ps-ranks"
            raise SpecError(f"options.batch: {b} is not accepted for run {r.id} ({who}); "
                            "accepted: a multiple of nodes x tasks_per_node (minus ps-ranks), or "
                            "batch_per_rank")


# ---- files ---------------------------------------------------------------------------------------
def runs_dir(spec: Spec) -> str:
    return os.path.join(spec.output, "runs")


def slurm_dir(spec: Spec) -> str:
    return os.path.join(spec.output, "slurm")


def log_path(spec: Spec) -> str:
    return os.path.join(spec.output, "submissions.jsonl")


def result_base(spec: Spec, run_id: str, attempt: int) -> str:
    return os.path.join(runs_dir(spec), f"{run_id}.a{attempt}")


def read_log(spec: Spec) -> List[Dict[str, Any]]:
    """The submission records (appendfile.read_jsonl: a cut line costs that line only)."""
    return appendfile.read_jsonl(log_path(spec))


def append_log(spec: Spec, record: Dict[str, Any]) -> None:
    os.makedirs(spec.output, exist_ok=True)
    appendfile.append_line(log_path(spec), json.dumps(record))


def attempts_on_disk(spec: Spec) -> Dict[str, List[int]]:
    found: Dict[str, set] = {}
    for p in glob.glob(os.path.join(runs_dir(spec), "*.a*.*")):
        m = ATTEMPT_RE.match(os.path.basename(p))
        if m:
            found.setdefault(m.group("run"), set()).add(int(m.group("attempt")))
    return {k: sorted(v) for k, v in found.items()}


def known_attempts(spec: Spec, log: Optional[List[Dict[str, Any]]] = None) -> Dict[str, List[int]]:
    """Attempts of every run, from the submissions log and the files (either may be missing)."""
    found = {k: set(v) for k, v in attempts_on_disk(spec).items()}
    for rec in (read_log(spec) if log is None else log):
        for t in rec.get("tasks", []):
            found.setdefault(t["run"], set()).add(int(t["attempt"]))
    return {k: sorted(v) for k, v in found.items()}


def next_attempt(known: Dict[str, List[int]], run_id: str) -> int:
    return max(known.get(run_id, [0])) + 1


# ---- jobs and commands ---------------------------------------------------------------------------
def group_jobs(spec: Spec, runs: List[Run], attempts: Dict[str, int], max_array: int) -> List[Job]:
    """One job array per (nodes, tasks per node, GPUs, launcher), split where Slurm's MaxArraySize
    says so; one job per run when arrays are off (resources.array = false) or not allowed."""
    groups: Dict[tuple, List[Run]] = {}
    for r in runs:
        groups.setdefault((r.nodes, r.tasks_per_node, r.gpus_per_node, r.launcher), []).append(r)
    jobs: List[Job] = []
    per_array = max(1, max_array)
    for (n, t, g, launcher), members in groups.items():
        name = f"{spec.name}-n{n}x{t}" + (f"g{g}" if g else "")
        if len(spec.launchers) > 1:
            name += f"-{launcher}"
        if spec.array and max_array > 1 and len(members) > 1:
            for i in range(0, len(members), per_array):
                chunk = members[i:i + per_array]
                jobs.append(Job(name, chunk, [attempts[r.id] for r in chunk], len(chunk) > 1))
        else:
            jobs.extend(Job(name, [r], [attempts[r.id]], False) for r in members)
    return jobs


def launcher_command(spec: Spec, run: Run, dtbench: str, output: str) -> List[str]:
    """What slurm/dtbench.sbatch runs for this run (shown by `plan`)."""
    head = ["srun", "--mpi=pmix", "--kill-on-bad-exit=1"] if run.launcher == "srun" else ["mpirun"]
    return head + spec.launcher_args + [dtbench] + run.dtbench_args() + ["--output", output]


def job_env(spec: Spec, job: Job, dtbench: str) -> Dict[str, str]:
    """What the batch template reads from the job's environment (sbatch --export=ALL carries
    it): the program, the launcher and its arguments, and the launcher's output next to the
    result file (DTBENCH_LOG=auto)."""
    env = {"DTBENCH": dtbench, "DTBENCH_LAUNCHER": job.runs[0].launcher}
    if spec.launcher_args:
        env["DTBENCH_LAUNCH_ARGS"] = " ".join(spec.launcher_args)
    env["DTBENCH_LOG"] = "auto"
    return env


def sbatch_command(spec: Spec, job: Job, template: str, dtbench: str, task_file: Optional[str],
                   dependency: Optional[str] = None) -> List[str]:
    r = job.runs[0]
    cmd = ["sbatch", "--parsable", f"--job-name={job.name}", f"--nodes={r.nodes}",
           f"--ntasks-per-node={r.tasks_per_node}"]
    if r.gpus_per_node:
        cmd.append(f"--gpus-per-node={r.gpus_per_node}")
    # --export=ALL: the job gets DTBENCH_* (job_env) and DTBENCH_SUBMIT_LINE even where the
    # site or the user's shell sets SBATCH_EXPORT=NONE (the template would then run srun and
    # rebuild a submit line without the launcher)
    cmd += [f"--time={spec.time}", f"--signal=B:USR1@{spec.signal_before}", "--no-requeue",
            "--export=ALL"]
    if spec.partition:
        cmd.append(f"--partition={spec.partition}")
    if spec.account:
        cmd.append(f"--account={spec.account}")
    pattern = "%x-%A_%a.out" if job.array else "%x-%j.out"
    cmd.append(f"--output={os.path.join(slurm_dir(spec), pattern)}")
    if dependency:
        cmd.append(f"--dependency={dependency}")
    cmd += spec.sbatch_args
    if job.array:
        limit = f"%{spec.array_limit}" if spec.array_limit else ""
        cmd += [f"--array=0-{len(job.runs) - 1}{limit}", template, "--task-file",
                task_file or "TASKFILE"]
    else:
        out = result_base(spec, r.id, job.attempts[0]) + ".h5"
        cmd += [template] + r.dtbench_args() + ["--output", out]
    return cmd


def task_lines(spec: Spec, job: Job) -> List[str]:
    """Lines of an array's task file: line i = shell-quoted dtbench options of array task i."""
    return [shlex.join(r.dtbench_args() + ["--output", result_base(spec, r.id, a) + ".h5"])
            for r, a in zip(job.runs, job.attempts)]


def submit_line(env: Dict[str, str], cmd: Iterable[str]) -> str:
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(cmd)


def find_template(spec: Spec) -> str:
    cand = spec.template or os.environ.get("DTBENCH_SBATCH_TEMPLATE") or os.path.join(
        os.path.dirname(__file__), "..", "..", "slurm", "dtbench.sbatch")
    path = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(spec.path)), cand)
                           if spec.template else cand)
    if not os.path.isfile(path):
        raise SpecError(f"campaign.template: {path} does not exist; accepted: the path of "
                        "slurm/dtbench.sbatch (or set DTBENCH_SBATCH_TEMPLATE)")
    return path
