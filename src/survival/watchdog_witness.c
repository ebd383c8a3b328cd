/* watchdog_witness.c - the node witness of a rank (see watchdog_witness.h): spawned as a process
 * of its own (witness_exec_main), which forks the witness and ends. */
#define _GNU_SOURCE
#include "watchdog_witness.h"
#include "watchdog_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int sock = -1, bye = -1; /* the witness's socket (until started), the pipe to it */

int witness_open(uint32_t *port) {
    sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof any;
    if (sock < 0 || bind(sock, (struct sockaddr *)&any, sizeof any) != 0 ||
        getsockname(sock, (struct sockaddr *)&any, &len) != 0) {
        if (sock >= 0) close(sock);
        sock = -1;
        return -1;
    }
    *port = any.sin_port;
    return 0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every descriptor but a and b closed (the rank's result file, MPI's sockets, its output pipes:
 * a launcher waits for those to close), 0-2 on /dev/null. */
static void close_all_but(int a, int b) {
    int lo = a < b ? a : b, hi = a < b ? b : a;
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++)
        if (null >= 0 && fd != null) dup2(null, fd);
    if (null > 2) close(null);
    struct rlimit rl;
    long top =
        getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;
    int ranges[3][2] = {{3, lo - 1}, {lo + 1, hi - 1}, {hi + 1, (int)top}};
    for (int r = 0; r < 3; r++) {
        if (ranges[r][0] > ranges[r][1]) continue;
        if (syscall(SYS_close_range, (unsigned)ranges[r][0], (unsigned)ranges[r][1], 0u) == 0)
            continue;
        for (int fd = ranges[r][0]; fd <= ranges[r][1]; fd++)
            close(fd);
    }
}

static _Noreturn void witness_main(int fd, int from_rank, uint64_t token, int rank, double linger) {
    setsid(); /* a launcher ending the job's process groups does not end it */
    struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
    sigaction(SIGTERM, &dfl, NULL), sigaction(SIGINT, &dfl, NULL), sigaction(SIGHUP, &dfl, NULL);
    sigaction(SIGUSR1, &dfl, NULL), sigaction(SIGUSR2, &dfl, NULL), sigaction(SIGPIPE, &ign, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (fd < 3) fd = fcntl(fd, F_DUPFD, 3); /* out of the way of 0-2 */
    if (from_rank < 3) from_rank = fcntl(from_rank, F_DUPFD, 3);
    close_all_but(fd, from_rank);
    double until = 0; /* 0: the rank lives */
    struct pollfd p[2] = {{fd, POLLIN, 0}, {from_rank, POLLIN, 0}};
    for (;;) {
        int ms = until > 0 ? (int)((until - now_s()) * 1000) + 1 : -1;
        if (until > 0 && ms <= 0) _exit(0);
        if (poll(p, until > 0 ? 1 : 2, ms) < 0 && errno != EINTR) _exit(1);
        if (until == 0 && p[1].revents) {
            char c = 0;
            ssize_t n = read(from_rank, &c, 1);
            if (n == 1 && c == 'b') _exit(0);     /* a normal end */
            if (n <= 0) until = now_s() + linger; /* the rank ended: answer a while more */
        }
        if (!(p[0].revents & POLLIN)) continue;
        WirePacket q;
        struct sockaddr_in src;
        socklen_t len = sizeof src;
        ssize_t got = recvfrom(fd, &q, sizeof q, MSG_DONTWAIT, (struct sockaddr *)&src, &len);
        if (got != (ssize_t)sizeof q || q.magic != WD_MAGIC || q.token != token ||
            q.kind != WD_PROBE)
            continue;
        WirePacket a = {WD_MAGIC, token, rank, WD_ALIVE};
        (void)sendto(fd, &a, sizeof a, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&src, len);
    }
}

/* Started by posix_spawn (a vfork: the rank's pages are neither shared with it nor made
 * copy-on-write for the rank, which a fork of a rank holding gigabytes of parameters would do:
 * every page the rank then writes first would be copied, seconds in its first iteration, and the
 * witness would keep the originals), as `dtbench --witness SOCK PIPE TOKEN RANK LINGER`. That
 * small process forks the witness (no child of the rank's) and ends. */
int witness_start(uint64_t token, int rank, double linger) {
    if (sock < 0) return -1;
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        close(sock), sock = -1;
        return -1;
    }
    /* the two descriptors the witness keeps, without close-on-exec, above both */
    const int fd = (sock > pipefd[0] ? sock : pipefd[0]) + 1, from_rank = fd + 1;
    char a_fd[16], a_from[16], a_token[24], a_rank[16], a_linger[32];
    snprintf(a_fd, sizeof a_fd, "%d", fd), snprintf(a_from, sizeof a_from, "%d", from_rank);
    snprintf(a_token, sizeof a_token, "%llu", (unsigned long long)token);
    snprintf(a_rank, sizeof a_rank, "%d", rank);
    snprintf(a_linger, sizeof a_linger, "%.17g", linger);
    char *argv[] = {"dtbench", "--witness", a_fd, a_from, a_token, a_rank, a_linger, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sock, fd);
    posix_spawn_file_actions_adddup2(&fa, pipefd[0], from_rank);
    pid_t child = -1;
    int rc = posix_spawn(&child, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[0]), close(sock), sock = -1;
    int st = 0;
    if (rc != 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        close(pipefd[1]);
        errno = rc ? rc : ECHILD;
        return -1;
    }
    bye = pipefd[1];
    return 0;
}

int witness_exec_main(int argc, char **argv) {
    if (argc != 7) return 2;
    const int fd = atoi(argv[2]), from_rank = atoi(argv[3]), rank = atoi(argv[5]);
    const uint64_t token = strtoull(argv[4], NULL, 10);
    const double linger = strtod(argv[6], NULL);
    prctl(PR_SET_NAME, "dtbench"); /* run as /proc/self/exe: named "exe" otherwise */
    pid_t child = fork();
    if (child == 0) witness_main(fd, from_rank, token, rank, linger);
    return child < 0 ? 1 : 0;
}

void witness_stop(void) {
    if (bye < 0) return;
    (void)!write(bye, "b", 1);
    close(bye), bye = -1;
}
