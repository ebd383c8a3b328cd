"""check_grow_eoa.py FILE: a growing results file killed mid-run (docs/hdf5-layout.md) read as a
run SIGKILLed inside any one of its extensions could have left it.

HDF5 flushes the superblock, which records the file's end of allocation (EOA), after every other
piece of metadata. A run killed inside an extension's H5Fflush can therefore leave on disk a
chunk index that names space past the EOA on disk, which HDF5 then refuses to read ("addr
overflow"). For every extension of FILE, a copy whose superblock EOA is put back to where it
stood before that extension (the lowest address of the chunks it allocated) must still read
every iteration before it: what the run had completed by then. The end put back is never below
the end of the metadata made with the file (created_end): that end was on disk before any
extension. Exit 1 naming the first extensions that fail.

check_grow_eoa.py FILE --cut-last OUT: writes OUT, FILE as a kill inside its last extension
could have left it (/ranks/completed at the extension's first iteration, the superblock's end of
allocation before it), for dtbench --finalize."""
import re
import struct
import subprocess
import sys
import tempfile

import h5py
import numpy as np


def created_end(path, k):
    """The end of the metadata a reader of /iterations needs, all of it made when the file was
    created: the object headers (their continuation chunks too, from h5debug) of the root group,
    /iterations and its datasets, and each dataset's chunk index node (k entries a side). A kill
    inside the first extension finds the end of allocation beyond it however HDF5's small-data
    aggregator placed that extension's first chunks: in the room left over in a block it reserved
    before this metadata was made (a file with 26 /iterations fields: the first chunk of the first
    extension lies below the last dataset's attribute continuation)."""
    end = 0
    with h5py.File(path, "r") as f:
        objs = [f, f["iterations"]] + list(f["iterations"].values())
        addrs = [h5py.h5o.get_info(o.id).addr for o in objs]
    for addr in addrs:
        out = subprocess.run(["h5debug", path, str(addr)], capture_output=True, text=True).stdout
        for a, n in re.findall(r"Chunk \d+\.\.\.\s*Address:\s*(\d+)\s*Size in bytes:\s*(\d+)", out):
            end = max(end, int(a) + int(n))
        for a in re.findall(r"Index address:\s*(\d+)", out):
            # a v1 B-tree node of chunks of a 2-D dataset: 24 bytes, 2k+1 keys of 32, 2k children
            end = max(end, int(a) + 24 + (2 * k + 1) * 32 + 2 * k * 8)
    return end

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
k = struct.unpack("<H", raw[24:26])[0] if version == 1 else 32  # the chunk index's node K
if eoa > len(raw):  # below it: killed inside an extension, its new chunks past the EOA
    sys.exit(f"check_grow_eoa.py: {path}: EOA {eoa} at offset {where} is beyond the file's "
             f"size {len(raw)}")
if sys.argv[2:3] == ["--cut-last"]:
    out, last = sys.argv[3], max(starts)
    # A kill inside an extension's flush can leave chunks past the superblock's EOA; opened for
    # writing, HDF5 would cut the file back to that EOA on close. The whole file allocated first:
    # the write then neither cuts nor grows it.
    whole = bytearray(raw)
    whole[where:where + 8] = struct.pack("<Q", len(raw))
    open(out, "wb").write(whole)
    with h5py.File(out, "r+") as f:  # raw data in place: no allocation, the same layout
        f["ranks/completed"][:] = np.minimum(f["ranks/completed"][:], last)
    cut = bytearray(open(out, "rb").read())
    if len(cut) != len(raw):
        sys.exit(f"check_grow_eoa.py: {out}: setting /ranks/completed changed its size")
    cut[where:where + 8] = struct.pack("<Q", starts[last])
    open(out, "wb").write(cut)
    sys.exit(0)
bad = []
made = created_end(path, k)
for col in sorted(starts)[1:]:
    cut = bytearray(raw)
    cut[where:where + 8] = struct.pack("<Q", max(starts[col], made))
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
