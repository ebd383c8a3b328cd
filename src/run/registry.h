/* registry.h - looks up the pluggable parts by name: the driver's own (models, schedules,
 * recorders: registry.c) and those it stands on (compute backends, exchange strategies,
 * transports, collectives: comm/parts.h, the only file that knows which optional parts were
 * built). */
#ifndef DTBENCH_REGISTRY_H
#define DTBENCH_REGISTRY_H

#include "parts.h" /* defines: registry_backend, registry_exchange, registry_transport ... */
#include "model.h"
#include "recorder.h"
#include "schedule.h"

const RecorderOps *registry_recorder(const char *name);
const ModelDesc *registry_model(const char *name);
const ScheduleOps *registry_schedule(const char *name);
/* Every registered schedule, for the resolver (src/run/resolve.c): sets *n. */
const ScheduleOps *const *registry_schedules(int *n);

/* Comma-separated names, for --help and error messages. */
const char *registry_model_names(void);
const char *registry_schedule_names(void);

#endif
