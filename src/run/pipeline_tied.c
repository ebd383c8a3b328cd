/* pipeline_tied.c - the table a language model's first and last pipeline stages share (see
 * pipeline_tied.h). */
#include "pipeline_tied.h"
#include "mpi_check.h"
#include "alloc.h" /* defines: xmalloc */

#include <limits.h>
#include <stdlib.h>

enum { TAG_GRAD = 1 << 20, TAG_TABLE }; /* above the micro-batches' tags (pipeline_p2p.c) */

static int holds_table(const Pipeline *p, const Model *m) {
    return p->stages > 1 && p->stage == 0 && m->tied_grad && !m->tied_w;
}
static int holds_copy(const Pipeline *p, const Model *m) {
    return p->stages > 1 && p->stage == p->stages - 1 && m->tied_w;
}
static int count_of(const Model *m) {
    if (m->tied_count > INT_MAX) check_fail(__FILE__, __LINE__, "tied table", "over 2^31 floats");
    return (int)m->tied_count;
}

void tied_init(TiedLink *t, const Pipeline *p, const Model *m) {
    t->host = NULL, t->send = MPI_REQUEST_NULL;
    if ((holds_table(p, m) || holds_copy(p, m)) && m->be->device_memory)
        t->host = xmalloc(m->tied_count * sizeof(float));
}

void tied_free(TiedLink *t) {
    free(t->host);
    t->host = NULL;
}

void tied_send_grad(TiedLink *t, const Pipeline *p, const Model *m) {
    if (!holds_copy(p, m)) return;
    const float *buf = m->tied_grad;
    if (t->host) {
        m->be->download(m->ctx, t->host, m->tied_grad, m->tied_count * sizeof(float));
        buf = t->host;
    }
    MPI_CHECK(MPI_Isend(buf, count_of(m), MPI_FLOAT, 0, TAG_GRAD, p->pipe_comm, &t->send));
}

void tied_wait(TiedLink *t) {
    MPI_CHECK(MPI_Wait(&t->send, MPI_STATUS_IGNORE));
}

void tied_recv_grad(TiedLink *t, const Pipeline *p, Model *m) {
    if (!holds_table(p, m)) return;
    float *buf = t->host ? t->host : m->tied_grad;
    MPI_CHECK(MPI_Recv(buf, count_of(m), MPI_FLOAT, p->stages - 1, TAG_GRAD, p->pipe_comm,
                       MPI_STATUS_IGNORE));
    if (t->host) m->be->upload(m->ctx, m->tied_grad, t->host, m->tied_count * sizeof(float));
    m->tied_pending = 1;
}

/* The table is the first parameters of stage 0 (its token embedding is row 0). */
void tied_refresh(TiedLink *t, const Pipeline *p, Model *m) {
    if (holds_table(p, m)) {
        const float *buf = m->params;
        if (t->host) {
            m->be->download(m->ctx, t->host, m->params, m->tied_count * sizeof(float));
            buf = t->host;
        }
        MPI_CHECK(MPI_Send(buf, count_of(m), MPI_FLOAT, p->stages - 1, TAG_TABLE, p->pipe_comm));
    } else if (holds_copy(p, m)) {
        float *buf = t->host ? t->host : m->tied_w;
        MPI_CHECK(MPI_Recv(buf, count_of(m), MPI_FLOAT, 0, TAG_TABLE, p->pipe_comm,
                           MPI_STATUS_IGNORE));
        if (t->host) m->be->upload(m->ctx, m->tied_w, t->host, m->tied_count * sizeof(float));
    }
}
