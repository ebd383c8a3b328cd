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
OPTIONAL_RANK_FIELDS = ("role", "updates_pushed", "updates_applied", "iterations_done",
                        "param_hash", "sample_source", "device_name")
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


def _require(f: h5py.File, name: str, path: str):
    if name not in f:
        raise RunFileError(f"{path}: missing {name} (not a complete schema-1 layout)")
    return f[name]


#: root attributes every file has, and the least each may be
REQUIRED_INTS = {"nranks": 1, "nnodes": 1, "warmup": 0, "iters": 0, "iters_total": 0,
                 "batch_global": 0}


def _int_attrs(attrs: Dict[str, object], path: str) -> None:
    """Check the required integer root attributes (int32 in the file) and store them as
    int."""
    for key, least in REQUIRED_INTS.items():
        if key not in attrs:
            raise RunFileError(f"{path}: missing root attribute {key}")
        value = attrs[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
            and np.isfinite(value) and value == int(value) and least <= value < 2 ** 31
        if not ok:
            raise RunFileError(f"{path}: root attribute {key} is {value!r}, expected an "
                               f"integer >= {least} and < 2^31")
        attrs[key] = int(value)


#: optional root attributes the analysis reads, by the kind of value they hold
OPTIONAL_ATTRS = {
    "int": ("batch_per_rank", "finished", "calibration_iters", "oversubscribed", "host_cores",
            "host_ranks_max", "stages", "microbatches", "replicas", "nworkers",
            "staleness_bound", "ps_ranks", "sync_period", "param_count", "flush_every"),
    "float": ("timer_overhead_s", "target_accuracy", "calibration_exchange_s",
              "calibration_busbw", "calibration_busbw_factor", "stop_latency_s"),
    "str": ("model", "dataset", "exchange", "transport", "device", "tag", "parallel",
            "precision", "grad_dtype", "stop_reason", "stop_detail", "start_time", "end_time",
            "mpi_library", "backend_info", "launcher", "submit_line", "command_line",
            "config_json", "calibration_method", "failed_nodes", "lost_ranks"),
}


def _optional_attrs(attrs: Dict[str, object], warnings: List[str]) -> None:
    """Optional root attributes of another kind than they should hold are dropped (warned):
    the analysis then reads the file as one that does not record them."""
    for kind, names in OPTIONAL_ATTRS.items():
        for key in names:
            if key not in attrs:
                continue
            value = attrs[key]
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if kind == "str" and (isinstance(value, str) or number):
                attrs[key] = str(value) if number else value
                continue
            if kind == "float" and number:
                continue
            if kind == "int" and number and np.isfinite(value) and value == int(value):
                attrs[key] = int(value)
                continue
            what = {"int": "a whole number", "float": "a number", "str": "text"}[kind]
            warnings.append(f"root attribute {key} is {str(value)[:40]!r}, expected {what}: "
                            f"ignored")
            del attrs[key]


def _config(attrs: Dict[str, object], config_attrs: Dict[str, str], path: str,
            warnings: List[str]) -> Dict[str, object]:
    """config_json as a dict; when it is not a JSON object, /config's strings (warned)."""
    text = attrs.get("config_json", "{}") or "{}"
    try:
        config = json.loads(text) if isinstance(text, str) else None
        why = f"a JSON {type(config).__name__.replace('NoneType', 'null')}, not an object"
    except ValueError as e:
        config, why = None, f"not valid JSON ({e})"
    if isinstance(config, dict):
        return config
    warnings.append(f"attribute config_json is {why}: the configuration is read from /config")
    return dict(config_attrs)


#: /ranks datasets that count or number something: whole numbers, always
INTEGER_RANK_FIELDS = ("rank", "node", "local_rank", "pid", "completed", "status")
COUNT_RANK_FIELDS = ("role", "updates_pushed", "updates_applied", "iterations_done")


def _integers(data: np.ndarray, path: str, name: str) -> np.ndarray:
    """Whole numbers as int64; RunFileError for anything else (text, inf, NaN, 2.5)."""
    if data.dtype.kind in "iu":
        return data.astype(np.int64)
    if data.dtype.kind != "f":
        raise RunFileError(f"{path}: {name} holds {data.dtype} values, expected whole numbers")
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(data) | (np.abs(data) >= 2 ** 62) | (data != np.round(data))
    if bad.any():
        raise RunFileError(f"{path}: {name} holds {data[bad].ravel()[0]!r}, expected whole "
                           f"numbers")
    return data.astype(np.int64)


def _numeric(ds, path: str, name: str) -> np.ndarray:
    """A dataset's values as float64; RunFileError when they are not numbers."""
    if ds.dtype.kind not in "iufb":
        raise RunFileError(f"{path}: {name} holds {ds.dtype} values, expected numbers")
    return ds[()].astype(np.float64)


def load_run(path, fields: Optional[Sequence[str]] = None) -> Run:
    """Read a dtbench result file. ``fields`` limits which /iterations datasets are loaded
    (default: all of them, including any beyond ITERATION_FIELDS). Raises RunFileError (or its
    subclass SchemaError) with a one-line message naming the file; what it can read around is
    in ``Run.warnings``."""
    path = os.fspath(path)
    with _open(path) as f:
        try:
            return _read(f, path, fields)
        except RunFileError:
            raise
        except (OSError, KeyError, ValueError, TypeError, AttributeError) as e:
            # h5py on damaged objects or types this reader has no use for
            text = " ".join(str(e).split()) or type(e).__name__
            raise RunFileError(f"{path}: cannot read: {text}") from None


def _read(f: h5py.File, path: str, fields: Optional[Sequence[str]]) -> Run:
    warnings: List[str] = []
    attrs = {k: _decode(v) for k, v in f.attrs.items()}
    if "schema_version" not in attrs:
        raise SchemaError(f"{path}: not a dtbench result file (no schema_version attribute)")
    version = attrs["schema_version"]
    if version != SCHEMA_VERSION:
        raise SchemaError(f"{path}: unsupported schema_version {version!r} "
                          f"(this reader understands version {SCHEMA_VERSION} only)")
    _int_attrs(attrs, path)
    _optional_attrs(attrs, warnings)
    config_attrs = {k: str(_decode(v)) for k, v in f["config"].attrs.items()} \
        if isinstance(f.get("config"), h5py.Group) else {}
    config = _config(attrs, config_attrs, path, warnings)

    nranks, iters_total = attrs["nranks"], attrs["iters_total"]
    ranks_df = _read_ranks(_require(f, "ranks", path), path, nranks)
    completed = np.clip(np.nan_to_num(ranks_df["completed"].to_numpy(dtype=np.float64)),
                        0, iters_total).astype(np.int64)
    ranks_df["measured"] = np.clip(completed - attrs["warmup"], 0, None)

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
        values = np.where(valid, _numeric(ds, path, f"/iterations/{name}"), np.nan)
        infinite = np.isinf(values)
        if infinite.any():
            warnings.append(f"/iterations/{name} holds {int(infinite.sum())} infinite values: "
                            f"read as not measured")
            values[infinite] = np.nan
        iterations[name] = values
        units[name] = str(_decode(ds.attrs.get("units", "")))
        descriptions[name] = str(_decode(ds.attrs.get("description", "")))
    # a rank-iteration whose start, phases and arrival wait are not all numbers was not measured
    for name in ("start",) + PHASES + ("exchange_wait",):
        if name in iterations:
            valid &= np.isfinite(iterations[name])
    for values in iterations.values():
        values[~valid] = np.nan
    return Run(path=path, attrs=attrs, config=config, config_attrs=config_attrs, ranks=ranks_df,
               iterations=iterations, valid=valid, units=units, descriptions=descriptions,
               eval=_read_eval(f, path, warnings),
               samples=_read_samples(f, path, nranks, warnings),
               warnings=warnings)


def _read_ranks(group: h5py.Group, path: str, nranks: int) -> pd.DataFrame:
    """/ranks: RANK_FIELDS (required) and the OPTIONAL_RANK_FIELDS present, one row per rank."""
    ranks = {}
    for name in RANK_FIELDS:
        data = _require(group, name, path)[()]
        if np.shape(data) != (nranks,):
            raise RunFileError(f"{path}: /ranks/{name} has shape {np.shape(data)}, "
                               f"expected ({nranks},)")
        if name in INTEGER_RANK_FIELDS:
            data = _integers(data, path, f"/ranks/{name}")
        elif name != "host" and data.dtype.kind not in "iuf":
            raise RunFileError(f"{path}: /ranks/{name} holds {data.dtype} values, expected "
                               f"numbers")
        ranks[name] = _decode_strings(data)
    ranks["host"] = np.array([str(h) for h in ranks["host"]], dtype=object)
    for name in OPTIONAL_RANK_FIELDS:
        if name in group and group[name].shape == (nranks,):
            data = group[name][()]
            ranks[name] = _integers(data, path, f"/ranks/{name}") \
                if name in COUNT_RANK_FIELDS else _decode_strings(data)
    return pd.DataFrame(ranks)


def _read_eval(f: h5py.File, path: str, warnings: List[str]) -> pd.DataFrame:
    """/eval: the evaluations written (rows with a finite iteration); ignored, with a warning,
    when its datasets are not numbers of one length."""
    empty = pd.DataFrame(columns=list(EVAL_FIELDS), dtype=np.float64)
    group = f.get("eval")
    if not isinstance(group, h5py.Group):
        return empty
    sets = {n: group[n] for n in EVAL_FIELDS if isinstance(group.get(n), h5py.Dataset)}
    if not sets:
        return empty
    shapes = {ds.shape for ds in sets.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1 or \
            any(ds.dtype.kind not in "iuf" for ds in sets.values()):
        warnings.append(f"/eval holds datasets of shapes {sorted(shapes)} and types "
                        f"{sorted({str(ds.dtype) for ds in sets.values()})}, expected numbers "
                        f"of one length: evaluations ignored")
        return empty
    frame = pd.DataFrame({n: ds[()].astype(np.float64) for n, ds in sets.items()})
    frame = frame.reindex(columns=list(EVAL_FIELDS)).replace([np.inf, -np.inf], np.nan)
    return frame[np.isfinite(frame["iteration"])].reset_index(drop=True)


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


def _read_samples(f: h5py.File, path: str, nranks: int,
                  warnings: List[str]) -> Dict[str, np.ndarray]:
    """The optional /samples group (GPU/CPU sampler): each SAMPLE_FIELDS dataset present, rows
    cut to ``/ranks/samples_written`` (NaN beyond, inf read as NaN). Empty when there is no
    sampler, or, with a warning, when the datasets do not fit together."""
    group = f.get("samples")
    if not isinstance(group, h5py.Group) or "samples_written" not in f["ranks"]:
        return {}
    written = _integers(f["ranks"]["samples_written"][()], path, "/ranks/samples_written")
    sets = {n: group[n] for n in SAMPLE_FIELDS if isinstance(group.get(n), h5py.Dataset)}
    shapes = {ds.shape for ds in sets.values()}
    if written.shape != (nranks,) or len(shapes) > 1 or \
            any(len(sh) != 2 or sh[0] != nranks for sh in shapes):
        warnings.append(f"/samples holds datasets of shapes {sorted(shapes)} and "
                        f"/ranks/samples_written {written.shape}, expected ({nranks}, capacity) "
                        f"and ({nranks},): samples ignored")
        return {}
    out = {}
    for name, ds in sets.items():
        data = _numeric(ds, path, f"/samples/{name}")
        keep = np.arange(data.shape[1])[None, :] < np.clip(written, 0, data.shape[1])[:, None]
        out[name] = np.where(keep & np.isfinite(data), data, np.nan)
    return out
