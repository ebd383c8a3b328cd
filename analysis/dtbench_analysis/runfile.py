"""Reader for dtbench result files (HDF5, schema version 1, see docs/hdf5-layout.md).

``load_run(path)`` opens one file read-only, checks its schema, reads everything into memory and
returns a :class:`Run` (schema.py reads and checks each part of the file). Every analysis command
is built on it. Files from killed runs (no
``finished``/``end_time``/``stop_reason`` attributes, NaN tails, ``completed`` < ``iters_total``) load
like any other; their incompleteness is reported by :meth:`Run.completeness_note`. Files of runs
stopped early hold /iterations datasets of ``extent`` <= ``iters_total`` columns (they grow with the
run, docs/hdf5-layout.md); the iterations beyond were never run.

Conventions:
- ``Run.iterations[field]`` is a float64 array of shape ``(nranks, extent)``, row = rank
  position in ``/ranks``, column = iteration. Cells outside ``Run.valid`` (beyond ``completed[r]``,
  i.e. never written or in a block whose completion was not recorded) are set to NaN.
- "measured" = valid and not warm-up (iteration >= ``warmup``). Every statistic uses measured cells.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence

import h5py
import numpy as np
import pandas as pd

# the file's constants and errors stay importable from here, where they always were
from .schema import (EVAL_FIELDS, FACTOR_ATTRS, ITERATION_FIELDS,  # noqa: F401
                     LOCKSTEP_EXCHANGES, OPTIONAL_ITERATION_FIELDS, OPTIONAL_RANK_FIELDS, PHASES,
                     PROFILE_NAMES, PROFILE_TIMES, RANK_FIELDS, SAMPLE_FIELDS, SCHEMA_VERSION,
                     STATUS_NAMES, RunFileError, SchemaError)
from .schema import (config_of, decode, int_attrs, iterations_extent, numeric, open_file,
                     optional_attrs, read_eval, read_profile, read_ranks, read_samples,
                     require)


@dataclass
class Run:
    """One dtbench run, fully in memory. Build it with :func:`load_run`."""

    path: str
    #: root attributes, decoded to str/int/float
    attrs: Dict[str, object]
    #: the resolved configuration, parsed from the ``config_json`` attribute
    config: Dict[str, object]
    #: attributes of group /config (option name -> value string, as printed by rank 0)
    config_attrs: Dict[str, str]
    #: one row per rank (position = row of /iterations): RANK_FIELDS plus ``measured``
    ranks: pd.DataFrame
    #: field -> (nranks, extent) float64, NaN outside ``valid``
    iterations: Dict[str, np.ndarray]
    #: (nranks, extent) bool: iteration i of rank r lies within ``completed[r]``
    valid: np.ndarray
    #: field -> ``units`` attribute of its dataset
    units: Dict[str, str] = field(default_factory=dict)
    #: field -> ``description`` attribute of its dataset
    descriptions: Dict[str, str] = field(default_factory=dict)
    #: evaluations actually written (rows with a finite ``iteration``), columns EVAL_FIELDS
    eval: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EVAL_FIELDS)))
    #: /samples datasets present (SAMPLE_FIELDS), (nranks, capacity) float64, NaN beyond
    #: ``/ranks/samples_written`` of each row; empty when the run had no sampler
    samples: Dict[str, np.ndarray] = field(default_factory=dict)
    #: /profile (--profile-layers): "forward" and "backward" (nranks, N, nlayers) float64 in s,
    #: NaN where not timed; "layer" and "kind" (nlayers,) object arrays of str; "first_iteration"
    #: (0-d int, when recorded); in newer files its roofline (schema.read_roofline): the amounts
    #: "forward_flop", "backward_flop", "forward_bytes", "backward_bytes" (nranks, nlayers), the
    #: peaks "peak_bandwidth" (B/s), "peak_flops" (FLOP/s) and their "*_method" (nranks,);
    #: empty without /profile
    profile: Dict[str, np.ndarray] = field(default_factory=dict)
    #: what the reader found wrong but could read around, one line each (the commands print
    #: them as warnings): e.g. a config_json that is not an object, timings that are inf
    warnings: List[str] = field(default_factory=list)

    # ---- scalar properties -------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        return int(self.attrs["schema_version"])

    @property
    def nranks(self) -> int:
        return self.valid.shape[0]

    @property
    def iters_total(self) -> int:
        """Iterations the run was configured for (warm-up included)."""
        return int(self.attrs.get("iters_total", self.valid.shape[1]))

    @property
    def extent(self) -> int:
        """Columns of ``iterations``: ``iters_total``, or fewer in a file that grows with its
        run and stopped early (the iterations beyond were never run)."""
        return self.valid.shape[1]

    @property
    def warmup(self) -> int:
        """Number of leading warm-up iterations, excluded from every statistic."""
        return int(self.attrs["warmup"])

    @property
    def iters(self) -> int:
        """Configured number of measured iterations."""
        return int(self.attrs["iters"])

    @property
    def nnodes(self) -> int:
        return int(self.attrs["nnodes"])

    @property
    def batch_global(self) -> int:
        return int(self.attrs["batch_global"])

    @property
    def batch_per_rank(self) -> int:
        """Samples per rank and iteration (root attribute, else batch_global / nranks)."""
        return int(self.attrs.get("batch_per_rank") or self.batch_global // max(1, self.nranks))

    @property
    def finished(self) -> bool:
        """True when the run closed the file cleanly (attribute ``finished`` == 1)."""
        return int(self.attrs.get("finished", 0) or 0) == 1

    @property
    def stop_reason(self) -> Optional[str]:
        """``completed``, ``signal``, ``error``, or None (killed: attribute absent)."""
        return self.attrs.get("stop_reason")  # type: ignore[return-value]

    @property
    def completed(self) -> np.ndarray:
        """Per rank: iterations completed and written, warm-up included."""
        return self.ranks["completed"].to_numpy()

    @property
    def status(self) -> np.ndarray:
        """Per rank: 0 not finished, 1 completed, 2 stopped early (signal or target accuracy: see stop_reason), 3 error."""
        return self.ranks["status"].to_numpy()

    @property
    def exchange(self) -> str:
        """The exchange strategy (root attribute ``exchange``; ``sync`` when absent)."""
        return str(self.attrs.get("exchange") or "sync")

    @property
    def lockstep(self) -> bool:
        """True when all ranks finish an iteration together (``sync``, ``ssp``), so the max
        over ranks of an iteration's time is its critical path. ``async`` and ``mixed`` ranks
        advance independently."""
        return self.exchange in LOCKSTEP_EXCHANGES

    @property
    def target_accuracy(self) -> Optional[float]:
        """Root attribute ``target_accuracy``; None when absent or NaN."""
        value = self.attrs.get("target_accuracy")
        try:
            value = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        return value if np.isfinite(value) else None

    def has(self, name: str) -> bool:
        """Whether the per-iteration field ``name`` was loaded (optional fields may be absent)."""
        return name in self.iterations

    @property
    def factors(self) -> Dict[str, object]:
        """The main factors of the run (FACTOR_ATTRS), None where an attribute is missing."""
        return {k: self.attrs.get(k) for k in FACTOR_ATTRS}

    @property
    def trains(self) -> np.ndarray:
        """Per rank: True for ranks that run iterations. Parameter servers (``/ranks/role`` 1,
        ``--exchange async``) serve and have no iterations; files without ``role`` train."""
        if "role" not in self.ranks:
            return np.ones(len(self.ranks), dtype=bool)
        return self.ranks["role"].to_numpy() != 1

    # ---- completeness ------------------------------------------------------------------------
    @property
    def is_complete(self) -> bool:
        """Finished cleanly, every rank has status 1 and every training rank completed all
        ``iters_total`` iterations."""
        return (self.finished and bool(np.all(self.status == 1))
                and bool(np.all(self.completed[self.trains] >= self.iters_total)))

    def incomplete_ranks(self) -> pd.DataFrame:
        """Rows of ``ranks`` whose status is not 1, or that train and did not complete every
        iteration (parameter servers have no iterations to complete)."""
        short = (self.ranks["completed"] < self.iters_total) & self.trains
        bad = short | (self.ranks["status"] != 1)
        return self.ranks[bad]

    def completeness_note(self, max_groups: int = 8) -> Optional[str]:
        """None for a complete run, else one line saying why not and where each rank stopped,
        e.g. ``run did not finish (killed?); rank 0 stopped after 120/500 iterations, rank 1
        after 100/500``. Ranks with the same count and status are grouped (``ranks 0-3,6``)."""
        if self.is_complete:
            return None
        if not self.finished:
            why = "run did not finish (killed?)"
        elif self.stop_reason == "signal":
            why = "run stopped early by a signal (stop_reason=signal)"
        elif self.stop_reason == "target":
            why = "run stopped early: the target accuracy was reached (stop_reason=target)"
        elif self.stop_reason == "duration":
            why = "run stopped at its --duration (stop_reason=duration)"
        elif self.stop_reason == "error":
            why = "run ended with an error (stop_reason=error)"
        elif self.stop_reason == "peer_lost":  # closed by the survivors (slurm/README.md)
            why = f"a rank or node was lost (stop_reason=peer_lost: {self.attrs.get('stop_detail', '?')})"
        else:
            why = f"run finished (stop_reason={self.stop_reason}) but not every rank completed"
        bad = self.incomplete_ranks()
        if bad.empty:
            return f"{why}; every rank completed {self.iters_total}/{self.iters_total} iterations"
        groups: Dict[tuple, List[int]] = {}
        for rank, done, status in zip(bad["rank"], bad["completed"], bad["status"]):
            groups.setdefault((int(done), int(status)), []).append(int(rank))
        parts = []
        for n, ((done, status), ranks) in enumerate(groups.items()):
            if n == max_groups:
                rest = sum(len(r) for r in list(groups.values())[max_groups:])
                parts.append(f"... and {rest} more ranks")
                break
            label = ("rank " if len(ranks) == 1 else "ranks ") + _ranges(ranks)
            verb = " stopped after " if n == 0 else " after "
            text = f"{label}{verb}{done}/{self.iters_total}" + (" iterations" if n == 0 else "")
            if not (status == 0 and not self.finished):
                text += f" (status {status}: {STATUS_NAMES.get(status, 'unknown')})"
            parts.append(text)
        return f"{why}; " + ", ".join(parts)

    # ---- per-iteration data ------------------------------------------------------------------
    @property
    def warmup_mask(self) -> np.ndarray:
        """(extent,) bool: True for warm-up iterations."""
        return np.arange(self.extent) < self.warmup

    @property
    def measured_mask(self) -> np.ndarray:
        """(nranks, extent) bool: valid and not warm-up."""
        return self.valid & ~self.warmup_mask[None, :]

    @property
    def measured_by_all(self) -> np.ndarray:
        """(extent,) bool: iterations measured by every rank (for cross-rank statistics,
        e.g. the per-iteration critical path)."""
        return self.measured_mask.all(axis=0)

    def measured(self, name: str) -> np.ndarray:
        """Copy of ``iterations[name]`` (nranks, extent) with NaN outside measured cells."""
        return np.where(self.measured_mask, self._field(name), np.nan)

    def to_frame(self, fields: Optional[Sequence[str]] = None, include_warmup: bool = True,
                 valid_only: bool = True) -> pd.DataFrame:
        """Tidy DataFrame, one row per (rank, iteration): columns ``rank`` (MPI rank),
        ``iteration``, ``warmup`` (bool), ``valid`` (bool), then one column per field
        (default: all). By default only valid cells are kept, warm-up included and flagged."""
        names = list(self.iterations) if fields is None else list(fields)
        nr, nt = self.valid.shape
        frame = pd.DataFrame({
            "rank": np.repeat(self.ranks["rank"].to_numpy(), nt),
            "iteration": np.tile(np.arange(nt), nr),
            "warmup": np.tile(self.warmup_mask, nr),
            "valid": self.valid.ravel(),
        })
        for name in names:
            frame[name] = self._field(name).ravel()
        keep = np.ones(len(frame), dtype=bool)
        if valid_only:
            keep &= frame["valid"].to_numpy()
        if not include_warmup:
            keep &= ~frame["warmup"].to_numpy()
        return frame[keep].reset_index(drop=True)

    def _field(self, name: str) -> np.ndarray:
        try:
            return self.iterations[name]
        except KeyError:
            raise KeyError(f"no per-iteration field {name!r}; have {sorted(self.iterations)}") \
                from None


def _ranges(values: Iterable[int]) -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8'."""
    vals = sorted(values)
    out, start, prev = [], None, None
    for v in vals + [None]:
        if start is not None and (v is None or v != prev + 1):
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if v is not None and start is None:
            start = v
        prev = v
    return ",".join(out)


def load_run(path, fields: Optional[Sequence[str]] = None) -> Run:
    """Read a dtbench result file. ``fields`` limits which /iterations datasets are loaded
    (default: all of them, including any beyond ITERATION_FIELDS). Raises RunFileError (or its
    subclass SchemaError) with a one-line message naming the file; what it can read around is
    in ``Run.warnings``."""
    path = os.fspath(path)
    try:
        with open_file(path) as f:
            return _read(f, path, fields)
    except RunFileError:
        raise
    except (OSError, RuntimeError, KeyError, ValueError, TypeError, AttributeError) as e:
        # h5py on damaged objects (RuntimeError: corrupt metadata) or types this reader has
        # no use for
        text = " ".join(str(e).split()) or type(e).__name__
        raise RunFileError(f"{path}: cannot read: {text}") from None


def iteration_values(ds, path: str, name: str, nranks: int, extent: int, read_columns: int,
                     warnings: List[str]) -> np.ndarray:
    """One /iterations dataset as (nranks, extent) float64. A growing file extends its datasets
    one after another, so a run killed between two extensions leaves some datasets narrower than
    the others: read them as far as they go (NaN beyond, with a line in ``warnings``); any other
    shape is refused."""
    shape = ds.shape
    if shape == (nranks, extent):
        return numeric(ds, path, f"/iterations/{name}", read_columns)
    if len(shape) != 2 or shape[0] != nranks or shape[1] >= extent:
        raise RunFileError(f"{path}: /iterations/{name} has shape {shape}, "
                           f"expected ({nranks}, {extent}) as the other datasets")
    warnings.append(f"/iterations/{name} holds {shape[1]} iterations, the other datasets "
                    f"{extent} (the run ended while its file grew): read as far as it goes")
    values = np.full((nranks, extent), np.nan)
    values[:, :shape[1]] = numeric(ds, path, f"/iterations/{name}", min(read_columns, shape[1]))
    return values


def _read(f: h5py.File, path: str, fields: Optional[Sequence[str]]) -> Run:
    warnings: List[str] = []
    attrs = {k: decode(v) for k, v in f.attrs.items()}
    if "schema_version" not in attrs:
        raise SchemaError(f"{path}: not a dtbench result file (no schema_version attribute)")
    version = attrs["schema_version"]
    if version != SCHEMA_VERSION:
        raise SchemaError(f"{path}: unsupported schema_version {version!r} "
                          f"(this reader understands version {SCHEMA_VERSION} only)")
    int_attrs(attrs, path)
    optional_attrs(attrs, warnings)
    config_attrs = {k: str(decode(v)) for k, v in f["config"].attrs.items()} \
        if isinstance(f.get("config"), h5py.Group) else {}
    config = config_of(attrs, config_attrs, path, warnings)

    nranks, iters_total = attrs["nranks"], attrs["iters_total"]
    ranks_df = read_ranks(require(f, "ranks", path), path, nranks, warnings)
    completed = np.clip(np.nan_to_num(ranks_df["completed"].to_numpy(dtype=np.float64)),
                        0, iters_total).astype(np.int64)
    ranks_df["measured"] = np.clip(completed - attrs["warmup"], 0, None)

    group = require(f, "iterations", path)
    extent = iterations_extent(group, path, nranks, iters_total)
    valid = np.arange(extent)[None, :] < np.minimum(completed, extent)[:, None]
    read_columns = int(min(extent, completed.max(initial=0)))  # nothing completed lies beyond
    names = [n for n in group if isinstance(group[n], h5py.Dataset)] if fields is None \
        else list(fields)
    missing = [n for n in (ITERATION_FIELDS if fields is None else names) if n not in group]
    if missing:
        raise RunFileError(f"{path}: missing /iterations/{missing[0]} "
                           f"(not a complete schema-1 layout)")
    iterations, units, descriptions = {}, {}, {}
    for name in names:
        ds = group[name]
        values = iteration_values(ds, path, name, nranks, extent, read_columns, warnings)
        values = np.where(valid, values, np.nan)
        infinite = np.isinf(values)
        if infinite.any():
            warnings.append(f"/iterations/{name} holds {int(infinite.sum())} infinite values: "
                            f"read as not measured")
            values[infinite] = np.nan
        iterations[name] = values
        units[name] = str(decode(ds.attrs.get("units", "")))
        descriptions[name] = str(decode(ds.attrs.get("description", "")))
    # a rank-iteration whose start, phases and arrival wait are not all numbers was not measured
    # (nor one beyond a dataset that a kill left narrower than the others)
    for name in ("start",) + PHASES + ("exchange_wait",):
        if name in iterations:
            valid &= np.isfinite(iterations[name])
    for values in iterations.values():
        values[~valid] = np.nan
    return Run(path=path, attrs=attrs, config=config, config_attrs=config_attrs, ranks=ranks_df,
               iterations=iterations, valid=valid, units=units, descriptions=descriptions,
               eval=read_eval(f, path, warnings),
               samples=read_samples(f, path, nranks, warnings),
               profile=read_profile(f, path, nranks, warnings),
               warnings=warnings)
