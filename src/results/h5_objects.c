/* h5_objects.c - the small HDF5 writers the recorder's files share (see h5_objects.h). */
#include "h5_objects.h"
#include "h5_check.h"

void attr_text(hid_t loc, const char *name, const char *value) {
    hid_t type = H5_CHECK(H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(type, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
    hid_t space = H5_CHECK(H5Screate(H5S_SCALAR));
    hid_t a = H5_CHECK(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Awrite(a, type, &value));
    H5Aclose(a), H5Sclose(space), H5Tclose(type);
}

void attr_number(hid_t loc, const char *name, hid_t type, const void *value) {
    hid_t space = H5_CHECK(H5Screate(H5S_SCALAR));
    hid_t a = H5_CHECK(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Awrite(a, type, value));
    H5Aclose(a), H5Sclose(space);
}

void attr_ll(hid_t loc, const char *name, long long v) {
    attr_number(loc, name, H5T_NATIVE_LLONG, &v);
}

hid_t create_set(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                 const void *fill) {
    hid_t dcpl = H5_CHECK(H5Pcreate(H5P_DATASET_CREATE));
    H5_CHECK(H5Pset_layout(dcpl, H5D_CONTIGUOUS));
    H5_CHECK(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY));
    H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC));
    H5_CHECK(H5Pset_obj_track_times(dcpl, 0));
    if (fill) H5_CHECK(H5Pset_fill_value(dcpl, type, fill));
    hid_t space = H5_CHECK(H5Screate_simple(rank, dims, NULL));
    hid_t set = H5_CHECK(H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Sclose(space), H5Pclose(dcpl);
    return set;
}
