/* An MPI error poisons the outputs with MPI's own error string. Run with
 * TA_MPI_TEST_INVALID_RANK=1: every send is then posted to an invalid rank
 * and MPI_Isend itself fails. */
#include "common.h"

int main(int argc, char **argv) {
  /* a simulated communicator first: ta_mpi_init must still read the variable */
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  CHECK(provided == MPI_THREAD_MULTIPLE);
  ta_mpi_comm *sim, *c;
  OK(ta_mpi_comm_new_simulated(2, 0, &sim));
  OK(ta_mpi_init(0));
  OK(ta_mpi_comm_new(MPI_COMM_WORLD, &c));
  OK(ta_mpi_comm_free(sim));
  CHECK(getenv("TA_MPI_TEST_INVALID_RANK") != NULL);
  size_t n = 4;
  ta_tensor *x;
  OK(ta_tensor_new_zeros(TA_DTYPE_F64, TA_DOMAIN_HOST, 1, &n, TA_ORDER_ROW_MAJOR, &x, NULL));
  ta_event *ev;
  OK(ta_mpi_send(x, (g_rank + 1) % g_size, 3, c, NULL, &ev, NULL)); /* valid at submission */
  CHECK(ta_event_wait(ev, TA_WAIT_FOREVER) == TA_STATUS_KERNEL_FAILED);
  ta_error *e = NULL;
  OK(ta_event_error(ev, &e));
  char msg[1024], origin[128], want[MPI_MAX_ERROR_STRING + 64];
  OK(ta_error_message(e, msg, sizeof msg, NULL));
  OK(ta_error_origin(e, origin, sizeof origin, NULL));
  /* MPI's words for the error class of an invalid rank */
  char cls[MPI_MAX_ERROR_STRING];
  int len;
  MPI_Error_string(MPI_ERR_RANK, cls, &len);
  snprintf(want, sizeof want, "ta_mpi_send: MPI_Isend failed: ");
  CHECK(strstr(msg, want) == msg);
  CHECK(strlen(msg) > strlen(want));
  CHECK(strstr(msg, cls) != NULL); /* Open MPI and MPICH both start with the class's words */
  CHECK(strcmp(origin, "ta_mpi_send") == 0);
  ta_error_free(e);
  ta_event_free(ev);
  /* the tensor read by the failed send is untouched and readable */
  char m2[256];
  CHECK(state_of(x, m2, sizeof m2) == TA_STATUS_OK);
  ta_tensor_free(x);
  OK(ta_mpi_comm_free(c));
  test_done("test_mpierror");
  return 0;
}
