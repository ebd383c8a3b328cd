/* signals.c - SIGTERM / SIGUSR1 handlers that only record the request (see signals.h). */
#define _GNU_SOURCE
#include "signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received = 0;

static void on_signal(int sig) {
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
