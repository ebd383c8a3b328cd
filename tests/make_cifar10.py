"""make_cifar10.py - writes a small data set in CIFAR-10's binary format, for the tests.

Usage: make_cifar10.py DIR TRAIN_RECORDS TEST_RECORDS [BATCHES]
Writes DIR/data_batch_1.bin .. data_batch_BATCHES.bin (TRAIN_RECORDS records in all, split
evenly) and DIR/test_batch.bin. Each record is 1 label byte (0..9) then 3072 pixel bytes: the
red, green and blue 32x32 planes, row-major (the layout of the real data set). Images are
seeded noise around a colour that depends on the label, so a network can learn them.
"""
import sys

import numpy as np


def records(n, rng):
    labels = np.arange(n) % 10
    rng.shuffle(labels)
    base = (np.arange(10)[:, None] * np.array([23, 71, 113])[None, :]) % 200 + 28  # [10, 3]
    noise = rng.integers(-28, 28, size=(n, 3, 32, 32))
    pixels = np.clip(base[labels][:, :, None, None] + noise, 0, 255).astype(np.uint8)
    out = np.empty((n, 1 + 3072), dtype=np.uint8)
    out[:, 0] = labels
    out[:, 1:] = pixels.reshape(n, 3072)
    return out


def main():
    folder, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batches = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    rng = np.random.default_rng(10)
    train = records(ntrain, rng)
    for b, part in enumerate(np.array_split(train, batches)):
        part.tofile(f"{folder}/data_batch_{b + 1}.bin")
    records(ntest, rng).tofile(f"{folder}/test_batch.bin")


if __name__ == "__main__":
    main()
