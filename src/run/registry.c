/* registry.c - the tables of the driver's own parts: models, schedules and recorders (see
 * registry.h). The parts below the driver (backends, exchange strategies, transports,
 * collectives), and which optional ones were built, are comm/parts.c's. */
#include "registry.h"

#include <string.h>

extern const RecorderOps hdf5_recorder; /* src/results/recorder_hdf5.c */

extern const ModelDesc model_lenet, model_fcn5, model_fcn8; /* src/model/models.c */
extern const ModelDesc model_alexnet, model_vgg16, model_googlenet, model_resnet50, model_lstm32,
    model_lstm64, model_resnet8; /* src/model/models.c, the model zoo */
extern const ModelDesc model_gpt2, model_gpt2_medium,
    model_nanogpt_char; /* src/model/models_gpt.c, the transformers */

static const RecorderOps *const RECORDERS[] = {&hdf5_recorder};
static const ScheduleOps *const SCHEDULES[] = {&data_schedule, &gpipe_schedule, &onef1b_schedule};
static const ModelDesc *const MODELS[] = {
    &model_lenet,     &model_fcn5,        &model_fcn8,        &model_alexnet, &model_vgg16,
    &model_googlenet, &model_resnet50,    &model_lstm32,      &model_lstm64,  &model_resnet8,
    &model_gpt2,      &model_gpt2_medium, &model_nanogpt_char};

const RecorderOps *registry_recorder(const char *name) {
    REGISTRY_FIND(RECORDERS, name);
}
const ModelDesc *registry_model(const char *name) {
    REGISTRY_FIND(MODELS, name);
}
const ScheduleOps *registry_schedule(const char *name) {
    REGISTRY_FIND(SCHEDULES, name);
}
const ScheduleOps *const *registry_schedules(int *n) {
    REGISTRY_ALL(SCHEDULES);
}

const char *registry_model_names(void) {
    REGISTRY_NAMES(MODELS);
}
const char *registry_schedule_names(void) {
    REGISTRY_NAMES(SCHEDULES);
}
