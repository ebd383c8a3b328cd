/* signals.c - SIGTERM / SIGUSR1 handlers that only record the request and its time (see
 * signals.h), SIGPIPE turned into EPIPE, and the stop file named by DTBENCH_STOP_FILE, looked for
 * at most every 0.25 s: the batch template creates it when it is asked to stop, so a request is
 * never lost, even when it comes before the launcher has started the ranks (a launcher drops such
 * a signal, or forwards it to a rank that is not yet running dtbench's code). */
#define _GNU_SOURCE
#include "signals.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t received = 0;
static struct timespec first; /* written once, by the handler (clock_gettime is signal-safe) */
static char stop_file[4096];
static double last_look;

static void on_signal(int sig) {
    if (!received) clock_gettime(CLOCK_MONOTONIC, &first);
    received = sig;
}

/* SIGPIPE's default action is death. The kernel sends it to a rank whose write meets a closed
 * socket: Open MPI's TCP link to a peer that was just killed, which the watchdog is about to find
 * lost. A write must fail with EPIPE instead (Open MPI then only reports the link), so that this
 * rank lives to mark the file; a handler, not SIG_IGN, so that programs it execs start with the
 * default. */
static void on_pipe(int sig) {
    (void)sig;
}

static void install(const char *file) {
    if (file && strlen(file) < sizeof stop_file) strcpy(stop_file, file);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_pipe;
    sigaction(SIGPIPE, &sa, NULL);
    /* Released: the front door (start.c) holds them across its exec; one sent meanwhile is
     * pending and reaches on_signal now. */
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &stops, NULL);
}

void signals_install(void) {
    install(getenv("DTBENCH_STOP_FILE"));
}

/* Before anything else of the process runs: the dynamic loader calls the program's
 * .preinit_array right after it has mapped and relocated the shared libraries, before their
 * constructors (MPI's, HDF5's, OpenBLAS's) and this program's own. Run directly, the window in
 * which a signal still has its default action (death) is the loader's own work, milliseconds;
 * through the front door (start.c) there is none. main calls signals_install again, which
 * changes nothing. The environment comes as an argument here. */
static void install_first(int argc, char **argv, char **envp) {
    (void)argc, (void)argv;
    const char *file = NULL;
    for (char **e = envp; e && *e; e++)
        if (!strncmp(*e, "DTBENCH_STOP_FILE=", 18)) file = *e + 18;
    install(file);
}
__attribute__((section(".preinit_array"),
               used)) static void (*const preinit_signals)(int, char **, char **) = install_first;

int signals_stop_requested(void) {
    if (received || !stop_file[0]) return received;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double now = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    if (now - last_look < 0.25) return 0;
    last_look = now;
    if (access(stop_file, F_OK) == 0 && !received) first = t, received = SIGUSR1;
    return received;
}

double signals_time(void) {
    return received ? (double)first.tv_sec + 1e-9 * (double)first.tv_nsec : 0.0;
}
