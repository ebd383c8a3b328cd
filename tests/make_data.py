"""make_data.py - data files for the shell tests: a small Fashion-MNIST, and IDX and CIFAR-10 files
made to be wrong, which dtbench's --data-dir readers must refuse (test_reliability_data.sh) or
stop reading (test_setup_stop.sh); llm.c token shards, good or made to be wrong
(test_token_data.sh). (make_cifar10.py makes a CIFAR-10 set of random images.)

  fmnist-subset SRC DST N        the first N training and test images of the Fashion-MNIST
                                 files in SRC, uncompressed, as IDX files in DST
  idx PATH MAGIC DIM... [--data-bytes B] [--extra-mib M] [--level L]
                                 a gzip'd IDX file: its header, then B zero bytes (by default the
                                 count the header announces), then M MiB more zeros
  flip PATH OFFSET               inverts the byte at OFFSET (from the end when negative)
  zeros PATH BYTES [--level L]   BYTES zero bytes, gzip'd
  tokens PATH [--text FILE | --count N --vocab V --seed S] [--magic M] [--version V]
         [--header-count C] [--extra-bytes B] [--token POS:VALUE]
                                 an llm.c token shard (--dataset tokens): the bytes of FILE as
                                 tokens, or N seeded tokens below V; the header's fields and the
                                 file's length set to be wrong on demand
"""
import array
import gzip
import os
import random
import struct
import sys

from checkutil import command, main, parser

MIB = 1 << 20


def fmnist_subset(a):
    """For the train and t10k splits: the images' and labels' header and first N items, the
    header's count set to N, uncompressed in DST (made if need be)."""
    os.makedirs(a.dst, exist_ok=True)
    for split in ("train", "t10k"):
        for kind, head, size in (("images-idx3", 16, 784), ("labels-idx1", 8, 1)):
            base = f"{split}-{kind}-ubyte"
            with gzip.open(f"{a.src}/{base}.gz") as f:
                data = f.read(head + a.n * size)
            with open(f"{a.dst}/{base}", "wb") as f:  # the header with the count set to n
                f.write(data[:4] + a.n.to_bytes(4, "big") + data[8:head] + data[head:])


def write_zeros(f, n):
    """n zero bytes, a MiB at a time (a data set of 784 MB is never held whole)."""
    while n > 0:
        f.write(bytes(min(n, MIB)))
        n -= MIB


def idx(a):
    """MAGIC and every DIM as big-endian 32-bit words, then the data: B zero bytes (default: the
    product of the DIMs, what the header announces), then M MiB of zeros beyond it; gzip level
    L (default 9, gzip's)."""
    count = 1
    for d in a.dim:
        count *= d
    with gzip.open(a.path, "wb", compresslevel=a.level) as f:
        f.write(struct.pack(">I", a.magic) + b"".join(struct.pack(">I", d) for d in a.dim))
        write_zeros(f, count if a.data_bytes is None else a.data_bytes)
        write_zeros(f, a.extra_mib * MIB)


def flip(a):
    """The byte at OFFSET XOR 0xFF (e.g. -8: the CRC-32 of a gzip trailer)."""
    with open(a.path, "rb") as f:
        b = bytearray(f.read())
    b[a.offset] ^= 0xFF
    with open(a.path, "wb") as f:
        f.write(b)


def zeros(a):
    """BYTES zero bytes through gzip at level L (default 9)."""
    with gzip.open(a.path, "wb", compresslevel=a.level) as f:
        write_zeros(f, a.bytes)


def tokens(a):
    """An llm.c token shard: 256 little-endian int32 (magic, version, token count, zeros), then
    the tokens as little-endian uint16: the bytes of --text FILE, or --count tokens drawn below
    --vocab from --seed. --header-count C announces C tokens instead, --extra-bytes B appends B
    zero bytes, --token POS:VALUE sets one token (a value beyond the vocabulary)."""
    if a.text:
        with open(a.text, "rb") as f:
            toks = array.array("H", list(f.read()))
    else:
        rng = random.Random(a.seed)
        toks = array.array("H", (rng.randrange(a.vocab) for _ in range(a.count)))
    for spec in a.token:
        pos, value = (int(x) for x in spec.split(":"))
        toks[pos] = value
    if sys.byteorder != "little":
        toks.byteswap()
    count = len(toks) if a.header_count is None else a.header_count
    head = struct.pack("<256i", a.magic, a.version, count, *([0] * 253))
    with open(a.path, "wb") as f:
        f.write(head + toks.tobytes() + bytes(a.extra_bytes))


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    word = {"type": lambda s: int(s, 0)}  # 0x803 or 2051
    level = ("--level", {"type": int, "default": 9, "help": "gzip's compression level"})
    command(sub, fmnist_subset, ("src",), ("dst",), ("n", {"type": int}))
    command(sub, idx, ("path",), ("magic", word), ("dim", {**word, "nargs": "+"}),
            ("--data-bytes", {"type": int}), ("--extra-mib", {"type": int, "default": 0}), level)
    command(sub, flip, ("path",), ("offset", {"type": int}))
    command(sub, zeros, ("path",), ("bytes", {"type": int}), level)
    command(sub, tokens, ("path",), ("--text",), ("--count", {"type": int, "default": 0}),
            ("--vocab", {"type": int, "default": 50257}), ("--seed", {"type": int, "default": 1}),
            ("--magic", {"type": int, "default": 20240520}),
            ("--version", {"type": int, "default": 1}), ("--header-count", {"type": int}),
            ("--extra-bytes", {"type": int, "default": 0}),
            ("--token", {"action": "append", "default": []}))
    main(ap)
