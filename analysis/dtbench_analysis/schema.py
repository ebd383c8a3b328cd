"""What a dtbench result file (HDF5, schema version 1, docs/hdf5-layout.md) holds, and the
checked reading of its parts, which runfile.load_run assembles into a Run.

Each reader raises RunFileError (one line naming the file) for what the analysis cannot do
without, and appends to ``warnings`` (one line each) what it reads around: an optional attribute
of the wrong kind, a configuration that is not a JSON object, /eval, /samples or /profile whose
datasets do not fit together.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

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
                        "param_hash", "sample_source", "device_name", "memory_params",
                        "memory_grads", "memory_optimizer", "memory_peak_resident")
#: the optional per-rank memory datasets (bytes, float64): the plan's and the measured peak
MEMORY_RANK_FIELDS = ("memory_params", "memory_grads", "memory_optimizer",
                      "memory_peak_resident")
EVAL_FIELDS = ("iteration", "time", "accuracy", "loss")
#: Optional per-iteration datasets written by newer dtbench versions (used when present).
OPTIONAL_ITERATION_FIELDS = ("staleness", "version", "bytes_recv", "exchange_wait",
                             "straggler_delay", "exchange_hidden", "exchange_reduce_scatter",
                             "exchange_allgather", "bytes_reduce_scatter", "bytes_allgather",
                             "exchange_allreduce", "bytes_allreduce")
#: Optional sampler datasets of /samples, shape (nranks, capacity); /ranks/samples_written says
#: how many entries of each row are valid.
SAMPLE_FIELDS = ("time", "power_w", "memory_mib", "utilization")
#: /profile datasets (--profile-layers): per-layer times (nranks, N, nlayers) and names (nlayers,)
PROFILE_TIMES, PROFILE_NAMES = ("forward", "backward"), ("layer", "kind")
#: /profile's roofline (newer files): each rank's FLOPs and least bytes per layer and call
#: (nranks, nlayers), its device's peaks (nranks,) and how each was found (nranks,) text
PROFILE_AMOUNTS = ("forward_flop", "backward_flop", "forward_bytes", "backward_bytes")
PROFILE_PEAKS, PROFILE_PEAK_METHODS = ("peak_bandwidth", "peak_flops"), \
    ("peak_bandwidth_method", "peak_flops_method")
#: Exchange strategies whose ranks advance in lockstep (an iteration ends for all ranks together).
LOCKSTEP_EXCHANGES = ("sync", "ssp", "zero1", "zero2", "zero3")
#: Meaning of /ranks/status values.
STATUS_NAMES = {0: "not finished", 1: "completed", 2: "stopped early", 3: "error"}
#: The main factors of a run (root attributes), as shown by every command.
FACTOR_ATTRS = ("model", "dataset", "exchange", "device", "tag",
                "nranks", "nnodes", "batch_global", "batch_per_rank")


class RunFileError(Exception):
    """A file that cannot be read as a dtbench result file; the message names the file."""


class SchemaError(RunFileError):
    """A dtbench file whose schema_version this reader does not understand."""


def decode(value):
    """HDF5 attribute/dataset scalar -> plain Python value (str, int, float, list)."""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).rstrip(b"\0").decode("utf-8", errors="replace")
    if isinstance(value, str):  # h5py's surrogate escapes of bytes that are not UTF-8 (a --tag)
        return value.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        if value.size == 1 and value.ndim <= 1:
            return decode(value.reshape(-1)[0])
        return [decode(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def decode_strings(array: np.ndarray) -> np.ndarray:
    """Fixed-length byte strings (e.g. /ranks/host, S64) -> object array of str."""
    if array.dtype.kind in ("S", "O"):
        return np.array([decode(v) for v in array], dtype=object)
    return array


def open_file(path: str) -> h5py.File:
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


def require(f: h5py.File, name: str, path: str):
    if name not in f:
        raise RunFileError(f"{path}: missing {name} (not a complete schema-1 layout)")
    return f[name]


#: root attributes every file has, and the least each may be
REQUIRED_INTS = {"nranks": 1, "nnodes": 1, "warmup": 0, "iters": 0, "iters_total": 0,
                 "batch_global": 0}


def int_attrs(attrs: Dict[str, object], path: str) -> None:
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
            "staleness_bound", "ps_ranks", "sync_period", "param_count", "flush_every",
            "tokens_per_sample"),
    "float": ("timer_overhead_s", "target_accuracy", "calibration_exchange_s",
              "calibration_busbw", "calibration_busbw_factor", "stop_latency_s",
              "train_flops_per_sample", "peak_flops"),
    "str": ("model", "dataset", "exchange", "transport", "device", "tag", "parallel",
            "precision", "grad_dtype", "stop_reason", "stop_detail", "start_time", "end_time",
            "mpi_library", "backend_info", "launcher", "submit_line", "command_line",
            "config_json", "calibration_method", "failed_nodes", "lost_ranks",
            "peak_flops_source"),
}


def optional_attrs(attrs: Dict[str, object], warnings: List[str]) -> None:
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


def config_of(attrs: Dict[str, object], config_attrs: Dict[str, str], path: str,
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


def integers(data: np.ndarray, path: str, name: str) -> np.ndarray:
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


def numeric(ds, path: str, name: str, columns: Optional[int] = None) -> np.ndarray:
    """A dataset's values as float64; RunFileError when they are not numbers. ``columns``: of a
    2-D dataset only the first ``columns`` are read, the rest NaN (a growing file killed inside
    an extension may name chunks past the end of the file it records, and no completed
    iteration lies in them: docs/hdf5-layout.md)."""
    if ds.dtype.kind not in "iufb":
        raise RunFileError(f"{path}: {name} holds {ds.dtype} values, expected numbers")
    if columns is None or ds.ndim != 2 or columns >= ds.shape[1]:
        return ds[()].astype(np.float64)
    values = np.full(ds.shape, np.nan)
    if columns > 0:
        values[:, :columns] = ds[:, :columns]
    return values


def read_ranks(group: h5py.Group, path: str, nranks: int,
               warnings: Optional[List[str]] = None) -> pd.DataFrame:
    """/ranks: RANK_FIELDS (required) and the OPTIONAL_RANK_FIELDS present, one row per rank.
    A memory dataset (MEMORY_RANK_FIELDS) that is not one number per rank is left out, with a
    line in ``warnings``; its non-finite or negative values read as not recorded (NaN)."""
    ranks = {}
    for name in RANK_FIELDS:
        data = require(group, name, path)[()]
        if np.shape(data) != (nranks,):
            raise RunFileError(f"{path}: /ranks/{name} has shape {np.shape(data)}, "
                               f"expected ({nranks},)")
        if name in INTEGER_RANK_FIELDS:
            data = integers(data, path, f"/ranks/{name}")
        elif name != "host" and data.dtype.kind not in "iuf":
            raise RunFileError(f"{path}: /ranks/{name} holds {data.dtype} values, expected "
                               f"numbers")
        ranks[name] = decode_strings(data)
    ranks["host"] = np.array([str(h) for h in ranks["host"]], dtype=object)
    for name in OPTIONAL_RANK_FIELDS:
        if name in MEMORY_RANK_FIELDS:
            values = memory_values(group, name, nranks, warnings if warnings is not None else [])
            if values is not None:
                ranks[name] = values
            continue
        if name in group and group[name].shape == (nranks,):
            data = group[name][()]
            ranks[name] = integers(data, path, f"/ranks/{name}") \
                if name in COUNT_RANK_FIELDS else decode_strings(data)
    return pd.DataFrame(ranks)


def memory_values(group: h5py.Group, name: str, nranks: int,
                  warnings: List[str]) -> Optional[np.ndarray]:
    """/ranks/``name`` (bytes per rank) as float64, NaN where not a finite number >= 0; None,
    with one warning line, when it is not a dataset of ``nranks`` numbers (None alone when
    absent: older files)."""
    if name not in group:
        return None
    ds = group[name]
    if not isinstance(ds, h5py.Dataset) or ds.shape != (nranks,) or ds.dtype.kind not in "iuf":
        what = f"{ds.dtype} values of shape {ds.shape}" if isinstance(ds, h5py.Dataset) \
            else "a group"
        warnings.append(f"/ranks/{name} holds {what}, expected ({nranks},) numbers: memory "
                        f"per rank read as not recorded")
        return None
    values = ds[()].astype(np.float64)
    bad = ~np.isfinite(values) | (values < 0)
    if (bad & ~np.isnan(values)).any():
        warnings.append(f"/ranks/{name} holds {int((bad & ~np.isnan(values)).sum())} values "
                        f"that are not bytes (negative or infinite): read as not recorded")
    values[bad] = np.nan
    return values


def read_eval(f: h5py.File, path: str, warnings: List[str]) -> pd.DataFrame:
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


def iterations_extent(group: h5py.Group, path: str, nranks: int, iters_total: int) -> int:
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


def read_samples(f: h5py.File, path: str, nranks: int,
                  warnings: List[str]) -> Dict[str, np.ndarray]:
    """The optional /samples group (GPU/CPU sampler): each SAMPLE_FIELDS dataset present, rows
    cut to ``/ranks/samples_written`` (NaN beyond, inf read as NaN). Empty when there is no
    sampler, or, with a warning, when the datasets do not fit together."""
    group = f.get("samples")
    if not isinstance(group, h5py.Group) or "samples_written" not in f["ranks"]:
        return {}
    written = integers(f["ranks"]["samples_written"][()], path, "/ranks/samples_written")
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
        data = numeric(ds, path, f"/samples/{name}")
        keep = np.arange(data.shape[1])[None, :] < np.clip(written, 0, data.shape[1])[:, None]
        out[name] = np.where(keep & np.isfinite(data), data, np.nan)
    return out


def read_profile(f: h5py.File, path: str, nranks: int,
                  warnings: List[str]) -> Dict[str, np.ndarray]:
    """The optional /profile group (--profile-layers): layer names and kinds, the forward and
    backward times (inf read as NaN) and, when it is a count, the group's first_iteration. Empty without it, or, with a warning, when its datasets do
    not fit together."""
    group = f.get("profile")
    if not isinstance(group, h5py.Group):
        return {}
    sets = {n: group.get(n) for n in PROFILE_NAMES + PROFILE_TIMES}
    names_ok = all(isinstance(sets[n], h5py.Dataset) and sets[n].ndim == 1 and
                   sets[n].dtype.kind in "SOU" for n in PROFILE_NAMES)
    nlayers = sets["layer"].shape[0] if names_ok else -1
    times_ok = all(isinstance(sets[n], h5py.Dataset) and sets[n].dtype.kind in "iuf" and
                   sets[n].ndim == 3 and sets[n].shape[0] == nranks and
                   sets[n].shape[2] == nlayers and sets[n].shape == sets["forward"].shape
                   for n in PROFILE_TIMES)
    if not (names_ok and times_ok and sets["kind"].shape == (nlayers,)):
        shapes = {n: getattr(ds, "shape", None) for n, ds in sets.items()}
        warnings.append(f"/profile holds {shapes}, expected layer and kind (nlayers,) text, "
                        f"forward and backward ({nranks}, N, nlayers) numbers: layer profile "
                        f"ignored")
        return {}
    out = {n: np.array([str(decode(v)) for v in sets[n][()]], dtype=object)
           for n in PROFILE_NAMES}
    for n in PROFILE_TIMES:
        data = sets[n][()].astype(np.float64)
        out[n] = np.where(np.isfinite(data), data, np.nan)
    first = decode(group.attrs.get("first_iteration"))
    if isinstance(first, int) and not isinstance(first, bool) and first >= 0:
        out["first_iteration"] = np.array(first)
    out.update(read_roofline(group, nranks, nlayers, warnings))
    return out


def read_roofline(group: h5py.Group, nranks: int, nlayers: int,
                  warnings: List[str]) -> Dict[str, np.ndarray]:
    """/profile's roofline, when the file has one (newer dtbench): the amounts (nranks, nlayers)
    and peaks (nranks,) as float64 (inf read as NaN), the methods as object arrays of str. Empty
    in older files, or, with a warning, when its datasets do not fit together."""
    names = PROFILE_AMOUNTS + PROFILE_PEAKS + PROFILE_PEAK_METHODS
    sets = {n: group.get(n) for n in names}
    if all(ds is None for ds in sets.values()):
        return {}

    def fits(n: str, shape, kinds: str) -> bool:
        ds = sets[n]
        return isinstance(ds, h5py.Dataset) and ds.shape == shape and ds.dtype.kind in kinds
    if not (all(fits(n, (nranks, nlayers), "iuf") for n in PROFILE_AMOUNTS) and
            all(fits(n, (nranks,), "iuf") for n in PROFILE_PEAKS) and
            all(fits(n, (nranks,), "SOU") for n in PROFILE_PEAK_METHODS)):
        shapes = {n: getattr(ds, "shape", None) for n, ds in sets.items()}
        warnings.append(f"/profile's roofline holds {shapes}, expected amounts "
                        f"({nranks}, {nlayers}), peaks and methods ({nranks},): roofline ignored")
        return {}
    out: Dict[str, np.ndarray] = {}
    for n in PROFILE_AMOUNTS + PROFILE_PEAKS:
        data = sets[n][()].astype(np.float64)
        out[n] = np.where(np.isfinite(data), data, np.nan)
    for n in PROFILE_PEAK_METHODS:
        out[n] = np.array([str(decode(v)) for v in sets[n][()]], dtype=object)
    return out
