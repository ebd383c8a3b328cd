"""Property: whatever a spec holds (TOML of any shape, values of any type, bytes that are not
text), reading and planning it either works or raises SpecError with one line: never another
exception. And whatever the append-only campaign files hold, reading them never raises.
hypothesis writes the specs as TOML text (a small writer below), so the whole path from the file
on; derandomized, so CI sees the same examples every time."""

import json
import math
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaign_helpers import BASIC  # noqa: F401  (puts the package on the path)
from dtbench_campaign import appendfile, dtoptions, plan, status
from dtbench_campaign.spec import CAMPAIGN_KEYS, LOCAL_KEYS, RESOURCE_KEYS, SpecError, load

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", 150))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                derandomize="FUZZ_EXAMPLES" not in os.environ, database=None,
                suppress_health_check=[HealthCheck.too_slow])

words = st.sampled_from(["sync", "mixed", "async", "lenet", "srun", "mpirun", "00:30:00", "1-00",
                         "-1", "x y", "", "é", "a.b", "results", "../up", "--export=NONE"])
scalars = st.one_of(st.integers(-3, 6), st.integers(-2 ** 63, 2 ** 63 - 1), st.booleans(),
                    st.sampled_from([math.inf, -math.inf, math.nan, 0.5, 1e300]), words,
                    st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(words, inner, max_size=3)), max_leaves=8)
OPTIONS = ["model", "exchange", "batch", "batch_per_rank", "iters", "staleness", "ps-ranks",
           "ranks-per-node", "threads", "lr", "output", "x"]


BASE = {"campaign": {"name": "f", "output": "out", "repeats": 2, "launcher": ["srun", "mpirun"]},
        "resources": {"nodes": [1, 2], "tasks_per_node": 2, "time": "00:30:00",
                      "signal_before": 60, "sbatch_args": ["--exclusive"]},
        "options": {"model": "lenet", "exchange": ["sync", "async"], "batch": 48, "iters": 10,
                    "ps-ranks": 1},
        "exclude": [{"exchange": "async", "nodes": 1}],
        "local": {"mpirun_args": ["--bind-to", "none"]}}
TABLES = {"campaign": list(CAMPAIGN_KEYS), "resources": list(RESOURCE_KEYS),
          "options": OPTIONS, "local": list(LOCAL_KEYS), "exclude": OPTIONS + ["nodes", "repeat"]}

#: one change to the valid BASE: a key of a table set to any value, or deleted, or a table
#: replaced by any value
edits = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(sorted(TABLES)),
              st.one_of(st.sampled_from(sum(TABLES.values(), [])), words), values),
    st.tuples(st.just("delete"), st.sampled_from(sorted(TABLES)),
              st.sampled_from(sum(TABLES.values(), [])), st.none()),
    st.tuples(st.just("table"), st.sampled_from(sorted(TABLES) + ["other"]), st.none(), values))


def edited(changes):
    doc = json.loads(json.dumps(BASE))
    for kind, name, key, value in changes:
        target = doc.get(name)
        if name == "exclude" and isinstance(target, list) and target:
            target = target[0]
        if kind == "table":
            doc[name] = value
        elif isinstance(target, dict) and kind == "set":
            target[key] = value
        elif isinstance(target, dict) and kind == "delete":
            target.pop(key, None)
    return doc


specs = st.lists(edits, min_size=1, max_size=3).map(edited)


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{toml_value(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml(doc):
    """TOML text of ``doc``: tables as [name] (or key = value when not a table), arrays of
    tables as [[name]]."""
    lines = []
    for name, v in doc.items():
        if name == "exclude" and isinstance(v, list) and all(isinstance(x, dict) for x in v):
            for t in v:
                lines += ["[[exclude]]"] + [f"{toml_value(k)} = {toml_value(x)}"
                                            for k, x in t.items()]
        elif isinstance(v, dict):
            lines += [f"[{name}]"] + [f"{toml_value(k)} = {toml_value(x)}" for k, x in v.items()]
        else:
            lines.insert(0, f"{name} = {toml_value(v)}")
    return "\n".join(lines) + "\n"


HELP = dtoptions.parse_help("""\
  --model {lenet,fcn5}
  --exchange {sync,ssp,async,mixed}
  --batch N
  --iters N
  --staleness N
  --ps-ranks N
  --ranks-per-node N
  --threads N
  --lr X
  --tag TEXT
  --overlap
""")


def plan_it(path):
    spec = load(path, cwd=os.path.dirname(path))
    runs = plan.expand(spec)
    plan.check_runs(runs)
    dtoptions.check(spec.options, HELP)
    for r in runs[:50]:
        job = plan.Job("j", [r], [1], False)
        plan.sbatch_command(spec, job, "/t/dtbench.sbatch", "/bin/dtbench", None)
        plan.launcher_command(spec, r, "/bin/dtbench", "/o.h5")
    return runs


@FUZZ
@given(specs)
def test_any_spec_is_planned_or_refused_in_one_line(doc):
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "spec.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(toml(doc))
        try:
            plan_it(path)
        except SpecError as e:
            assert str(e) and "\n" not in str(e), repr(str(e))


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([b"", b"[campaign]\nname = \"f\"\n"]))
def test_any_bytes_are_refused_in_one_line(data, head):
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "spec.toml")
        with open(path, "wb") as f:
            f.write(head + data)
        try:
            plan_it(path)
        except SpecError as e:
            assert str(e) and "\n" not in str(e)


@FUZZ
@given(st.lists(st.one_of(st.binary(max_size=60), st.text(max_size=60),
                          st.builds(json.dumps, values)), max_size=5),
       st.booleans())
def test_append_only_files_always_read(lines, cut):
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "submissions.jsonl")
        with open(path, "wb") as f:
            for x in lines:
                f.write((x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass")) + b"\n")
            if cut:
                f.write(b'{"job_id": "7", "array": true, "tasks": [{"index": 0, "run": "r", "at')
        records = appendfile.read_jsonl(path)
        assert all(isinstance(r, dict) and isinstance(r["tasks"], list) for r in records)
        status.job_keys(records)
        state = appendfile.read_state(path)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in state.items())
        appendfile.append_line(path, json.dumps({"job_id": "8", "tasks": []}))
        assert appendfile.read_jsonl(path)[-1]["job_id"] == "8"
