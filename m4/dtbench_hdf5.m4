# dtbench_hdf5.m4 - DTBENCH_CHECK_PARALLEL_HDF5: parallel HDF5 from pkg-config (hdf5-openmpi,
# hdf5-mpich, hdf5), else from h5pcc -show; then checks that it really is parallel
# (H5_HAVE_PARALLEL) and links. Sets HDF5_CFLAGS, HDF5_LIBS, HDF5_SOURCE.
AC_DEFUN([DTBENCH_CHECK_PARALLEL_HDF5], [
  AC_ARG_VAR([H5PCC], [parallel HDF5 compiler wrapper, used when pkg-config finds no HDF5])
  HDF5_SOURCE=""
  for dtbench_h5pc in hdf5-openmpi hdf5-mpich hdf5; do
    AS_IF([test -z "$HDF5_SOURCE" && $PKG_CONFIG --exists $dtbench_h5pc 2>/dev/null], [
      HDF5_CFLAGS=`$PKG_CONFIG --cflags $dtbench_h5pc`
      HDF5_LIBS=`$PKG_CONFIG --libs $dtbench_h5pc`
      HDF5_SOURCE="pkg-config $dtbench_h5pc (`$PKG_CONFIG --modversion $dtbench_h5pc`)"
    ])
  done
  AS_IF([test -z "$HDF5_SOURCE"], [
    AC_CHECK_PROGS([H5PCC], [h5pcc], [])
    AS_IF([test -n "$H5PCC"], [
      # h5pcc -show prints "CC ... -I... -L... -lhdf5 ..."; keep the flags, drop the compiler.
      dtbench_show=`$H5PCC -show -shlib 2>/dev/null | cut -d' ' -f2-`
      HDF5_CFLAGS=`for f in $dtbench_show; do case $f in -I*|-D*) printf '%s ' "$f";; esac; done`
      HDF5_LIBS=`for f in $dtbench_show; do case $f in -L*|-l*|-Wl*|*.so|*.a) printf '%s ' "$f";; esac; done`
      HDF5_SOURCE="$H5PCC"
    ])
  ])
  AS_IF([test -z "$HDF5_SOURCE"],
    [AC_MSG_ERROR([parallel HDF5 not found: install it (Debian: libhdf5-openmpi-dev) or set H5PCC])])
  AC_SUBST([HDF5_CFLAGS])
  AC_SUBST([HDF5_LIBS])
  AC_MSG_CHECKING([whether HDF5 is built for parallel I/O])
  dtbench_save_CFLAGS=$CFLAGS; dtbench_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $HDF5_CFLAGS"; LIBS="$HDF5_LIBS $LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>
#ifndef H5_HAVE_PARALLEL
#error serial HDF5
#endif]], [[hid_t p = H5Pcreate(H5P_FILE_ACCESS); H5Pset_fapl_mpio(p, MPI_COMM_WORLD, MPI_INFO_NULL);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([the HDF5 found ($HDF5_SOURCE) is not parallel: dtbench writes one shared file with MPI-IO and needs parallel HDF5 (Debian: libhdf5-openmpi-dev)])])
  CFLAGS=$dtbench_save_CFLAGS; LIBS=$dtbench_save_LIBS
])
