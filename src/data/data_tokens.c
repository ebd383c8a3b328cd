/* data_tokens.c - a language model's corpus: --dataset text (any file read as bytes, a token per
 * byte value 0..255) and --dataset tokens (the shards llm.c's data scripts write: 256 little-endian
 * int32, header[0] = 20240520, header[1] = 1, header[2] = the token count, then that many
 * little-endian uint16 tokens).
 *
 * --data-dir names one file or a folder:
 *   - a file: the corpus; its last 10% of tokens is the evaluation split (nanoGPT's prepare.py)
 *     when both parts hold a sequence (seq + 1 tokens), else all of it trains and there is none;
 *   - a folder: the files whose name holds "train" train, those whose name holds "val" (and not
 *     "train") evaluate, each in name order (strcmp); for tokens only names ending in ".bin"
 *     count and a folder without a *train*.bin file is refused; for text, a folder without a
 *     *train* file trains on every regular file in it (names starting with '.' skipped) and has
 *     no evaluation split.
 * Sample i of a file (or of a part of the split file) is the window of tokens [i*seq, i*seq+seq]:
 * seq inputs, the seq tokens after each as labels; windows do not overlap or cross files, so a
 * file of n tokens gives (n - 1) / seq of them. The splits number their files' windows one after
 * the other.
 *
 * Files are memory-mapped, never read whole into memory: a rank touches the pages of the windows
 * it takes (and every page once when the corpus is opened: the check of every token against the
 * model's vocabulary, in pieces with a look at dataset_interrupted between them). Every refusal
 * is one line naming --data-dir, before training: a file shorter than one sequence, a shard
 * whose header is not llm.c's or whose size is not what its header says, a token beyond the
 * vocabulary, text with a vocabulary below 256. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "data_tokens.h"
#include "alloc.h" /* defines: xcalloc, xmalloc, xrealloc */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHARD_HEADER_BYTES 1024 /* 256 int32 */
#define SHARD_MAGIC        20240520
#define SHARD_VERSION      1
#define TEXT_VOCAB         256
/* The most tokens checked between two looks at dataset_interrupted (4 MiB of uint16). */
#define CHECK_PIECE ((size_t)2 << 20)

/* Tokens windows are cut from: a whole file, or a part of the one file that is split. */
typedef struct {
    const uint8_t *tok;
    size_t ntokens;
    size_t first; /* the split's index of its first window */
} TokenRun;

typedef struct {
    TokenRun *runs;
    int n;
    size_t nwin; /* windows of all its runs */
} TokenSplit;

struct TokenCorpus {
    int seq, width; /* tokens per sample; bytes per token: 1 (text) or 2 (shards) */
    void **maps;    /* the mapped files */
    size_t *map_len;
    int nmaps;
    TokenSplit split[2]; /* training, evaluation */
};

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint32_t token_at(const uint8_t *tok, int width, size_t i) {
    return width == 1 ? tok[i] : (uint32_t)tok[2 * i] | (uint32_t)tok[2 * i + 1] << 8;
}

static void add_run(TokenCorpus *c, int test, const uint8_t *tok, size_t ntokens) {
    TokenSplit *s = &c->split[test];
    s->runs = xrealloc(s->runs, (size_t)(s->n + 1) * sizeof *s->runs);
    s->runs[s->n++] = (TokenRun){tok, ntokens, s->nwin};
    s->nwin += (ntokens - 1) / (size_t)c->seq;
}

/* 0 when every shard token is below vocab; -1 with the first one that is not, or a stop. */
static int check_tokens(const char *path, const uint8_t *tok, size_t n, int vocab, char *err,
                        size_t errlen) {
    if (vocab > 65535) return 0; /* every uint16 is a token */
    for (size_t i0 = 0; i0 < n; i0 += CHECK_PIECE) {
        if (dataset_interrupted && dataset_interrupted()) {
            snprintf(err, errlen, "--data-dir: reading %s: stopped (a stop was asked for)", path);
            return -1;
        }
        const size_t i1 = n - i0 > CHECK_PIECE ? i0 + CHECK_PIECE : n;
        uint32_t top = 0;
        for (size_t i = i0; i < i1; i++) {
            const uint32_t v = token_at(tok, 2, i);
            top = v > top ? v : top;
        }
        if (top < (uint32_t)vocab) continue;
        size_t i = i0;
        while (token_at(tok, 2, i) < (uint32_t)vocab)
            i++;
        snprintf(err, errlen,
                 "--data-dir: %s: token %u at position %zu is outside the model's vocabulary "
                 "(0..%d)",
                 path, token_at(tok, 2, i), i, vocab - 1);
        return -1;
    }
    return 0;
}

/* A shard's header against its size: *tok and *n its tokens, or -1 with the reason. */
static int shard_tokens(const char *path, const uint8_t *map, size_t size, const uint8_t **tok,
                        size_t *n, char *err, size_t errlen) {
    if (size < SHARD_HEADER_BYTES) {
        snprintf(err, errlen,
                 "--data-dir: %s: %zu bytes, shorter than the %d-byte header of a token shard",
                 path, size, SHARD_HEADER_BYTES);
        return -1;
    }
    const uint32_t magic = le32(map), version = le32(map + 4), count = le32(map + 8);
    if (magic != SHARD_MAGIC || version != SHARD_VERSION) {
        snprintf(err, errlen,
                 "--data-dir: %s: not a token shard (magic %u, version %u; expected %d and %d: "
                 "llm.c's uint16 tokens)",
                 path, magic, version, SHARD_MAGIC, SHARD_VERSION);
        return -1;
    }
    const size_t want = SHARD_HEADER_BYTES + 2 * (size_t)count;
    if (size != want) {
        snprintf(err, errlen,
                 "--data-dir: %s: its header announces %u tokens (%zu bytes in all), the file "
                 "holds %zu bytes: %s than its header says",
                 path, count, want, size, size < want ? "shorter" : "longer");
        return -1;
    }
    *tok = map + SHARD_HEADER_BYTES, *n = count;
    return 0;
}

/* Maps one file of the corpus and checks it: *tok and *n its tokens, or -1 with the reason. */
static int map_file(TokenCorpus *c, const char *path, int vocab, const uint8_t **tok, size_t *n,
                    char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO does not wait for a writer */
    struct stat st;
    if (fd < 0) {
        snprintf(err, errlen, "--data-dir: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--data-dir: %s is %s; expected a regular file", path,
                 S_ISDIR(st.st_mode) ? "a folder" : "not a regular file");
        close(fd);
        return -1;
    }
    const size_t size = (size_t)st.st_size;
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    const int map_errno = errno;
    close(fd);
    if (size && map == MAP_FAILED) {
        snprintf(err, errlen, "--data-dir: cannot map %s: %s", path, strerror(map_errno));
        return -1;
    }
    if (map) {
        c->maps = xrealloc(c->maps, (size_t)(c->nmaps + 1) * sizeof *c->maps);
        c->map_len = xrealloc(c->map_len, (size_t)(c->nmaps + 1) * sizeof *c->map_len);
        c->maps[c->nmaps] = map, c->map_len[c->nmaps++] = size;
    }
    if (c->width == 1)
        *tok = map, *n = size;
    else if (shard_tokens(path, map, size, tok, n, err, errlen))
        return -1;
    if (*n < (size_t)c->seq + 1) {
        snprintf(err, errlen,
                 "--data-dir: %s: %zu %s, fewer than one sequence needs (%d: --seq-len %d and "
                 "the next token)",
                 path, *n, c->width == 1 ? "bytes" : "tokens", c->seq + 1, c->seq);
        return -1;
    }
    if (c->width == 1) return 0; /* bytes are below 256, the least vocabulary accepted */
    madvise(map, size, MADV_SEQUENTIAL);
    const int rc = check_tokens(path, *tok, *n, vocab, err, errlen);
    madvise(map, size, MADV_NORMAL);
    return rc;
}

/* One file: its last 10% evaluates when both parts hold a sequence. */
static int open_file(TokenCorpus *c, const char *path, int vocab, char *err, size_t errlen) {
    const uint8_t *tok;
    size_t n;
    if (map_file(c, path, vocab, &tok, &n, err, errlen)) return -1;
    const size_t cut = n / 10 * 9 + n % 10 * 9 / 10, need = (size_t)c->seq + 1;
    if (cut >= need && n - cut >= need) {
        add_run(c, 0, tok, cut);
        add_run(c, 1, tok + cut * (size_t)c->width, n - cut);
    } else {
        add_run(c, 0, tok, n);
    }
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir (not starting with '.'; for shards, ending in ".bin"), sorted; *n of them,
 * or NULL with the reason. */
static char **list_folder(const char *dir, int shards, int *n, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "--data-dir: cannot open %s: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    *n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || (shards && (len < 4 || strcmp(e->d_name + len - 4, ".bin"))))
            continue;
        names = xrealloc(names, (size_t)(*n + 1) * sizeof *names);
        names[*n] = memcpy(xmalloc(len + 1), e->d_name, len + 1);
        (*n)++;
    }
    closedir(d);
    if (*n) qsort(names, (size_t)*n, sizeof *names, by_name);
    return names ? names : xcalloc(1, sizeof *names);
}

/* Which split a folder's file goes to: 0 training, 1 evaluation, -1 none. Without any *train*
 * file (all_train), a text folder trains on every regular file. */
static int split_of(const char *dir, const char *name, int all_train) {
    if (strstr(name, "train")) return 0;
    if (!all_train) return strstr(name, "val") ? 1 : -1;
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? 0 : -1;
}

static int open_folder(TokenCorpus *c, const char *dir, int vocab, char *err, size_t errlen) {
    int n, ntrain = 0, rc = 0;
    char **names = list_folder(dir, c->width == 2, &n, err, errlen);
    if (!names) return -1;
    for (int i = 0; i < n; i++)
        ntrain += strstr(names[i], "train") != NULL;
    if (ntrain == 0 && c->width == 2) {
        snprintf(err, errlen, "--data-dir: %s has no *train*.bin file (token shards)", dir);
        rc = -1;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        const int test = split_of(dir, names[i], ntrain == 0);
        char path[4096];
        const uint8_t *tok;
        size_t ntok;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (test < 0) continue;
        rc = map_file(c, path, vocab, &tok, &ntok, err, errlen);
        if (rc == 0) add_run(c, test, tok, ntok);
    }
    if (rc == 0 && c->split[0].n == 0) {
        snprintf(err, errlen, "--data-dir: %s has no regular file to read as text", dir);
        rc = -1;
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int corpus_open(Dataset *ds, int bytes, const char *path, int seq, int vocab, char *err,
                size_t errlen) {
    if (bytes && vocab < TEXT_VOCAB) {
        snprintf(err, errlen,
                 "--dataset: 'text' is not accepted with a vocabulary of %d tokens: expected at "
                 "least %d (a token per byte value)",
                 vocab, TEXT_VOCAB);
        return -1;
    }
    TokenCorpus *c = xcalloc(1, sizeof *c);
    ds->corpus = c;
    c->seq = seq, c->width = bytes ? 1 : 2;
    ds->c = 1, ds->h = 1, ds->w = seq, ds->classes = vocab;
    ds->sample_size = (size_t)seq;
    ds->label_size = seq;
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "--data-dir: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode) ? open_folder(c, path, vocab, err, errlen)
                            : open_file(c, path, vocab, err, errlen))
        return -1;
    if (c->split[0].nwin > UINT32_MAX) { /* the epoch's order (Dataset.perm) holds uint32 */
        snprintf(err, errlen,
                 "--data-dir: %s: %zu windows of %d tokens, more than the %u an epoch's order "
                 "holds: expected a larger --seq-len",
                 path, c->split[0].nwin, seq, UINT32_MAX);
        return -1;
    }
    ds->ntrain = c->split[0].nwin, ds->ntest = c->split[1].nwin;
    return 0;
}

void corpus_window(const TokenCorpus *c, int test, size_t s, float *x, int32_t *labels) {
    const TokenSplit *sp = &c->split[test];
    int lo = 0, hi = sp->n - 1; /* the last run whose first window is at most s */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (sp->runs[mid].first <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    const TokenRun *r = &sp->runs[lo];
    const size_t at = (s - r->first) * (size_t)c->seq;
    uint32_t cur = token_at(r->tok, c->width, at);
    for (int t = 0; t < c->seq; t++) {
        const uint32_t next = token_at(r->tok, c->width, at + (size_t)t + 1);
        if (x) x[t] = (float)cur;
        labels[t] = (int32_t)next;
        cur = next;
    }
}

void corpus_free(TokenCorpus *c) {
    if (!c) return;
    for (int i = 0; i < c->nmaps; i++)
        munmap(c->maps[i], c->map_len[i]);
    free(c->maps), free(c->map_len);
    free(c->split[0].runs), free(c->split[1].runs);
    free(c);
}
