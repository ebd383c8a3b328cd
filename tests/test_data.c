/* test_data.c - the data sets (src/data/data.c): sharding (the slices of 2 and 4 ranks put together
 * are the batch of one process); the CIFAR-10 reader on small files written here in the binary
 * format (two training batches and a test batch read back record by record; a truncated file, a bad
 * label and missing files refused); synthetic token sequences whose labels are the next tokens;
 * reading that never waits unbounded: a stop asked for during the read ends it within a piece of
 * 4 MiB, a FIFO is refused without waiting for a writer; the batch loader's threads
 * (src/data/loader.c) make exactly dataset_train_batch's batches. A language model's corpora
 * (src/data/data_tokens.c) on files written here: text and llm.c token shards cut into windows
 * whose labels are the next tokens, an epoch over 1, 2 and 4 ranks taking every window exactly
 * once, the evaluation split (a folder's *val* files, the last 10% of one file), the files
 * mapped (not copied), and every refusal. */
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

/* ---- a language model's corpus (data_tokens.c) ------------------------------------------------
 */

/* Token j of corpus file f: every window of these files starts with a token of its own. */
static uint32_t shard_token(int f, size_t j) {
    return (uint32_t)(f * 1000 + j) % 5000;
}

/* An llm.c token shard of n tokens (shard_token(f, .)) whose header says count (n if -1), with
 * that magic and version, and `extra` bytes after the tokens. */
static void write_shard(const char *path, int f, size_t n, long count, uint32_t magic,
                        uint32_t version, int extra) {
    FILE *out = fopen(path, "wb");
    int32_t head[256] = {(int32_t)magic, (int32_t)version, (int32_t)(count < 0 ? (long)n : count)};
    fwrite(head, sizeof head, 1, out); /* little-endian, as the machines this runs on */
    for (size_t j = 0; j < n; j++) {
        uint16_t t = (uint16_t)shard_token(f, j);
        fwrite(&t, 2, 1, out);
    }
    for (int i = 0; i < extra; i++)
        fputc(0, out);
    fclose(out);
}

/* Opens name ("text" or "tokens") at path with samples of seq tokens and a vocabulary of vocab;
 * returns 0 or -1 with err, as dataset_open. */
static int open_corpus(Dataset *ds, const char *name, const char *path, int seq, int vocab,
                       char *err, size_t errlen) {
    err[0] = '\0';
    return dataset_open(ds, name, path, 1, 1, seq, vocab, 7, err, errlen);
}

/* Every training window once per epoch: the slices of P ranks (1, 2, 4) over the epoch's
 * iterations (B divides ntrain) hold each window once, and the window of position s is tokens
 * s*seq .. s*seq+seq of the token stream tok(s, t) (the label: t + 1). */
static int epoch_covered(Dataset *ds, int B, uint32_t (*tok)(size_t s, int t)) {
    const int seq = ds->w;
    int ok = ds->ntrain % (size_t)B == 0;
    int *seen = calloc(ds->ntrain, sizeof *seen);
    float *x = malloc((size_t)B * (size_t)seq * sizeof *x);
    int32_t *labels = malloc((size_t)B * (size_t)seq * sizeof *labels);
    size_t idx[64];
    for (int P = 1; P <= 4; P *= 2) {
        memset(seen, 0, ds->ntrain * sizeof *seen);
        for (int64_t it = 0; it < (int64_t)(ds->ntrain / (size_t)B); it++)
            for (int r = 0; r < P; r++) {
                const int n = B / P;
                dataset_batch_indices(ds, it, B, r, P, idx);
                dataset_fill(ds, idx, 0, n, x, labels);
                for (int i = 0; i < n; i++) {
                    seen[idx[i]]++;
                    for (int t = 0; t < seq; t++)
                        ok &= x[i * seq + t] == (float)tok(idx[i], t) &&
                              labels[i * seq + t] == (int32_t)tok(idx[i], t + 1);
                }
            }
        for (size_t s = 0; s < ds->ntrain; s++)
            ok &= seen[s] == 1;
    }
    free(seen), free(x), free(labels);
    return ok;
}

static int text_seq = 8;
static uint8_t text_byte(size_t i) {
    return (uint8_t)(i * 7 + 3);
}
static uint32_t text_window(size_t s, int t) {
    return text_byte(s * (size_t)text_seq + (size_t)t);
}

static void write_text(const char *path, size_t n) {
    FILE *f = fopen(path, "wb");
    for (size_t i = 0; i < n; i++)
        fputc(text_byte(i), f);
    fclose(f);
}

static void test_text_corpus(void) {
    char dir[] = "/tmp/dtbench-text.XXXXXX", path[512], err[512];
    if (!mkdtemp(dir)) {
        EXPECT(0, "mkdtemp of %s", dir);
        return;
    }
    Dataset ds;
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    write_text(path, 1000); /* 900 bytes train: 112 windows of 8; 100 evaluate: 12 */
    int rc = open_corpus(&ds, "text", path, 8, 10000, err, sizeof err);
    EXPECT(rc == 0 && ds.ntrain == 112 && ds.ntest == 12 && ds.c == 1 && ds.h == 1 && ds.w == 8 &&
               ds.label_size == 8 && ds.sample_size == 8 && ds.classes == 10000,
           "text file of 1000 bytes, seq 8: %zu training and %zu evaluation windows [%d,%d,%d] %s",
           ds.ntrain, ds.ntest, ds.c, ds.h, ds.w, err);
    if (rc == 0) {
        EXPECT(epoch_covered(&ds, 8, text_window),
               "text: an epoch on 1, 2 and 4 ranks takes every window once, labels shifted by one");
        float x[12 * 8];
        int32_t labels[12 * 8];
        dataset_test_batch(&ds, 0, 12, x, labels);
        int same = 1;
        for (int i = 0; i < 12 * 8; i++) /* window k: bytes 900 + 8k .. */
            same &= x[i] == text_byte(900 + (size_t)i) && labels[i] == text_byte(901 + (size_t)i);
        EXPECT(same, "text: the evaluation windows are the last 10%% of the file, in order");
        dataset_close(&ds);
    }
    write_text(path, 20); /* 18 + 2 bytes: the part held out would be shorter than a sequence */
    rc = open_corpus(&ds, "text", path, 8, 10000, err, sizeof err);
    EXPECT(rc == 0 && ds.ntrain == 2 && ds.ntest == 0,
           "text of 20 bytes, seq 8: all of it trains (%zu windows), no evaluation split",
           ds.ntrain);
    if (rc == 0) dataset_close(&ds);
    write_text(path, 8);
    rc = open_corpus(&ds, "text", path, 8, 10000, err, sizeof err);
    printf("short text: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "--data-dir") && strstr(err, "8 bytes, fewer than one sequence"),
           "a text of fewer than seq + 1 bytes is refused");
    rc = open_corpus(&ds, "text", path, 4, 200, err, sizeof err);
    printf("small vocabulary: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "vocabulary of 200 tokens: expected at least 256"),
           "text with a vocabulary below 256 is refused");

    /* a folder of train and val files; then one without: every regular file trains */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/split", dir);
    mkdir(sub, 0700);
    snprintf(path, sizeof path, "%s/train.txt", sub), write_text(path, 81);
    snprintf(path, sizeof path, "%s/val.txt", sub), write_text(path, 17);
    snprintf(path, sizeof path, "%s/notes.md", sub), write_text(path, 3); /* neither: ignored */
    rc = open_corpus(&ds, "text", sub, 8, 10000, err, sizeof err);
    EXPECT(rc == 0 && ds.ntrain == 10 && ds.ntest == 2,
           "text folder: train.txt trains (%zu windows), val.txt evaluates (%zu) %s", ds.ntrain,
           ds.ntest, err);
    if (rc == 0) dataset_close(&ds);
    snprintf(path, sizeof path, "%s/train.txt", sub), unlink(path);
    snprintf(path, sizeof path, "%s/val.txt", sub), unlink(path);
    snprintf(path, sizeof path, "%s/.hidden", sub), write_text(path, 3);
    snprintf(path, sizeof path, "%s/notes.md", sub), write_text(path, 17);
    snprintf(path, sizeof path, "%s/a.txt", sub), write_text(path, 81);
    snprintf(path, sizeof path, "%s/folder", sub), mkdir(path, 0700);
    rc = open_corpus(&ds, "text", sub, 8, 10000, err, sizeof err);
    EXPECT(rc == 0 && ds.ntrain == 12 && ds.ntest == 0,
           "text folder without *train*: its regular files train (%zu windows), none evaluate %s",
           ds.ntrain, err);
    if (rc == 0) dataset_close(&ds);
    rmdir(path);
    snprintf(path, sizeof path, "%s/train.txt", sub), mkfifo(path, 0600);
    rc = open_corpus(&ds, "text", sub, 8, 10000, err, sizeof err);
    printf("FIFO: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "train.txt is not a regular file"), "a FIFO is refused");
    const char *names[] = {"train.txt", ".hidden", "notes.md", "a.txt"};
    for (int i = 0; i < 4; i++)
        snprintf(path, sizeof path, "%s/%s", sub, names[i]), unlink(path);
    rmdir(sub);
    snprintf(path, sizeof path, "%s/corpus.txt", dir), unlink(path);
    rmdir(dir);
}

/* The shards of test_token_shards: train_000000 (321 tokens), train_000001 (481), val (101). */
static uint32_t shard_window(size_t s, int t) {
    const int f = s < 32 ? 0 : 1;
    return shard_token(f, (s - (f ? 32 : 0)) * 10 + (size_t)t);
}

/* 1 when a mapping of path is in /proc/self/maps. */
static int mapped(const char *path) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, path) != NULL;
    if (f) fclose(f);
    return found;
}

static void test_token_shards(void) {
    char dir[] = "/tmp/dtbench-shards.XXXXXX", path[256], err[512];
    if (!mkdtemp(dir)) {
        EXPECT(0, "mkdtemp of %s", dir);
        return;
    }
    snprintf(path, sizeof path, "%s/tok_train_000001.bin", dir);
    write_shard(path, 1, 481, -1, 20240520, 1, 0);
    snprintf(path, sizeof path, "%s/tok_train_000000.bin", dir);
    write_shard(path, 0, 321, -1, 20240520, 1, 0);
    snprintf(path, sizeof path, "%s/tok_val_000000.bin", dir);
    write_shard(path, 2, 101, -1, 20240520, 1, 0);
    snprintf(path, sizeof path, "%s/README.txt", dir); /* not a .bin: ignored */
    write_text(path, 5);
    Dataset ds;
    int rc = open_corpus(&ds, "tokens", dir, 10, 5000, err, sizeof err);
    EXPECT(rc == 0 && ds.ntrain == 80 && ds.ntest == 10 && ds.w == 10 && ds.label_size == 10,
           "token shards: 2 training shards (32 + 48 windows of 10, in name order: %zu) and a "
           "val shard (%zu) %s",
           ds.ntrain, ds.ntest, err);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/tok_train_000001.bin", dir);
        EXPECT(mapped(path), "the shards are memory-mapped, not read into memory");
        EXPECT(epoch_covered(&ds, 8, shard_window),
               "tokens: an epoch on 1, 2 and 4 ranks takes every window once, labels shifted");
        float x[10 * 10];
        int32_t labels[10 * 10];
        dataset_test_batch(&ds, 3, 2, x, labels);
        int same = 1;
        for (int i = 0; i < 20; i++)
            same &= x[i] == shard_token(2, 30 + (size_t)i) &&
                    labels[i] == (int32_t)shard_token(2, 31 + (size_t)i);
        EXPECT(same, "tokens: evaluation windows 3 and 4 are those of the val shard");
        dataset_close(&ds);
        EXPECT(!mapped(path), "closing the data set unmaps them");
    }
    /* one shard named alone: its last 10% evaluates */
    snprintf(path, sizeof path, "%s/tok_train_000001.bin", dir);
    rc = open_corpus(&ds, "tokens", path, 10, 5000, err, sizeof err);
    EXPECT(rc == 0 && ds.ntrain == 43 && ds.ntest == 4,
           "one shard of 481 tokens: 432 train (%zu windows), 49 evaluate (%zu) %s", ds.ntrain,
           ds.ntest, err);
    if (rc == 0) dataset_close(&ds);
    /* --seq-len: the same shards, windows of 4 */
    rc = open_corpus(&ds, "tokens", dir, 4, 5000, err, sizeof err);
    EXPECT(rc == 0 && ds.w == 4 && ds.ntrain == 80 + 120 && ds.ntest == 25,
           "windows of 4 tokens: [1,1,%d], %zu training and %zu evaluation windows", ds.w,
           ds.ntrain, ds.ntest);
    if (rc == 0) dataset_close(&ds);
    const char *names[] = {"tok_train_000000.bin", "tok_train_000001.bin", "tok_val_000000.bin",
                           "README.txt"};
    for (int i = 0; i < 4; i++)
        snprintf(path, sizeof path, "%s/%s", dir, names[i]), unlink(path);
    rmdir(dir);
}

static int stop_now(void) {
    return 1;
}

/* One shard, written by write_shard(f = 0, n, count, magic, version, extra), refused with a
 * message holding `want` (vocabulary 5000, windows of 10). */
static void refused_shard(const char *path, size_t n, long count, uint32_t magic, uint32_t version,
                          int extra, const char *want) {
    char err[512];
    Dataset ds;
    write_shard(path, 0, n, count, magic, version, extra);
    int rc = open_corpus(&ds, "tokens", path, 10, 5000, err, sizeof err);
    printf("refused: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "--data-dir: ") && strstr(err, want), "shard refused: %s", want);
}

static void test_shard_refusals(void) {
    char dir[] = "/tmp/dtbench-bad.XXXXXX", path[256], err[512];
    if (!mkdtemp(dir)) {
        EXPECT(0, "mkdtemp of %s", dir);
        return;
    }
    snprintf(path, sizeof path, "%s/s.bin", dir);
    refused_shard(path, 100, -1, 20240521, 1, 0, "magic 20240521, version 1; expected 20240520");
    refused_shard(path, 100, -1, 20240520, 2, 0, "version 2; expected 20240520 and 1");
    refused_shard(path, 100, 101, 20240520, 1, 0, "shorter than its header says");
    refused_shard(path, 100, -1, 20240520, 1, 1, "longer than its header says");
    refused_shard(path, 10, -1, 20240520, 1, 0, "10 tokens, fewer than one sequence");
    FILE *f = fopen(path, "wb"); /* a header cut short */
    fwrite("\x68\x0b\x35\x01", 4, 1, f), fclose(f);
    Dataset ds;
    int rc = open_corpus(&ds, "tokens", path, 10, 5000, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "4 bytes, shorter than the 1024-byte header"), "%s", err);
    write_shard(path, 4, 1000, -1, 20240520, 1, 0); /* tokens 4000 .. 4999, then 0 .. */
    rc = open_corpus(&ds, "tokens", path, 10, 4500, err, sizeof err);
    printf("vocabulary: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "token 4500 at position 500 is outside the model's vocabulary "
                                  "(0..4499)"),
           "a token beyond the vocabulary is refused, the first one named");
    dataset_interrupted = stop_now;
    rc = open_corpus(&ds, "tokens", path, 10, 5000, err, sizeof err);
    dataset_interrupted = NULL;
    EXPECT(rc != 0 && strstr(err, "stopped"), "a stop asked for ends the check: %s", err);
    unlink(path);
    rc = open_corpus(&ds, "tokens", dir, 10, 5000, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "has no *train*.bin file"), "a folder without shards: %s", err);
    rmdir(dir);
    rc = open_corpus(&ds, "tokens", dir, 10, 5000, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "cannot open") && strstr(err, "No such file"), "%s", err);
}

int main(void) {
    test_sharding();
    test_loader();
    test_cifar10_reader();
    test_interrupted_reading();
    test_text_corpus();
    test_token_shards();
    test_shard_refusals();
    return check_summary();
}
