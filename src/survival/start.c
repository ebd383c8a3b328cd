/* start.c - dtbench's front door (bin/dtbench, the name users and launchers run): holds SIGTERM
 * and SIGUSR1 (blocked: a stop sent now stays pending instead of killing) before anything else,
 * then executes the program itself, src/dtbench in the build tree or dtbench in pkglibexecdir once
 * installed, with the same arguments and environment. The program's first code (signals.c, its
 * .preinit_array) installs the handlers and releases the signals, so a stop pending since this
 * door is taken as a stop request. Without the door, the dynamic loader's work (mapping and
 * relocating MPI, HDF5, OpenBLAS and what they need: milliseconds) comes before any handler, and
 * a stop then kills the process. Linked statically where the C library allows it (configure):
 * then nothing runs before main but the C library's own start-up, microseconds. libc only. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DTBENCH_LIBEXECDIR
#define DTBENCH_LIBEXECDIR "/usr/local/libexec/dtbench"
#endif

/* An executable regular file? */
static int runnable(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The program: beside this door's folder as built (bin/../src/dtbench) or as installed in the
 * default layout, wherever the installation was moved (bin/../libexec/dtbench/dtbench), else
 * where it was installed. */
static const char *program(char *path, size_t len) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
        *slash = '\0';
        const char *beside[] = {"src/dtbench", "libexec/dtbench/dtbench"};
        for (int i = 0; i < 2; i++) {
            snprintf(path, len, "%s/../%s", self, beside[i]);
            if (runnable(path)) return path;
        }
    }
    snprintf(path, len, "%s/dtbench", DTBENCH_LIBEXECDIR);
    return path;
}

int main(int argc, char **argv) {
    (void)argc;
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGUSR1);
    sigprocmask(SIG_BLOCK, &stops, NULL);
    char path[PATH_MAX + 32];
    execv(program(path, sizeof path), argv);
    fprintf(stderr, "dtbench: cannot run the program %s: %s\n", path, strerror(errno));
    return 127;
}
