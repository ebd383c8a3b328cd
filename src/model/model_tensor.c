/* model_tensor.c - tensor parallelism of a Model (ModelTensor in model.h): which rows split
 * over a tensor group, their shapes there, and the slices of their parameters.
 *
 * A split pair is an fc read only by an attention row (the QKV projection: its columns form 3
 * blocks, q, k and v), a GELU or a ReLU, itself read only by an fc: Megatron-LM's attention and
 * MLP, and the fully connected layers of FCN-5/8 and of LeNet's classifier, pair by pair in
 * table order (a row in one pair at most). The first fc is column-parallel: rank r holds the
 * rows [r q, (r + 1) q) of each block of its weights [out, in] (q = block / size) and of its
 * bias, so that it computes the q, k and v of the heads [r H/size, (r + 1) H/size), or its share
 * of the MLP's columns. The attention runs on H/size heads, the activation on the local columns.
 * The second fc is row-parallel: rank r holds the columns [r in, (r + 1) in) of its weights
 * [out, size x in] and the whole bias (replicated, added by rank 0 alone: model.c). Every other
 * row is replicated. */
#include "layers.h"
#include "alloc.h" /* defines: xcalloc */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Row i starts a split pair (see above): its blocks (3 before attention, 1 before an
 * activation), the middle row in *mid and the row-parallel fc in *row; 0 when it does not. */
static int tensor_pair(const Model *m, int i, int *mid, int *row) {
    const Layer *A = &m->layers[i];
    if (A->d.kind != LAYER_FC || A->consumers != 1 || A->last_consumer < 0) return 0;
    const int j = A->last_consumer;
    const Layer *B = &m->layers[j];
    const LayerKind k_mid = B->d.kind;
    if (k_mid != LAYER_ATTENTION && k_mid != LAYER_GELU && k_mid != LAYER_RELU) return 0;
    if (B->ninputs != 1 || B->inputs[0] != i || B->consumers != 1 || B->last_consumer < 0) return 0;
    const int k = B->last_consumer;
    const Layer *C = &m->layers[k];
    if (C->d.kind != LAYER_FC || C->ninputs != 1 || C->inputs[0] != j) return 0;
    *mid = j, *row = k;
    return k_mid == LAYER_ATTENTION ? 3 : 1;
}

/* The pairs in table order, none sharing a row: calls fn(m, i, j, k, blocks, user) for each until
 * it returns non-zero, which is returned; 0 after the last. */
typedef int (*PairFn)(Model *m, int i, int j, int k, int blocks, void *user);
static int each_pair(Model *m, PairFn fn, void *user) {
    char *taken = xcalloc((size_t)m->nlayers + 1, 1);
    int rc = 0;
    for (int i = 0; i < m->nlayers && !rc; i++) {
        int j, k;
        const int g = taken[i] ? 0 : tensor_pair(m, i, &j, &k);
        if (!g) continue;
        taken[j] = taken[k] = 1;
        rc = fn(m, i, j, k, g, user);
    }
    free(taken);
    return rc;
}

static int mark_pair(Model *m, int i, int j, int k, int g, void *user) {
    (void)user;
    const int n = m->tp.size;
    Layer *A = &m->layers[i], *B = &m->layers[j], *C = &m->layers[k];
    A->tp_role = TP_COLUMN, A->tp_groups = g, A->d.out /= n;
    B->tp_role = TP_LOCAL;
    if (B->d.kind == LAYER_ATTENTION) B->d.heads /= n;
    C->tp_role = TP_ROW, C->tp_groups = 1;
    return 0;
}

void model_tensor_roles(Model *m) {
    (void)each_pair(m, mark_pair, NULL);
}

typedef struct {
    int n, pairs;
    char *why;
    size_t len;
} PairCheck;

static int check_pair(Model *m, int i, int j, int k, int g, void *user) {
    (void)k;
    PairCheck *c = user;
    const Layer *A = &m->layers[i], *B = &m->layers[j];
    const int block = (A->seq ? A->out_w : A->out_c) / g, n = c->n;
    c->pairs++;
    if (B->d.kind == LAYER_ATTENTION && B->d.heads % n) {
        snprintf(c->why, c->len, "%s has %d heads, which a group of %d does not divide", B->d.name,
                 B->d.heads, n);
        return 1;
    }
    if (block % n) {
        snprintf(c->why, c->len, "%s has %d outputs per block, which a group of %d does not divide",
                 A->d.name, block, n);
        return 1;
    }
    return 0;
}

const char *model_tensor_problem(const Model *plan, int n, char *why, size_t len) {
    PairCheck c = {n, 0, why, len};
    if (each_pair((Model *)plan, check_pair, &c)) return why; /* (reads it only) */
    if (c.pairs) return NULL;
    snprintf(why, len,
             "%s does not split (only pairs of fully connected rows do: an fc read by attention, "
             "GELU or ReLU, then an fc)",
             plan->desc->name);
    return why;
}

void model_tensor_sizes(const Model *plan, int max, char *list, size_t len) {
    char why[200];
    size_t used = 0;
    list[0] = '\0';
    for (int n = 2; n <= max && used < len; n++)
        if (!model_tensor_problem(plan, n, why, sizeof why))
            used += (size_t)snprintf(list + used, len - used, used ? ",%d" : "%d", n);
}

Layer model_tensor_whole(const Model *m, const Layer *L) {
    Layer F = *L;
    const size_t n = (size_t)m->tp.size;
    if (L->tp_role == TP_COLUMN) {
        F.nw *= n, F.nb *= n, F.d.out *= (int)n, F.out_size *= n;
        if (F.seq)
            F.out_w *= (int)n;
        else
            F.out_c *= (int)n;
    } else if (L->tp_role == TP_ROW) {
        F.nw *= n, F.in_size *= n;
        if (F.seq)
            F.in_w *= (int)n;
        else
            F.in_c *= (int)n;
    }
    F.nparams = F.nw + F.nb;
    return F;
}

static void move(float *whole, float *part, size_t count, int to_part) {
    if (to_part)
        memcpy(part, whole, count * sizeof(float));
    else
        memcpy(whole, part, count * sizeof(float));
}

void model_tensor_copy(const Model *m, const Layer *L, int r, float *whole, float *part,
                       int to_part) {
    const size_t n = (size_t)m->tp.size, out = (size_t)(L->seq ? L->out_w : L->out_c);
    const size_t in = L->nw / out; /* this rank's inputs per output */
    if (L->tp_role == TP_COLUMN) {
        const size_t g = (size_t)L->tp_groups, q = out / g; /* rows per block, per rank */
        for (size_t p = 0; p < g; p++) {
            const size_t from = p * q * n + (size_t)r * q; /* the whole row's first row here */
            move(whole + from * in, part + p * q * in, q * in, to_part);
            if (L->nb) move(whole + n * L->nw + from, part + L->nw + p * q, q, to_part);
        }
    } else if (L->tp_role == TP_ROW) {
        for (size_t o = 0; o < out; o++)
            move(whole + o * in * n + (size_t)r * in, part + o * in, in, to_part);
        if (L->nb) move(whole + n * L->nw, part + L->nw, L->nb, to_part);
    }
}

/* Rows of a replicated kind, and the bias of a row-parallel fc: the same on every rank. */
static int differs(const Model *m, const float *const *ranks, size_t off, size_t count) {
    for (int r = 1; r < m->tp.size; r++)
        if (memcmp(ranks[r] + off, ranks[0] + off, count * sizeof(float))) return 1;
    return 0;
}

size_t model_tensor_whole_count(const Model *m, int first, int last) {
    size_t n = 0;
    for (int i = first; i < last; i++)
        n += m->tp.size > 1 ? model_tensor_whole(m, &m->layers[i]).nparams : m->layers[i].nparams;
    return n;
}

int model_tensor_gather(const Model *m, const float *const *ranks, float *whole) {
    int bad = -1;
    size_t at = 0;
    for (int i = m->first; i < m->last; i++) {
        const Layer *L = &m->layers[i];
        const size_t off = L->w_off - m->param_base;
        if (L->tp_role == TP_COLUMN || L->tp_role == TP_ROW) {
            for (int r = 0; r < m->tp.size; r++)
                model_tensor_copy(m, L, r, whole + at, (float *)(ranks[r] + off), 0);
            if (bad < 0 && L->tp_role == TP_ROW && differs(m, ranks, off + L->nw, L->nb)) bad = i;
            at += model_tensor_whole(m, L).nparams;
            continue;
        }
        memcpy(whole + at, ranks[0] + off, L->nparams * sizeof(float));
        if (bad < 0 && differs(m, ranks, off, L->nparams)) bad = i;
        at += L->nparams;
    }
    return bad;
}
