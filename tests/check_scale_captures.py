"""check_scale_captures.py COUNT H5: an fp16 run on the counting fake device whose loss scale was
halved by a forced overflow (tests/test_count_device.sh) captured its graphs in iterations 1 and 2
only: one graph per slot and part serves both scales (the scale is read from device memory), so
none is captured again in a timed step. One line; status 1 otherwise."""

import sys

import h5py


def main(count_path, h5_path):
    caps = {}
    with open(count_path) as f:
        for line in f:
            if line.startswith("count "):
                kv = dict(t.split("=", 1) for t in line.split()[1:])
                caps[int(kv["iter"])] = int(kv["captures"])
    with h5py.File(h5_path, "r") as f:
        scales = list(f["iterations/loss_scale"][0])
    per_iter = [caps[i] for i in sorted(caps) if i >= 0]  # -1: the set-up
    print(f"loss scales {scales}, captures per iteration {per_iter}")
    return 0 if len(set(scales)) == 2 and per_iter == [0, 2, 2, 0, 0, 0] else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
