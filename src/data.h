/* data.h - training and test samples: seeded synthetic data, or MNIST-format (IDX) files.
 *
 * Sharding: iteration t's global batch is samples t*B .. t*B+B-1 of an epoch-wise shuffled order
 * that every rank computes identically from the seed; rank r of P takes the r-th slice of B/P.
 * So P ranks together see exactly the batch one process would see, and no two ranks share a
 * sample. */
#ifndef DTBENCH_DATA_H
#define DTBENCH_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char name[32];
    int c, h, w, classes;
    size_t sample_size; /* c*h*w */
    /* Real data: uint8 images [n, c*h*w] and labels [n]. Synthetic: a pool of float samples. */
    size_t ntrain, ntest;
    uint8_t *train_images, *train_labels, *test_images, *test_labels;
    float *pool; /* synthetic: [pool_n, sample_size] in [0,1) */
    int32_t *pool_labels;
    size_t pool_n;
    uint64_t seed;
    uint32_t *perm; /* current epoch's order of the training samples */
    int64_t perm_epoch;
} Dataset;

/* Opens a data set. Synthetic data take the shape given (the model's native input). Real data
 * are read from dir (or the default folder). Returns 0, or -1 with a one-line reason in err. */
int dataset_open(Dataset *ds, const char *name, const char *dir, int c, int h, int w, int classes,
                 uint64_t seed, char *err, size_t errlen);
void dataset_close(Dataset *ds);

/* Default folder of a real data set: /usr/share/datasets/<name>. */
const char *dataset_default_dir(const char *name);

/* Fills x[n, sample_size] (floats in [0,1]) and labels[n] with this rank's slice of iteration
 * `iter`'s global batch (n = global_batch / nranks). */
void dataset_train_batch(Dataset *ds, int64_t iter, int global_batch, int rank, int nranks,
                         float *x, int32_t *labels);
/* Test samples first .. first+n-1 (real data only). */
void dataset_test_batch(const Dataset *ds, size_t first, int n, float *x, int32_t *labels);

#endif
