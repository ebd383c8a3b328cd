# test_layering.sh - the directories' include rules hold (docs/architecture.md):
#   base/    includes nothing of the project outside base/, no MPI, no HDF5;
#   kernels/ includes only base/ and kernels/ headers, no MPI, no HDF5;
#   comm/    includes only base/, kernels/ and comm/ headers: nothing of src/ (so no HDF5, no
#            model), and compiles with only -I base -I kernels -I comm;
#   only comm/parts.c, the registry of the optional parts, tests feature macros (#if*def HAVE_*).
# Greps catch a wrong include however it is spelled in the tree; compiling base/ and kernels/ with
# the plain C compiler under mpicc and only -I base -I kernels, and comm/ with mpicc and only
# -I base -I kernels -I comm, proves they need nothing else.
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

# Quoted includes of a file, one name per line.
includes() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p' "$1"; }

for f in base/*.c base/*.h kernels/*.c kernels/*.h kernels/*.cu; do
    [ -e "$f" ] || continue
    dir=${f%%/*}
    for inc in $(includes "$f"); do
        case "$inc" in
        mpi.h | hdf5.h | H5*.h) bad "$f includes $inc: $dir/ knows no MPI or HDF5" ;;
        esac
        [ "${inc#*.}" = h ] || continue
        # a project header must come from base/ (or, for kernels/, from kernels/)
        if [ -e "src/$inc" ] || [ -e "comm/$inc" ] || { [ "$dir" = base ] && [ -e "kernels/$inc" ]; }; then
            [ -e "base/$inc" ] || { [ "$dir" = kernels ] && [ -e "kernels/$inc" ]; } ||
                bad "$f includes $inc, a header of a layer above $dir/"
        fi
    done
done

for f in comm/*.c comm/*.h comm/*.cu; do
    [ -e "$f" ] || continue
    for inc in $(includes "$f"); do
        case "$inc" in
        hdf5.h | H5*.h | recorder*.h) bad "$f includes $inc: comm/ knows no HDF5" ;;
        model*.h | layers.h | data.h | partition.h) bad "$f includes $inc: comm/ knows no models" ;;
        esac
        [ "${inc#*.}" = h ] || continue
        # a project header must come from base/, kernels/ or comm/: src/ is the layer above
        if [ -e "src/$inc" ] && ! [ -e "comm/$inc" ] && ! [ -e "kernels/$inc" ] && ! [ -e "base/$inc" ]; then
            bad "$f includes $inc, a header of src/, the layer above comm/"
        fi
    done
done

# Feature macros only in the registry of the optional parts.
for f in $(grep -l -E '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif).*HAVE_' base/* kernels/* comm/* src/* 2>/dev/null); do
    case "$f" in
    comm/parts.c) ;;
    *) bad "$f tests a HAVE_* feature macro: only comm/parts.c may" ;;
    esac
done

# Compile base/ and the CPU kernels with the compiler under mpicc and no MPI include path.
CC_PLAIN=$(mpicc -showme:command 2>/dev/null || echo "${CC:-cc}")
CC_PLAIN=${CC_PLAIN%% *}
for f in base/*.c kernels/cpu*.c; do
    case "$f" in # oneDNN's engine where this tree was configured with it (config.h says so)
    kernels/cpu_bf16_onednn.c) grep -q '^#define HAVE_ONEDNN 1' "$BUILD/config.h" 2>/dev/null || continue ;;
    esac
    if ! "$CC_PLAIN" -std=gnu11 -fsyntax-only -I base -I kernels "$f" 2>"${TMPDIR:-/tmp}/layering.$$"; then
        sed 's/^/    /' "${TMPDIR:-/tmp}/layering.$$" | head -5
        bad "$f does not compile with only -I base -I kernels ($CC_PLAIN)"
    fi
done
# The CUDA host files too, where this tree was configured with CUDA (config.h says so).
if grep -q '^#define HAVE_CUDA 1' "$BUILD/config.h" 2>/dev/null && [ -d /usr/local/cuda/include ]; then
    for f in kernels/cuda*.c; do
        "$CC_PLAIN" -std=gnu11 -fsyntax-only -I "$BUILD" -I base -I kernels -I /usr/local/cuda/include \
            "$f" 2>"${TMPDIR:-/tmp}/layering.$$" || {
            sed 's/^/    /' "${TMPDIR:-/tmp}/layering.$$" | head -5
            bad "$f does not compile with only -I base -I kernels and CUDA's headers"
        }
    done
fi
# comm/ with mpicc and only the layers below it (and CUDA's and NCCL's headers for the NCCL files,
# where this tree was configured with NCCL).
nccl_built=0
grep -q '^#define HAVE_NCCL 1' "$BUILD/config.h" 2>/dev/null && [ -d /usr/local/cuda/include ] && nccl_built=1
for f in comm/*.c; do
    case "$f" in *nccl*) [ "$nccl_built" = 1 ] || continue ;; esac
    if ! mpicc -std=gnu11 -fsyntax-only -I "$BUILD" -I base -I kernels -I comm \
        $([ "$nccl_built" = 1 ] && echo -I /usr/local/cuda/include) "$f" 2>"${TMPDIR:-/tmp}/layering.$$"; then
        sed 's/^/    /' "${TMPDIR:-/tmp}/layering.$$" | head -5
        bad "$f does not compile with only -I base -I kernels -I comm (mpicc)"
    fi
done
rm -f "${TMPDIR:-/tmp}/layering.$$"

# comm/'s test programs are built on comm/'s include path and link no file of src/.
for prog in exchange_avg grad_dtype_check staged_check test_grad_cast; do
    grep -q "^tests_${prog}_CPPFLAGS = \$(comm_libdtcomm_a_CPPFLAGS)" Makefile.am ||
        bad "tests/$prog is not built on comm/'s include path (Makefile.am)"
    ! sed -n "/^tests_${prog}_\(SOURCES\|LDADD\) =/,/[^\\]\$/p" Makefile.am | grep -q 'src/' ||
        bad "tests/$prog links a file of src/ (Makefile.am)"
done

[ "$fails" = 0 ] || exit 1
echo "ok: base/, kernels/ and comm/ keep their include rules; base/ and kernels/ build without MPI, comm/ without src/"
