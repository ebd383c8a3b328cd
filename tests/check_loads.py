"""check_loads.py - where a run's batch loading went, from its result file (rank 0).

Usage: check_loads.py FILE [--prefetch] [--min-load S] [--late most|few]

  always       every iteration's load_wait lies inside its data phase (data >= load_wait);
  --prefetch   the run prefetched (root attribute prefetch "on") with a loader of 1 or more
               threads (loader_threads); without it: prefetch "off", no loader threads, and the
               batch was made inside data (load_wait == load);
  --min-load S every batch took at least S to make (load >= S: the data source's delay);
  --late most  the loader limited the step: at least half the measured iterations waited for
               their batch (load_wait > 0; on a loaded machine a step may now and then outlast
               the loader) and the median iteration took at least half a batch's making;
  --late few   the loader kept up: at least half the measured iterations did not wait
               (load_wait == 0: made and uploaded during the previous step), and in those the
               median data phase is under a tenth of the median total.
Exit status 0 when all hold, 1 with one line per breach.
"""
import argparse
import sys

import h5py
import numpy as np


def breaches(f, a):
    bad = []
    it, w = f["iterations"], int(f.attrs["warmup"])
    load, wait, data, total = (it[k][0] for k in ("load", "load_wait", "data", "total"))
    prefetch, threads = f.attrs["prefetch"], int(f.attrs["loader_threads"])
    if (data < wait - 1e-9).any():
        bad.append(f"load_wait beyond the data phase: {wait[data < wait - 1e-9]} s")
    if a.prefetch and (prefetch != "on" or threads < 1):
        bad.append(f"prefetch {prefetch} with {threads} loader threads, expected on and >= 1")
    if not a.prefetch:
        if prefetch != "off" or threads != 0:
            bad.append(f"prefetch {prefetch} with {threads} loader threads, expected off and 0")
        if (wait != load).any():
            bad.append("without prefetch load_wait differs from load")
    if a.min_load is not None and (load < a.min_load).any():
        bad.append(f"batches made in {load.min():.4f} s, below the source's {a.min_load} s")
    m_wait, m_data, m_total = wait[w:], data[w:], total[w:]
    if a.late == "most":
        if (m_wait > 0).sum() * 2 < m_wait.size:
            bad.append(f"iterations {list(np.nonzero(m_wait <= 0)[0] + w)} did not wait for a "
                       "loader slower than the step")
        if np.median(m_total) < 0.5 * np.median(load):
            bad.append(f"median iteration {np.median(m_total):.4f} s, under half a batch's "
                       f"making ({np.median(load):.4f} s): the loader did not limit it")
    if a.late == "few":
        kept = m_wait == 0
        if kept.sum() * 2 < kept.size:
            bad.append(f"only {kept.sum()} of {kept.size} batches made during the previous step")
        elif np.median(m_data[kept]) > 0.1 * np.median(m_total):
            bad.append(f"data {np.median(m_data[kept]):.5f} s of {np.median(m_total):.5f} s when "
                       "the batch was ready")
    print(f"{a.file}: prefetch {prefetch}, {threads} loader threads; load median "
          f"{1e3 * np.median(load):.2f} ms, waited in {int((m_wait > 0).sum())} of {m_wait.size} "
          f"measured iterations; data {1e3 * np.median(m_data):.3f} ms, exchange "
          f"{1e3 * np.median(it['exchange'][0, w:]):.3f} ms of {1e3 * np.median(m_total):.3f} ms")
    return bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("file")
    p.add_argument("--prefetch", action="store_true")
    p.add_argument("--min-load", type=float)
    p.add_argument("--late", choices=["most", "few"])
    a = p.parse_args()
    try:
        with h5py.File(a.file, "r") as f:
            bad = breaches(f, a)
    except (OSError, KeyError) as e:
        print(f"FAIL: {a.file}: {e}")
        return 1
    for b in bad:
        print(f"FAIL: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
