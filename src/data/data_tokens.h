/* data_tokens.h - a language model's corpus (data_tokens.c): the readers behind --dataset text and
 * tokens, for data.c alone (dataset_open, dataset_fill, dataset_test_batch, dataset_close). */
#ifndef DTBENCH_DATA_TOKENS_H
#define DTBENCH_DATA_TOKENS_H

#include "data.h"

#include <stddef.h>
#include <stdint.h>

/* Opens the corpus at path (a file or a folder) into ds, whose name, seed and perm_epoch are set
 * and the rest zero: text (bytes = 1: a token per byte) or token shards (bytes = 0), samples of
 * seq tokens, every token checked against vocab. Sets ds->corpus (dataset_close frees it, also
 * after a failure), the shape, ntrain and ntest. 0, or -1 with one line in err. */
int corpus_open(Dataset *ds, int bytes, const char *path, int seq, int vocab, char *err,
                size_t errlen);

/* Window s of the training (test = 0) or evaluation (test = 1) split: its seq tokens into x as
 * floats (x NULL: not), the seq tokens after each into labels. Only reads the corpus. */
void corpus_window(const TokenCorpus *c, int test, size_t s, float *x, int32_t *labels);

void corpus_free(TokenCorpus *c);

#endif
