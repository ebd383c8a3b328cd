# test_reliability_data.sh - bad data files: every one is refused with one line naming
# the file, exit status 2, no output file left, and without reading more than its header allows.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
O="--output bad.h5 --iters 1 --warmup 0 --batch 4"

# make_data idx FILE MAGIC DIM... : an IDX header (big-endian) followed by the data bytes it
# announces (zeros), gzip'd.
# t10k DIR : a valid test split of 10 samples.
t10k() {
    make_data idx "$1/t10k-images-idx3-ubyte.gz" 0x803 10 28 28
    make_data idx "$1/t10k-labels-idx1-ubyte.gz" 0x801 10
}

# An IDX file with zero samples: was a division by zero (SIGFPE) and a left-over file.
mkdir -p empty
t10k empty
make_data idx empty/train-images-idx3-ubyte.gz 0x803 0 28 28
make_data idx empty/train-labels-idx1-ubyte.gz 0x801 0
expect_bad 0 "train-images-idx3-ubyte.gz: the IDX header announces 0 samples" --dataset mnist --data-dir empty $O
expect_bad 2 "train-images-idx3-ubyte.gz: the IDX header announces 0 samples" --dataset mnist --data-dir empty $O

# A damaged gzip stream: zlib's own message, whole (gzerror was read after gzclose: garbage).
mkdir -p damaged
t10k damaged
make_data idx damaged/train-images-idx3-ubyte.gz 0x803 100 28 28
cp damaged/train-images-idx3-ubyte.gz damaged/ok.gz
make_data flip damaged/train-images-idx3-ubyte.gz -8 # the CRC-32 of the gzip trailer
make_data idx damaged/train-labels-idx1-ubyte.gz 0x801 100
expect_bad 0 "cannot read .*train-images-idx3-ubyte.gz: incorrect data check$" --dataset mnist --data-dir damaged $O

# A small compressed file that expands far beyond what its header announces (64 MiB of zeros
# after 10 images): refused after the announced bytes, not read whole first.
mkdir -p bomb
t10k bomb
make_data idx bomb/train-images-idx3-ubyte.gz 0x803 10 28 28 --extra-mib 64 --level 1
make_data idx bomb/train-labels-idx1-ubyte.gz 0x801 10
expect_bad 0 "train-images-idx3-ubyte.gz: longer than its header says" --dataset mnist --data-dir bomb $O

# A header announcing more than the machine can hold: refused before any allocation.
mkdir -p huge
t10k huge
make_data idx huge/train-images-idx3-ubyte.gz 0x803 0xFFFFFFFF 4096 4096 --data-bytes 0
make_data idx huge/train-labels-idx1-ubyte.gz 0x801 10
expect_bad 0 "train-images-idx3-ubyte.gz: its header announces .* GB, more than half" --dataset mnist --data-dir huge $O

# Fewer data bytes than the header announces.
mkdir -p short
t10k short
make_data idx short/train-images-idx3-ubyte.gz 0x803 10 28 28 --data-bytes 100
make_data idx short/train-labels-idx1-ubyte.gz 0x801 10
expect_bad 0 "train-images-idx3-ubyte.gz: 100 data bytes where the IDX header announces 7840" --dataset mnist --data-dir short $O

# CIFAR-10: a batch (gzip-compressed, which the reader accepts) of more records than any real
# one holds is refused without being read whole; an empty one is refused.
mkdir -p cifar_big cifar_empty
make_data zeros cifar_big/data_batch_1.bin $((100001 * 3073)) --level 1 # 100001 records
: >cifar_big/test_batch.bin
expect_bad 0 "data_batch_1.bin: more than 100000 records" --dataset cifar10 --data-dir cifar_big $O
: >cifar_empty/data_batch_1.bin
: >cifar_empty/test_batch.bin
expect_bad 0 "data_batch_1.bin: no records" --dataset cifar10 --data-dir cifar_empty $O
