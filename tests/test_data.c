/* test_data.c - the data sets (src/data/data.c): sharding (the slices of 2 and 4 ranks put together
 * are the batch of one process); the CIFAR-10 reader on small files written here in the binary
 * format (two training batches and a test batch read back record by record; a truncated file, a bad
 * label and missing files refused); synthetic token sequences whose labels are the next tokens;
 * reading that never waits unbounded: a stop asked for during the read ends it within a piece of
 * 4 MiB, a FIFO is refused without waiting for a writer; the batch loader's threads
 * (src/data/loader.c) make exactly dataset_train_batch's batches. */
#include "data.h"
#include "harness.h"
#include "loader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A synthetic data set of 1 x h x w images and 10 classes; 0 (a failed check) when it fails. */
static int open_synthetic(Dataset *ds, int h, int w, uint64_t seed) {
    char err[256];
    int rc = dataset_open(ds, "synthetic", "", 1, h, w, 10, seed, err, sizeof err);
    if (rc != 0) EXPECT(0, "synthetic data set: %s", err);
    return rc == 0;
}

static void test_sharding(void) {
    Dataset ds;
    if (!open_synthetic(&ds, 28, 28, 5)) return;
    const int B = 16;
    float whole[16 * 784], part[16 * 784];
    int32_t wl[16], pl[16];
    for (int64_t it = 0; it < 40; it += 13) {
        dataset_train_batch(&ds, it, B, 0, 1, whole, wl);
        for (int P = 2; P <= 4; P *= 2)
            for (int r = 0; r < P; r++) {
                dataset_train_batch(&ds, it, B, r, P, part, pl);
                size_t off = (size_t)r * (B / P);
                EXPECT(!memcmp(part, whole + off * 784, (size_t)(B / P) * 784 * sizeof(float)) &&
                           !memcmp(pl, wl + off, (size_t)(B / P) * sizeof(int32_t)),
                       "iteration %lld rank %d of %d: slice equals the single-process batch's",
                       (long long)it, r, P);
            }
    }
    printf("data sharding: 1, 2 and 4 ranks see the same global batches\n");
    dataset_close(&ds);
}

/* The loader, with 1 to 4 threads, 2 slots in turn and 2 shards, makes the batches
 * dataset_train_batch makes: the same samples in the same places, the batch cut into parts that
 * do not divide it evenly, across the synthetic pool's wrap (its "epochs" of 256 samples). */
static void test_loader(void) {
    Dataset ds;
    if (!open_synthetic(&ds, 8, 8, 3)) return;
    enum { B = 14, P = 2, N = B / P, S = 64 };
    float want[N * S], got[2][N * S];
    int32_t wl[N], gl[2][N];
    for (int threads = 1; threads <= 4; threads++)
        for (int shard = 0; shard < P; shard++) {
            Loader *l = loader_create(&ds, B, shard, P, threads);
            int same = 1;
            loader_submit(l, 0, 0, got[0], gl[0]);
            for (int64_t it = 0; it < 60; it++) {
                const int s = (int)(it % 2);
                if (it + 1 < 60) loader_submit(l, 1 - s, it + 1, got[1 - s], gl[1 - s]);
                double made = -1.0;
                loader_wait(l, s, &made);
                dataset_train_batch(&ds, it, B, shard, P, want, wl);
                same &= !memcmp(got[s], want, sizeof want) && !memcmp(gl[s], wl, sizeof wl) &&
                        made >= 0.0;
                memset(got[s], 0, sizeof got[s]);
            }
            loader_free(l);
            EXPECT(same, "loader, %d threads, shard %d of %d: 60 batches = dataset_train_batch's",
                   threads, shard, P);
        }
    printf("batch loader: 1-4 threads make the driver's batches\n");
    dataset_close(&ds);
}

/* Pixel j of record r of a generated CIFAR-10 file, and its label. */
static uint8_t cifar_pixel(int r, int j) {
    return (uint8_t)((r * 37 + j * 11) % 251);
}

static void write_cifar(const char *path, int first, int n, int bad_label, int truncate) {
    FILE *f = fopen(path, "wb");
    for (int r = first; r < first + n; r++) {
        fputc(bad_label && r == first + 1 ? 10 : r % 10, f);
        for (int j = 0; j < 3072; j++)
            fputc(cifar_pixel(r, j), f);
    }
    if (truncate) fputc(7, f);
    fclose(f);
}

static void test_cifar10_reader(void) {
    char dir[] = "/tmp/dtbench-cifar.XXXXXX", path[256], err[512];
    if (!mkdtemp(dir)) {
        EXPECT(0, "mkdtemp of %s", dir);
        return;
    }
    snprintf(path, sizeof path, "%s/data_batch_1.bin", dir);
    write_cifar(path, 0, 5, 0, 0);
    snprintf(path, sizeof path, "%s/data_batch_2.bin", dir);
    write_cifar(path, 5, 3, 0, 0);
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    write_cifar(path, 100, 4, 0, 0);
    Dataset ds;
    int rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    EXPECT(rc == 0, "cifar10 reader: %s", err);
    if (rc == 0) {
        EXPECT(ds.ntrain == 8 && ds.ntest == 4 && ds.c == 3 && ds.h == 32 && ds.w == 32 &&
                   ds.classes == 10,
               "cifar10: %zu/%zu records [%d,%d,%d]", ds.ntrain, ds.ntest, ds.c, ds.h, ds.w);
        float x[4 * 3072];
        int32_t labels[4];
        dataset_test_batch(&ds, 0, 4, x, labels);
        int wrong = 0;
        for (int r = 0; r < 4; r++) {
            wrong += labels[r] != (100 + r) % 10;
            for (int j = 0; j < 3072; j++)
                wrong += fabsf(x[r * 3072 + j] - cifar_pixel(100 + r, j) / 255.0f) > 1e-7f;
        }
        /* training samples come shuffled: each must be one of the 8 records, label included */
        dataset_train_batch(&ds, 0, 4, 0, 1, x, labels);
        for (int i = 0; i < 4; i++) {
            int match = 0;
            for (int r = 0; r < 8 && !match; r++)
                match = labels[i] == r % 10 &&
                        fabsf(x[i * 3072 + 5] - cifar_pixel(r, 5) / 255.0f) < 1e-7f &&
                        fabsf(x[i * 3072 + 3071] - cifar_pixel(r, 3071) / 255.0f) < 1e-7f;
            wrong += !match;
        }
        printf("cifar10 reader: 2 training batches (8 records) and a test batch (4) read back, %d "
               "mismatches\n",
               wrong);
        EXPECT(wrong == 0, "cifar10 records read back");
        dataset_close(&ds);
    }
    snprintf(path, sizeof path, "%s/data_batch_2.bin", dir);
    write_cifar(path, 5, 3, 0, 1);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    printf("truncated batch: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "--data-dir") && strstr(err, "not a CIFAR-10 binary batch"),
           "truncated cifar file refused");
    write_cifar(path, 5, 3, 1, 0);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    printf("bad label: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "label 10 of record 1"), "label 10 refused");
    unlink(path);
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    unlink(path);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "no test_batch.bin"), "missing test_batch.bin: %s", err);
    snprintf(path, sizeof path, "%s/data_batch_1.bin", dir);
    unlink(path);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "no data_batch_1.bin"), "missing data_batch_1.bin: %s", err);
    rmdir(dir);

    /* token sequences: the labels are the inputs shifted by one position */
    dataset_open_tokens(&ds, 6, 50, 3);
    float t[2 * 6];
    int32_t next[2 * 6];
    dataset_train_batch(&ds, 3, 2, 0, 1, t, next);
    int shifted = ds.label_size == 6;
    for (int i = 0; i < 2; i++)
        for (int p = 0; p + 1 < 6; p++)
            shifted &= (int)t[i * 6 + p + 1] == next[i * 6 + p];
    for (int i = 0; i < 12; i++)
        shifted &= t[i] >= 0 && t[i] < 50 && next[i] >= 0 && next[i] < 50;
    printf("token sequences: labels are the next tokens: %s\n", shifted ? "yes" : "no");
    EXPECT(shifted, "token labels");
    dataset_close(&ds);
}

/* Writes an IDX file of n images of 28x28 (or n labels) with the header's count. */
static void write_idx(const char *path, int images, uint32_t n) {
    FILE *f = fopen(path, "wb");
    uint8_t head[16] = {
        0, 0, 8, images ? 3 : 1, n >> 24, n >> 16 & 255, n >> 8 & 255, n & 255, 0, 0, 0, 28, 0,
        0, 0, 28};
    fwrite(head, 1, images ? 16 : 8, f);
    size_t bytes = (size_t)n * (images ? 784 : 1);
    uint8_t *zeros = calloc(bytes, 1);
    fwrite(zeros, 1, bytes, f);
    free(zeros);
    fclose(f);
}

static int looks; /* calls of stop_at_second_look */
static int stop_at_second_look(void) {
    return ++looks >= 2;
}

static void test_interrupted_reading(void) {
    char dir[] = "/tmp/dtbench-data.XXXXXX", path[256], err[512];
    if (!mkdtemp(dir)) {
        EXPECT(0, "mkdtemp of %s", dir);
        return;
    }
    const uint32_t n = 20000; /* 15.7 MB of images: four pieces */
    const char *files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        write_idx(path, i % 2 == 0, i < 2 ? n : 10);
    }
    Dataset ds;
    int rc = dataset_open(&ds, "mnist", dir, 1, 28, 28, 10, 1, err, sizeof err);
    EXPECT(rc == 0 && ds.ntrain == n, "the 15.7 MB set reads whole without a stop: %s", err);
    if (rc == 0) dataset_close(&ds);

    looks = 0;
    dataset_interrupted = stop_at_second_look;
    rc = dataset_open(&ds, "mnist", dir, 1, 28, 28, 10, 1, err, sizeof err);
    dataset_interrupted = NULL;
    printf("stopped read: %s (%d looks at the stop)\n", err, looks);
    EXPECT(rc == -1 && strstr(err, "stopped"), "a stop asked for during the read ends it");
    EXPECT(looks == 2, "at the first piece boundary after it (%d looks)", looks);

    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
    unlink(path);
    mkfifo(path, 0600); /* opening it for reading would wait for a writer */
    rc = dataset_open(&ds, "mnist", dir, 1, 28, 28, 10, 1, err, sizeof err);
    printf("FIFO: %s\n", err);
    EXPECT(rc == -1 && strstr(err, "is a FIFO; expected a regular file"),
           "a FIFO is refused without waiting");
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void) {
    test_sharding();
    test_loader();
    test_cifar10_reader();
    test_interrupted_reading();
    return check_summary();
}
