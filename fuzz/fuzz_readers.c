/* fuzz_readers.c - fuzzing the data readers (src/data/data.c): IDX (MNIST-format, gzip or plain)
 * and CIFAR-10 binary batches. One input becomes the files of a data folder, dataset_open reads it;
 * any crash, sanitizer report, or a "success" whose shapes break the promises of data.h is a
 * finding.
 *
 * Two drivers, one target (LLVMFuzzerTestOneInput):
 *   - libFuzzer: `make fuzz-libfuzzer` (clang -fsanitize=fuzzer,address,undefined), then
 *     fuzz/fuzz_readers_lf fuzz/corpus -max_total_time=600 for a long run by hand;
 *   - a deterministic mutation driver (FUZZ_STANDALONE, built with the tests by any compiler):
 *     fuzz_readers SECONDS [SEED] mutates built-in seeds (valid IDX and CIFAR files, gzip'd or
 *     not) for SECONDS, reproducibly from SEED; tests/test_reliability_fuzz.sh runs it bounded. */
#include "data.h"
#include "clock.h" /* defines: dt_now */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char folder[256];
static long accepted; /* inputs read as a data set (the driver reports it: coverage) */

static int damage; /* > 0: flip this byte (counted from the gzip member's end) of .gz files */

static void put(const char *name, const uint8_t *data, size_t n, int gz) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s", folder, name, gz ? ".gz" : "");
    if (gz) {
        gzFile f = gzopen(path, "wb1");
        if (f) gzwrite(f, data, (unsigned)n), gzclose(f);
        FILE *g = damage ? fopen(path, "r+b") : NULL;
        if (g && fseek(g, -(long)damage, SEEK_END) == 0 && ftell(g) >= 10) { /* past the header */
            int c = fgetc(g);
            fseek(g, -1, SEEK_CUR);
            fputc(c ^ 0x5a, g);
        }
        if (g) fclose(g);
    } else {
        FILE *f = fopen(path, "wb");
        if (f) fwrite(data, 1, n, f), fclose(f);
    }
}

static void clear(void) {
    static const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                                  "data_batch_1.bin",       "data_batch_2.bin",
                                  "test_batch.bin"};
    char path[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", folder, names[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.gz", folder, names[i]);
        unlink(path);
    }
}

/* Input: byte 0 picks the format and compression, bytes 1-2 where the input is cut in two files
 * (images | labels, or training | test batch); the rest is the files' bytes. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!folder[0]) {
        snprintf(folder, sizeof folder, "%s/dtbench-fuzz.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 (int)getpid());
        mkdir(folder, 0700);
    }
    if (size < 3) return 0;
    int mode = data[0], cut = data[1] << 8 | data[2];
    data += 3, size -= 3;
    size_t a = size ? (size_t)cut % (size + 1) : 0;
    int gz = (mode >> 1) & 1;
    damage = mode >> 2; /* 0: intact; else a byte of the compressed stream or its trailer */
    clear();
    Dataset ds;
    char err[512] = "";
    int rc;
    if (mode & 1) {
        put("data_batch_1.bin", data, a, gz);
        put("test_batch.bin", data + a, size - a, gz);
        rc = dataset_open(&ds, "cifar10", folder, 3, 32, 32, 10, 1, err, sizeof err);
    } else {
        put("train-images-idx3-ubyte", data, a, gz);
        put("train-labels-idx1-ubyte", data + a, size - a, gz);
        put("t10k-images-idx3-ubyte", data, a, !gz);
        put("t10k-labels-idx1-ubyte", data + a, size - a, !gz);
        rc = dataset_open(&ds, "mnist", folder, 1, 28, 28, 10, 1, err, sizeof err);
    }
    if (rc == 0) {
        /* what a successful open promises: samples, shapes, labels in range, readable batches */
        if (ds.ntrain == 0 || ds.sample_size != (size_t)ds.c * ds.h * ds.w || ds.classes != 10)
            abort();
        float x[2 * 4096];
        int32_t labels[2];
        if (ds.sample_size <= 4096) {
            dataset_train_batch(&ds, 0, 2, 0, 1, x, labels);
            if (labels[0] < 0 || labels[0] > 9) abort();
            if (ds.ntest) dataset_test_batch(&ds, 0, 1, x, labels);
        }
        dataset_close(&ds);
        accepted++;
    } else if (!err[0] || strchr(err, '\n')) {
        abort(); /* a refusal is one line */
    }
    return 0;
}

#ifdef FUZZ_STANDALONE
/* ---- the deterministic mutation driver -------------------------------------------------------- */
#include <time.h>

static uint64_t state;
static uint64_t next(void) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 17;
}

static size_t seed_input(int which, uint8_t *buf, size_t cap) {
    size_t n = 0;
    buf[n++] = (uint8_t)which; /* format, compression, damage */
    if (which & 1) {           /* CIFAR: 3 training records | 2 test records */
        size_t rec = 3073, cut = 3 * rec;
        buf[n++] = (uint8_t)(cut >> 8), buf[n++] = (uint8_t)cut;
        for (int r = 0; r < 5 && n + rec <= cap; r++) {
            buf[n] = (uint8_t)(r % 10);
            for (size_t j = 1; j < rec; j++)
                buf[n + j] = (uint8_t)(j * 7 + r);
            n += rec;
        }
        /* the cut is taken modulo the length: make it land on the record boundary */
        size_t len = n - 3, c = cut % (len + 1);
        (void)c;
    } else { /* IDX: 4 images of 5x6 | 4 labels */
        uint8_t img[16 + 120] = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6};
        uint8_t lab[8 + 4] = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 9};
        for (int j = 0; j < 120; j++)
            img[16 + j] = (uint8_t)(j * 13);
        buf[n++] = 0, buf[n++] = sizeof img;
        memcpy(buf + n, img, sizeof img), n += sizeof img;
        memcpy(buf + n, lab, sizeof lab), n += sizeof lab;
    }
    return n;
}

static size_t mutate(uint8_t *buf, size_t n, size_t cap) {
    int edits = 1 + (int)(next() % 4);
    for (int e = 0; e < edits; e++) {
        size_t at = n ? (size_t)(next() % n) : 0;
        switch (next() % 8) {
        case 0: buf[at] ^= (uint8_t)(1u << (next() % 8)); break;           /* bit flip */
        case 1: buf[at] = (uint8_t)next(); break;                           /* random byte */
        case 2: buf[at] = (uint8_t[]){0, 1, 0x7f, 0x80, 0xff}[next() % 5]; break;
        case 3: if (n > 4) n = 3 + (size_t)(next() % (n - 3)); break;       /* truncate */
        case 4:                                                              /* grow */
            while (n < cap && next() % 8) buf[n++] = (uint8_t)next();
            break;
        case 5: /* a big-endian count in a header field */
            if (n >= 11) {
                size_t f = 3 + 4 * (size_t)(next() % 4);
                uint32_t v = (uint32_t[]){0, 1, 0xFFFFFFFFu, 0x80000000u, 4096, 4097}[next() % 6];
                if (f + 4 <= n) buf[f] = v >> 24, buf[f + 1] = v >> 16, buf[f + 2] = v >> 8, buf[f + 3] = v;
            }
            break;
        case 6: /* IDX: the same sample count in both headers (e.g. 0, or more than present) */
            if (n >= 11 && !(buf[0] & 1)) {
                size_t a = (size_t)(buf[1] << 8 | buf[2]) % (n - 3 + 1);
                uint32_t v = (uint32_t[]){0, 1, 5, 0xFFFFFFFFu}[next() % 4];
                uint8_t be[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
                memcpy(buf + 7, be, 4);
                if (3 + a + 8 <= n) memcpy(buf + 3 + a + 4, be, 4);
            }
            break;
        default: if (n >= 3) buf[1] = (uint8_t)next(), buf[2] = (uint8_t)next(); /* the cut */
        }
    }
    return n;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    enum { CAP = 1 << 16 };
    static uint8_t buf[CAP];
    long runs = 0;
    double end = dt_now() + seconds;
    while (dt_now() < end) {
        int mode = (int)(next() % 4) | (next() % 4 == 0 ? (int)(1 + next() % 40) << 2 : 0);
        size_t n = seed_input(mode, buf, CAP);
        n = mutate(buf, n, CAP);
        LLVMFuzzerTestOneInput(buf, n);
        runs++;
    }
    clear();
    rmdir(folder);
    printf("fuzz_readers: %ld inputs (%ld read as data sets) in %.0f s (seed %llu), no finding\n",
           runs, accepted, seconds, (unsigned long long)(argc > 2 ? strtoull(argv[2], NULL, 10) : 1));
    return 0;
}
#endif
