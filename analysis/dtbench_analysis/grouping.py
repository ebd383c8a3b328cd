"""Which runs may be compared with which: comparisons along one factor inside one configuration.

A comparison only makes sense between runs that differ in what is being compared. For each
factor (``FACTORS``: exchange, transport, ranks, batch, precision, micro-batches) the runs are
grouped by their configuration (configs.py) *without* that factor's keys; a group whose runs take
two or more values of the factor is one comparison. Everything else (model, data set, device,
learning rate, ...) is equal inside a comparison, so LeNet is never compared with ResNet-50 and
synthetic data never with Fashion-MNIST. Runs that differ in two factors at once appear in no
comparison of either (their difference cannot be attributed to one factor).

``strategy_groups`` picks the runs of the report's Strategies figures: one model, data set and
batch, differing in the exchange strategy (its options, the ranks and evaluation settings).

``differing_factors`` names the factors in which a set of runs differ: ``dtbench-analyze compare``
compares all its runs at once only when they differ in at most one of them, and otherwise makes
the same one-factor comparisons as the report. ``line_labels`` gives each run of a figure a label
naming every configuration key in which the figure's runs differ (ranks, launcher, exchange,
transport, precision, ...), so no two lines of different configurations read alike.
``rank_view_order`` picks the run of the report's ranks x iterations view and straggler verdict.

Exchange strategies are compared at an equal number of *workers* (root attribute ``nworkers``,
else ``nranks``): ``--exchange async`` adds parameter-server ranks and ``mixed`` needs a node
layout (``--ranks-per-node``), so for this factor the rank counts vary with the strategy.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Sequence, Tuple

import pandas as pd

from . import configs
from .runfile import Run

#: factor -> the configuration keys that vary with it (options that only make sense with a
#: factor's value, e.g. ``--staleness`` with ``--exchange ssp``, vary together with it)
FACTORS: "OrderedDict[str, Tuple[str, ...]]" = OrderedDict([
    ("exchange", ("exchange", "staleness", "ps-ranks", "sync-period", "param-prefetch",
                  "staleness_bound", "ps_ranks", "sync_period", "nranks", "nnodes",
                  "ranks-per-node")),
    ("transport", ("transport", "bucket-mb", "overlap")),
    ("ranks", ("nranks", "nnodes", "ranks-per-node", "gpus-per-node")),
    ("batch", ("batch", "batch_global", "batch_per_rank")),
    ("precision", ("precision", "grad-dtype")),
    ("microbatches", ("microbatches",)),
    ("schedule", ("schedule",)),
    ("launcher", ("launcher",)),
])


#: factors whose first N keys are all the factor itself (either varying makes a comparison):
#: the compute precision and the gradients' wire type (fp32 beside bf16 runs, side by side)
PRIMARY_KEYS = {"precision": 2}

#: order of the exchange strategies in a comparison (the first present is the baseline)
EXCHANGE_ORDER = ("sync", "ssp", "async", "mixed", "zero1", "zero2", "zero3")
#: order of precisions (compute, then wire type): fp32, the strict one, is the baseline
PRECISION_ORDER = ("fp32", "tf32", "bf16", "fp16")


def _order(run: Run, key: str, ignore: Sequence[str]):
    """Sort key putting the baseline first: sync before the others, small numbers first."""
    conf = configs.configuration(run, ignore)
    value = conf.get(key, "")
    if key == "precision":
        return (0, tuple(PRECISION_ORDER.index(conf.get(k, "fp32"))
                         if conf.get(k, "fp32") in PRECISION_ORDER else len(PRECISION_ORDER)
                         for k in FACTORS["precision"]), "")
    if value in EXCHANGE_ORDER:
        return (0, EXCHANGE_ORDER.index(value), "")
    try:
        return (1, float(value), "")
    except ValueError:
        return (2, 0.0, value)


def _values(run: Run, keys: Sequence[str], ignore: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
    conf = configs.configuration(run, ignore)
    return tuple((k, conf[k]) for k in keys if k in conf)


def comparisons(runs: Sequence[Run], ignore: Sequence[str] = (),
                factors: Sequence[str] = tuple(FACTORS)) -> List[Dict[str, object]]:
    """Every comparison among ``runs``: dicts with ``factor``, ``runs`` (input order),
    ``common`` (the configuration all of them share) and ``values`` (the distinct values of the
    factor's keys); runs in the order sync, ssp, async, mixed or by increasing value, so the
    first, the baseline of compare.compare, is sync or the smallest."""
    out: List[Dict[str, object]] = []
    for factor in factors:
        keys = FACTORS[factor]
        groups: "OrderedDict[tuple, List[Run]]" = OrderedDict()
        for run in runs:
            key = configs.key_of(run, tuple(ignore) + tuple(keys))
            if factor == "exchange":
                key += (("workers", str(run.attrs.get("nworkers") or run.nranks)),)
            groups.setdefault(key, []).append(run)
        for key, members in groups.items():
            primary = keys[:PRIMARY_KEYS.get(factor, 1)]
            if len({_values(r, primary, ignore) for r in members}) < 2:
                continue            # the factor itself does not vary (only options that go
                                    # with it): not a comparison of this factor
            members = sorted(members, key=lambda r: _order(r, keys[0], ignore))
            values = list(OrderedDict.fromkeys(_values(r, keys, ignore) for r in members))
            if len(values) < 2:
                continue
            out.append({"factor": factor, "runs": list(members),
                        "common": {k: v for k, v in key if k != "workers"},
                        "values": [dict(v) for v in values]})
    return out


#: keys that may differ between the runs of one strategies figure (the report's Strategies)
STRATEGY_KEYS = ("exchange", "staleness", "ps-ranks", "sync-period", "param-prefetch", "nranks",
                 "nnodes", "ranks-per-node",
                 "tag", "target_accuracy", "target-acc", "eval-every")


def strategy_groups(runs: Sequence[Run], ignore: Sequence[str] = ()) -> List[List[Run]]:
    """Runs of one model, data set and everything else but the exchange strategy (and its
    options, the ranks and the evaluation settings), groups with several strategies first."""
    groups = configs.group_runs(runs, tuple(ignore) + STRATEGY_KEYS)
    out = [g for g in groups.values()
           if len({r.exchange for r in g}) > 1 or any(len(r.eval) for r in g)]
    return sorted(out, key=lambda g: (-len({r.exchange for r in g}), -len(g)))


def value_label(values: Dict[str, str], differing: Sequence[str]) -> str:
    """``exchange=ssp staleness=2`` limited to the keys that differ within the comparison."""
    return " ".join(f"{k}={values[k]}" for k in differing if k in values) or "-"


def table(runs: Sequence[Run], ignore: Sequence[str] = ()) -> pd.DataFrame:
    """One row per comparison: factor, the values compared, the runs, and what they share."""
    rows = []
    for i, c in enumerate(comparisons(runs, ignore), 1):
        differing = [k for k in OrderedDict.fromkeys(k for v in c["values"] for k in v)
                     if len({v.get(k) for v in c["values"]}) > 1]
        rows.append({"comparison": i, "factor": c["factor"],
                     "values": " | ".join(value_label(v, differing) for v in c["values"]),
                     "runs": len(c["runs"]),
                     "model": c["common"].get("model"), "dataset": c["common"].get("dataset"),
                     "common": configs.describe({k: v for k, v in c["common"].items()
                                                 if k not in ("model", "dataset")})})
    return pd.DataFrame(rows, columns=["comparison", "factor", "values", "runs", "model",
                                       "dataset", "common"])


def differing_factors(runs: Sequence[Run], ignore: Sequence[str] = ()) -> List[str]:
    """The FACTORS whose own keys (the first, or PRIMARY_KEYS of them: ``nranks`` belongs to
    the ranks, not to the exchange) differ among the configurations of ``runs``."""
    confs = [configs.configuration(r, ignore) for r in runs]
    out = []
    for factor, keys in FACTORS.items():
        primary = keys[:PRIMARY_KEYS.get(factor, 1)]
        if len({tuple(c.get(k) for k in primary) for c in confs}) > 1:
            out.append(factor)
    return out


#: configuration keys never named in a line label (they say nothing about the measurement)
UNLABELLED = ("tag",)


def differing_labels(confs: Sequence[Dict[str, str]], skip: Sequence[str] = ()) -> List[str]:
    """Per configuration, ``k=v`` of every key whose value differs among ``confs`` (a key a
    configuration lacks reads ``-``), ``skip`` and UNLABELLED left out; "" when none differs."""
    _, differing = configs.split_common([tuple(sorted(c.items())) for c in confs])
    return [configs.label({k: v for k, v in d.items() if k not in skip and
                           k not in UNLABELLED}, fallback="") for d in differing]


def line_labels(runs: Sequence[Run], ignore: Sequence[str] = ()) -> Dict[str, str]:
    """path -> ``exchange=async nranks=2 launcher=srun``: every configuration key whose value
    differs among ``runs`` (differing_labels); ``all runs`` when none differs."""
    texts = differing_labels([configs.configuration(r, ignore) for r in runs])
    return {r.path: t or "all runs" for r, t in zip(runs, texts)}


def workers(run: Run) -> int:
    """Ranks that ran iterations (parameter servers excluded) and measured at least one."""
    return int(((run.ranks["measured"].to_numpy() > 0) & run.trains).sum())


def rank_view_order(runs: Sequence[Run]) -> List[Run]:
    """Runs with a completed iteration, best first for the ranks x iterations view and the
    straggler verdict: most ranks that measured iterations (a parameter server's empty row or
    a killed rank says nothing), then a lockstep strategy (sync, ssp: where one slow rank holds
    up the others), then most ranks, then most measured iterations, then the path."""
    have = [r for r in runs if int(r.valid.sum())]
    return sorted(have, key=lambda r: (-workers(r), not r.lockstep, -r.nranks,
                                       -int(r.ranks["measured"].sum()), r.path))
