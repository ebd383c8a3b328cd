# dtbench_cuda.m4 - DTBENCH_CHECK_CUDA: the optional GPU stack, each a tri-state switch
#   --with-cuda[=PATH]  --with-cudnn[=PATH]  --with-nccl[=PATH]
# default "check": use it when found, otherwise disable it and say so; "yes" or a PATH: fail
# when it is not usable; "no": disabled. CUDA is looked for at PATH, then through pkg-config
# (cudart), then in /usr/local/cuda. Sets CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, NVCC,
# NVCCFLAGS, CUDNN_LIBS, NCCL_LIBS, HAVE_CUDA / HAVE_CUDNN / HAVE_NCCL (defines and
# conditionals), the conditional BUILD_CUDA_BACKEND (CUDA and cuDNN: the backend needs both) and
# the *_summary lines printed at the end of configure. NVML is not linked: dtbench loads
# libnvidia-ml.so.1 at run time (it ships with the driver, not the toolkit; configure.ac checks
# for dlopen). CUDA_ARCHS (default "80 90 100") picks the GPU architectures nvcc compiles for; PTX of
# the newest is embedded too, so later GPUs JIT-compile it.
AC_DEFUN([DTBENCH_CHECK_CUDA], [
  AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda@<:@=PATH@:>@], [CUDA toolkit (default: check)])],
              [], [with_cuda=check])
  AC_ARG_WITH([cudnn], [AS_HELP_STRING([--with-cudnn@<:@=PATH@:>@], [cuDNN >= 9 (default: check)])],
              [], [with_cudnn=check])
  AC_ARG_WITH([nccl], [AS_HELP_STRING([--with-nccl@<:@=PATH@:>@], [NCCL (default: check)])],
              [], [with_nccl=check])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([NVCCFLAGS], [flags for nvcc (default: -O2 -std=c++17 and -gencode for CUDA_ARCHS)])
  AC_ARG_VAR([CUDA_ARCHS], [GPU architectures to compile for, e.g. "80 90" (default: 80 90 100)])

  dtbench_have_cuda=no; dtbench_have_cudnn=no; dtbench_have_nccl=no
  dtbench_cuda_summary="disabled (--without-cuda)"
  dtbench_cudnn_summary="disabled"; dtbench_nccl_summary="disabled"
  dtbench_extra_backends=""
  dtbench_extra_transports=""
  CUDA_CPPFLAGS=""; CUDA_LDFLAGS=""; CUDA_LIBS=""; CUDNN_LIBS=""; NCCL_LIBS=""

  AS_IF([test "x$with_cuda" != xno], [
    dtbench_cuda_home=""
    AS_CASE([$with_cuda],
      [yes|check], [
        AS_IF([$PKG_CONFIG --exists cudart 2>/dev/null],
          [CUDA_CPPFLAGS=`$PKG_CONFIG --cflags cudart`; CUDA_LDFLAGS=`$PKG_CONFIG --libs-only-L cudart`
           dtbench_cuda_home=`$PKG_CONFIG --variable=cudaroot cudart 2>/dev/null`],
          [test -d /usr/local/cuda], [dtbench_cuda_home=/usr/local/cuda])],
      [dtbench_cuda_home=$with_cuda])
    AS_IF([test -n "$dtbench_cuda_home"], [
      CUDA_CPPFLAGS="$CUDA_CPPFLAGS -I$dtbench_cuda_home/include"
      CUDA_LDFLAGS="$CUDA_LDFLAGS -L$dtbench_cuda_home/lib64 -Wl,-rpath,$dtbench_cuda_home/lib64"
    ])
    AC_PATH_PROG([NVCC], [nvcc], [], [$dtbench_cuda_home/bin$PATH_SEPARATOR$PATH])
    dtbench_save_CPPFLAGS=$CPPFLAGS; dtbench_save_LDFLAGS=$LDFLAGS; dtbench_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
    dtbench_cuda_ok=yes
    AS_IF([test -z "$NVCC"], [dtbench_cuda_ok="no nvcc"])
    AS_IF([test "$dtbench_cuda_ok" = yes],
      [AC_CHECK_HEADER([cuda_runtime.h], [], [dtbench_cuda_ok="no cuda_runtime.h"])])
    AS_IF([test "$dtbench_cuda_ok" = yes],
      [AC_CHECK_LIB([cudart], [cudaMalloc], [], [dtbench_cuda_ok="no libcudart"])])
    AS_IF([test "$dtbench_cuda_ok" = yes],
      [AC_CHECK_LIB([cublas], [cublasCreate_v2], [], [dtbench_cuda_ok="no libcublas"])])
    AS_IF([test "$dtbench_cuda_ok" = yes], [
      dtbench_have_cuda=yes
      # nvcc's host stubs need the C++ runtime when mpicc links
      CUDA_LIBS="-lcublas -lcudart -lstdc++"
      dtbench_cuda_summary="yes ($NVCC, $dtbench_cuda_home)"
      : ${CUDA_ARCHS="80 90 100"}
      AS_IF([test -z "$NVCCFLAGS"], [
        NVCCFLAGS="-O2 -std=c++17 -Werror all-warnings"
        dtbench_last_arch=""
        for dtbench_arch in $CUDA_ARCHS; do
          NVCCFLAGS="$NVCCFLAGS -gencode arch=compute_$dtbench_arch,code=sm_$dtbench_arch"
          dtbench_last_arch=$dtbench_arch
        done
        AS_IF([test -n "$dtbench_last_arch"],
          [NVCCFLAGS="$NVCCFLAGS -gencode arch=compute_$dtbench_last_arch,code=compute_$dtbench_last_arch"])
      ])
      # cuDNN >= 9
      AS_IF([test "x$with_cudnn" != xno], [
        AS_CASE([$with_cudnn], [yes|check], [], [CPPFLAGS="$CPPFLAGS -I$with_cudnn/include"
          LDFLAGS="$LDFLAGS -L$with_cudnn/lib64 -L$with_cudnn/lib"
          CUDA_CPPFLAGS="$CUDA_CPPFLAGS -I$with_cudnn/include"
          CUDA_LDFLAGS="$CUDA_LDFLAGS -L$with_cudnn/lib64 -L$with_cudnn/lib"])
        AC_MSG_CHECKING([for cuDNN >= 9])
        AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cudnn.h>
#if CUDNN_MAJOR < 9
#error old cuDNN
#endif]], [])], [dtbench_cudnn_hdr=yes], [dtbench_cudnn_hdr=no])
        AC_MSG_RESULT([$dtbench_cudnn_hdr])
        AS_IF([test $dtbench_cudnn_hdr = yes],
          [AC_CHECK_LIB([cudnn], [cudnnCreate], [dtbench_have_cudnn=yes; CUDNN_LIBS=-lcudnn])])
        AS_IF([test $dtbench_have_cudnn = yes], [dtbench_cudnn_summary=yes],
          [test "x$with_cudnn" != xcheck], [AC_MSG_ERROR([--with-cudnn was given but cuDNN >= 9 is not usable])],
          [dtbench_cudnn_summary="not found (disabled)"])
      ], [dtbench_cudnn_summary="disabled (--without-cudnn)"])
      # NCCL
      AS_IF([test "x$with_nccl" != xno], [
        AS_CASE([$with_nccl], [yes|check], [], [CPPFLAGS="$CPPFLAGS -I$with_nccl/include"
          LDFLAGS="$LDFLAGS -L$with_nccl/lib"
          CUDA_CPPFLAGS="$CUDA_CPPFLAGS -I$with_nccl/include"
          CUDA_LDFLAGS="$CUDA_LDFLAGS -L$with_nccl/lib"])
        AC_CHECK_HEADER([nccl.h],
          [AC_CHECK_LIB([nccl], [ncclCommInitRank], [dtbench_have_nccl=yes; NCCL_LIBS=-lnccl])])
        AS_IF([test $dtbench_have_nccl = yes], [dtbench_nccl_summary=yes],
          [test "x$with_nccl" != xcheck], [AC_MSG_ERROR([--with-nccl was given but NCCL is not usable])],
          [dtbench_nccl_summary="not found (disabled)"])
      ], [dtbench_nccl_summary="disabled (--without-nccl)"])
    ], [
      AS_IF([test "x$with_cuda" != xcheck], [AC_MSG_ERROR([--with-cuda was given but CUDA is not usable: $dtbench_cuda_ok])])
      dtbench_cuda_summary="not found ($dtbench_cuda_ok): disabled"
    ])
    CPPFLAGS=$dtbench_save_CPPFLAGS; LDFLAGS=$dtbench_save_LDFLAGS; LIBS=$dtbench_save_LIBS
  ])
  AS_IF([test $dtbench_have_cuda = yes && test $dtbench_have_cudnn = yes], [
    dtbench_extra_backends=", cuda (GPU power/memory through NVML, loaded at run time)"
    AS_IF([test $dtbench_have_nccl = yes],
      [dtbench_extra_transports=", nccl (and NCCL inside the node for hier on GPUs)"])
  ], [test $dtbench_have_cuda = yes], [
    dtbench_extra_backends=" (cuda needs cuDNN: not built)"
  ])
  AS_IF([test $dtbench_have_cuda = yes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA backend built])])
  AS_IF([test $dtbench_have_cuda = yes], [AC_DEFINE_UNQUOTED([DTBENCH_CUDA_ARCHS], ["$CUDA_ARCHS"],
    [GPU architectures the CUDA kernels are compiled for (PTX of the last)])])
  AS_IF([test $dtbench_have_cudnn = yes], [AC_DEFINE([HAVE_CUDNN], [1], [cuDNN found])])
  AS_IF([test $dtbench_have_nccl = yes], [AC_DEFINE([HAVE_NCCL], [1], [NCCL found])])
  AM_CONDITIONAL([HAVE_CUDA], [test $dtbench_have_cuda = yes])
  AM_CONDITIONAL([HAVE_CUDNN], [test $dtbench_have_cudnn = yes])
  AM_CONDITIONAL([HAVE_NCCL], [test $dtbench_have_nccl = yes])
  AM_CONDITIONAL([BUILD_CUDA_BACKEND], [test $dtbench_have_cuda = yes && test $dtbench_have_cudnn = yes])
  AM_CONDITIONAL([BUILD_NCCL_TRANSPORT],
    [test $dtbench_have_cuda = yes && test $dtbench_have_cudnn = yes && test $dtbench_have_nccl = yes])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([CUDNN_LIBS])
  AC_SUBST([NCCL_LIBS])
  AC_SUBST([NVCCFLAGS])
])
