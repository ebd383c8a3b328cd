/* watchdog.c - the heartbeat thread of --peer-timeout (see watchdog.h for the design): UDP
 * datagrams to and from the neighbours on the rank ring, port-unreachable reports read from the
 * socket's error queue (IP_RECVERR), and on a loss the serial finalizer (src/survival/finalize.c).
 * MPI is called only by watchdog_start, from the main thread. */
#define _GNU_SOURCE
#include "watchdog.h"
#include "mpi_check.h"
#include "finalize.h"
#include "alloc.h"   /* defines: xcalloc */
#include "fail.h"    /* defines: check_fail, dt_hostname */
#include "outputs.h" /* defines: dt_exit_status */
#include "watchdog_host.h"
#include "watchdog_records.h"
#include "watchdog_wire.h"
#include "watchdog_witness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WD_ADDRS       16  /* IPv4 addresses kept per rank */
#define WD_HOST        64  /* host name bytes */
#define WD_GONE_GRACE  1.0 /* s of silence before a peer known to be gone is declared lost */
#define WD_PROBE_EVERY 0.2 /* s between probes of a suspect's witness */
#define WD_PROBE_WAIT  1.0 /* s of probing without an answer: its node is dead */

typedef struct {
    uint32_t addr[WD_ADDRS]; /* network order; 0: unused */
    uint32_t port;           /* network order */
    uint32_t witness_port;   /* its node witness's (watchdog_witness.h); 0: none */
    int32_t pid;
    uint64_t pidns; /* inode of /proc/self/ns/pid: pids compare only within one */
    uint64_t start; /* start time in /proc/PID/stat: a reused pid is another process */
    char host[WD_HOST];
} PeerInfo;

typedef struct {
    int rank;
    double last;                  /* last heartbeat seen, s (monotonic) */
    int bye;                      /* it ended its run normally */
    int heard;                    /* a datagram of it has arrived */
    uint32_t seen_from[WD_ADDRS]; /* source addresses of its heartbeats */
    int refused;                  /* its port was unreachable at one of them */
    /* Suspected (silent for more than a heartbeat, or refused) since this time (0: not): its
     * witness is probed until it answers (its node lives) or its port is unreachable. */
    double suspect_since, next_probe, witness_seen;
    int witness_refused;
} Neighbour;

typedef WirePacket Packet;

static struct {
    int on, fd, rank, nranks;
    double timeout, interval;
    uint64_t token;
    PeerInfo *peers;
    Neighbour nb[2 * WATCHDOG_NEIGHBOURS];
    int nnb;
    char path[PATH_MAX];
    pthread_t thread;
    atomic_int stop;    /* set by watchdog_stop, read by the thread */
    atomic_int heard;   /* neighbours heard at least once (watchdog_start waits for all) */
    atomic_int judging; /* silence counts only once every rank has heard all its neighbours */
    int mute;           /* tests only: DTBENCH_TEST_MUTE_HEARTBEAT names this rank, it sends none */
    int over;           /* the neighbour that said a peer was lost (-1: none) */
    atomic_int leaving; /* the finalizer writes this rank's records: the recorder writes none */
    atomic_int abandoning; /* watchdog_abandon_run: the thread judges no one any more */
} wd;

/* The thread's naps end early when the watchdog stops (stop_thread): a run's exit does not wait
 * out a nap. */
static pthread_mutex_t nap_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nap_cv = PTHREAD_COND_INITIALIZER; /* on CLOCK_REALTIME */

static void nap(long ns) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += ns;
    until.tv_sec += until.tv_nsec / 1000000000L, until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&nap_mu);
    while (!wd.stop && pthread_cond_timedwait(&nap_cv, &nap_mu, &until) != ETIMEDOUT) continue;
    pthread_mutex_unlock(&nap_mu);
}

static void stop_thread(void) {
    pthread_mutex_lock(&nap_mu);
    wd.stop = 1;
    pthread_cond_broadcast(&nap_cv);
    pthread_mutex_unlock(&nap_mu);
    pthread_join(wd.thread, NULL);
}

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int same_host(int peer) {
    return !strcmp(wd.peers[peer].host, wd.peers[wd.rank].host);
}

/* p to every address of rank `peer` at `port` (loopback only towards its own host). */
static void send_to(int peer, uint32_t port, const Packet *p) {
    const PeerInfo *q = &wd.peers[peer];
    for (int a = 0; a < WD_ADDRS && q->addr[a]; a++) {
        if (ipv4_is_loopback(q->addr[a]) && !same_host(peer)) continue;
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = (in_port_t)port};
        to.sin_addr.s_addr = q->addr[a];
        (void)sendto(wd.fd, p, sizeof *p, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&to,
                     sizeof to);
    }
}

static void send_all(int kind) {
    Packet p = {WD_MAGIC, wd.token, wd.rank, kind};
    if (wd.mute) return;
    for (int i = 0; i < wd.nnb; i++)
        if (!wd.nb[i].bye) send_to(wd.nb[i].rank, wd.peers[wd.nb[i].rank].port, &p);
}

static Neighbour *neighbour(int rank) {
    for (int i = 0; i < wd.nnb; i++)
        if (wd.nb[i].rank == rank) return &wd.nb[i];
    return NULL;
}

/* Datagrams waiting on the socket: heartbeats, goodbyes, witnesses' answers, records. Returns
 * how many were read. */
static int receive(double now) {
    union {
        Packet h;
        char bytes[2048];
    } buf;
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    int i = 0;
    for (; i < 100000; i++) {
        ssize_t got =
            recvfrom(wd.fd, &buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &len);
        len = sizeof from;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        /* shorter: a pending ICMP error (read_errors), or junk */
        if (got < (ssize_t)sizeof buf.h || buf.h.magic != WD_MAGIC || buf.h.token != wd.token)
            continue;
        const Packet *p = &buf.h;
        if (p->kind == WD_RECORDS || p->kind == WD_HELD) {
            records_receive(&buf, (size_t)got, &from);
            continue;
        }
        Neighbour *n = got == (ssize_t)sizeof *p ? neighbour(p->rank) : NULL;
        if (!n || p->kind == WD_PROBE) continue;
        if (p->kind == WD_ALIVE) { /* its witness: its node lives */
            n->witness_seen = now;
            continue;
        }
        n->last = now, n->refused = 0;
        if (!n->heard) n->heard = 1, atomic_fetch_add(&wd.heard, 1);
        if (p->kind == WD_GOODBYE || p->kind == WD_RUN_OVER) n->bye = 1;
        if (p->kind == WD_RUN_OVER && wd.over < 0) wd.over = p->rank;
        for (int a = 0; a < WD_ADDRS; a++) {
            if (n->seen_from[a] == from.sin_addr.s_addr) break;
            if (!n->seen_from[a]) {
                n->seen_from[a] = from.sin_addr.s_addr;
                break;
            }
        }
    }
    records_answer();
    return i;
}

/* Port-unreachable reports (IP_RECVERR): the neighbour (or its witness) whose port it is, at an
 * address its heartbeats came from, has no socket any more. Reports for other addresses are ignored
 * (a peer's address list may name interfaces that other hosts have too). */
static void read_errors(void) {
    for (;;) {
        char ctrl[512], data[64];
        struct sockaddr_in dst;
        struct iovec io = {data, sizeof data};
        struct msghdr m = {.msg_name = &dst,
                           .msg_namelen = sizeof dst,
                           .msg_iov = &io,
                           .msg_iovlen = 1,
                           .msg_control = ctrl,
                           .msg_controllen = sizeof ctrl};
        if (recvmsg(wd.fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != SOL_IP || c->cmsg_type != IP_RECVERR) continue;
            const struct sock_extended_err *e = (const void *)CMSG_DATA(c);
            if (e->ee_origin != SO_EE_ORIGIN_ICMP || e->ee_errno != ECONNREFUSED) continue;
            for (int i = 0; i < wd.nnb; i++) {
                Neighbour *n = &wd.nb[i];
                const PeerInfo *q = &wd.peers[n->rank];
                int *flag = q->port == dst.sin_port ? &n->refused
                            : q->witness_port && q->witness_port == dst.sin_port
                                ? &n->witness_refused
                                : NULL;
                for (int a = 0; flag && a < WD_ADDRS && n->seen_from[a]; a++)
                    if (n->seen_from[a] == dst.sin_addr.s_addr) *flag = 1;
            }
        }
    }
}

/* A neighbour on this host, in this pid namespace, whose process no longer exists: no such pid,
 * another process under it, or a zombie waiting for its parent. */
static int process_gone(const PeerInfo *q) {
    const PeerInfo *me = &wd.peers[wd.rank];
    if (strcmp(q->host, me->host) != 0 || !q->pidns || q->pidns != me->pidns || !q->start) return 0;
    char state;
    uint64_t t = proc_start_time(q->pid, &state);
    if (t == 0) return kill(q->pid, 0) != 0 && errno == ESRCH;
    return t != q->start || state == 'Z' || state == 'X';
}

/* Is the node of neighbour n alive? 1: yes (it is this host, or its witness answered since n
 * became suspect); 0: no (the witness's port is unreachable, or it did not answer for
 * WD_PROBE_WAIT s of probing); -1: not known yet; -2: n has no witness. */
static int node_alive(const Neighbour *n, double now) {
    if (same_host(n->rank)) return 1;
    if (!wd.peers[n->rank].witness_port) return -2;
    if (n->suspect_since > 0 && n->witness_seen >= n->suspect_since) return 1;
    if (n->witness_refused) return 0;
    return n->suspect_since > 0 && now - n->suspect_since >= WD_PROBE_WAIT ? 0 : -1;
}

/* How n was lost, as the finalizer's --lost takes it: its process ended (`gone`) or it fell
 * silent, on a node that lives (gone, frozen) or not (down, silent). */
static const char *loss_kind(const Neighbour *n, int gone, double now) {
    int alive = node_alive(n, now);
    if (alive == -2) alive = gone; /* no witness: a silent rank's node counts as lost */
    return gone ? (alive > 0 ? "gone" : "down") : (alive > 0 ? "frozen" : "silent");
}

/* Every record this rank holds (its own unwritten ones and those it keeps for others) to a
 * finalizer, which writes them; its exit status. From now on the recorder writes nothing. */
static int finalize_with_records(char **argv) {
    atomic_store(&wd.leaving, 1);
    size_t len = 0;
    char *records = records_dump(&len);
    int code = finalize_start(argv, records, len);
    free(records);
    return code;
}

/* A neighbour is lost: report, mark the file, end this process. Every neighbour silent for half
 * the timeout or more goes with it (the ranks of a dead node stop together). */
static _Noreturn void peer_lost(double now, const Neighbour *first, int gone) {
    char args[2 * WATCHDOG_NEIGHBOURS][64], rank_text[16];
    char *argv[9 + 2 * 2 * WATCHDOG_NEIGHBOURS];
    int na = 0, k = 0;
    argv[na++] = "dtbench", argv[na++] = "--finalize", argv[na++] = wd.path;
    snprintf(rank_text, sizeof rank_text, "%d", wd.rank);
    argv[na++] = "--by", argv[na++] = rank_text, argv[na++] = "--records";
    const char *first_kind = loss_kind(first, gone, now);
    for (int i = 0; i < wd.nnb; i++) {
        const Neighbour *n = &wd.nb[i];
        double silent = now - n->last;
        if (n->bye || (n != first && silent < wd.timeout / 2)) continue;
        snprintf(args[k], sizeof args[k], "%d:%.1f:%s", n->rank, silent,
                 n == first ? first_kind : loss_kind(n, 0, now));
        argv[na++] = "--lost", argv[na++] = args[k++];
    }
    argv[na] = NULL;
    const PeerInfo *q = &wd.peers[first->rank];
    int node_dead = !strcmp(first_kind, "down") || !strcmp(first_kind, "silent");
    fprintf(stderr,
            "dtbench: rank %d on %s: rank %d on %s %s for %.1f s%s (--peer-timeout %g); closing "
            "%s as stop_reason=peer_lost and ending this rank (exit %d)\n",
            wd.rank, wd.peers[wd.rank].host, first->rank, q->host,
            gone ? "is gone (its process ended), silent" : "silent", now - first->last,
            node_dead ? ", its node too" : "", wd.timeout, wd.path, WATCHDOG_EXIT_STATUS);
    fflush(stderr);
    int code = finalize_with_records(argv);
    if (code == FINALIZE_ALREADY_CLOSED) { /* the run had ended: a clean file */
        send_all(WD_GOODBYE), send_all(WD_GOODBYE);
        _exit(dt_exit_status);
    }
    /* Leaving on purpose, and telling the neighbours the run is over: they leave too and pass it
     * on, so that ranks that do not watch the lost one end as well even when the launcher does
     * not end a job on a failed rank; nobody takes a leaving rank for a lost one. */
    send_all(WD_RUN_OVER), send_all(WD_RUN_OVER);
    if (code != 0)
        fprintf(stderr,
                "dtbench: rank %d: the finalizer of %s failed (%d); the file keeps every "
                "written block but is not marked\n",
                wd.rank, wd.path, code);
    _exit(WATCHDOG_EXIT_STATUS);
}

/* A neighbour lost a peer and the file is closed: pass it on, write what this rank holds, and
 * leave. */
static _Noreturn void run_over(void) {
    fprintf(stderr,
            "dtbench: rank %d on %s: rank %d on %s says the run is over (a lost peer or a write "
            "error; the file is closed); writing the records this rank holds and ending it "
            "(exit %d)\n",
            wd.rank, wd.peers[wd.rank].host, wd.over, wd.peers[wd.over].host, WATCHDOG_EXIT_STATUS);
    fflush(stderr);
    send_all(WD_RUN_OVER);
    char rank_text[16];
    snprintf(rank_text, sizeof rank_text, "%d", wd.rank);
    char *argv[] = {"dtbench", "--finalize", wd.path, "--by", rank_text, "--records", NULL};
    int code = finalize_with_records(argv);
    if (code != 0 && code != FINALIZE_ALREADY_CLOSED)
        fprintf(stderr, "dtbench: rank %d: the finalizer could not write its records to %s (%d)\n",
                wd.rank, wd.path, code);
    send_all(WD_RUN_OVER);
    _exit(WATCHDOG_EXIT_STATUS);
}

/* A neighbour silent for more than a heartbeat (or refused) is suspect: its witness is probed
 * until the verdict. */
static void watch_suspect(Neighbour *n, int gone, double silent, double now) {
    int suspect = gone || silent > wd.interval + 0.25;
    if (!suspect) {
        n->suspect_since = 0;
        return;
    }
    if (n->suspect_since == 0) n->suspect_since = now, n->next_probe = now, n->witness_refused = 0;
    const PeerInfo *q = &wd.peers[n->rank];
    if (now < n->next_probe || !q->witness_port || same_host(n->rank)) return;
    Packet p = {WD_MAGIC, wd.token, wd.rank, WD_PROBE};
    send_to(n->rank, q->witness_port, &p);
    n->next_probe = now + WD_PROBE_EVERY;
}

static void *watch(void *unused) {
    (void)unused;
    double next = 0, prev = mono();
    int drained = 0;
    while (!wd.stop) {
        double now = mono();
        if (now >= next) send_all(WD_HEARTBEAT), records_resend(), next = now + wd.interval;
        /* Asleep, not waiting on the socket: a datagram per recorded iteration would wake this
         * thread as often (watchdog_records.h); sooner when the last drain was large, or while a
         * neighbour is still unheard (watchdog_start waits for them all). */
        nap(drained > 64 || atomic_load(&wd.heard) < wd.nnb ? 10000000L : 100000000L);
        now = mono();
        /* This thread did not run for a while (host frozen, suspended, starved): that time is
         * not the neighbours' silence. */
        if (now - prev > 1.0)
            for (int i = 0; i < wd.nnb; i++) {
                wd.nb[i].last += now - prev;
                if (wd.nb[i].suspect_since > 0) wd.nb[i].suspect_since += now - prev;
            }
        prev = now;
        drained = receive(now);
        if (wd.over >= 0) run_over();
        read_errors();
        for (int i = 0;
             i < wd.nnb && !wd.stop && atomic_load(&wd.judging) && !atomic_load(&wd.abandoning);
             i++) {
            Neighbour *n = &wd.nb[i];
            if (n->bye) continue;
            double silent = now - n->last;
            int gone = n->refused || process_gone(&wd.peers[n->rank]);
            watch_suspect(n, gone, silent, now);
            if (((gone && silent >= WD_GONE_GRACE) || silent >= wd.timeout) &&
                node_alive(n, now) != -1)
                peer_lost(now, n, gone && silent < wd.timeout);
        }
    }
    return NULL;
}

/* The neighbours: up to WATCHDOG_NEIGHBOURS ranks on each side of the ring, each once. */
static void choose_neighbours(double now) {
    int k = WATCHDOG_NEIGHBOURS < wd.nranks - 1 ? WATCHDOG_NEIGHBOURS : wd.nranks - 1;
    wd.nnb = 0;
    for (int d = 1; d <= k; d++)
        for (int s = -1; s <= 1; s += 2) {
            int r = ((wd.rank + s * d) % wd.nranks + wd.nranks) % wd.nranks;
            if (r == wd.rank || neighbour(r)) continue;
            wd.nb[wd.nnb++] = (Neighbour){.rank = r, .last = now};
        }
}

static int open_socket(PeerInfo *me, char *err, size_t errlen) {
    wd.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof any;
    int on = 1;
    if (wd.fd < 0 || bind(wd.fd, (struct sockaddr *)&any, sizeof any) != 0 ||
        getsockname(wd.fd, (struct sockaddr *)&any, &len) != 0 ||
        setsockopt(wd.fd, SOL_IP, IP_RECVERR, &on, sizeof on) != 0) {
        snprintf(err, errlen,
                 "--peer-timeout: rank %d on %s: cannot open a UDP socket for the "
                 "heartbeats: %s (--peer-timeout 0 turns them off)",
                 wd.rank, dt_hostname(), strerror(errno));
        return -1;
    }
    me->port = any.sin_port;
    int room = 4 << 20; /* records of the ranks this one keeps arrive in bursts */
    (void)setsockopt(wd.fd, SOL_SOCKET, SO_RCVBUF, &room, sizeof room);
    if (witness_open(&me->witness_port) != 0) me->witness_port = 0; /* judged without it */
    return 0;
}

/* The keeper of this rank's unwritten records (watchdog_records.h): the next rank on the ring
 * that runs on another host, else the next rank. */
static void start_records(void) {
    int keeper = (wd.rank + 1) % wd.nranks;
    for (int d = 1; d < wd.nranks; d++)
        if (!same_host((wd.rank + d) % wd.nranks)) {
            keeper = (wd.rank + d) % wd.nranks;
            break;
        }
    const PeerInfo *q = &wd.peers[keeper];
    uint32_t addrs[WD_ADDRS];
    int n = 0;
    for (int a = 0; a < WD_ADDRS && q->addr[a]; a++)
        if (!ipv4_is_loopback(q->addr[a]) || same_host(keeper)) addrs[n++] = q->addr[a];
    records_init(wd.fd, wd.token, wd.rank, wd.nranks, keeper, addrs, n, q->port);
}

/* Collective: every rank has heard every neighbour once (within the timeout), or the watchdog is
 * off again on every rank and err names a pair that cannot hear each other (a firewall on UDP
 * would otherwise make every run lose its peers after the timeout). */
static int heard_from_all(MPI_Comm comm, char *err, size_t errlen) {
    double wait = wd.timeout < 30 ? wd.timeout : 30, until = mono() + wait;
    while (atomic_load(&wd.heard) < wd.nnb && mono() < until)
        usleep(10000);
    int ok = atomic_load(&wd.heard) >= wd.nnb, all = 0;
    MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm));
    /* Until this verdict, a neighbour never heard is the start-up check's to report (exit 2), not a
     * lost peer: with a short --peer-timeout the thread would otherwise judge it first. */
    if (all) {
        atomic_store(&wd.judging, 1);
        return 0;
    }
    stop_thread();
    close(wd.fd);
    witness_stop();
    records_free();
    wd.on = 0;
    const Neighbour *n = NULL;
    for (int i = 0; i < wd.nnb && !n; i++)
        if (!wd.nb[i].heard) n = &wd.nb[i];
    if (n)
        snprintf(err, errlen,
                 "--peer-timeout: rank %d on %s heard no UDP heartbeat from rank %d on %s in %g s "
                 "(UDP between the nodes blocked?); --peer-timeout 0 runs without dead-peer "
                 "detection",
                 wd.rank, wd.peers[wd.rank].host, n->rank, wd.peers[n->rank].host, wait);
    else
        snprintf(err, errlen, "--peer-timeout: another rank heard no UDP heartbeat");
    free(wd.peers);
    return -1;
}

int watchdog_start(MPI_Comm comm, double timeout, const char *result_path, char *err,
                   size_t errlen) {
    MPI_CHECK(MPI_Comm_rank(comm, &wd.rank));
    MPI_CHECK(MPI_Comm_size(comm, &wd.nranks));
    if (timeout <= 0 || wd.nranks < 2) return 0;
    wd.timeout = timeout;
    wd.interval = timeout / 5 < 1.0 ? timeout / 5 : 1.0;
    snprintf(wd.path, sizeof wd.path, "%s", result_path);
    const char *mute = getenv("DTBENCH_TEST_MUTE_HEARTBEAT");
    wd.mute = mute && atoi(mute) == wd.rank;
    wd.over = -1;
    char state;
    PeerInfo me = {.pid = (int32_t)getpid(), .pidns = proc_pid_namespace()};
    me.start = proc_start_time(getpid(), &state);
    snprintf(me.host, sizeof me.host, "%s", dt_hostname());
    host_ipv4_addresses(me.addr, WD_ADDRS);
    int ok = open_socket(&me, err, errlen) == 0, all = 0;
    MPI_CHECK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm));
    if (!all) {
        if (ok) snprintf(err, errlen, "--peer-timeout: another rank cannot open its UDP socket");
        if (wd.fd >= 0) close(wd.fd);
        return -1;
    }
    /* A token of the job: a datagram of another job that reuses a port is ignored. */
    wd.token = ((uint64_t)getpid() << 32) ^ (uint64_t)(mono() * 1e9);
    MPI_CHECK(MPI_Bcast(&wd.token, 1, MPI_UINT64_T, 0, comm));
    wd.peers = xcalloc((size_t)wd.nranks, sizeof *wd.peers);
    MPI_CHECK(
        MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, wd.peers, (int)sizeof me, MPI_BYTE, comm));
    choose_neighbours(mono());
    start_records();
    /* Its witness answers a while after the rank ended: for as long as a neighbour may take to
     * judge it (silence for the timeout, then the probes). */
    if (me.witness_port && witness_start(wd.token, wd.rank, wd.timeout + 5.0) != 0)
        fprintf(stderr,
                "dtbench: warning: rank %d on %s: no node witness (fork: %s); its neighbours will "
                "take it for a lost node if its process ends\n",
                wd.rank, me.host, strerror(errno));
    /* The thread takes no stop signal: SIGTERM/SIGUSR1 go to the main thread (signals.c). A
     * finalizer that ends before reading its records is EPIPE, an error (signals.c: SIGPIPE). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM), sigaddset(&block, SIGUSR1), sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = pthread_create(&wd.thread, NULL, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) check_fail(__FILE__, __LINE__, "pthread_create (watchdog)", strerror(rc));
    wd.on = 1;
    return heard_from_all(comm, err, errlen);
}

void watchdog_stop(void) {
    if (!wd.on) return;
    stop_thread();
    send_all(WD_GOODBYE), send_all(WD_GOODBYE); /* twice: a datagram may be dropped */
    witness_stop();
    close(wd.fd);
    records_free();
    free(wd.peers);
    wd.on = 0;
}

void watchdog_record(int64_t iter, const IterRecord *rec) {
    if (wd.on) records_add(iter, rec);
}

void watchdog_written(int64_t written) {
    if (wd.on) records_written(written);
}

int watchdog_leaving(void) {
    return atomic_load(&wd.leaving);
}

void watchdog_abandon_run(const char *path, const char *detail, MPI_Comm comm) {
    fflush(stderr);
    atomic_store(&wd.abandoning, 1);
    char rank_text[16];
    snprintf(rank_text, sizeof rank_text, "%d", wd.rank);
    char *argv[] = {"dtbench",       "--finalize",   (char *)path, "--by", rank_text,
                    "--write-error", (char *)detail, "--records",  NULL};
    if (!wd.on) argv[7] = NULL; /* no records kept without the watchdog */
    int code = wd.on ? finalize_with_records(argv) : finalize_start(argv, NULL, 0);
    if (code != 0)
        fprintf(stderr,
                "dtbench: rank %d: the finalizer of %s failed (%d); the file keeps every "
                "written block but is not marked\n",
                wd.rank, path, code);
    if (wd.on) /* the others wait inside HDF5: told that the run is over, they leave */
        send_all(WD_RUN_OVER), send_all(WD_RUN_OVER);
    int nranks = 1;
    MPI_Comm_size(comm, &nranks);
    if (!wd.on && nranks > 1) MPI_Abort(comm, 1);
    _exit(1);
}

const RecordKeeper watchdog_keeper = {.record = watchdog_record,
                                      .written = watchdog_written,
                                      .leaving = watchdog_leaving,
                                      .abandon_run = watchdog_abandon_run};
