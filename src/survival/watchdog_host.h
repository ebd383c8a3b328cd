/* watchdog_host.h - what the heartbeat thread (watchdog.c) asks of this host and its processes:
 * its IPv4 addresses, and a process's start time and pid namespace from /proc (a pid reused by
 * another process, or seen from another namespace, is not the peer it names). */
#ifndef DTBENCH_WATCHDOG_HOST_H
#define DTBENCH_WATCHDOG_HOST_H

#include <stdint.h>
#include <sys/types.h>

/* This host's IPv4 addresses (network order) on interfaces that are up, loopback last, into
 * addr[max] (the rest left as they are); how many. */
int host_ipv4_addresses(uint32_t *addr, int max);
/* a (network order) is 127.x.x.x */
int ipv4_is_loopback(uint32_t a);
/* Field 22 of /proc/PID/stat (start time, clock ticks after boot) and the state letter; 0 and
 * '?' when there is no such process. */
uint64_t proc_start_time(pid_t pid, char *state);
/* The inode of /proc/self/ns/pid (0: unknown): pids compare only within one namespace. */
uint64_t proc_pid_namespace(void);

#endif
