/* watchdog_records.c - a rank's unwritten iteration records, kept by itself and sent to its keeper
 * (see watchdog_records.h). */
#define _GNU_SOURCE
#include "watchdog_records.h"
#include "alloc.h" /* defines: xcalloc, xrealloc */
#include "watchdog_wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define KEEPER_ADDRS 16

typedef struct {
    WirePacket h;
    int64_t written, first, done; /* the sender's written and completed iterations; rec[0]'s */
    int32_t n, pad;
    IterRecord rec[RECORDS_PER_PACKET];
} RecordsPacket;

typedef struct {
    WirePacket h; /* h.rank: the keeper */
    int64_t held; /* it holds `source`'s iterations up to held-1 (from what was written) */
    int32_t source, pad;
} HeldPacket;

/* Records of iterations first .. end-1. */
typedef struct {
    int64_t first, end, done;
    IterRecord *rec;
    int64_t cap;
    int answer;              /* a keeper's store: datagrams came since its last answer */
    struct sockaddr_in from; /* where they came from */
} Store;

static struct {
    int on, fd, rank, nranks, keeper;
    uint64_t token;
    struct sockaddr_in to[KEEPER_ADDRS];
    int nto;
    _Atomic int via; /* the one of to[] the keeper answered from (-1: none yet, send to all) */
    /* Own records: appended by the main thread, sent by it and, again, by the watchdog thread;
     * everything below under the lock. */
    pthread_mutex_t lock;
    Store own;
    int64_t sent;          /* own records sent up to sent-1 */
    _Atomic int64_t acked; /* the keeper holds own iterations up to acked-1 */
    Store *held;           /* [nranks]: what this rank keeps for others (watchdog thread only) */
} rs = {.lock = PTHREAD_MUTEX_INITIALIZER};

void records_init(int fd, uint64_t token, int rank, int nranks, int keeper, const uint32_t *addrs,
                  int naddrs, uint32_t port) {
    rs.fd = fd, rs.token = token, rs.rank = rank, rs.nranks = nranks, rs.keeper = keeper;
    rs.nto = 0;
    for (int a = 0; a < naddrs && a < KEEPER_ADDRS && addrs[a]; a++) {
        rs.to[rs.nto] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = (in_port_t)port};
        rs.to[rs.nto++].sin_addr.s_addr = addrs[a];
    }
    rs.held = xcalloc((size_t)nranks, sizeof *rs.held);
    rs.sent = 0;
    atomic_store(&rs.acked, 0), atomic_store(&rs.via, -1);
    rs.on = keeper != rank && rs.nto > 0;
}

/* Room for n records in s. */
static void reserve(Store *s, int64_t n) {
    if (n <= s->cap) return;
    s->cap = n > 2 * s->cap ? n : 2 * s->cap;
    s->rec = xrealloc(s->rec, (size_t)s->cap * sizeof *s->rec);
}

/* s without the records before `first`. */
static void drop_before(Store *s, int64_t first) {
    if (first <= s->first) return;
    if (first >= s->end) {
        s->first = s->end = first;
        return;
    }
    memmove(s->rec, s->rec + (first - s->first), (size_t)(s->end - first) * sizeof *s->rec);
    s->first = first;
}

/* Own records from `from` on to the keeper, at most `packets` datagrams (under the lock). */
static void send_own(int64_t from, int packets) {
    RecordsPacket p = {.h = {WD_MAGIC, rs.token, rs.rank, WD_RECORDS}};
    p.written = rs.own.first, p.done = rs.own.end;
    if (from < rs.own.first) from = rs.own.first;
    for (int k = 0; k < packets && from < rs.own.end; k++) {
        int64_t n = rs.own.end - from < RECORDS_PER_PACKET ? rs.own.end - from : RECORDS_PER_PACKET;
        p.first = from, p.n = (int32_t)n;
        memcpy(p.rec, rs.own.rec + (from - rs.own.first), (size_t)n * sizeof *p.rec);
        size_t len = offsetof(RecordsPacket, rec) + (size_t)n * sizeof *p.rec;
        int via = atomic_load(&rs.via);
        for (int a = via < 0 ? 0 : via; a < (via < 0 ? rs.nto : via + 1); a++)
            (void)sendto(rs.fd, &p, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&rs.to[a],
                         sizeof rs.to[a]);
        from += n;
    }
    if (from > rs.sent) rs.sent = from;
}

void records_add(int64_t iter, const IterRecord *rec) {
    if (!rs.held) return;
    pthread_mutex_lock(&rs.lock);
    if (iter != rs.own.end) rs.own.first = rs.own.end = rs.sent = iter; /* not in order: anew */
    reserve(&rs.own, rs.own.end - rs.own.first + 1);
    rs.own.rec[rs.own.end++ - rs.own.first] = *rec;
    if (rs.on) send_own(rs.sent, 2); /* what was not sent yet: normally this one record */
    pthread_mutex_unlock(&rs.lock);
}

void records_written(int64_t written) {
    if (!rs.held) return;
    pthread_mutex_lock(&rs.lock);
    drop_before(&rs.own, written);
    pthread_mutex_unlock(&rs.lock);
}

void records_resend(void) {
    if (!rs.on) return;
    pthread_mutex_lock(&rs.lock);
    int64_t acked = atomic_load(&rs.acked);
    if (acked < rs.sent) send_own(acked, 4); /* lost on the way, or not confirmed yet */
    pthread_mutex_unlock(&rs.lock);
}

/* A keeper's datagram: what follows what it holds is kept; it answers once per drain. */
static void keep(const RecordsPacket *p, const struct sockaddr_in *from) {
    Store *s = &rs.held[p->h.rank];
    drop_before(s, p->written);
    if (p->first <= s->end && p->first + p->n > s->end) {
        int64_t skip = s->end - p->first, add = p->n - skip;
        reserve(s, s->end - s->first + add);
        memcpy(s->rec + (s->end - s->first), p->rec + skip, (size_t)add * sizeof *s->rec);
        s->end += add;
    }
    if (p->done > s->done) s->done = p->done;
    s->answer = 1, s->from = *from;
}

void records_answer(void) {
    for (int r = 0; rs.held && r < rs.nranks; r++) {
        Store *s = &rs.held[r];
        if (!s->answer) continue;
        HeldPacket a = {.h = {WD_MAGIC, rs.token, rs.rank, WD_HELD}, .held = s->end, .source = r};
        (void)sendto(rs.fd, &a, sizeof a, MSG_DONTWAIT | MSG_NOSIGNAL,
                     (const struct sockaddr *)&s->from, sizeof s->from);
        s->answer = 0;
    }
}

void records_receive(const void *packet, size_t len, const struct sockaddr_in *from) {
    const WirePacket *h = packet;
    if (!rs.held || h->rank < 0 || h->rank >= rs.nranks || h->rank == rs.rank) return;
    if (h->kind == WD_RECORDS && len >= offsetof(RecordsPacket, rec)) {
        const RecordsPacket *p = packet;
        if (p->n > 0 && p->n <= RECORDS_PER_PACKET && p->first >= p->written &&
            len == offsetof(RecordsPacket, rec) + (size_t)p->n * sizeof(IterRecord))
            keep(p, from);
    } else if (h->kind == WD_HELD && len == sizeof(HeldPacket)) {
        const HeldPacket *a = packet;
        if (a->h.rank != rs.keeper || a->source != rs.rank) return;
        if (a->held > atomic_load(&rs.acked)) atomic_store(&rs.acked, a->held);
        for (int i = 0; i < rs.nto && atomic_load(&rs.via) < 0; i++) /* the address that works */
            if (rs.to[i].sin_addr.s_addr == from->sin_addr.s_addr) atomic_store(&rs.via, i);
    }
}

static void append(char **buf, size_t *len, size_t *cap, const void *data, size_t n) {
    if (*len + n > *cap) {
        *cap = *len + n > 2 * *cap ? *len + n : 2 * *cap;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, data, n);
    *len += n;
}

static void dump_store(char **buf, size_t *len, size_t *cap, int rank, int own, const Store *s) {
    RecordsBlock b = {rank, own, s->first, s->end - s->first, s->done > s->end ? s->done : s->end};
    append(buf, len, cap, &b, sizeof b);
    append(buf, len, cap, s->rec, (size_t)b.n * sizeof *s->rec);
}

char *records_dump(size_t *len) {
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    if (!rs.held) return NULL;
    pthread_mutex_lock(&rs.lock);
    dump_store(&buf, len, &cap, rs.rank, 1, &rs.own);
    pthread_mutex_unlock(&rs.lock);
    for (int r = 0; r < rs.nranks; r++)
        if (rs.held[r].end > 0 || rs.held[r].done > 0)
            dump_store(&buf, len, &cap, r, 0, &rs.held[r]);
    return buf;
}

void records_free(void) {
    pthread_mutex_lock(&rs.lock);
    if (rs.held)
        for (int r = 0; r < rs.nranks; r++)
            free(rs.held[r].rec);
    free(rs.held), free(rs.own.rec);
    rs.held = NULL, rs.own = (Store){0}, rs.on = 0;
    pthread_mutex_unlock(&rs.lock);
}
