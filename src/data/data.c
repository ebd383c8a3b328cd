/* data.c - synthetic samples (images or token sequences), the IDX reader (MNIST, Fashion-MNIST;
 * gzip files as shipped, or uncompressed) and the CIFAR-10 binary reader; a language model's
 * corpus (text, token shards) is data_tokens.c's, its windows taken here. Every file is validated
 * (magic or record size, dimensions, counts, label range) before training starts. Reading never
 * waits unbounded: only regular files are read (a FIFO would block until a writer comes), in
 * pieces with a look at dataset_interrupted between them. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "data.h"
#include "data_tokens.h" /* defines: corpus_open, corpus_window, corpus_free */
#include "alloc.h"       /* defines: dt_mem_available, xmalloc, xrealloc */
#include "rng.h"         /* defines: rng_mix, rng_uniform */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

int (*dataset_interrupted)(void) = NULL;

/* The most bytes read between two looks at dataset_interrupted. */
#define DF_PIECE ((size_t)4 << 20)

const char *dataset_default_dir(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "/usr/share/datasets/%s", name);
    return buf;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A data file being read (gzip or plain: zlib reads both). Errors name the file; zlib's message
 * is copied before the file is closed (it lives in the gzFile). */
typedef struct {
    gzFile f;
    const char *path;
} DataFile;

static const char *file_kind(mode_t mode) {
    return S_ISFIFO(mode)   ? "a FIFO"
           : S_ISDIR(mode)  ? "a folder"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

/* Opened without waiting (O_NONBLOCK: a FIFO does not wait for a writer), then refused unless
 * it is a regular file, whose reads never wait for another process. */
static int df_open(DataFile *d, const char *path, char *err, size_t errlen) {
    d->path = path;
    d->f = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        snprintf(err, errlen, "--data-dir: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen,
                 "--data-dir: %s is %s; expected a regular file (data files are read whole "
                 "before training)",
                 path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    d->f = gzdopen(fd, "rb"); /* owns fd from here */
    if (!d->f) {
        snprintf(err, errlen, "--data-dir: cannot open %s", path);
        close(fd);
        return -1;
    }
    return 0;
}

/* zlib's message on d, without the "<fd:N>: " it puts first for a gzdopen'ed file. */
static const char *df_error(DataFile *d, int *zerr) {
    const char *msg = gzerror(d->f, zerr);
    const char *colon = !strncmp(msg, "<fd:", 4) ? strstr(msg, ": ") : NULL;
    return colon ? colon + 2 : msg;
}

/* 1 (and why in err) when the program asked the reading to stop. */
static int df_interrupted(const DataFile *d, char *err, size_t errlen) {
    if (!dataset_interrupted || !dataset_interrupted()) return 0;
    snprintf(err, errlen, "--data-dir: reading %s: stopped (a stop was asked for)", d->path);
    return 1;
}

/* Reads up to n bytes; returns the count read, or -1 with the reason in err. */
static long long df_read(DataFile *d, uint8_t *buf, size_t n, char *err, size_t errlen) {
    size_t done = 0;
    while (done < n) {
        if (df_interrupted(d, err, errlen)) return -1;
        size_t want = n - done > DF_PIECE ? DF_PIECE : n - done;
        int got = gzread(d->f, buf + done, (unsigned)want);
        if (got < 0) {
            int zerr = 0;
            snprintf(err, errlen, "--data-dir: cannot read %s: %s", d->path, df_error(d, &zerr));
            return -1;
        }
        if (got == 0) break;
        done += (size_t)got;
    }
    /* A truncated gzip stream reads as a short file; zlib reports it here. */
    int zerr = 0;
    const char *msg = df_error(d, &zerr);
    if (zerr != Z_OK && zerr != Z_BUF_ERROR) {
        snprintf(err, errlen, "--data-dir: cannot read %s: %s", d->path, msg);
        return -1;
    }
    return (long long)done;
}

/* 0 when the file ends here; -1 with a reason if more bytes follow (read no further: a small
 * compressed file may expand to gigabytes). */
static int df_expect_end(DataFile *d, const char *what, char *err, size_t errlen) {
    uint8_t extra;
    long long got = df_read(d, &extra, 1, err, errlen);
    if (got < 0) return -1;
    if (got > 0) {
        snprintf(err, errlen, "--data-dir: %s: longer than its header says (%s)", d->path, what);
        return -1;
    }
    return 0;
}

static void df_close(DataFile *d) {
    if (d->f) gzclose(d->f);
    d->f = NULL;
}

/* Refuses to hold more than half of this machine's available memory in one data file. */
static int fits_memory(const char *path, double bytes, char *err, size_t errlen) {
    double avail = dt_mem_available();
    if (avail > 0 && bytes > avail / 2) {
        snprintf(err, errlen,
                 "--data-dir: %s: its header announces %.1f GB, more than half of the %.1f GB of "
                 "memory available",
                 path, bytes / 1e9, avail / 1e9);
        return -1;
    }
    return 0;
}

/* Reads an IDX file of `magic` whose header (4 + 4*ndims bytes) gives the dimensions; the data
 * are read only after the header is checked, and exactly as many bytes as it announces. Returns
 * the data (malloc'd) and dims[0..ndims-1], or NULL with a one-line reason. */
static uint8_t *read_idx(const char *path, uint32_t magic, int ndims, uint32_t *dims, char *err,
                         size_t errlen) {
    DataFile d;
    if (df_open(&d, path, err, errlen)) return NULL;
    uint8_t head[16];
    size_t hlen = 4 + 4 * (size_t)ndims;
    long long got = df_read(&d, head, hlen, err, errlen);
    if (got < 0) goto fail;
    int ok = got == (long long)hlen && be32(head) == magic;
    double bytes = 1;
    for (int i = 0; ok && i < ndims; i++) {
        dims[i] = be32(head + 4 + 4 * i);
        bytes *= dims[i];
        if (i > 0 && (dims[i] == 0 || dims[i] > 4096)) ok = 0;
    }
    if (!ok) {
        snprintf(err, errlen, "--data-dir: %s: not an IDX %s file (magic 0x%x, %s)", path,
                 ndims == 3 ? "image" : "label", magic,
                 ndims == 3 ? "n x rows x cols bytes" : "n bytes");
        goto fail;
    }
    if (dims[0] == 0) {
        snprintf(err, errlen, "--data-dir: %s: the IDX header announces 0 samples", path);
        goto fail;
    }
    if (fits_memory(path, bytes, err, errlen)) goto fail;
    uint8_t *buf = xmalloc((size_t)bytes);
    got = df_read(&d, buf, (size_t)bytes, err, errlen);
    if (got >= 0 && got < (long long)bytes)
        snprintf(err, errlen, "--data-dir: %s: %lld data bytes where the IDX header announces %.0f",
                 path, got, bytes);
    if (got != (long long)bytes || df_expect_end(&d, "trailing bytes after the data", err, errlen)) {
        free(buf);
        goto fail;
    }
    df_close(&d);
    return buf;
fail:
    df_close(&d);
    return NULL;
}

/* Is there something named path (without opening it: a FIFO would wait for a writer)? */
static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Finds "<base>.gz" or "<base>" in dir. */
static int find_file(const char *dir, const char *base, char *path, size_t len) {
    snprintf(path, len, "%s/%s.gz", dir, base);
    if (exists(path)) return 1;
    snprintf(path, len, "%s/%s", dir, base);
    return exists(path);
}

/* Loads one images+labels pair, checking the IDX headers. */
static int load_split(const char *dir, const char *prefix, uint8_t **images, uint8_t **labels,
                      size_t *count, int *h, int *w, char *err, size_t errlen) {
    char ipath[1024], lpath[1024], base[128];
    snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
    if (!find_file(dir, base, ipath, sizeof ipath)) {
        snprintf(err, errlen, "--data-dir: %s has no %s(.gz)", dir, base);
        return -1;
    }
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    if (!find_file(dir, base, lpath, sizeof lpath)) {
        snprintf(err, errlen, "--data-dir: %s has no %s(.gz)", dir, base);
        return -1;
    }
    uint32_t idims[3], ldims[1];
    uint8_t *ib = read_idx(ipath, 0x803, 3, idims, err, errlen);
    if (!ib) return -1;
    uint8_t *lb = read_idx(lpath, 0x801, 1, ldims, err, errlen);
    if (!lb) {
        free(ib);
        return -1;
    }
    uint32_t n = idims[0], rows = idims[1], cols = idims[2];
    if (ldims[0] != n) {
        snprintf(err, errlen,
                 "--data-dir: %s: not an IDX label file matching %s (%u labels expected)", lpath,
                 ipath, n);
        goto bad;
    }
    for (size_t i = 0; i < n; i++)
        if (lb[i] > 9) {
            snprintf(err, errlen, "--data-dir: %s: label %u of sample %zu is outside 0..9", lpath,
                     lb[i], i);
            goto bad;
        }
    *images = ib, *labels = lb;
    *count = n, *h = (int)rows, *w = (int)cols;
    return 0;
bad:
    free(ib), free(lb);
    return -1;
}

/* CIFAR-10 binary version: records of 1 label byte and 32x32x3 pixel bytes (R, G, B planes). */
#define CIFAR_PIXELS 3072
#define CIFAR_RECORD (1 + CIFAR_PIXELS)

/* The most records one batch file may hold (CIFAR-10's are 10000; the whole set is 60000). */
#define CIFAR_MAX_RECORDS 100000

/* Appends the records of one CIFAR-10 batch file to images[*count] / labels[*count], read one
 * record at a time: a file longer than CIFAR_MAX_RECORDS is refused without being read whole. */
static int load_cifar_file(const char *path, uint8_t **images, uint8_t **labels, size_t *count,
                           char *err, size_t errlen) {
    DataFile d;
    if (df_open(&d, path, err, errlen)) return -1;
    uint8_t rec[CIFAR_RECORD];
    size_t n = 0, cap = 0;
    for (;;) {
        long long got = df_read(&d, rec, CIFAR_RECORD, err, errlen);
        if (got < 0) goto fail;
        if (got == 0) break;
        if (got < CIFAR_RECORD) {
            snprintf(err, errlen,
                     "--data-dir: %s: %zu bytes is not a CIFAR-10 binary batch (records of 1 "
                     "label byte + 3072 pixel bytes)",
                     path, n * CIFAR_RECORD + (size_t)got);
            goto fail;
        }
        if (n == CIFAR_MAX_RECORDS) {
            snprintf(err, errlen,
                     "--data-dir: %s: more than %d records (CIFAR-10 batches hold 10000); refused "
                     "without reading further",
                     path, CIFAR_MAX_RECORDS);
            goto fail;
        }
        if (rec[0] > 9) {
            snprintf(err, errlen, "--data-dir: %s: label %u of record %zu is outside 0..9", path,
                     rec[0], n);
            goto fail;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            *images = xrealloc(*images, (*count + cap) * CIFAR_PIXELS);
            *labels = xrealloc(*labels, *count + cap);
        }
        (*labels)[*count + n] = rec[0];
        memcpy(*images + (*count + n) * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
        n++;
    }
    if (n == 0) {
        snprintf(err, errlen, "--data-dir: %s: no records (an empty CIFAR-10 batch)", path);
        goto fail;
    }
    df_close(&d);
    *count += n;
    return 0;
fail:
    df_close(&d);
    return -1;
}

/* Training: data_batch_1.bin and the following ones present (up to 5); test: test_batch.bin. */
static int load_cifar(Dataset *ds, const char *dir, char *err, size_t errlen) {
    char path[1024];
    for (int b = 1; b <= 5; b++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b);
        if (!exists(path)) {
            if (b > 1) break;
            snprintf(err, errlen,
                     "--data-dir: %s has no data_batch_1.bin (CIFAR-10, binary version)", dir);
            return -1;
        }
        if (load_cifar_file(path, &ds->train_images, &ds->train_labels, &ds->ntrain, err, errlen))
            return -1;
    }
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    if (!exists(path)) {
        snprintf(err, errlen, "--data-dir: %s has no test_batch.bin (CIFAR-10, binary version)",
                 dir);
        return -1;
    }
    if (load_cifar_file(path, &ds->test_images, &ds->test_labels, &ds->ntest, err, errlen))
        return -1;
    ds->c = 3, ds->h = 32, ds->w = 32, ds->classes = 10;
    ds->sample_size = CIFAR_PIXELS;
    return 0;
}

int dataset_open_tokens(Dataset *ds, int seq, int vocab, uint64_t seed) {
    memset(ds, 0, sizeof *ds);
    snprintf(ds->name, sizeof ds->name, "synthetic");
    ds->seed = seed;
    ds->perm_epoch = -1;
    ds->c = 1, ds->h = 1, ds->w = seq, ds->classes = vocab;
    ds->sample_size = (size_t)seq;
    ds->label_size = seq;
    /* A fixed pool of random token streams: the input is tokens 0..seq-1, the labels 1..seq. */
    ds->pool_n = 256;
    ds->pool = xmalloc(ds->pool_n * ds->sample_size * sizeof(float));
    ds->pool_labels = xmalloc(ds->pool_n * (size_t)seq * sizeof(int32_t));
    for (size_t i = 0; i < ds->pool_n; i++) {
        uint64_t key = rng_mix(seed * 0x2545F4914F6CDD1DULL + i) << 20;
        int32_t prev = (int32_t)(rng_mix(key) % (uint64_t)vocab);
        for (int t = 0; t < seq; t++) {
            int32_t next = (int32_t)(rng_mix(key + 1 + (uint64_t)t) % (uint64_t)vocab);
            ds->pool[i * ds->sample_size + t] = (float)prev;
            ds->pool_labels[i * (size_t)seq + t] = next;
            prev = next;
        }
    }
    ds->ntrain = ds->pool_n;
    return 0;
}

int dataset_open(Dataset *ds, const char *name, const char *dir, int c, int h, int w, int classes,
                 uint64_t seed, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    snprintf(ds->name, sizeof ds->name, "%s", name);
    ds->seed = seed;
    ds->perm_epoch = -1;
    ds->label_size = 1;
    if (!strcmp(name, "synthetic")) {
        ds->c = c, ds->h = h, ds->w = w, ds->classes = classes;
        ds->sample_size = (size_t)c * h * w;
        /* A fixed pool, generated once, so the data phase costs a copy as with real data. */
        ds->pool_n = 256;
        ds->pool = xmalloc(ds->pool_n * ds->sample_size * sizeof(float));
        ds->pool_labels = xmalloc(ds->pool_n * sizeof(int32_t));
        for (size_t i = 0; i < ds->pool_n; i++) {
            uint64_t key = rng_mix(seed * 0x2545F4914F6CDD1DULL + i) << 20;
            for (size_t j = 0; j < ds->sample_size; j++)
                ds->pool[i * ds->sample_size + j] = rng_uniform(key + j);
            ds->pool_labels[i] = (int32_t)(rng_mix(key ^ 0xabcdefULL) % (uint64_t)classes);
        }
        ds->ntrain = ds->pool_n;
        return 0;
    }
    if (!dir || !*dir) dir = dataset_default_dir(name);
    if (!strcmp(name, "text") || !strcmp(name, "tokens")) {
        if (corpus_open(ds, !strcmp(name, "text"), dir, w, classes, err, errlen) == 0) return 0;
        dataset_close(ds);
        return -1;
    }
    if (!strcmp(name, "cifar10")) {
        if (load_cifar(ds, dir, err, errlen) == 0) return 0;
        dataset_close(ds);
        return -1;
    }
    int th = 0, tw = 0;
    if (load_split(dir, "train", &ds->train_images, &ds->train_labels, &ds->ntrain, &ds->h, &ds->w,
                   err, errlen) ||
        load_split(dir, "t10k", &ds->test_images, &ds->test_labels, &ds->ntest, &th, &tw, err,
                   errlen)) {
        dataset_close(ds);
        return -1;
    }
    if (th != ds->h || tw != ds->w) {
        snprintf(err, errlen, "--data-dir: %s: test images are %dx%d, training images %dx%d", dir,
                 th, tw, ds->h, ds->w);
        dataset_close(ds);
        return -1;
    }
    ds->c = 1, ds->classes = 10;
    ds->sample_size = (size_t)ds->h * ds->w;
    return 0;
}

void dataset_close(Dataset *ds) {
    free(ds->train_images), free(ds->train_labels), free(ds->test_images), free(ds->test_labels);
    free(ds->pool), free(ds->pool_labels), free(ds->perm);
    corpus_free(ds->corpus);
    memset(ds, 0, sizeof *ds);
}

/* Position of global sample g in the shuffled order (Fisher-Yates per epoch, seeded). */
static size_t sample_index(Dataset *ds, int64_t g) {
    if (ds->pool) return (size_t)(g % (int64_t)ds->pool_n);
    int64_t epoch = g / (int64_t)ds->ntrain;
    if (epoch != ds->perm_epoch) {
        if (!ds->perm) ds->perm = xmalloc(ds->ntrain * sizeof(uint32_t));
        for (size_t i = 0; i < ds->ntrain; i++)
            ds->perm[i] = (uint32_t)i;
        uint64_t key = rng_mix(ds->seed ^ (0x0e9c0000ULL + (uint64_t)epoch)) << 24;
        for (size_t i = ds->ntrain - 1; i > 0; i--) {
            size_t j = (size_t)(rng_mix(key + i) % (i + 1));
            uint32_t t = ds->perm[i];
            ds->perm[i] = ds->perm[j], ds->perm[j] = t;
        }
        ds->perm_epoch = epoch;
    }
    return ds->perm[g % (int64_t)ds->ntrain];
}

static void copy_image(const uint8_t *src, size_t n, float *dst) {
    for (size_t j = 0; j < n; j++)
        dst[j] = (float)src[j] * (1.0f / 255.0f);
}

/* DTBENCH_TEST_LOAD_DELAY=S: every batch takes S seconds more to make (tests: a slow data
 * source, e.g. a file system, without one). */
static void test_load_delay(void) {
    const char *v = getenv("DTBENCH_TEST_LOAD_DELAY");
    double delay = v ? atof(v) : 0.0;
    if (!(delay > 0)) return;
    struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

void dataset_batch_indices(Dataset *ds, int64_t iter, int global_batch, int rank, int nranks,
                           size_t *idx) {
    test_load_delay();
    int n = global_batch / nranks;
    int64_t first = iter * (int64_t)global_batch + (int64_t)rank * n;
    for (int i = 0; i < n; i++)
        idx[i] = sample_index(ds, first + i);
}

void dataset_fill(const Dataset *ds, const size_t *idx, int i0, int i1, float *x, int32_t *labels) {
    const size_t ls = (size_t)ds->label_size;
    for (int i = i0; i < i1; i++) {
        size_t s = idx[i];
        float *dst = x ? x + (size_t)i * ds->sample_size : NULL;
        if (ds->pool) {
            if (dst) memcpy(dst, ds->pool + s * ds->sample_size, ds->sample_size * sizeof(float));
            memcpy(labels + (size_t)i * ls, ds->pool_labels + s * ls, ls * sizeof(int32_t));
        } else if (ds->corpus) {
            corpus_window(ds->corpus, 0, s, dst, labels + (size_t)i * ls);
        } else {
            if (dst) copy_image(ds->train_images + s * ds->sample_size, ds->sample_size, dst);
            labels[i] = ds->train_labels[s];
        }
    }
}

void dataset_train_batch(Dataset *ds, int64_t iter, int global_batch, int rank, int nranks,
                         float *x, int32_t *labels) {
    int n = global_batch / nranks;
    size_t *idx = xmalloc((size_t)n * sizeof *idx);
    dataset_batch_indices(ds, iter, global_batch, rank, nranks, idx);
    dataset_fill(ds, idx, 0, n, x, labels);
    free(idx);
}

void dataset_test_batch(const Dataset *ds, size_t first, int n, float *x, int32_t *labels) {
    for (int i = 0; i < n; i++) {
        if (ds->corpus) {
            corpus_window(ds->corpus, 1, first + i, x + (size_t)i * ds->sample_size,
                          labels + (size_t)i * (size_t)ds->label_size);
            continue;
        }
        copy_image(ds->test_images + (first + i) * ds->sample_size, ds->sample_size,
                   x + (size_t)i * ds->sample_size);
        labels[i] = ds->test_labels[first + i];
    }
}
