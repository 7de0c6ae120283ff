/* ScaLAPACK pdpotrf on the matrix of cholesky_dist.h (chol_elem), for the
 * comparison with cholesky_mpi: same n, block size and process grid.
 *   mpirun -np R scalapack_pdpotrf n nb */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void Cblacs_pinfo(int *me, int *np);
void Cblacs_get(int ctx, int what, int *val);
void Cblacs_gridinit(int *ctx, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int ctx, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int ctx);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb, const int *irsrc,
               const int *icsrc, const int *ictxt, const int *lld, int *info);
void pdpotrf_(const char *uplo, const int *n, double *a, const int *ia, const int *ja, const int *desc, int *info);
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

static double elem(int r, int s, int n) {
  int d = r > s ? r - s : s - r;
  return pow(0.9, d) + (r == s ? 1.0 : 0.0) + 0.1 * sin((double)(r + s)) / n;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 2048, nb = argc > 2 ? atoi(argv[2]) : 256;
  int me, np;
  Cblacs_pinfo(&me, &np);
  openblas_set_num_threads(1);
  int P = (int)sqrt((double)np);
  const char *ge = getenv("CHOL_GRID_P"); /* as cholesky_dist.h's chol_grid */
  if (ge && atoi(ge) > 0 && np % atoi(ge) == 0) P = atoi(ge);
  while (np % P) P--;
  int Q = np / P, ctx, myr, myc, zero = 0, info;
  Cblacs_get(-1, 0, &ctx);
  Cblacs_gridinit(&ctx, "Row", P, Q);
  Cblacs_gridinfo(ctx, &P, &Q, &myr, &myc);
  int mloc = numroc_(&n, &nb, &myr, &zero, &P), nloc = numroc_(&n, &nb, &myc, &zero, &Q);
  int lld = mloc > 1 ? mloc : 1, desc[9];
  descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctx, &lld, &info);
  double *a = malloc((size_t)lld * (nloc > 0 ? nloc : 1) * sizeof *a);
  for (int lj = 0; lj < nloc; lj++) {
    int gj = (lj / nb) * Q * nb + myc * nb + lj % nb;
    for (int li = 0; li < mloc; li++) {
      int gi = (li / nb) * P * nb + myr * nb + li % nb;
      a[(size_t)lj * lld + li] = elem(gi, gj, n);
    }
  }
  int one = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  pdpotrf_("L", &n, a, &one, &one, desc, &info);
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime() - t0;
  if (me == 0)
    printf("scalapack pdpotrf: n=%d nb=%d grid=%dx%d openblas=%s: %.3f s, %.2f GFLOP/s (info %d)\n", n, nb, P, Q,
           openblas_get_corename(), t, (double)n * n * n / 3.0 / t * 1e-9, info);
  free(a);
  Cblacs_gridexit(ctx);
  MPI_Finalize();
  return info != 0;
}
