#!/usr/bin/env bash
# The comparison, by hand (not part of the tests): the same n, tile/block size
# and ranks (2 ranks x 1 worker, grid 1x2) for cholesky_mpi, ScaLAPACK pdpotrf
# and StarPU-MPI, interleaved, `reps` times each. ScaLAPACK runs with Open MPI
# yielding the core in its blocking waits (mpi_yield_when_idle 1), which helps
# it on a busy node; cholesky_mpi runs without (its progress thread polls with
# MPI_Testsome and sleeps between polls: a yield inside each poll slows it).
#   mpi/bench/run.sh [n] [b] [reps]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-4096}; b=${2:-256}; reps=${3:-3}
make -s -C mpi MPICC=mpicc.openmpi all bench
ROOTFLAG=(); [ "$(id -u)" -eq 0 ] && ROOTFLAG=(--allow-run-as-root)
# Debian's OpenBLAS 0.3.21 picks a slower kernel on this CPU unless told
# (the environment may name another one: BENCH_CORETYPE overrides).
export OPENBLAS_CORETYPE=${BENCH_CORETYPE:-SkylakeX} OPENBLAS_NUM_THREADS=1
export TA_NUM_THREADS=1 STARPU_NCPU=1 STARPU_SILENT=1 STARPU_SCHED=${STARPU_SCHED:-lws}
# CHOL_GRID_P (the grid's row count, default 1 for 2 ranks) applies to all three.
export CHOL_GRID_P=${CHOL_GRID_P:-0}
R=(mpirun.openmpi "${ROOTFLAG[@]}" --oversubscribe -x CHOL_GRID_P -x OPENBLAS_CORETYPE -x OPENBLAS_NUM_THREADS
   -x TA_NUM_THREADS -x STARPU_NCPU -x STARPU_SILENT -x STARPU_SCHED -np 2)
uptime
for r in $(seq "$reps"); do
  "${R[@]}" mpi/build/cholesky_mpi "$n" "$b"
  "${R[@]}" --mca mpi_yield_when_idle 1 mpi/build/scalapack_pdpotrf "$n" "$b"
  "${R[@]}" mpi/build/starpu_mpi_dpotrf "$n" "$b"
done
uptime
