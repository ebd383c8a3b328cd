/* test_cpu_recurrent.c - the CPU backend's language-model layers (kernels/cpu/cpu_recurrent.c):
 * embedding (repeated ids accumulate in the weight gradient) and the LSTM layer (forward, and
 * back-propagation through time for dx, dW, db, with and without dx) against the naive references
 * (tests/ref_recurrent.c), outputs pre-filled with NaN; then their backward passes against finite
 * differences (tests/gradcheck.h; the LSTM's dx, dW, db through every step). */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

#include <stdio.h>
#include <stdlib.h>

static void test_embedding(int rows, int vocab, int dim) {
    EmbeddingShape s = {rows, vocab, dim};
    char shape[96];
    snprintf(shape, sizeof shape, "rows=%d vocab=%d dim=%d", rows, vocab, dim);
    float *ids = falloc(rows), *w = falloc((size_t)vocab * dim), *y = falloc((size_t)rows * dim);
    float *dy = falloc((size_t)rows * dim), *dw = falloc((size_t)vocab * dim);
    float *ry = halloc((size_t)rows * dim), *rdw = halloc((size_t)vocab * dim);
    for (int r = 0; r < rows; r++) /* few distinct ids: repeats accumulate */
        ids[r] = (float)(rand_u64() % (uint64_t)(vocab < 5 ? vocab : 5) * (vocab / 5 + 1) % vocab);
    fill_uniform(w, (size_t)vocab * dim, -1, 1);
    fill_uniform(dy, (size_t)rows * dim, -1, 1);
    fill_nan(y, (size_t)rows * dim);
    B->embedding_forward(ctx, &s, ids, w, y);
    ref_embedding_forward(&s, ids, w, ry);
    check_close(fmt_label("embedding_forward %s", shape), y, ry, (size_t)rows * dim, 0.0, 0.0);
    fill_nan(dw, (size_t)vocab * dim);
    B->embedding_backward(ctx, &s, ids, dy, dw);
    ref_embedding_backward(&s, ids, dy, rdw);
    check_close(fmt_label("embedding_backward %s", shape), dw, rdw, (size_t)vocab * dim, 1e-6,
                1e-6);
    B->free(ctx, ids), B->free(ctx, w), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dw);
    free(ry), free(rdw);
}

static void test_lstm(int batch, int seq, int in, int hidden) {
    LstmShape s = {batch, seq, in, hidden};
    char shape[96];
    snprintf(shape, sizeof shape, "batch=%d seq=%d in=%d hidden=%d", batch, seq, in, hidden);
    size_t nx = (size_t)batch * seq * in, ny = (size_t)batch * seq * hidden;
    size_t nw = (size_t)4 * hidden * (in + hidden), nb = (size_t)4 * hidden;
    float *x = falloc(nx), *w = falloc(nw), *b = falloc(nb), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(nb);
    float *ry = halloc(ny), *rdx = halloc(nx), *rdw = halloc(nw), *rdb = halloc(nb);
    void *reserve = B->alloc(ctx, B->lstm_reserve_bytes(ctx, &s));
    void *work = B->alloc(ctx, B->lstm_workspace_bytes(ctx, &s));
    fill_uniform(x, nx, -1, 1);
    fill_uniform(w, nw, -0.5f, 0.5f);
    fill_uniform(b, nb, -0.5f, 0.5f);
    fill_uniform(dy, ny, -1, 1);
    fill_nan(y, ny);
    B->lstm_forward(ctx, &s, x, w, b, y, reserve, work);
    ref_lstm_forward(&s, x, w, b, ry);
    check_close(fmt_label("lstm_forward %s", shape), y, ry, ny, 1e-5, 1e-5);
    fill_nan(dx, nx), fill_nan(dw, nw), fill_nan(db, nb);
    B->lstm_backward(ctx, &s, x, w, y, reserve, dy, dx, dw, db, work);
    ref_lstm_backward(&s, x, w, b, dy, rdx, rdw, rdb);
    check_close(fmt_label("lstm_backward dx %s", shape), dx, rdx, nx, 1e-4, 1e-4);
    check_close(fmt_label("lstm_backward dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    check_close(fmt_label("lstm_backward db %s", shape), db, rdb, nb, 1e-4, 1e-4);
    B->lstm_backward(ctx, &s, x, w, y, reserve, dy, NULL, dw, db, work); /* overwrite, no dx */
    check_close(fmt_label("lstm_backward(dx=NULL) dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    B->free(ctx, x), B->free(ctx, w), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db), B->free(ctx, reserve), B->free(ctx, work);
    free(ry), free(rdx), free(rdw), free(rdb);
}

/* ---- finite differences ---- */

typedef struct {
    EmbeddingShape s;
    float *ids, *w;
} EmbState;

static void emb_fwd(GradLayer *l) {
    EmbState *st = l->state;
    B->embedding_forward(ctx, &st->s, st->ids, st->w, l->y);
}

static void gradcheck_embedding(int rows, int vocab, int dim) {
    EmbState st = {{rows, vocab, dim}, falloc(rows), falloc((size_t)vocab * dim)};
    char name[96];
    snprintf(name, sizeof name, "embedding rows=%d vocab=%d dim=%d", rows, vocab, dim);
    size_t ny = (size_t)rows * dim, nw = (size_t)vocab * dim;
    float *dw = falloc(nw);
    GradLayer l = {emb_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, 0};
    for (int r = 0; r < rows; r++)
        st.ids[r] = (float)(rand_u64() % (uint64_t)vocab);
    fill_uniform(st.w, nw, -1, 1);
    fill_uniform(l.r, ny, -1, 1);
    B->embedding_backward(ctx, &st.s, st.ids, l.r, dw);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dW", &pr, st.w, dw, nw, 1e-2f, 1e-2);
    B->free(ctx, st.ids), B->free(ctx, st.w), B->free(ctx, dw), B->free(ctx, l.y);
    B->free(ctx, l.r);
}

typedef struct {
    LstmShape s;
    float *x, *w, *b;
    void *reserve, *work;
} LstmState;

static void lstm_fwd(GradLayer *l) {
    LstmState *st = l->state;
    B->lstm_forward(ctx, &st->s, st->x, st->w, st->b, l->y, st->reserve, st->work);
}

static void gradcheck_lstm(int batch, int seq, int in, int hidden) {
    LstmState st = {{batch, seq, in, hidden}, NULL, NULL, NULL, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "lstm batch=%d seq=%d in=%d hidden=%d", batch, seq, in, hidden);
    size_t nx = (size_t)batch * seq * in, ny = (size_t)batch * seq * hidden;
    size_t nw = (size_t)4 * hidden * (in + hidden), nb = (size_t)4 * hidden;
    st.x = falloc(nx), st.w = falloc(nw), st.b = falloc(nb);
    st.reserve = B->alloc(ctx, B->lstm_reserve_bytes(ctx, &st.s));
    st.work = B->alloc(ctx, B->lstm_workspace_bytes(ctx, &st.s));
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(nb);
    GradLayer l = {lstm_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -1, 1);
    fill_uniform(st.w, nw, -0.6f, 0.6f);
    fill_uniform(st.b, nb, -0.5f, 0.5f);
    fill_uniform(l.r, ny, -1, 1);
    lstm_fwd(&l);
    B->lstm_backward(ctx, &st.s, st.x, st.w, l.y, st.reserve, l.r, dx, dw, db, st.work);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    fd_check(name, "dW", &pr, st.w, dw, nw, 1e-2f, 1e-2);
    fd_check(name, "db", &pr, st.b, db, nb, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, st.w), B->free(ctx, st.b), B->free(ctx, st.reserve);
    B->free(ctx, st.work), B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db);
    B->free(ctx, l.y), B->free(ctx, l.r);
}

int main(void) {
    kernel_test_init(0x157a);
    test_embedding(64, 50, 16);
    test_embedding(7, 3, 5);
    /*        batch seq in hidden */
    test_lstm(3, 5, 4, 6);
    test_lstm(1, 1, 3, 2);
    test_lstm(2, 7, 16, 9);

    gradcheck_embedding(12, 6, 5);
    gradcheck_lstm(2, 4, 3, 5);
    gradcheck_lstm(1, 6, 2, 3);
    return kernel_test_finish();
}
