"""dtbench's own options, learnt from the program: ``dtbench --options-json`` gives every option
with its kind and accepted choices (a dtbench older than that option: ``--help``, parsed),
``dtbench --dry-run`` says whether one run's options are accepted.
Nothing about dtbench's options is written down here, so the campaign tool follows dtbench as it
grows (new models, exchange strategies, devices).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .spec import DERIVED, SpecError

# Options the campaign tool sets itself, and why a spec may not.
RESERVED = {
    "output": "results go to campaign.output, one file per run",
    "overwrite": "a campaign never overwrites a result",
    "dry-run": "runs are real",
    "ranks": "the ranks are nodes x tasks_per_node",
    "help": "not an option for a run",
    "version": "not an option for a run",
    "options-json": "not an option for a run",
}

HELP_LINE = re.compile(r"^  --([a-z0-9][a-z0-9-]*)(?: (\{[^}]*\}|TEXT|N|X))?\s*$")


@dataclass
class Option:
    name: str
    kind: str  # choice, text, int, float, flag
    choices: Tuple[str, ...] = ()


def parse_help(text: str) -> Dict[str, Option]:
    """Options from ``dtbench --help``: lines ``  --name {a,b}``, ``  --name N|X|TEXT``,
    ``  --name`` (a flag)."""
    opts: Dict[str, Option] = {}
    for line in text.splitlines():
        m = HELP_LINE.match(line)
        if not m:
            continue
        name, arg = m.group(1), m.group(2)
        if arg is None:
            opts[name] = Option(name, "flag")
        elif arg.startswith("{"):
            opts[name] = Option(name, "choice", tuple(c for c in arg[1:-1].split(",") if c))
        else:
            opts[name] = Option(name, {"TEXT": "text", "N": "int", "X": "float"}[arg])
    return opts


def find_dtbench(configured: Optional[str]) -> str:
    """The dtbench program: campaign.dtbench, else $DTBENCH, else PATH, else the source tree's
    front door, bin/dtbench (it holds a stop signal until the program can take it)."""
    tree = os.path.join(os.path.dirname(__file__), "..", "..", "bin", "dtbench")
    for cand, where in ((configured, "campaign.dtbench"), (os.environ.get("DTBENCH"), "DTBENCH"),
                        (shutil.which("dtbench"), "PATH"), (os.path.abspath(tree), "source tree")):
        if not cand:
            continue
        path = shutil.which(cand) if os.sep not in cand else cand
        if path and os.access(path, os.X_OK):
            return os.path.abspath(path)
        if where in ("campaign.dtbench", "DTBENCH"):
            raise SpecError(f"{where}: {cand!r} is not an executable program; accepted: the path "
                            "of a built dtbench")
    raise SpecError("campaign.dtbench: no dtbench found; accepted: a path in campaign.dtbench or "
                    "$DTBENCH, or dtbench on PATH")


def _run(cmd: List[str], timeout: int = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # A singleton MPI process as root (the tests, containers) needs Open MPI's consent.
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def parse_options_json(text: str) -> Dict[str, Option]:
    """Options from ``dtbench --options-json``: a JSON array of {name, type, choices, ...}
    (type int, float, text, choice or flag). Empty when the text is not that."""
    try:
        table = json.loads(text)
    except ValueError:
        return {}
    opts: Dict[str, Option] = {}
    if not isinstance(table, list):
        return {}
    for o in table:
        if not isinstance(o, dict) or not isinstance(o.get("name"), str) or \
                o.get("type") not in ("int", "float", "text", "choice", "flag"):
            return {}
        choices = tuple(str(c) for c in o.get("choices") or ())
        opts[o["name"]] = Option(o["name"], o["type"], choices if o["type"] == "choice" else ())
    return opts


def query_help(dtbench: str) -> Dict[str, Option]:
    """dtbench's options: from --options-json, else (an older dtbench) from --help."""
    try:
        p = _run([dtbench, "--options-json"])
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SpecError(f"campaign.dtbench: {dtbench} --options-json failed: {e}") from None
    opts = parse_options_json(p.stdout) if p.returncode == 0 else {}
    if opts:
        return opts
    try:
        p = _run([dtbench, "--help"])
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SpecError(f"campaign.dtbench: {dtbench} --help failed: {e}") from None
    opts = parse_help(p.stdout)
    if p.returncode != 0 or not opts:
        raise SpecError(f"campaign.dtbench: {dtbench} --help did not list its options "
                        f"(exit {p.returncode}: {p.stderr.strip()[:200]})")
    return opts


def option_args(name: str, value: Any) -> List[str]:
    """Command-line words for one option value (flags: true -> --name, false -> nothing)."""
    if isinstance(value, bool):
        return [f"--{name}"] if value else []
    return [f"--{name}", str(value)]


def check(options: Dict[str, List[Any]], known: Dict[str, Option]) -> None:
    """Every key is a dtbench option and every value of the right kind and among its choices."""
    for key, values in options.items():
        if key in DERIVED:  # the campaign's own keys, checked by spec.py
            continue
        if key in RESERVED:
            raise SpecError(f"options.{key}: set by dtbench-campaign ({RESERVED[key]}); remove it")
        opt = known.get(key)
        if opt is None:
            names = ", ".join(k for k in known if k not in RESERVED)
            raise SpecError(f"options.{key}: not a dtbench option; accepted: {names}")
        for v in values:
            ok = {
                "flag": isinstance(v, bool),
                "int": isinstance(v, int) and not isinstance(v, bool),
                "float": isinstance(v, (int, float)) and not isinstance(v, bool),
                "text": isinstance(v, (str, int, float)) and not isinstance(v, bool),
                "choice": isinstance(v, str) and v in opt.choices,
            }[opt.kind]
            if not ok:
                accepted = {
                    "flag": "true or false",
                    "int": "an integer",
                    "float": "a number",
                    "text": "a string",
                    "choice": ", ".join(opt.choices) + " (from dtbench --help)",
                }[opt.kind]
                raise SpecError(f"options.{key}: {v!r} is not accepted; accepted: {accepted}")


# A dry run that ends without dtbench's "dtbench: error:" line did not judge the options: MPI's
# own start-up failed (seen with many lone processes starting at once on a busy 2-core machine:
# Open MPI's banner and no dtbench line). It is tried this many times before the tool gives up.
DRY_RUN_TRIES = 3


def dry_run(dtbench: str, args: List[str]) -> Optional[str]:
    """None when ``dtbench --dry-run ARGS`` accepts the options, else dtbench's message."""
    for _ in range(DRY_RUN_TRIES):
        try:
            p = _run([dtbench, "--dry-run", *args])
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"dtbench --dry-run failed: {e}"
        if p.returncode == 0:
            return None
        lines = [x.strip() for x in (p.stderr + p.stdout).splitlines() if x.strip()]
        refusal = [x for x in lines if x.startswith("dtbench: error:")]
        if refusal:
            return refusal[0]
    words = [x for x in lines if not set(x) <= set("-")]  # without Open MPI's ---- rules
    return (f"exit status {p.returncode} without a dtbench error, {DRY_RUN_TRIES} times: "
            + " / ".join(words[:4]))
