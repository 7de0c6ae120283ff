#!/usr/bin/env bash
# Tests of libtensorasync_mpi (mpi/): installs Open MPI, MPICH, ScaLAPACK and
# StarPU-MPI when missing, builds the library and its tests against Open MPI
# (and the library and tests against MPICH), then runs with one worker per
# rank (TA_NUM_THREADS=1):
#   - point-to-point and collective tests, and the manual-progress mode
#     (MPI_THREAD_FUNNELED), -np 2 and -np 4 (Open MPI), -np 2 (MPICH);
#   - an MPI error (TA_MPI_TEST_INVALID_RANK) and a message of 2^31 + 13 elements;
#   - a dead peer: mpirun must exit non-zero within 60 s;
#   - the distributed Cholesky, checked against LAPACK, -np 2 and -np 4;
#   - the simulated rank of large grids (submission cost per rank);
#   - the ScaLAPACK and StarPU-MPI comparison programs, built and run small.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n--> %s\n' "$*"; }

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
command -v mpicc.openmpi >/dev/null 2>&1 || need+=(libopenmpi-dev openmpi-bin)
command -v mpicc.mpich >/dev/null 2>&1 || need+=(libmpich-dev mpich)
[ -e /usr/lib/x86_64-linux-gnu/libscalapack-openmpi.so ] || need+=(libscalapack-openmpi-dev)
pkg-config --exists starpumpi-1.3 2>/dev/null || need+=(libstarpu-dev libstarpumpi-1.3-3)
ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' || need+=(libopenblas0)
if ((${#need[@]})); then
  step "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

ROOTFLAG=(); [ "$(id -u)" -eq 0 ] && ROOTFLAG=(--allow-run-as-root)
OMPI=(mpirun.openmpi "${ROOTFLAG[@]}" --oversubscribe -x TA_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
B=mpi/build
export TA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

step "build against Open MPI"
make -s -C mpi MPICC=mpicc.openmpi all bench
step "build against MPICH"
make -s -C mpi MPICC=mpicc.mpich BUILD="$PWD/mpi/build-mpich" lib tests

for np in 2 4; do
  step "point to point and collectives, Open MPI, -np $np"
  timeout 120 "${OMPI[@]}" -np $np $B/test_p2p
  timeout 120 "${OMPI[@]}" -np $np $B/test_coll
  timeout 120 "${OMPI[@]}" -np $np $B/test_manual
done
step "point to point and collectives, MPICH, -np 2"
timeout 120 mpirun.mpich -np 2 mpi/build-mpich/test_p2p
timeout 120 mpirun.mpich -np 2 mpi/build-mpich/test_coll
timeout 120 mpirun.mpich -np 2 mpi/build-mpich/test_manual

step "an MPI error poisons with MPI's words (Open MPI and MPICH)"
timeout 60 "${OMPI[@]}" -x TA_MPI_TEST_INVALID_RANK=1 -np 2 $B/test_mpierror
TA_MPI_TEST_INVALID_RANK=1 timeout 60 mpirun.mpich -np 2 mpi/build-mpich/test_mpierror

avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
if [ "$avail_kb" -gt $((6 * 1024 * 1024)) ]; then
  step "a message of 2^31 + 13 elements"
  timeout 300 "${OMPI[@]}" -np 2 $B/test_bigcount
else
  step "SKIPPED: the 2^31-element message needs 6 GiB available (have $((avail_kb / 1024)) MiB)"
fi

for np in 2 4; do
  step "a dead peer ends the job, -np $np"
  start=$(date +%s)
  set +e
  timeout 60 "${OMPI[@]}" -np $np $B/test_deadpeer >/tmp/ta-mpi-deadpeer.log 2>&1
  rc=$?
  set -e
  echo "mpirun exited with status $rc after $(($(date +%s) - start)) s"
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    cat /tmp/ta-mpi-deadpeer.log
    echo "FAILED: expected mpirun to exit non-zero within 60 s"
    exit 1
  fi
done

for np in 2 4; do
  step "distributed Cholesky against LAPACK, -np $np"
  timeout 120 "${OMPI[@]}" -np $np $B/cholesky_mpi 768 64 --check
  timeout 120 "${OMPI[@]}" -np $np $B/cholesky_mpi 768 96 2 --check   # lookahead 2
done
step "distributed Cholesky, MPICH, -np 2"
make -s -C mpi MPICC=mpicc.mpich BUILD="$PWD/mpi/build-mpich" examples
timeout 120 mpirun.mpich -np 2 mpi/build-mpich/cholesky_mpi 512 64 --check

step "one simulated rank of large grids"
timeout 300 $B/cholesky_sim --check

step "ScaLAPACK and StarPU-MPI comparison programs, small"
timeout 120 "${OMPI[@]}" -np 2 $B/scalapack_pdpotrf 512 64
STARPU_SILENT=1 STARPU_NCPU=1 timeout 120 "${OMPI[@]}" -x STARPU_SILENT -x STARPU_NCPU -np 2 $B/starpu_mpi_dpotrf 512 64

step "MPI tests passed"
