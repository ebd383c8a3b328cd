"""Reader for dtbench result files (HDF5, schema version 1, see docs/hdf5-layout.md).

``load_run(path)`` opens one file read-only, checks its schema, reads everything into memory and
returns a :class:`Run`. Every analysis command is built on it. Files from killed runs (no
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

import json
import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence

import h5py
import numpy as np
import pandas as pd

SCHEMA_VERSION = 1

#: Per-iteration datasets of /iterations required by schema version 1, in documented order.
ITERATION_FIELDS = (
    "start", "data", "forward", "backward", "exchange", "update", "total",
    "loss", "bytes_sent", "record",
)
#: The timed phases, and ``total`` (the whole iteration), in seconds.
PHASES = ("data", "forward", "backward", "exchange", "update", "total")
#: Per-rank datasets of /ranks.
RANK_FIELDS = (
    "rank", "host", "node", "local_rank", "pid", "clock_offset_start", "clock_offset_end",
    "clock_rtt", "completed", "status",
)
#: Optional per-rank datasets (used when present): role 0 worker / 1 parameter server, the
#: update counts of the exchange, and the hash of the final parameters.
OPTIONAL_RANK_FIELDS = ("role", "updates_pushed", "updates_applied", "param_hash",
                        "sample_source", "device_name")
EVAL_FIELDS = ("iteration", "time", "accuracy", "loss")
#: Optional per-iteration datasets written by newer dtbench versions (used when present).
OPTIONAL_ITERATION_FIELDS = ("staleness", "version", "bytes_recv", "exchange_wait",
                             "straggler_delay", "exchange_hidden")
#: Optional sampler datasets of /samples, shape (nranks, capacity); /ranks/samples_written says
#: how many entries of each row are valid.
SAMPLE_FIELDS = ("time", "power_w", "memory_mib", "utilization")
#: Exchange strategies whose ranks advance in lockstep (an iteration ends for all ranks together).
LOCKSTEP_EXCHANGES = ("sync", "ssp")
#: Meaning of /ranks/status values.
STATUS_NAMES = {0: "not finished", 1: "completed", 2: "stopped early", 3: "error"}
#: The main factors of a run (root attributes), as shown by every command.
FACTOR_ATTRS = ("model", "dataset", "exchange", "device", "tag",
                "nranks", "nnodes", "batch_global", "batch_per_rank")


class RunFileError(Exception):
    """A file that cannot be read as a dtbench result file; the message names the file."""


class SchemaError(RunFileError):
    """A dtbench file whose schema_version this reader does not understand."""


def _decode(value):
    """HDF5 attribute/dataset scalar -> plain Python value (str, int, float, list)."""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).rstrip(b"\0").decode("utf-8", errors="replace")
    if isinstance(value, str):  # h5py's surrogate escapes of bytes that are not UTF-8 (a --tag)
        return value.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        if value.size == 1 and value.ndim <= 1:
            return _decode(value.reshape(-1)[0])
        return [_decode(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode_strings(array: np.ndarray) -> np.ndarray:
    """Fixed-length byte strings (e.g. /ranks/host, S64) -> object array of str."""
    if array.dtype.kind in ("S", "O"):
        return np.array([_decode(v) for v in array], dtype=object)
    return array


def _open(path: str) -> h5py.File:
    """Open read-only; map the usual failures to one-line RunFileErrors."""
    if not os.path.exists(path):
        raise RunFileError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise RunFileError(f"{path}: not a regular file")
    try:
        is_hdf5 = h5py.is_hdf5(path)
    except OSError as e:
        raise RunFileError(f"{path}: cannot read: {e}") from None
    if not is_hdf5:
        raise RunFileError(f"{path}: not an HDF5 file")
    try:
        # No file locking: a run still writing the file (status 0) must stay readable.
        try:
            return h5py.File(path, "r", locking=False)
        except TypeError:  # h5py built without the locking option
            return h5py.File(path, "r")
    except OSError as e:
        raise RunFileError(f"{path}: cannot open HDF5 file: {e}") from None


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


def _require(f: h5py.File, name: str, path: str):
    if name not in f:
        raise RunFileError(f"{path}: missing {name} (not a complete schema-1 layout)")
    return f[name]


def load_run(path, fields: Optional[Sequence[str]] = None) -> Run:
    """Read a dtbench result file. ``fields`` limits which /iterations datasets are loaded
    (default: all of them, including any beyond ITERATION_FIELDS). Raises RunFileError (or its
    subclass SchemaError) with a one-line message naming the file."""
    path = os.fspath(path)
    with _open(path) as f:
        attrs = {k: _decode(v) for k, v in f.attrs.items()}
        if "schema_version" not in attrs:
            raise SchemaError(f"{path}: not a dtbench result file (no schema_version attribute)")
        version = attrs["schema_version"]
        if version != SCHEMA_VERSION:
            raise SchemaError(f"{path}: unsupported schema_version {version!r} "
                              f"(this reader understands version {SCHEMA_VERSION} only)")
        for key in ("nranks", "warmup", "iters", "iters_total", "batch_global"):
            if key not in attrs:
                raise RunFileError(f"{path}: missing root attribute {key}")
        try:
            config = json.loads(attrs.get("config_json", "{}") or "{}")
        except ValueError as e:
            raise RunFileError(f"{path}: attribute config_json is not valid JSON ({e})") from None
        config_attrs = {k: _decode(v) for k, v in f["config"].attrs.items()} \
            if "config" in f else {}

        nranks, iters_total = int(attrs["nranks"]), int(attrs["iters_total"])
        ranks_group = _require(f, "ranks", path)
        ranks = {}
        for name in RANK_FIELDS:
            data = _require(ranks_group, name, path)[()]
            if data.shape != (nranks,):
                raise RunFileError(f"{path}: /ranks/{name} has shape {data.shape}, "
                                   f"expected ({nranks},)")
            ranks[name] = _decode_strings(data)
        for name in OPTIONAL_RANK_FIELDS:
            if name in ranks_group and ranks_group[name].shape == (nranks,):
                ranks[name] = _decode_strings(ranks_group[name][()])
        ranks_df = pd.DataFrame(ranks)
        completed = np.clip(ranks_df["completed"].to_numpy().astype(np.int64), 0, iters_total)
        ranks_df["measured"] = np.clip(completed - int(attrs["warmup"]), 0, None)

        group = _require(f, "iterations", path)
        extent = _iterations_extent(group, path, nranks, iters_total)
        valid = np.arange(extent)[None, :] < np.minimum(completed, extent)[:, None]
        names = [n for n in group if isinstance(group[n], h5py.Dataset)] if fields is None \
            else list(fields)
        missing = [n for n in (ITERATION_FIELDS if fields is None else names) if n not in group]
        if missing:
            raise RunFileError(f"{path}: missing /iterations/{missing[0]} "
                               f"(not a complete schema-1 layout)")
        iterations, units, descriptions = {}, {}, {}
        for name in names:
            ds = group[name]
            if ds.shape != (nranks, extent):
                raise RunFileError(f"{path}: /iterations/{name} has shape {ds.shape}, "
                                   f"expected ({nranks}, {extent}) as the other datasets")
            iterations[name] = np.where(valid, ds[()].astype(np.float64), np.nan)
            units[name] = _decode(ds.attrs.get("units", ""))
            descriptions[name] = _decode(ds.attrs.get("description", ""))

        samples = _read_samples(f, path, nranks)

        eval_df = pd.DataFrame(columns=list(EVAL_FIELDS), dtype=np.float64)
        if "eval" in f:
            cols = {n: f["eval"][n][()].astype(np.float64) for n in EVAL_FIELDS if n in f["eval"]}
            if cols:
                eval_df = pd.DataFrame(cols).reindex(columns=list(EVAL_FIELDS))
                eval_df = eval_df[np.isfinite(eval_df["iteration"])].reset_index(drop=True)

    return Run(path=path, attrs=attrs, config=config, config_attrs=config_attrs, ranks=ranks_df,
               iterations=iterations, valid=valid, units=units, descriptions=descriptions,
               eval=eval_df, samples=samples)


def _iterations_extent(group: h5py.Group, path: str, nranks: int, iters_total: int) -> int:
    """Columns of the /iterations datasets: ``iters_total`` (allocated whole), or fewer when the
    file grew with a run that stopped early (docs/hdf5-layout.md); never more."""
    sets = [group[n] for n in group if isinstance(group[n], h5py.Dataset)]
    widths = {ds.shape[1] for ds in sets if ds.ndim == 2 and ds.shape[0] == nranks}
    if not widths:
        return iters_total
    extent = max(widths)
    if extent > iters_total:
        raise RunFileError(f"{path}: /iterations holds {extent} iterations, more than "
                           f"iters_total {iters_total}")
    return extent


def _read_samples(f: h5py.File, path: str, nranks: int) -> Dict[str, np.ndarray]:
    """The optional /samples group (GPU/CPU sampler): each SAMPLE_FIELDS dataset present, rows
    cut to ``/ranks/samples_written`` (NaN beyond). Empty when there is no sampler."""
    if "samples" not in f or "samples_written" not in f["ranks"]:
        return {}
    written = f["ranks"]["samples_written"][()].astype(np.int64)
    if written.shape != (nranks,):
        raise RunFileError(f"{path}: /ranks/samples_written has shape {written.shape}, "
                           f"expected ({nranks},)")
    out = {}
    for name in SAMPLE_FIELDS:
        if name not in f["samples"]:
            continue
        data = f["samples"][name][()].astype(np.float64)
        if data.ndim != 2 or data.shape[0] != nranks:
            raise RunFileError(f"{path}: /samples/{name} has shape {data.shape}, "
                               f"expected ({nranks}, capacity)")
        keep = np.arange(data.shape[1])[None, :] < np.clip(written, 0, data.shape[1])[:, None]
        out[name] = np.where(keep, data, np.nan)
    return out
