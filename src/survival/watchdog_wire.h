/* watchdog_wire.h - the datagrams of --peer-timeout (src/survival/watchdog.c, its node witness
 * src/survival/watchdog_witness.c and the records it keeps, src/survival/watchdog_records.c): one
 * header, then what the kind carries. Every rank runs the same binary, so structs go on the wire as
 * they are; a datagram of another job (another token) or of another size than its kind's is
 * ignored. */
#ifndef DTBENCH_WATCHDOG_WIRE_H
#define DTBENCH_WATCHDOG_WIRE_H

#include <stdint.h>

#define WD_MAGIC 0x6474626568727462ull

enum {
    WD_HEARTBEAT = 1, /* the rank lives */
    WD_GOODBYE = 2,   /* it ended its run normally */
    WD_RUN_OVER = 3,  /* a peer was lost and the file is closed: the run is over */
    WD_PROBE = 4,     /* to a witness: is the node of rank R alive? */
    WD_ALIVE = 5,     /* from the witness of rank R: it is */
    WD_RECORDS = 6,   /* iteration records of rank R, for its keeper (RecordsPacket) */
    WD_HELD = 7,      /* from a keeper: the records of rank R it holds (HeldPacket) */
};

typedef struct {
    uint64_t magic, token; /* WD_MAGIC, the job's token */
    int32_t rank, kind;    /* the sender (WD_ALIVE: the rank witnessed) */
} WirePacket;

#endif
