/* recorder_profile.h - the /profile group of the HDF5 recorder: the per-layer profile of
 * --profile-layers (src/results/profile.h), created with the file (collective,
 * src/results/recorder_create.c) and written a row at a time by each rank (independent raw data,
 * src/results/recorder_hdf5.c), as /samples. */
#ifndef DTBENCH_RECORDER_PROFILE_H
#define DTBENCH_RECORDER_PROFILE_H

#include "recorder.h"

#include <hdf5.h>

typedef struct ProfileSets ProfileSets;

/* Collective: /profile of cfg (NULL when cfg->profile_iters is 0). */
ProfileSets *profile_sets_create(hid_t file, const RecorderConfig *cfg, int nranks);
/* Row `index` of this rank: 0, or -1 when HDF5 refused the write (the caller reports it). */
int profile_sets_write(ProfileSets *p, int rank, int index, const double *forward,
                       const double *backward);
void profile_sets_close(ProfileSets *p);

#endif
