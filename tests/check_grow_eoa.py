"""check_grow_eoa.py FILE: a growing results file killed mid-run (docs/hdf5-layout.md) read as a
run SIGKILLed inside any one of its extensions could have left it.

HDF5 flushes the superblock, which records the file's end of allocation (EOA), after every other
piece of metadata. A run killed inside an extension's H5Fflush can therefore leave on disk a
chunk index that names space past the EOA on disk, which HDF5 then refuses to read ("addr
overflow"). For every extension of FILE, a copy whose superblock EOA is put back to where it
stood before that extension (the lowest address of the chunks it allocated) must still read
every iteration before it: what the run had completed by then. Exit 1 naming the first
extensions that fail.

check_grow_eoa.py FILE --cut-last OUT: writes OUT, FILE as a kill inside its last extension
could have left it (/ranks/completed at the extension's first iteration, the superblock's end of
allocation before it), for dtbench --finalize."""
import struct
import sys
import tempfile

import h5py
import numpy as np

path = sys.argv[1]
with h5py.File(path, "r") as f:
    sets = list(f["iterations"].values())
    step = sets[0].chunks[1]
    starts = {}  # first column of a chunk -> lowest address of the chunks of that extension
    for d in sets:
        for i in range(d.id.get_num_chunks()):
            c = d.id.get_chunk_info(i)
            col = c.chunk_offset[1]
            starts[col] = min(starts.get(col, c.byte_offset), c.byte_offset)
raw = open(path, "rb").read()
version = raw[8]
if raw[:8] != b"\x89HDF\r\n\x1a\n" or version not in (0, 1):
    sys.exit(f"check_grow_eoa.py: {path}: not a superblock of version 0 or 1 at offset 0")
where = 40 if version == 0 else 44  # version 1 adds the chunk B-tree's K and 2 reserved bytes
eoa = struct.unpack("<Q", raw[where:where + 8])[0]
if eoa > len(raw):  # below it: killed inside an extension, its new chunks past the EOA
    sys.exit(f"check_grow_eoa.py: {path}: EOA {eoa} at offset {where} is beyond the file's "
             f"size {len(raw)}")
if sys.argv[2:3] == ["--cut-last"]:
    out, last = sys.argv[3], max(starts)
    open(out, "wb").write(raw)
    with h5py.File(out, "r+") as f:  # raw data in place: no allocation, the same layout
        f["ranks/completed"][:] = np.minimum(f["ranks/completed"][:], last)
    cut = bytearray(open(out, "rb").read())
    if len(cut) != len(raw):
        sys.exit(f"check_grow_eoa.py: {out}: setting /ranks/completed changed its size")
    cut[where:where + 8] = struct.pack("<Q", starts[last])
    open(out, "wb").write(cut)
    sys.exit(0)
bad = []
for col in sorted(starts)[1:]:
    cut = bytearray(raw)
    cut[where:where + 8] = struct.pack("<Q", starts[col])
    with tempfile.NamedTemporaryFile(suffix=".h5") as t:
        t.write(cut)
        t.flush()
        try:
            with h5py.File(t.name, "r") as g:
                for d in g["iterations"].values():
                    d[:, :col]
        except Exception as e:  # noqa: BLE001 - any failure to read is the finding
            bad.append(f"killed inside the extension at iteration {col}: {e}")
if bad:
    print(f"FAIL: {path}: {len(bad)} of {len(starts) - 1} extensions leave completed "
          f"iterations unreadable; " + "; ".join(bad[:2]))
    sys.exit(1)
print(f"ok: {path}: superblock v{version}, {len(starts)} chunks of {step} iterations: killed "
      f"inside any of its {len(starts) - 1} extensions, every iteration before it reads")
