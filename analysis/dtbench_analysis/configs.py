"""What makes two runs "the same configuration", and how groups of runs are labelled.

A run's configuration is its resolved options (``config_json``) plus the job's shape (``nranks``,
``nnodes``) and the factors newer writers store as root attributes (``parallel``, ``stages``,
``target_accuracy``, ``launcher``: mpirun and srun runs differ in wire-up and binding, so
they are never pooled as repeats; older files have no launcher), minus options that only say
where results go or how long to measure
(``BOOKKEEPING``: output, overwrite, save-model, dry-run, data-dir, seed, iters, warmup). Runs
with equal configurations are repeats and are pooled. The numeric precision (``--precision``, the
compute) and the gradients' wire type (``--grad-dtype``) are always part of it, ``fp32`` for files
written before the options existed (they computed and exchanged in fp32), so an old fp32 run
pools with a new one and a bf16 run never does. ``--ignore KEY`` drops more keys (e.g. ``tag``
when repeats were tagged differently).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Iterable, List, Sequence, Tuple

from .runfile import Run

#: Options that do not change what is measured; never part of a configuration.
BOOKKEEPING = ("output", "overwrite", "save-model", "dry-run", "data-dir", "seed", "iters",
               "warmup")
#: Root attributes that are part of the configuration when present.
EXTRA_ATTRS = ("nranks", "nnodes", "parallel", "stages", "target_accuracy", "launcher")
#: Keys that vary along a scaling series (scale and the batch that goes with it).
SCALE_KEYS = ("nranks", "nnodes", "batch", "batch_global", "batch_per_rank", "ranks-per-node")

#: The precision keys of a configuration (option names) and their value when not recorded.
PRECISION_DEFAULTS = (("precision", "fp32"), ("grad-dtype", "fp32"))

Key = Tuple[Tuple[str, str], ...]


def _text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def precision(run: Run) -> Dict[str, str]:
    """``{"precision": compute type, "grad_dtype": gradients' wire type}``, from the
    configuration (``grad-dtype`` or ``grad_dtype``), else root attributes, else ``fp32``."""
    out = {}
    for key, default in PRECISION_DEFAULTS:
        name = key.replace("-", "_")
        for source in (run.config, run.attrs, run.config_attrs):
            value = source.get(key, source.get(name))
            if value not in (None, ""):
                out[name] = _text(value.decode() if isinstance(value, bytes) else value)
                break
        out.setdefault(name, default)
    return out


def configuration(run: Run, ignore: Iterable[str] = ()) -> Dict[str, str]:
    """The run's configuration as ordered name -> value text."""
    skip = set(BOOKKEEPING) | set(ignore)
    out: Dict[str, str] = {}
    for k, v in run.config.items():
        if k not in skip:
            out[k] = _text(v)
    for k in ("model", "dataset", "exchange", "device", "tag"):
        if k not in out and k not in skip and run.attrs.get(k) is not None:
            out[k] = _text(run.attrs[k])
    prec = precision(run)
    for key, _ in PRECISION_DEFAULTS:
        out.pop(key.replace("-", "_"), None)
        if key not in skip and key.replace("-", "_") not in skip:
            out[key] = prec[key.replace("-", "_")]
    for k in EXTRA_ATTRS:
        if k not in skip and run.attrs.get(k) is not None:
            out[k] = _text(run.attrs[k])
    if "batch" not in out and "batch" not in skip:
        out["batch"] = _text(run.batch_global)
    return out


def key_of(run: Run, ignore: Iterable[str] = ()) -> Key:
    return tuple(sorted(configuration(run, ignore).items()))


def group_runs(runs: Sequence[Run], ignore: Iterable[str] = ()) -> "OrderedDict[Key, List[Run]]":
    """Runs grouped by configuration (repeats together), groups in order of first appearance."""
    ignore = tuple(ignore)
    groups: "OrderedDict[Key, List[Run]]" = OrderedDict()
    for run in runs:
        groups.setdefault(key_of(run, ignore), []).append(run)
    return groups


def split_common(keys: Sequence[Key]) -> Tuple[Dict[str, str], List[Dict[str, str]]]:
    """(factors equal in every key, per key the factors that differ between keys)."""
    dicts = [dict(k) for k in keys]
    names = list(OrderedDict.fromkeys(n for d in dicts for n in d))
    common = {n: dicts[0][n] for n in names
              if all(n in d and d[n] == dicts[0][n] for d in dicts)}
    differing = [{n: d.get(n, "-") for n in names if n not in common} for d in dicts]
    return common, differing


def label(differing: Dict[str, str], fallback: str = "all runs") -> str:
    """``exchange=async staleness=2`` from the differing factors of one group."""
    return " ".join(f"{k}={v}" for k, v in differing.items()) or fallback


def describe(factors: Dict[str, str]) -> str:
    """All factors as ``k=v`` pairs, for the 'configuration' line of every report."""
    return "  ".join(f"{k}={v}" for k, v in factors.items())
