# test_layering.sh - the directories' include rules hold (docs/architecture.md):
#   base/    includes nothing of the project outside base/, no MPI, no HDF5;
#   kernels/, in rooms, no MPI, no HDF5 in any:
#     common/  the backend interface (backend.h) and what every backend shares: base/ and common/;
#     cpu/     the CPU backend: base/, common/ and cpu/;
#     cuda/    the CUDA backend: base/, common/ and cuda/ (never cpu/: the two backends share
#              only common/);
#     fake/    a backend made of another (the fake device): base/, common/ and fake/;
#     no source file lies in kernels/ itself: each is in the room of its concern;
#   comm/    includes only base/, kernels/common/ and comm/ headers: nothing of src/ (so no HDF5,
#            no model), and compiles with only -I base -I kernels/common -I kernels/fake -I comm;
#            two named exceptions: the CPU posing as a device (as_device.c) is a fake device
#            (kernels/fake/), and the GPU module's files that reach the CUDA backend (gpu_module.c,
#            coll_nccl.c) include kernels/cuda/;
#   src/, in rooms, each including the layers and rooms below it:
#     model/     base/, kernels/common/ and model/: no MPI, no HDF5;
#     data/      base/ and data/: no MPI, no HDF5;
#     results/   base/, kernels/common/, comm/'s MPI base (mpi_check.h), model/'s public headers and
#                results/;
#     survival/  base/, comm/'s MPI base, results/ and survival/ (its front door, start.c, libc
#                only);
#     run/       everything but model/'s internal table of layer kinds (layers.h) and the
#                backends' own rooms (kernels/cpu/, kernels/cuda/: the registry, comm/parts.h,
#                hands the run its backends);
#   only comm/parts.c, the registry of the optional parts, tests feature macros (#if*def HAVE_*);
#   no two source files share a name (an include names one file wherever it is).
# Greps catch a wrong include however it is spelled in the tree (a project header is known by its
# name wherever it lives); compiling each directory with only the include paths its rule allows
# proves it needs nothing else: base/, the rooms of kernels/, src/model/ and src/data/ with the
# plain C compiler under mpicc, so that no MPI header can be found either.
set -eu
: "${TESTS_SRCDIR:=$(cd "$(dirname "$0")" && pwd)}"
TOP=$(cd "$TESTS_SRCDIR/.." && pwd)
BUILD=${DTBENCH:+$(cd "$(dirname "$DTBENCH")/.." && pwd)}
BUILD=${BUILD:-$TOP}
cd "$TOP"
fails=0
bad() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
LOG=${TMPDIR:-/tmp}/layering.$$
trap 'rm -f "$LOG"' EXIT

# Quoted includes of a file, one name per line.
includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p' "$1"; }

DIRS="base kernels/common kernels/cpu kernels/cuda kernels/fake comm src/model src/data src/results
    src/survival src/run"
# home=the directory that holds the project header $1 (by its name), or "" for a system header.
home_of() {
    home=
    for d in $DIRS; do
        if [ -e "$d/$1" ]; then
            home=$d
            return
        fi
    done
}

# 0 when file $4 of directory $1 may include header $3, which lives in directory $2.
allowed() {
    [ "$1" != "$2" ] || return 0
    case "$1:$2" in
    kernels/*:base | kernels/*:kernels/common) return 0 ;;
    comm:base | comm:kernels/common) return 0 ;;
    comm:kernels/fake) [ "$4" = comm/as_device.c ] ;; # the CPU posing as a device: a fake device
    comm:kernels/cuda) # the GPU module's files that reach the CUDA backend
        [ "$4" = comm/gpu_module.c ] || [ "$4" = comm/coll_nccl.c ] ;;
    src/model:base | src/model:kernels/common | src/data:base) return 0 ;;
    src/results:base | src/results:kernels/common) return 0 ;;
    src/survival:base | src/survival:src/results) return 0 ;;
    src/results:comm | src/survival:comm) [ "$3" = mpi_check.h ] ;;
    src/results:src/model | src/run:src/model) [ "$3" != layers.h ] ;;
    src/run:kernels/cpu | src/run:kernels/cuda) return 1 ;;
    src/run:*) return 0 ;;
    *) return 1 ;;
    esac
}

for dir in $DIRS; do
    for f in "$dir"/*.c "$dir"/*.h "$dir"/*.cu; do
        [ -e "$f" ] || continue
        for inc in $(includes "$f"); do
            case "$dir:$inc" in
            base:mpi.h | kernels/*:mpi.h | src/model:mpi.h | src/data:mpi.h)
                bad "$f includes $inc: $dir/ knows no MPI" ;;
            base:hdf5.h | kernels/*:hdf5.h | comm:hdf5.h | src/model:hdf5.h | src/data:hdf5.h | \
                base:H5*.h | kernels/*:H5*.h | comm:H5*.h | src/model:H5*.h | src/data:H5*.h)
                bad "$f includes $inc: $dir/ knows no HDF5" ;;
            esac
            [ "${inc##*.}" = h ] || continue
            home_of "${inc##*/}"
            [ -n "$home" ] || continue
            allowed "$dir" "$home" "${inc##*/}" "$f" ||
                bad "$f includes $inc, a header of $home/, which $dir/ may not use"
        done
    done
done
# The front door runs before anything else: libc alone.
for inc in $(includes src/survival/start.c); do
    home_of "${inc##*/}"
    [ -z "$home" ] || bad "src/survival/start.c includes $inc: the front door uses libc alone"
done

# Each file of kernels/ in a room, and each room known here.
for f in kernels/*.c kernels/*.h kernels/*.cu; do
    [ ! -e "$f" ] || bad "$f lies in kernels/ itself: put it in the room of its concern"
done
for f in kernels/*/; do
    case "$f" in
    kernels/common/ | kernels/cpu/ | kernels/cuda/ | kernels/fake/) ;;
    *) bad "$f is not a room of kernels/ this test knows: add its rule here and in the docs" ;;
    esac
done

# One name, one file: an include finds the file it names wherever it lives.
dups=$(find base kernels comm src tests bench fuzz \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -exec basename {} \; | sort | uniq -d)
[ -z "$dups" ] || bad "source files share a name: $(echo $dups)"

# Feature macros only in the registry of the optional parts.
for f in $(grep -l -E '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif).*HAVE_' base/* kernels/*/* \
    comm/* src/*/* 2>/dev/null); do
    case "$f" in
    comm/parts.c) ;;
    *) bad "$f tests a HAVE_* feature macro: only comm/parts.c may" ;;
    esac
done

# syntax COMPILER FILE FLAGS...: FILE compiles with these include paths alone.
syntax() {
    cc=$1 f=$2
    shift 2
    if ! $cc -std=gnu11 -fsyntax-only "$@" "$f" 2>"$LOG"; then
        sed 's/^/    /' "$LOG" | head -5
        bad "$f does not compile with only $* ($cc)"
    fi
}
configured() { grep -q "^#define $1 1" "$BUILD/config.h" 2>/dev/null; }
made() { sed -n "s/^$1 = //p" "$BUILD/Makefile" 2>/dev/null; }

# base/, the CPU-side rooms of kernels/, the model and the data sets with the compiler under mpicc
# and no MPI include path.
CC_PLAIN=$(mpicc -showme:command 2>/dev/null || echo "${CC:-cc}")
CC_PLAIN=${CC_PLAIN%% *}
for f in base/*.c; do syntax "$CC_PLAIN" "$f" -I base; done
for f in kernels/common/*.c; do syntax "$CC_PLAIN" "$f" -I base -I kernels/common; done
for f in kernels/cpu/*.c; do
    case "$f" in # oneDNN's engine where this tree was configured with it (config.h says so)
    kernels/cpu/cpu_bf16_onednn.c) configured HAVE_ONEDNN || continue ;;
    esac
    syntax "$CC_PLAIN" "$f" -I base -I kernels/common -I kernels/cpu
done
for f in kernels/fake/*.c; do
    syntax "$CC_PLAIN" "$f" -I base -I kernels/common -I kernels/fake
done
for f in src/model/*.c; do syntax "$CC_PLAIN" "$f" -I base -I kernels/common -I src/model; done
for f in src/data/*.c; do syntax "$CC_PLAIN" "$f" $(made ZLIB_CFLAGS) -I base -I src/data; done
syntax "$CC_PLAIN" src/survival/start.c
# The CUDA host files too, where this tree was configured with CUDA (config.h says so).
if configured HAVE_CUDA && [ -d /usr/local/cuda/include ]; then
    for f in kernels/cuda/*.c; do
        syntax "$CC_PLAIN" "$f" -I "$BUILD" -I base -I kernels/common -I kernels/cuda \
            -I /usr/local/cuda/include
    done
fi
# comm/ with mpicc and only the layers below it (and the CUDA backend's headers for the GPU
# module's files, CUDA's and NCCL's for the NCCL files, where this tree was configured with NCCL).
nccl_built=0
configured HAVE_NCCL && [ -d /usr/local/cuda/include ] && nccl_built=1
for f in comm/*.c; do
    case "$f" in *nccl*) [ "$nccl_built" = 1 ] || continue ;; esac
    gpu=
    case "$f" in comm/gpu_module.c | comm/coll_nccl.c) gpu="-I kernels/cuda" ;; esac
    syntax mpicc "$f" -I "$BUILD" -I base -I kernels/common -I kernels/fake -I comm $gpu \
        $([ "$nccl_built" = 1 ] && echo -I /usr/local/cuda/include)
done
# The results and survival with mpicc, HDF5's include path and only the rooms below them.
H5_CFLAGS=$(made HDF5_CFLAGS)
for f in src/results/*.c; do
    syntax mpicc "$f" -I "$BUILD" $H5_CFLAGS -I base -I kernels/common -I comm -I src/model \
        -I src/results
done
for f in src/survival/*.c; do
    [ "$f" != src/survival/start.c ] || continue
    syntax mpicc "$f" -I "$BUILD" $H5_CFLAGS -I base -I comm -I src/results -I src/survival
done

# The build compiles each room on its own include path (Makefile.am), as this test does.
for room in model:MODEL data:DATA results:RESULTS survival:SURVIVAL; do
    name=${room%:*} var=${room#*:}
    grep -q "^src_${name}_libdt${name}_a_CPPFLAGS = \$(${var}_CPPFLAGS)\$" Makefile.am ||
        bad "src/$name/ is not built on its own include path, ${var}_CPPFLAGS (Makefile.am)"
done

# The build compiles each room of kernels/ on its own include path too (Makefile.am).
grep -q '^KERNELS_COMMON_CPPFLAGS = $(BASE_CPPFLAGS) -I$(srcdir)/kernels/common$' Makefile.am ||
    bad "KERNELS_COMMON_CPPFLAGS is not base/ and kernels/common/ (Makefile.am)"
for room in common:COMMON cpu:CPU cuda:CUDA fake:FAKE; do
    name=${room%:*} var=KERNELS_${room#*:}_CPPFLAGS
    [ "$name" = common ] ||
        grep -q "^$var = \$(KERNELS_COMMON_CPPFLAGS) -I\$(srcdir)/kernels/$name\$" Makefile.am ||
        bad "$var is not base/, kernels/common/ and kernels/$name/ (Makefile.am)"
    grep -q "^kernels_${name}_libdt${name}_a_CPPFLAGS = \$($var)\( \|\$\)" Makefile.am ||
        bad "kernels/$name/ is not built on its own include path, $var (Makefile.am)"
done
grep -q '^DT_NVCCFLAGS = .*$(KERNELS_CUDA_CPPFLAGS)$' Makefile.am ||
    bad "the .cu files are not built on kernels/cuda/'s include path (DT_NVCCFLAGS, Makefile.am)"

# comm/'s test programs are built on comm/'s include path and link no file of src/.
for prog in exchange_avg grad_dtype_check staged_check test_grad_cast; do
    grep -q "^tests_${prog}_CPPFLAGS = \$(comm_libdtcomm_a_CPPFLAGS)" Makefile.am ||
        bad "tests/$prog is not built on comm/'s include path (Makefile.am)"
    ! sed -n "/^tests_${prog}_\(SOURCES\|LDADD\) =/,/[^\\]\$/p" Makefile.am | grep -q 'src/' ||
        bad "tests/$prog links a file of src/ (Makefile.am)"
done

[ "$fails" = 0 ] || exit 1
echo "ok: base/, the rooms of kernels/, comm/ and the rooms of src/ keep their include rules;" \
    "base/, kernels/, src/model/ and src/data/ build without MPI, comm/ without src/, each room" \
    "on its own path"
