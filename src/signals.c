/* signals.c - SIGTERM / SIGUSR1 handlers that only record the request and its time (see
 * signals.h). */
#define _GNU_SOURCE
#include "signals.h"

#include <signal.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t received = 0;
static struct timespec first; /* written once, by the handler (clock_gettime is signal-safe) */

static void on_signal(int sig) {
    if (!received) clock_gettime(CLOCK_MONOTONIC, &first);
    received = sig;
}

void signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int signals_stop_requested(void) {
    return received;
}

double signals_time(void) {
    return received ? (double)first.tv_sec + 1e-9 * (double)first.tv_nsec : 0.0;
}
