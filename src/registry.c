/* registry.c - the tables of compute backends, exchange strategies, recorders and models.
 * The only place that knows which optional parts were built: optional backends and strategies
 * (CUDA, NCCL) are added to these tables under #ifdef HAVE_CUDA / HAVE_NCCL, here and nowhere else. */
#include <config.h>
#include "registry.h"

#include <string.h>


extern const ExchangeOps sync_exchange; /* comm/sync.c */

extern const RecorderOps hdf5_recorder; /* src/recorder_hdf5.c */

extern const ModelDesc model_lenet, model_fcn5, model_fcn8; /* src/models.c */
extern const ModelDesc model_alexnet, model_vgg16, model_googlenet, model_resnet50, model_lstm32,
    model_lstm64; /* src/models.c, the model zoo */

static const BackendOps *const BACKENDS[] = {&cpu_backend};
static const ExchangeOps *const EXCHANGES[] = {&sync_exchange};
static const RecorderOps *const RECORDERS[] = {&hdf5_recorder};
static const ModelDesc *const MODELS[] = {&model_lenet,    &model_fcn5,   &model_fcn8,
                                          &model_alexnet,  &model_vgg16,  &model_googlenet,
                                          &model_resnet50, &model_lstm32, &model_lstm64};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FIND(table, key)                                                                           \
    for (size_t i = 0; i < COUNT(table); i++)                                                      \
        if (!strcmp(table[i]->name, key)) return table[i];                                         \
    return NULL

const BackendOps *registry_backend(const char *name) { FIND(BACKENDS, name); }
const ExchangeOps *registry_exchange(const char *name) { FIND(EXCHANGES, name); }
const RecorderOps *registry_recorder(const char *name) { FIND(RECORDERS, name); }
const ModelDesc *registry_model(const char *name) { FIND(MODELS, name); }

#define NAMES(table)                                                                               \
    static char names[256];                                                                        \
    if (!names[0])                                                                                 \
        for (size_t i = 0; i < COUNT(table); i++) {                                                \
            if (i) strcat(names, ",");                                                             \
            strcat(names, table[i]->name);                                                         \
        }                                                                                          \
    return names

const char *registry_backend_names(void) { NAMES(BACKENDS); }
const char *registry_exchange_names(void) { NAMES(EXCHANGES); }
const char *registry_model_names(void) { NAMES(MODELS); }
