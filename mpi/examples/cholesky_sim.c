/* The submission side of one rank of the distributed Cholesky (cholesky_dist.h)
 * on grids of up to 10^4 ranks, run alone on a simulated communicator
 * (ta_mpi_comm_new_simulated: nothing is sent, every message is counted).
 * Weak scaling: about T owned tiles per rank, NT = sqrt(2 T R) tiles per
 * side. Kernels do nothing (dry), so the time is what the rank spends
 * submitting its tasks and messages and the runtime spends ordering them.
 *
 *   cholesky_sim [--check] [T] [lookahead]
 *
 * Prints, per grid: the rank's tasks, sends and receives, the peak number of
 * received tiles alive at once, the submission time per rank and per task,
 * and the size of the global task graph, which no rank builds. With --check,
 * for the grids of up to 256 ranks, the counts are compared with a brute-force
 * enumeration of the whole task graph (every task's inputs, and the owners
 * that need them), and the program fails if they differ. */
#include "cholesky_dist.h"

/* Brute force over the global graph: the tasks rank `me` owns, and the
 * distinct (tile, consumer rank) pairs with an owner != consumer that it
 * sends or receives. */
static void brute(const chol *c, long *tasks, long *sends, long *recvs) {
  int NT = c->NT;
  long t = 0, s = 0, r = 0;
  char *need = malloc((size_t)NT * c->size); /* per step: tile i needed by rank x */
  for (int k = 0; k < NT; k++) {
    memset(need, 0, (size_t)NT * c->size);
    /* consumers of L_kk (index k) and of L_ik (index i) in step k */
    if (owner(c, k, k) == c->me) t++;
    for (int i = k + 1; i < NT; i++) {
      int o = owner(c, i, k);
      if (o == c->me) t++;
      need[(size_t)k * c->size + o] = 1; /* trsm(i, k) reads L_kk */
    }
    for (int j = k + 1; j < NT; j++)
      for (int i = j; i < NT; i++) {
        int o = owner(c, i, j);
        if (o == c->me) t++;
        need[(size_t)i * c->size + o] = 1; /* reads L_ik */
        need[(size_t)j * c->size + o] = 1; /* reads L_jk */
      }
    for (int i = k; i < NT; i++)
      for (int x = 0; x < c->size; x++) {
        if (!need[(size_t)i * c->size + x]) continue;
        int o = owner(c, i, k);
        if (o == x) continue;
        if (o == c->me) s++;
        if (x == c->me) r++;
      }
  }
  free(need);
  *tasks = t; *sends = s; *recvs = r;
}

int main(int argc, char **argv) {
  int check = 0, T = 32, lookahead = 4, pos = 0;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "--check")) { check = 1; continue; }
    if (pos++ == 0) T = atoi(argv[a]); else lookahead = atoi(argv[a]);
  }
  static const int sizes[] = {4, 16, 64, 256, 1024, 4096, 10000};
  printf("one simulated rank, ~%d owned tiles per rank, lookahead %d, dry kernels\n", T, lookahead);
  printf("%6s %5s %7s %9s %7s %7s %9s %10s %9s %14s\n", "ranks", "grid", "NT", "tasks", "sends", "recvs",
         "peak_tmp", "submit_s", "us/task", "global_tasks");
  int failed = 0;
  for (size_t g = 0; g < sizeof sizes / sizeof *sizes; g++) {
    int R = sizes[g], NT = (int)lround(sqrt(2.0 * T * R));
    int P, Q;
    chol_grid(R, &P, &Q);
    int me = (P / 2) * Q + Q / 2; /* a rank in the middle of the grid */
    ta_mpi_comm *comm;
    if (ta_mpi_comm_new_simulated(R, me, &comm) != TA_STATUS_OK) {
      fprintf(stderr, "%s\n", ta_mpi_last_message());
      return 1;
    }
    chol c;
    chol_setup(&c, comm, NT, 4, lookahead, 1);
    double t0 = chol_now();
    chol_factor(&c);
    int bad = chol_wait(&c);
    double total = chol_now() - t0;
    (void)total;
    ta_mpi_stats s;
    ta_mpi_comm_stats(comm, &s);
    double gt = (double)NT * NT * NT / 6.0;
    printf("%6d %2dx%-3d %6d %9ld %7llu %7llu %9ld %10.4f %9.2f %14.3g\n", R, P, Q, NT, c.tasks,
           (unsigned long long)s.messages_sent, (unsigned long long)s.messages_received, c.peak_tmp,
           c.submit_seconds, 1e6 * c.submit_seconds / (double)(c.tasks + c.sends + c.recvs), gt);
    if (bad) { fprintf(stderr, "ranks %d: %d tiles failed\n", R, bad); failed = 1; }
    if (check && R <= 256) {
      long bt, bs, br;
      brute(&c, &bt, &bs, &br);
      int ok = bt == c.tasks && bs == (long)s.messages_sent && br == (long)s.messages_received &&
               c.sends == bs && c.recvs == br;
      printf("       brute force over the global graph: %ld tasks, %ld sends, %ld recvs: %s\n", bt, bs, br,
             ok ? "same" : "DIFFERENT");
      if (!ok) failed = 1;
    }
    if (c.peak_tmp > (long)lookahead * (NT / P + NT / Q + 2)) {
      fprintf(stderr, "ranks %d: %ld received tiles alive at once, above the lookahead bound\n", R, c.peak_tmp);
      failed = 1;
    }
    chol_free(&c);
    ta_mpi_comm_free(comm);
  }
  ta_mpi_finalize();
  return failed;
}
