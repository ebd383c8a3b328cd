/* recorder_profile.c - /profile of the HDF5 result file (see recorder_profile.h and
 * docs/hdf5-layout.md): forward and backward [nranks, iterations, layers] in seconds, NaN where
 * a rank does not hold a layer or did not reach the iteration; the layers' names, kinds and
 * forward FLOPs per sample; attributes first_iteration and iterations; the roofline: each rank's
 * FLOPs and least bytes per layer and call [nranks, layers], and its device's peaks [nranks]
 * with how they were found. */
#include "h5_check.h"
#include "profile.h" /* defines: PROFILE_AMOUNTS */
#include "recorder_profile.h"
#include "roofline.h"
#include "alloc.h" /* defines: xcalloc */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME_LEN 64

struct ProfileSets {
    hid_t forward, backward;
    int iters, layers;
};

static hid_t dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                     const void *fill, const char *units, const char *description) {
    hid_t dcpl = H5_CHECK(H5Pcreate(H5P_DATASET_CREATE));
    H5_CHECK(H5Pset_layout(dcpl, H5D_CONTIGUOUS));
    H5_CHECK(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY));
    H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC));
    if (fill) H5_CHECK(H5Pset_fill_value(dcpl, type, fill));
    hid_t space = H5_CHECK(H5Screate_simple(rank, dims, NULL));
    hid_t set = H5_CHECK(H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Sclose(space), H5Pclose(dcpl);
    const char *keys[2] = {"units", "description"}, *values[2] = {units, description};
    for (int i = 0; i < 2; i++) {
        hid_t t = H5_CHECK(H5Tcopy(H5T_C_S1));
        H5_CHECK(H5Tset_size(t, strlen(values[i]) + 1));
        hid_t sp = H5_CHECK(H5Screate(H5S_SCALAR));
        hid_t a = H5_CHECK(H5Acreate2(set, keys[i], t, sp, H5P_DEFAULT, H5P_DEFAULT));
        H5_CHECK(H5Awrite(a, t, values[i]));
        H5Aclose(a), H5Sclose(sp), H5Tclose(t);
    }
    return set;
}

/* The layers' names or kinds as one fixed-length string each, written by rank 0. */
static void names(hid_t g, const char *set_name, const char *const *text, int n, int rank,
                  const char *description) {
    hid_t type = H5_CHECK(H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(type, NAME_LEN));
    hsize_t dim = (hsize_t)n;
    hid_t set = dataset(g, set_name, type, 1, &dim, NULL, "", description);
    if (rank == 0) {
        char *buf = xcalloc((size_t)n, NAME_LEN);
        for (int i = 0; i < n; i++)
            snprintf(buf + (size_t)i * NAME_LEN, NAME_LEN, "%s", text[i]);
        H5_CHECK(H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
        free(buf);
    }
    H5Dclose(set), H5Tclose(type);
}

/* This rank's element (or row of n values) of set, at `rank` (independent raw data). */
static void write_row(hid_t set, hid_t type, int rank, hsize_t n, const void *values) {
    hid_t fspace = H5_CHECK(H5Dget_space(set));
    hsize_t start[2] = {(hsize_t)rank, 0}, count[2] = {1, n};
    H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mspace = H5_CHECK(H5Screate_simple(1, &n, NULL));
    H5_CHECK(H5Dwrite(set, type, mspace, fspace, H5P_DEFAULT, values));
    H5Sclose(mspace), H5Sclose(fspace);
}

/* The roofline's data sets (collective), then this rank's amounts and peaks. */
static void roofline_sets(hid_t g, const RecorderConfig *c, int nranks, int rank) {
    static const struct {
        const char *name, *units, *description;
    } AMOUNTS[PROFILE_AMOUNTS] = {
        {"forward_flop", "FLOP", "FLOPs of one forward call of the layer on this rank's batch"},
        {"backward_flop", "FLOP",
         "FLOPs of one backward call: parameter gradients, and input gradients where written"},
        {"forward_bytes", "B",
         "least bytes one forward call moves: inputs read, output written, parameters read"},
        {"backward_bytes", "B",
         "least bytes one backward call moves: dy and what the kind needs read, input and "
         "parameter gradients written, weights read"},
    };
    const double nan = NAN;
    const hsize_t dims[2] = {(hsize_t)nranks, (hsize_t)c->profile_layers};
    for (int a = 0; a < PROFILE_AMOUNTS; a++) {
        hid_t set = dataset(g, AMOUNTS[a].name, H5T_IEEE_F64LE, 2, dims, &nan, AMOUNTS[a].units,
                            AMOUNTS[a].description);
        if (c->profile_amounts)
            write_row(set, H5T_NATIVE_DOUBLE, rank, dims[1],
                      c->profile_amounts + (size_t)a * dims[1]);
        H5Dclose(set);
    }
    const RooflinePeak *pk = c->profile_peak;
    hid_t bw = dataset(g, "peak_bandwidth", H5T_IEEE_F64LE, 1, dims, &nan, "B/s",
                       "the device's memory bandwidth (peak_bandwidth_method says how found)");
    hid_t fl = dataset(g, "peak_flops", H5T_IEEE_F64LE, 1, dims, &nan, "FLOP/s",
                       "the device's compute at the run's precision (see peak_flops_method)");
    hid_t text = H5_CHECK(H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(text, ROOFLINE_HOW_LEN));
    hid_t bw_how = dataset(g, "peak_bandwidth_method", text, 1, dims, NULL, "",
                           "how peak_bandwidth was found: the table's datasheet figure or a "
                           "measurement at start");
    hid_t fl_how =
        dataset(g, "peak_flops_method", text, 1, dims, NULL, "", "how peak_flops was found");
    if (pk) {
        write_row(bw, H5T_NATIVE_DOUBLE, rank, 1, &pk->bandwidth);
        write_row(fl, H5T_NATIVE_DOUBLE, rank, 1, &pk->flops);
        write_row(bw_how, text, rank, 1, pk->bandwidth_how);
        write_row(fl_how, text, rank, 1, pk->flops_how);
    }
    H5Dclose(bw), H5Dclose(fl), H5Dclose(bw_how), H5Dclose(fl_how), H5Tclose(text);
}

ProfileSets *profile_sets_create(hid_t file, const RecorderConfig *c, int nranks) {
    if (c->profile_iters <= 0) return NULL;
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(c->comm, &rank));
    ProfileSets *p = xcalloc(1, sizeof *p);
    p->iters = c->profile_iters, p->layers = c->profile_layers;
    hid_t g = H5_CHECK(H5Gcreate2(file, "profile", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    long long first = c->profile_first, iters = c->profile_iters;
    hid_t sp = H5_CHECK(H5Screate(H5S_SCALAR));
    hid_t a =
        H5_CHECK(H5Acreate2(g, "first_iteration", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Awrite(a, H5T_NATIVE_LLONG, &first));
    H5Aclose(a);
    a = H5_CHECK(H5Acreate2(g, "iterations", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Awrite(a, H5T_NATIVE_LLONG, &iters));
    H5Aclose(a), H5Sclose(sp);
    const double nan = NAN;
    hsize_t dims[3] = {(hsize_t)nranks, (hsize_t)c->profile_iters, (hsize_t)c->profile_layers};
    p->forward = dataset(g, "forward", H5T_IEEE_F64LE, 3, dims, &nan, "s",
                         "each layer's forward on the backend's timeline, per rank and profiled "
                         "iteration (NaN: a layer the rank does not hold)");
    p->backward = dataset(g, "backward", H5T_IEEE_F64LE, 3, dims, &nan, "s",
                          "each layer's backward (its input and parameter gradients), likewise");
    names(g, "layer", c->profile_names, c->profile_layers, rank, "layer name (as --dry-run)");
    names(g, "kind", c->profile_kinds, c->profile_layers, rank, "layer kind");
    hsize_t n = (hsize_t)c->profile_layers;
    hid_t fl = dataset(g, "flops", H5T_IEEE_F64LE, 1, &n, NULL, "FLOP",
                       "forward FLOPs per sample (as --dry-run)");
    if (rank == 0)
        H5_CHECK(H5Dwrite(fl, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, c->profile_flops));
    H5Dclose(fl);
    roofline_sets(g, c, nranks, rank);
    H5Gclose(g);
    return p;
}

int profile_sets_write(ProfileSets *p, int rank, int index, const double *forward,
                       const double *backward) {
    if (!p || index < 0 || index >= p->iters) return 0;
    hsize_t start[3] = {(hsize_t)rank, (hsize_t)index, 0}, count[3] = {1, 1, (hsize_t)p->layers};
    hsize_t n = (hsize_t)p->layers;
    const double *rows[2] = {forward, backward};
    hid_t sets[2] = {p->forward, p->backward};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        hid_t fspace = H5_CHECK(H5Dget_space(sets[i]));
        H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
        hid_t mspace = H5_CHECK(H5Screate_simple(1, &n, NULL));
        rc =
            H5Dwrite(sets[i], H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, rows[i]) < 0 ? -1 : 0;
        H5Sclose(mspace), H5Sclose(fspace);
    }
    return rc;
}

void profile_sets_close(ProfileSets *p) {
    if (!p) return;
    H5Dclose(p->forward), H5Dclose(p->backward);
    free(p);
}
