"""check_run.py - how a run ended, as its results file says it (docs/hdf5-layout.md): the root
attributes, /ranks and the stored configuration. Exit 0 when the check holds, 1 with one line.

  marks FILE [CONDITION...]   every condition given holds (see `check_run.py marks --help`):
                              attributes, /ranks columns, config_json, stop detail and latency,
                              completed iterations intact, the last evaluated accuracy
  duration FILE [--lockstep]  stopped by --duration: every worker part-way, the last iteration
                              begun at about 2 s of the common clock
  tag FILE BYTES              the --tag BYTES stored whole: attribute, /config, config_json
  write-error FILE --rank R --kept N --errno E
                              a write error injected on rank R: the file closed as write_error
                              within seconds, R keeping its first N iterations and the others as
                              many or more, each counting what it ran past them
"""
import json
import operator
import os
import re

import numpy as np

from checkutil import command, die, expect, h5, main, parser, text

OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt,
       ">=": operator.ge}


def same(got, want):
    """An attribute or column value against a command-line word: text as text, numbers as
    numbers."""
    if isinstance(got, (bytes, str, np.bytes_, np.str_)):
        return text(got) == want
    return float(got) == float(want)


def split(spec, ops="="):
    m = re.fullmatch(r"([A-Za-z0-9_]+)(<=|>=|=|<|>)(.*)", spec)
    if not m or m.group(2) not in ops:
        die(f"bad condition {spec!r}: expected NAME{'|'.join(ops)}VALUE")
    return m.groups()


def column_holds(f, spec):
    """NAME=V: every rank's /ranks/NAME is V; NAME=V0,V1,...: rank by rank; NAME=@OTHER: equal to
    /ranks/OTHER; NAME<V, <=, >, >=: on every rank."""
    name, op, want = split(spec, OPS)
    col = f["ranks"][name][:]
    if want.startswith("@"):
        return bool((col == f["ranks"][want[1:]][:]).all()), col
    if op == "=" and "," in want:
        words = want.split(",")
        return len(col) == len(words) and all(same(c, w) for c, w in zip(col, words)), col
    return all(OPS[op](c, float(want)) if op != "=" else same(c, want) for c in col), col


def marks(a):
    """Every condition given holds for FILE. Prints what held."""
    with h5(a.file) as f:
        at, held = f.attrs, []
        for spec in a.attr:
            name, _, want = split(spec)
            expect(name in at and same(at[name], want),
                   f"{a.file}: {name} is {at.get(name)}, expected {want!r}: {dict(at)}")
            held.append(spec)
        for name in a.has:
            expect(name in at, f"{a.file}: no root attribute {name}: {dict(at)}")
            held.append(f"{name} present")
        for name in a.lacks:
            expect(name not in at, f"{a.file}: root attribute {name} present: {dict(at)}")
            held.append(f"no {name}")
        for name in a.no_group:
            expect(name not in f, f"{a.file}: /{name} present")
            held.append(f"no /{name}")
        detail = text(at.get("stop_detail", ""))
        if a.detail_starts is not None:
            expect(detail.startswith(a.detail_starts),
                   f"{a.file}: stop_detail {detail!r} does not start with {a.detail_starts!r}")
        for part in a.detail_has:
            expect(part in detail, f"{a.file}: stop_detail {detail!r} does not name {part!r}")
        for spec in a.ranks:
            ok, col = column_holds(f, spec)
            expect(ok, f"{a.file}: /ranks {spec} does not hold: {col.tolist()}")
            held.append(f"{spec} ({col.tolist()})")
        if a.config:
            cfg = json.loads(text(at["config_json"]))
            for spec in a.config:
                key, _, want = split(spec)
                expect(key in cfg and same(cfg[key], want),
                       f"{a.file}: the stored configuration says {key} {cfg.get(key)!r}, "
                       f"not {want!r}")
                held.append(f"config {spec}")
        iterations_held(f, a, held)
        if a.max_latency is not None:
            latency = float(at["stop_latency_s"])
            expect(0 < latency < a.max_latency,
                   f"{a.file}: file closed {latency:.3f} s after the stop "
                   f"(limit {a.max_latency} s)")
            held.append(f"closed {latency:.3f} s after the stop")
        if a.superblock is not None:
            v = f.id.get_create_plist().get_version()[0]
            expect(v == a.superblock, f"{a.file}: superblock version {v}, expected {a.superblock}")
            held.append(f"superblock version {v}")
        if a.min_accuracy is not None:
            acc, its = f["eval/accuracy"][:], f["eval/iteration"][:]
            ok = ~np.isnan(acc)
            expect(ok.any() and acc[ok][-1] >= a.min_accuracy,
                   f"{a.file}: accuracy {acc[ok]}, expected the last >= {a.min_accuracy}")
            held.append(f"test accuracy {acc[ok][-1]:.3f} after {int(its[ok][-1])} iterations")
    print(f"ok: {a.file}: " + "; ".join(held + ([detail] if detail else [])))


def iterations_held(f, a, held):
    """--intact, --whole, --to-extent: what /iterations/total holds against /ranks/completed."""
    if not (a.intact or a.whole or a.to_extent):
        return
    done, total = f["ranks/completed"][:], f["iterations/total"]
    if a.to_extent:
        expect((done == total.shape[1]).all(),
               f"{a.file}: completed {done.tolist()}, /iterations extent {total.shape[1]}")
        held.append(f"completed up to the extent {total.shape[1]}")
    v = total[:]
    if a.whole:
        expect(not np.isnan(v).any(), f"{a.file}: /iterations/total has missing values")
    for r, n in enumerate(done):
        expect(not np.isnan(v[r, :n]).any(),
               f"{a.file}: rank {r}: iterations missing before its completed {n}")
    held.append("completed iterations intact")


def duration(a):
    """Stopped by --duration 2: finished with stop_reason duration, every worker part-way
    (0 < completed < iters_total; --lockstep: all after the same iteration), every rank's status 2,
    and the last iteration begun between 1.9 and 10 s (about 2 s: it is the one that saw the
    time)."""
    with h5(a.file) as f:
        at = f.attrs
        expect(at["finished"] == 1 and at["stop_reason"] == "duration",
               f"{a.file}: not stopped by --duration: {dict(at)}")
        workers = f["ranks/role"][:] == 0
        done = f["ranks/completed"][:][workers]
        expect((done > 0).all() and (done < at["iters_total"]).all(),
               f"{a.file}: workers completed {done.tolist()} of {at['iters_total']}")
        if a.lockstep:
            expect(len(set(done)) == 1, f"{a.file}: workers stopped apart: {done.tolist()}")
        start = f["iterations/start"][:][workers]
        last = max(start[i, done[i] - 1] for i in range(len(done)))
        expect(1.9 <= last < 10, f"{a.file}: the last iteration began at {last:.3f} s")
        expect((f["ranks/status"][:] == 2).all(), f"{a.file}: status {f['ranks/status'][:]}")
    print(f"ok: {a.file}: stopped after {done.tolist()} iterations, last began at {last:.2f} s")


def raw(v):
    """The bytes stored (h5py escapes what is not UTF-8)."""
    return v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)


def tag(a):
    """The root attribute tag, /config's tag and config_json's are the bytes given, whole."""
    want = os.fsencode(a.bytes)  # the argument's bytes, as the shell gave them
    with h5(a.file) as f:
        got = raw(f.attrs["tag"])
        expect(got == want, f"{a.file}: tag of {len(got)} bytes stored, {len(want)} given")
        expect(raw(f["config"].attrs["tag"]) == want, f"{a.file}: /config tag differs")
        cfg = json.loads(raw(f.attrs["config_json"]).decode("utf-8", "surrogateescape"))
        expect(cfg["tag"].encode("utf-8", "surrogateescape") == want,
               f"{a.file}: config_json tag differs")
    print(f"ok: {a.file}: the {len(want)}-byte tag stored whole (attribute, /config, config_json)")


def write_error(a):
    """A write error injected on rank R at the block after its first N iterations: the file
    finished as write_error naming the file and errno E; R kept N iterations, every other rank N
    or more and fewer than iters_total; each rank's iterations_done counts what it ran (R past
    its N, within one of the others); every kept iteration written; closed 0-5 s after the
    error."""
    with h5(a.file) as f:
        at, r = f.attrs, a.rank
        expect(at["finished"] == 1 and at["stop_reason"] == "write_error",
               f"{a.file}: not closed as write_error: {dict(at)}")
        detail = text(at["stop_detail"])
        expect(f"errno {a.errno}" in detail and a.file in detail,
               f"{a.file}: stop_detail {detail!r} names not the file and errno {a.errno}")
        done, ran = f["ranks/completed"][:], f["ranks/iterations_done"][:]
        others = np.arange(len(done)) != r
        expect(done[r] == a.kept and (done[others] >= a.kept).all()
               and (done[others] < at["iters_total"]).all(), f"{a.file}: completed {done}")
        # the iterations rank R completed after its failed write are counted, not kept
        expect((ran[others] == done[others]).all() and ran[r] > done[r]
               and (np.abs(ran[others].astype(int) - int(ran[r])) <= 1).all(),
               f"{a.file}: iterations_done {ran}, completed {done}")
        total = f["iterations/total"][:]
        for q, d in enumerate(done):
            expect(not np.isnan(total[q, :d]).any(), f"{a.file}: rank {q}: missing before {d}")
        latency = at["stop_latency_s"]  # from the error to the file's last write
        expect(0 < latency < 5, f"{a.file}: closed {latency} s after the error")
    print(f"ok: write error on rank {r}: file closed {latency:.3f} s after it, kept "
          f"{done.tolist()} of {ran.tolist()} completed, blocks before intact")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    many = {"action": "append", "default": []}
    command(sub, marks, ("file",),
            ("--attr", {**many, "metavar": "NAME=VALUE", "help": "a root attribute's value"}),
            ("--has", {**many, "metavar": "NAME", "help": "a root attribute present"}),
            ("--lacks", {**many, "metavar": "NAME", "help": "a root attribute absent"}),
            ("--no-group", {**many, "metavar": "NAME", "help": "no object /NAME"}),
            ("--ranks", {**many, "metavar": "NAME=V|NAME=V0,V1..|NAME=@OTHER|NAME<V...",
                         "help": column_holds.__doc__}),
            ("--config", {**many, "metavar": "KEY=VALUE", "help": "config_json's KEY"}),
            ("--detail-starts", {"metavar": "TEXT", "help": "stop_detail starts with TEXT"}),
            ("--detail-has", {**many, "metavar": "TEXT", "help": "stop_detail holds TEXT"}),
            ("--intact", {"action": "store_true", "help": "every rank's completed "
                                                        "iterations of /iterations/total written"}),
            ("--whole", {"action": "store_true", "help": "/iterations/total has no missing value"}),
            ("--to-extent", {"action": "store_true",
                             "help": "every rank completed the extent of /iterations"}),
            ("--max-latency", {"type": float, "help": "0 < stop_latency_s < this"}),
            ("--superblock", {"type": int, "help": "the HDF5 superblock's version"}),
            ("--min-accuracy", {"type": float, "help": "the last evaluated accuracy"}))
    command(sub, duration, ("file",), ("--lockstep", {"action": "store_true"}))
    command(sub, tag, ("file",), ("bytes",))
    command(sub, write_error, ("file",), ("--rank", {"type": int, "required": True}),
            ("--kept", {"type": int, "required": True}),
            ("--errno", {"type": int, "required": True}))
    main(ap)
