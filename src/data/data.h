/* data.h - training and test samples: seeded synthetic data (images, or token sequences for the
 * language models), MNIST-format (IDX) files, CIFAR-10's binary batches, or a language model's
 * corpus: text read as bytes, or llm.c's token shards (data_tokens.c).
 *
 * Sharding: iteration t's global batch is samples t*B .. t*B+B-1 of an epoch-wise shuffled order
 * that every rank computes identically from the seed; rank r of P takes the r-th slice of B/P.
 * So P ranks together see exactly the batch one process would see, and no two ranks share a
 * sample. */
#ifndef DTBENCH_DATA_H
#define DTBENCH_DATA_H

#include <stddef.h>
#include <stdint.h>

/* --dataset: the data sets, named in the enum's order (base/names.h). */
typedef enum {
    DATA_SYNTHETIC = 0,
    DATA_FASHION_MNIST,
    DATA_MNIST,
    DATA_CIFAR10,
    DATA_TEXT,
    DATA_TOKENS
} DataSource;
#define DATASET_NAMES "synthetic,fashion-mnist,mnist,cifar10,text,tokens"

/* A language model's corpus, memory-mapped (data_tokens.c). */
typedef struct TokenCorpus TokenCorpus;

typedef struct {
    char name[32];
    int c, h, w, classes;
    size_t sample_size; /* c*h*w */
    int label_size;     /* labels per sample: 1, or the sequence length (token data) */
    /* Real data: uint8 images [n, c*h*w] and labels [n]. Synthetic: a pool of float samples. */
    size_t ntrain, ntest;
    uint8_t *train_images, *train_labels, *test_images, *test_labels;
    float *pool;          /* synthetic: [pool_n, sample_size] in [0,1) */
    int32_t *pool_labels; /* [pool_n, label_size] */
    size_t pool_n;
    TokenCorpus *corpus; /* text, tokens: samples are windows of its files (ntrain, ntest) */
    uint64_t seed;
    uint32_t *perm; /* current epoch's order of the training samples */
    int64_t perm_epoch;
} Dataset;

/* Opens a data set. Synthetic data take the shape given (the model's native input). Real data
 * are read from dir (or the default folder): "mnist" and "fashion-mnist" as IDX files (gzip or
 * plain), "cifar10" as CIFAR-10's binary version (data_batch_1.bin .. data_batch_5.bin, those
 * present, and test_batch.bin; records of 1 label byte + 3072 pixel bytes, channel-major).
 * "text" and "tokens" are a language model's corpus (dir: a file or a folder, see data_tokens.c):
 * samples of w tokens (c = h = 1), labels the next w tokens, every token below `classes` (the
 * model's vocabulary). Returns 0, or -1 with a one-line reason in err. */
int dataset_open(Dataset *ds, const char *name, const char *dir, int c, int h, int w, int classes,
                 uint64_t seed, char *err, size_t errlen);
/* Synthetic token sequences for a language model: samples of seq token ids in [0, vocab) (stored as
 * floats, shape [1,1,seq]) whose labels are the next tokens (label_size = seq). */
int dataset_open_tokens(Dataset *ds, int seq, int vocab, uint64_t seed);
void dataset_close(Dataset *ds);

/* Set by the program (or NULL: never): while a data set is read, a non-zero return makes
 * dataset_open stop within one piece of at most 4 MiB and return -1 ("stopped" in err). */
extern int (*dataset_interrupted)(void);

/* Default folder of a real data set: /usr/share/datasets/<name>. */
const char *dataset_default_dir(const char *name);

/* Fills x[n, sample_size] (floats in [0,1]; token ids for token data) and labels[n, label_size]
 * with this rank's slice of iteration `iter`'s global batch (n = global_batch / nranks). x may be
 * NULL: the labels only (the last stage of a pipeline). */
void dataset_train_batch(Dataset *ds, int64_t iter, int global_batch, int rank, int nranks,
                         float *x, int32_t *labels);
/* The same in two steps, for loaders that share the copying among threads:
 * dataset_batch_indices writes the data set positions of the slice's n samples into idx[n]
 * (it may reshuffle: one caller at a time); dataset_fill copies samples i0 .. i1-1 of them into
 * their places in x and labels (it only reads the data set: threads may fill disjoint ranges at
 * once). */
void dataset_batch_indices(Dataset *ds, int64_t iter, int global_batch, int rank, int nranks,
                           size_t *idx);
void dataset_fill(const Dataset *ds, const size_t *idx, int i0, int i1, float *x, int32_t *labels);
/* Test samples first .. first+n-1 (real data only; labels[n, label_size]). */
void dataset_test_batch(const Dataset *ds, size_t first, int n, float *x, int32_t *labels);

#endif
