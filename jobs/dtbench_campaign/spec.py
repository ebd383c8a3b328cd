"""Campaign specs: reading a TOML file (``tomllib``) into a checked ``Spec``.

Every problem is raised as ``SpecError`` with one line that names the key (``resources.nodes``,
``options.exchange``) and the accepted values; nothing is planned or submitted before the whole
spec is valid. The dtbench options themselves are checked against the program (``dtoptions``),
not against a list kept here. The format is described in jobs/README.md.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

LAUNCHERS = ("srun", "mpirun")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Slurm's time formats: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
TIME_RE = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")
TIME_FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"

# The most runs a campaign may hold (each one a job or an array task, and a line of status).
MAX_RUNS = 100_000

# Keys of each table: name -> short description of the accepted values (used in error messages).
CAMPAIGN_KEYS = {
    "name": "a name of letters, digits, '.', '_' and '-'",
    "description": "free text",
    "output": "a folder for the campaign's results (default results/NAME)",
    "dtbench": "the dtbench program (default: $DTBENCH, dtbench on PATH, the source tree's)",
    "template": "the sbatch template (default: slurm/dtbench.sbatch of the source tree)",
    "launcher": "srun or mpirun, or a list of both",
    "repeats": f"a positive integer (at most {MAX_RUNS} runs in all)",
}
RESOURCE_KEYS = {
    "nodes": "a positive integer or a list of them",
    "tasks_per_node": "a positive integer or a list of them",
    "gpus_per_node": "a non-negative integer or a list of them",
    "time": f"a Slurm time limit ({TIME_FORMATS})",
    "signal_before": "seconds before the time limit at which dtbench is asked to stop (1 to 65535)",
    "partition": "a Slurm partition name",
    "account": "a Slurm account name",
    "array": "true (one job array per node count) or false (one job per run)",
    "chain": "true (each job waits for the previous one: afterany) or false",
    "array_limit": "the most tasks of a job array running at once (Slurm's --array=...%N; "
                   "1: one run at a time)",
    "sbatch_args": "a list of extra sbatch arguments",
    "launcher_args": "a list of extra srun/mpirun arguments",
}
LOCAL_KEYS = {
    "hostfile": "an Open MPI hostfile (one host per line)",
    "mpirun_args": "a list of extra mpirun arguments",
}
# Keys that may be swept (lists) besides the dtbench options.
SWEPT_RESOURCES = ("nodes", "tasks_per_node", "gpus_per_node")
SWEEP_KEYS = {
    "name": "a name of letters, digits, '.', '_' and '-' (the start of its runs' names)",
    **{k: RESOURCE_KEYS[k] + " (instead of resources." + k + ")" for k in SWEPT_RESOURCES},
    "options": "a table of dtbench options added to [options] (or replacing them) in this sweep",
}
TABLES = {
    "campaign": CAMPAIGN_KEYS,
    "resources": RESOURCE_KEYS,
    "options": None,  # dtbench options, checked against the program
    "sweep": None,    # array of tables (SWEEP_KEYS)
    "exclude": None,  # array of tables
    "local": LOCAL_KEYS,
}
# Not dtbench options: the batch per training rank, turned into --batch = value x (ranks minus
# parameter servers) (weak scaling), and the parameter servers per node, turned into
# --ps-ranks = value x nodes (servers that grow with the job).
BATCH_PER_RANK = "batch_per_rank"
PS_RANKS_PER_NODE = "ps_ranks_per_node"
DERIVED = (BATCH_PER_RANK, PS_RANKS_PER_NODE)
#: dtbench's --ps-ranks when an async run does not set it (dtbench --help: [1])
DEFAULT_PS_RANKS = 1


class SpecError(Exception):
    """A problem with the spec: one line, naming the key and what is accepted."""


@dataclass
class Sweep:
    """One product of resources and options; a spec without [[sweep]] tables is one, unnamed."""
    name: str
    nodes: List[int]
    tasks_per_node: List[int]
    gpus_per_node: List[int]
    options: Dict[str, List[Any]]  # [options] updated with the sweep's own


@dataclass
class Spec:
    path: str
    name: str
    description: str
    output: str  # absolute
    dtbench: Optional[str]
    template: Optional[str]
    launchers: List[str]
    repeats: int
    nodes: List[int]
    tasks_per_node: List[int]
    gpus_per_node: List[int]
    time: str
    time_seconds: int
    signal_before: int
    partition: str
    account: str
    array: bool
    array_limit: int  # 0: no limit
    chain: bool
    sbatch_args: List[str]
    launcher_args: List[str]
    options: Dict[str, List[Any]]  # dtbench option -> values (a single value is a 1-list)
    excludes: List[Dict[str, Any]] = field(default_factory=list)
    hostfile: Optional[str] = None
    mpirun_args: List[str] = field(default_factory=list)
    sweeps: List[Sweep] = field(default_factory=list)

    def all_options(self) -> Dict[str, List[Any]]:
        """Every option with every value any sweep gives it (what dtbench must accept)."""
        out: Dict[str, List[Any]] = {}
        for sw in self.sweeps:
            for k, values in sw.options.items():
                have = out.setdefault(k, [])
                have += [v for v in values if repr(v) not in map(repr, have)]
        return out


def time_seconds(text: str) -> Optional[int]:
    """Seconds in a Slurm time limit, or None when the text is not one."""
    m = TIME_RE.match(text)
    if not m:
        return None
    d, dh, dm, ds, mm, ms, hs = m.groups()
    if d is not None:
        return int(d) * 86400 + int(dh) * 3600 + int(dm or 0) * 60 + int(ds or 0)
    if hs is not None:  # HH:MM:SS
        return int(mm) * 3600 + int(ms) * 60 + int(hs)
    return int(mm) * 60 + int(ms or 0)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_list(key: str, v: Any, minimum: int) -> List[int]:
    values = v if isinstance(v, list) else [v]
    what = "a positive integer" if minimum == 1 else "a non-negative integer"
    if not values:
        raise SpecError(f"{key}: an empty list; accepted: {what} or a non-empty list of them")
    for x in values:
        if not _is_int(x) or x < minimum:
            raise SpecError(f"{key}: {x!r} is not accepted; accepted: {what} or a list of them")
    if len(set(values)) != len(values):
        raise SpecError(f"{key}: {values} lists a value twice; accepted: distinct values")
    return values


def _str(key: str, v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise SpecError(f"{key}: {v!r} is not accepted; accepted: {what}")
    return v


def _str_list(key: str, v: Any) -> List[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise SpecError(f"{key}: {v!r} is not accepted; accepted: a list of strings")
    return list(v)


def _bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise SpecError(f"{key}: {v!r} is not accepted; accepted: true or false")
    return v


def _opt_str(camp: Dict[str, Any], key: str) -> Optional[str]:
    return _str(f"campaign.{key}", camp[key], CAMPAIGN_KEYS[key]) if key in camp else None


def _check_keys(table: str, data: Dict[str, Any], accepted: Dict[str, str]) -> None:
    for k in data:
        if k not in accepted:
            raise SpecError(f"{table}.{k}: unknown key; accepted: {', '.join(accepted)}")


def load(path: str, cwd: Optional[str] = None) -> Spec:
    """Reads and checks the spec's structure and types (dtbench options: see dtoptions.check)."""
    try:
        if os.path.exists(path) and not os.path.isfile(path):
            raise SpecError("not a regular file; accepted: a TOML file (jobs/README.md)")
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise SpecError(f"cannot read the spec: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                        "accepted: a TOML file (jobs/README.md)") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"not valid TOML: {e}") from None
    return from_dict(data, path, cwd)


def _options(table: str, options: Any) -> Dict[str, List[Any]]:
    """A table of dtbench options: name -> its values (a single value is a 1-list)."""
    if not isinstance(options, dict):
        raise SpecError(f"{table}: must be a table of option = value")
    opts: Dict[str, List[Any]] = {}
    for k, v in options.items():
        values = v if isinstance(v, list) else [v]
        if not values:
            raise SpecError(f"{table}.{k}: an empty list; accepted: a value or a non-empty list")
        for x in values:
            if isinstance(x, (dict, list)):
                raise SpecError(f"{table}.{k}: {x!r} is not accepted; accepted: a string, number "
                                "or boolean, or a list of them")
        if len(set(map(repr, values))) != len(values):
            raise SpecError(f"{table}.{k}: {values} lists a value twice; accepted: distinct values")
        opts[k] = values
    return opts


def _check_derived(table: str, opts: Dict[str, List[Any]]) -> None:
    """The campaign's own option keys (DERIVED): integers, batch_per_rank not with batch."""
    if BATCH_PER_RANK in opts and "batch" in opts:
        raise SpecError(f"{table}.{BATCH_PER_RANK}: given together with {table}.batch; "
                        "accepted: one of them (batch = global batch, batch_per_rank = batch x "
                        "ranks that train)")
    if PS_RANKS_PER_NODE in opts and "ps-ranks" in opts:
        raise SpecError(f"{table}.{PS_RANKS_PER_NODE}: given together with {table}.ps-ranks; "
                        "accepted: one of them (ps_ranks_per_node = ps-ranks / nodes)")
    for k in DERIVED:
        if k in opts:
            _int_list(f"{table}.{k}", opts[k], 1)


def _sweeps(tables: Any, opts: Dict[str, List[Any]], nodes: List[int], tasks: List[int],
            gpus: List[int]) -> List[Sweep]:
    """The [[sweep]] tables, each over [resources] and [options] with its own keys; without
    any, one unnamed sweep of [resources] and [options]."""
    _check_derived("options", opts)
    if tables is None:
        return [Sweep("", nodes, tasks, gpus, opts)]
    if not isinstance(tables, list) or not tables:
        raise SpecError("sweep: write it as [[sweep]] tables (a non-empty list of tables)")
    out: List[Sweep] = []
    for i, t in enumerate(tables):
        if not isinstance(t, dict):
            raise SpecError(f"sweep[{i}]: must be a table")
        _check_keys(f"sweep[{i}]", t, SWEEP_KEYS)
        name = _str(f"sweep[{i}].name", t.get("name"), SWEEP_KEYS["name"])
        if not NAME_RE.match(name) or "_" in name:
            raise SpecError(f"sweep[{i}].name: {name!r} is not accepted; accepted: letters, "
                            "digits, '.' and '-' (no '_': it separates the parts of run names)")
        if name in (sw.name for sw in out):
            raise SpecError(f"sweep[{i}].name: {name!r} names two sweeps; accepted: one name each")
        merged = dict(opts)
        own = _options(f"sweep[{i}].options", t.get("options", {}))
        # an own batch or ps-ranks form replaces the other form inherited from [options]
        for a, b in (("batch", BATCH_PER_RANK), ("ps-ranks", PS_RANKS_PER_NODE)):
            for mine, other in ((a, b), (b, a)):
                if mine in own and other not in own:
                    merged.pop(other, None)
        merged.update(own)
        _check_derived(f"sweep[{i}].options", merged)
        out.append(Sweep(
            name,
            _int_list(f"sweep[{i}].nodes", t["nodes"], 1) if "nodes" in t else nodes,
            _int_list(f"sweep[{i}].tasks_per_node", t["tasks_per_node"], 1)
            if "tasks_per_node" in t else tasks,
            _int_list(f"sweep[{i}].gpus_per_node", t["gpus_per_node"], 0)
            if "gpus_per_node" in t else gpus,
            merged))
    return out


def _array_limit(v: Any) -> int:
    if not _is_int(v) or v < 0:
        raise SpecError(f"resources.array_limit: {v!r} is not accepted; accepted: "
                        f"{RESOURCE_KEYS['array_limit']}, a positive integer (0: no limit)")
    return v


def check_folder(path: str, key: str) -> None:
    """A folder the tool writes into: it, or its nearest existing parent, must be a folder."""
    probe = os.path.abspath(path)
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return
        probe = parent
    if not os.path.isdir(probe):
        what = "is a file" if probe == os.path.abspath(path) else f"lies under {probe}, a file"
        raise SpecError(f"{key} {path}: {what}; accepted: a folder (made when missing)")


def from_dict(data: Dict[str, Any], path: str = "<spec>", cwd: Optional[str] = None) -> Spec:
    for t, v in data.items():
        if t not in TABLES:
            tables = ", ".join("[" + k + "]" for k in TABLES)
            raise SpecError(f"{t}: unknown table; accepted: {tables} ([[sweep]] and [[exclude]] "
                            "for lists)")
        if t in ("exclude", "sweep"):
            if not isinstance(v, list):
                raise SpecError(f"{t}: write it as [[{t}]] tables (a list of tables)")
        elif not isinstance(v, dict):
            raise SpecError(f"{t}: must be a table [{t}]")
    camp = data.get("campaign")
    if camp is None:
        raise SpecError('campaign: missing; accepted: a [campaign] table with name = "..."')
    _check_keys("campaign", camp, CAMPAIGN_KEYS)
    res = data.get("resources", {})
    _check_keys("resources", res, RESOURCE_KEYS)
    loc = data.get("local", {})
    _check_keys("local", loc, LOCAL_KEYS)

    if "name" not in camp:
        raise SpecError("campaign.name: missing; accepted: " + CAMPAIGN_KEYS["name"])
    name = _str("campaign.name", camp["name"], CAMPAIGN_KEYS["name"])
    if not NAME_RE.match(name):
        raise SpecError(f"campaign.name: {name!r} is not accepted; accepted: "
                        f"{CAMPAIGN_KEYS['name']}")
    base = cwd or os.getcwd()
    out = _str("campaign.output", camp.get("output", os.path.join("results", name)),
               CAMPAIGN_KEYS["output"])
    launchers = camp.get("launcher", "srun")
    launchers = launchers if isinstance(launchers, list) else [launchers]
    if (not launchers or any(x not in LAUNCHERS for x in launchers)
            or len(set(launchers)) != len(launchers)):
        raise SpecError(f"campaign.launcher: {camp.get('launcher')!r} is not accepted; accepted: "
                        f"{', '.join(LAUNCHERS)} or a list of them")
    repeats = camp.get("repeats", 1)
    if not _is_int(repeats) or not 1 <= repeats <= MAX_RUNS:
        raise SpecError(f"campaign.repeats: {repeats!r} is not accepted; accepted: an integer "
                        f"from 1 to {MAX_RUNS}")

    time = _str("resources.time", res.get("time", "00:30:00"), RESOURCE_KEYS["time"])
    secs = time_seconds(time)
    if secs is None or secs <= 0:
        raise SpecError(f"resources.time: {time!r} is not accepted; accepted: {TIME_FORMATS} "
                        "(more than zero)")
    sig = res.get("signal_before", 120)
    if not _is_int(sig) or sig < 1 or sig > 65535:
        raise SpecError(f"resources.signal_before: {sig!r} is not accepted; accepted: seconds, "
                        "1 to 65535")

    opts = _options("options", data.get("options", {}))
    nodes = _int_list("resources.nodes", res.get("nodes", 1), 1)
    tasks = _int_list("resources.tasks_per_node", res.get("tasks_per_node", 1), 1)
    gpus = _int_list("resources.gpus_per_node", res.get("gpus_per_node", 0), 0)
    sweeps = _sweeps(data.get("sweep"), opts, nodes, tasks, gpus)

    excludes = []
    swept_keys = set(SWEPT_RESOURCES) | {"launcher", "repeat"}
    for sw in sweeps:
        swept_keys |= set(sw.options)
    if data.get("sweep") is not None:
        swept_keys.add("sweep")
    for i, ex in enumerate(data.get("exclude", [])):
        if not isinstance(ex, dict) or not ex:
            raise SpecError(f"exclude[{i}]: must be a non-empty table of key = value")
        for k in ex:
            if k not in swept_keys:
                raise SpecError(f"exclude[{i}].{k}: not a key of this campaign; accepted: "
                                f"{', '.join(sorted(swept_keys))}")
        excludes.append(dict(ex))

    hostfile = loc.get("hostfile")
    if hostfile is not None:
        hostfile = os.path.join(os.path.dirname(os.path.abspath(path)),
                                _str("local.hostfile", hostfile, LOCAL_KEYS["hostfile"]))
    spec = Spec(
        path=path,
        name=name,
        description=_str("campaign.description", camp.get("description", ""), "free text"),
        output=os.path.abspath(os.path.join(base, out)),
        dtbench=_opt_str(camp, "dtbench"),
        template=_opt_str(camp, "template"),
        launchers=launchers,
        repeats=repeats,
        nodes=nodes,
        tasks_per_node=tasks,
        gpus_per_node=gpus,
        time=time,
        time_seconds=secs,
        signal_before=sig,
        partition=_str("resources.partition", res.get("partition", ""), RESOURCE_KEYS["partition"]),
        account=_str("resources.account", res.get("account", ""), RESOURCE_KEYS["account"]),
        array=_bool("resources.array", res.get("array", True)),
        array_limit=_array_limit(res.get("array_limit", 0)),
        chain=_bool("resources.chain", res.get("chain", False)),
        sbatch_args=_str_list("resources.sbatch_args", res.get("sbatch_args", [])),
        launcher_args=_str_list("resources.launcher_args", res.get("launcher_args", [])),
        options=opts,
        excludes=excludes,
        hostfile=hostfile,
        mpirun_args=_str_list("local.mpirun_args", loc.get("mpirun_args", [])),
        sweeps=sweeps,
    )
    for k in ("sbatch_args",):
        for a in getattr(spec, k):
            for bad in ("--array", "--output", "--error", "--nodes", "--ntasks-per-node", "-N",
                        "--time", "-t", "--signal", "--dependency", "-d", "-o", "-e", "-a",
                        "--export"):
                if a == bad or a.startswith(bad + "="):
                    raise SpecError(f"resources.sbatch_args: {a!r} is set by dtbench-campaign; "
                                    "accepted: other sbatch arguments (use resources.* keys)")
    return spec
