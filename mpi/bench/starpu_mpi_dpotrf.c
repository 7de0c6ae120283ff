/* StarPU-MPI tiled Cholesky on the matrix of cholesky_dist.h (chol_elem), in
 * the style of StarPU 1.3's mpi/examples/matrix_decomposition: every rank
 * registers every tile, starpu_mpi_task_insert over the whole task graph
 * (StarPU runs each task on the owner of the tile it writes and moves the
 * data), priorities on the critical path, the same BLAS kernels.
 *   STARPU_NCPU=1 mpirun -np R starpu_mpi_dpotrf n b */
#include <math.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>

void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void dtrsm_(const char *side, const char *uplo, const char *transa, const char *diag, const int *m,
            const int *n, const double *alpha, const double *a, const int *lda, double *b, const int *ldb);
void dsyrk_(const char *uplo, const char *trans, const int *n, const int *k, const double *alpha,
            const double *a, const int *lda, const double *beta, double *c, const int *ldc);
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k, const double *alpha,
            const double *a, const int *lda, const double *b, const int *ldb, const double *beta,
            double *c, const int *ldc);
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

static double elem(int r, int s, int n) {
  int d = r > s ? r - s : s - r;
  return pow(0.9, d) + (r == s ? 1.0 : 0.0) + 0.1 * sin((double)(r + s)) / n;
}

static void potrf_cpu(void *buffers[], void *arg) {
  (void)arg;
  double *a = (double *)STARPU_MATRIX_GET_PTR(buffers[0]);
  int b = (int)STARPU_MATRIX_GET_NX(buffers[0]), ld = (int)STARPU_MATRIX_GET_LD(buffers[0]), info;
  dpotrf_("L", &b, a, &ld, &info);
}
static void trsm_cpu(void *buffers[], void *arg) {
  (void)arg;
  double *l = (double *)STARPU_MATRIX_GET_PTR(buffers[0]), *a = (double *)STARPU_MATRIX_GET_PTR(buffers[1]);
  int b = (int)STARPU_MATRIX_GET_NX(buffers[0]), ld = (int)STARPU_MATRIX_GET_LD(buffers[0]);
  int ld2 = (int)STARPU_MATRIX_GET_LD(buffers[1]);
  const double one = 1;
  dtrsm_("R", "L", "T", "N", &b, &b, &one, l, &ld, a, &ld2);
}
static void syrk_cpu(void *buffers[], void *arg) {
  (void)arg;
  double *l = (double *)STARPU_MATRIX_GET_PTR(buffers[0]), *c = (double *)STARPU_MATRIX_GET_PTR(buffers[1]);
  int b = (int)STARPU_MATRIX_GET_NX(buffers[0]), ld = (int)STARPU_MATRIX_GET_LD(buffers[0]);
  int ldc = (int)STARPU_MATRIX_GET_LD(buffers[1]);
  const double one = 1, mone = -1;
  dsyrk_("L", "N", &b, &b, &mone, l, &ld, &one, c, &ldc);
}
static void gemm_cpu(void *buffers[], void *arg) {
  (void)arg;
  double *x = (double *)STARPU_MATRIX_GET_PTR(buffers[0]), *y = (double *)STARPU_MATRIX_GET_PTR(buffers[1]);
  double *c = (double *)STARPU_MATRIX_GET_PTR(buffers[2]);
  int b = (int)STARPU_MATRIX_GET_NX(buffers[0]);
  int l0 = (int)STARPU_MATRIX_GET_LD(buffers[0]), l1 = (int)STARPU_MATRIX_GET_LD(buffers[1]);
  int l2 = (int)STARPU_MATRIX_GET_LD(buffers[2]);
  const double one = 1, mone = -1;
  dgemm_("N", "T", &b, &b, &b, &mone, x, &l0, y, &l1, &one, c, &l2);
}

static struct starpu_codelet cl_potrf = {.cpu_funcs = {potrf_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "potrf"};
static struct starpu_codelet cl_trsm = {.cpu_funcs = {trsm_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .name = "trsm"};
static struct starpu_codelet cl_syrk = {.cpu_funcs = {syrk_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW}, .name = "syrk"};
static struct starpu_codelet cl_gemm = {.cpu_funcs = {gemm_cpu}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_RW}, .name = "gemm"};

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2048, b = argc > 2 ? atoi(argv[2]) : 256, NT = n / b;
  openblas_set_num_threads(1);
  if (starpu_init(NULL) != 0) return 77;
  starpu_mpi_init(&argc, &argv, 1);
  int rank, size;
  starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank);
  starpu_mpi_comm_size(MPI_COMM_WORLD, &size);
  int P = (int)sqrt((double)size);
  const char *ge = getenv("CHOL_GRID_P"); /* as cholesky_dist.h's chol_grid */
  if (ge && atoi(ge) > 0 && size % atoi(ge) == 0) P = atoi(ge);
  while (size % P) P--;
  int Q = size / P;
  starpu_data_handle_t *h = calloc((size_t)NT * NT, sizeof *h);
  for (int i = 0; i < NT; i++)
    for (int j = 0; j <= i; j++) {
      int own = (i % P) * Q + j % Q;
      if (own == rank) {
        double *t = malloc((size_t)b * b * sizeof *t);
        for (int s = 0; s < b; s++)
          for (int r = 0; r < b; r++) t[(size_t)s * b + r] = elem(i * b + r, j * b + s, n);
        starpu_matrix_data_register(&h[i * NT + j], STARPU_MAIN_RAM, (uintptr_t)t, b, b, b, sizeof(double));
      } else {
        starpu_matrix_data_register(&h[i * NT + j], -1, 0, b, b, b, sizeof(double));
      }
      starpu_mpi_data_register(h[i * NT + j], i * NT + j, own);
    }
  starpu_mpi_barrier(MPI_COMM_WORLD);
  double t0 = starpu_timing_now();
  for (int k = 0; k < NT; k++) {
    starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_potrf, STARPU_PRIORITY, 2 * NT - 2 * k, STARPU_RW, h[k * NT + k], 0);
    for (int i = k + 1; i < NT; i++)
      starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_trsm, STARPU_PRIORITY, 2 * NT - 2 * k - i, STARPU_R, h[k * NT + k],
                             STARPU_RW, h[i * NT + k], 0);
    starpu_mpi_cache_flush(MPI_COMM_WORLD, h[k * NT + k]);
    for (int j = k + 1; j < NT; j++) {
      starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_syrk, STARPU_PRIORITY, 2 * NT - 2 * k - 2 * j, STARPU_R,
                             h[j * NT + k], STARPU_RW, h[j * NT + j], 0);
      for (int i = j + 1; i < NT; i++)
        starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_gemm, STARPU_PRIORITY, 2 * NT - 2 * k - j - i, STARPU_R,
                               h[i * NT + k], STARPU_R, h[j * NT + k], STARPU_RW, h[i * NT + j], 0);
    }
    for (int i = k + 1; i < NT; i++) starpu_mpi_cache_flush(MPI_COMM_WORLD, h[i * NT + k]);
  }
  starpu_task_wait_for_all();
  starpu_mpi_barrier(MPI_COMM_WORLD);
  double t = (starpu_timing_now() - t0) * 1e-6;
  if (rank == 0)
    printf("starpu-mpi dpotrf: n=%d b=%d grid=%dx%d ncpu=%u openblas=%s: %.3f s, %.2f GFLOP/s\n", n, b, P, Q,
           starpu_cpu_worker_get_count(), openblas_get_corename(), t, (double)n * n * n / 3.0 / t * 1e-9);
  for (int i = 0; i < NT; i++)
    for (int j = 0; j <= i; j++) starpu_data_unregister(h[i * NT + j]);
  starpu_mpi_shutdown();
  starpu_shutdown();
  return 0;
}
