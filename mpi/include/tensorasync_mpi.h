/* tensorasync_mpi.h: MPI operations on tensorasync tensors (libtensorasync_mpi).
 *
 * Each operation here is an operation on the tensors' epoch queues like any
 * other: a send is a read access, a receive a write access, a collective a
 * read of its input and a write of its output. It is enrolled when the call
 * returns and runs when its accesses are granted; its MPI requests are posted
 * and completed by the library's progress engine, never by a worker of the
 * runtime (the operations complete through deferred completion, see
 * ta_external_submit in tensorasync.h). Outputs of a failed operation are
 * poisoned as for any failed operation: the error message is MPI's own
 * (MPI_Error_string) for an MPI error, or says what went wrong.
 *
 * Thread level. ta_mpi_init starts a progress thread when MPI was
 * initialised with MPI_THREAD_MULTIPLE: the library then calls MPI from that
 * thread (and from the caller's thread in ta_mpi_comm_new/_free) while the
 * program calls MPI from its own threads. With a lower level (FUNNELED or
 * SERIALIZED), pass TA_MPI_MANUAL_PROGRESS: no thread is started, and the
 * library calls MPI only inside ta_mpi_* calls, from the calling thread; the
 * program then drives the engine with ta_mpi_progress (or ta_mpi_wait) from
 * the thread allowed to call MPI, never concurrently with its own MPI calls.
 * MPI_THREAD_SINGLE is refused (TA_STATUS_UNSUPPORTED). Simulated
 * communicators (ta_mpi_comm_new_simulated) never count as an initialised
 * MPI: ta_mpi_init makes its checks whether or not one was created first.
 *
 * Errors. Every MPI call of the library on its duplicate communicator
 * returns its errors (MPI_ERRORS_RETURN is set on the duplicate, never on
 * the program's communicator); the operation's outputs are then poisoned
 * with "<operation>: <MPI call> failed: <MPI_Error_string>". (Open MPI 4.1
 * and MPICH 4.0 may raise an error found while completing a nonblocking
 * request, in MPI_Testsome, on MPI_COMM_WORLD's handler, fatal by default,
 * instead of returning it. So the library keeps the errors it can foresee
 * from reaching MPI: receives are matched by size and dtype before the data
 * is read, and collectives compare the ranks' arguments first, see
 * Collectives.) A testing aid: with the environment variable
 * TA_MPI_TEST_INVALID_RANK=1 at ta_mpi_init, every send is posted to the
 * invalid rank `size`, so that MPI itself fails it.
 *
 * Poisoned inputs. The error of a poisoned sent tensor, or of a poisoned
 * collective input, travels in place of the data and poisons the receiving
 * tensors with the same error: its status, code, origin and message, not
 * re-worded (ta_error_new, ta_token_finish_error).
 *
 * Collectives. Each collective first reduces a small header over the ranks
 * (one MPI_Iallreduce of 8 int64: which rank's input is poisoned, the
 * element count, the dtype, the kind, root and reduction operation), then,
 * alike on every rank: broadcasts the poisoned input's error (the lowest
 * such rank's) in place of the data; or, if the counts, dtypes or kinds
 * differ between the ranks, posts nothing and poisons the outputs with a
 * message saying what differs ("the ranks' tensors differ in size: from 4
 * to 8 elements ..."); or posts the data collective. This costs one small
 * allreduce latency per collective, and collectives of one communicator
 * are posted one after another.
 *
 * Communicators. ta_mpi_comm_new duplicates the program's communicator
 * (MPI_Comm_dup, collective over it) so that the library's messages never
 * match the program's. Tags: 0 <= tag <= ta_mpi_tag_max(). Matching of
 * sends and receives follows MPI: per (source, tag), in submission order of
 * the sends on the source and of the receives here.
 *
 * Completion callbacks and completion-queue entries of these operations (as
 * given in `opts`) may run on the library's progress thread: they must not
 * wait for other operations.
 *
 * Functions return a ta_status (TA_STATUS_* from tensorasync.h); where an
 * `error` argument exists it receives a new ta_error handle from the core
 * when the core refused the submission (may be NULL; set to NULL
 * otherwise). Checks made by this library itself (rank, tag, root, shape,
 * dtype; before constructing an unconstructed output, its domain and
 * writability) return TA_STATUS_INVALID_ARGUMENT, SHAPE_MISMATCH,
 * DTYPE_MISMATCH, DOMAIN_MISMATCH or READ_ONLY, leave the reason in
 * ta_mpi_last_message(), and enroll nothing (an unconstructed output stays
 * unconstructed).
 */
#ifndef TENSORASYNC_MPI_H
#define TENSORASYNC_MPI_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <tensorasync.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator of this library: the duplicate of a program communicator. */
typedef struct ta_mpi_comm ta_mpi_comm;

/* Reduction operations for ta_mpi_reduce and ta_mpi_allreduce. */
typedef uint32_t ta_mpi_op;
#define TA_MPI_SUM 0 /* every dtype, complex included */
#define TA_MPI_MAX 1 /* real dtypes (integers, f32, f64) */
#define TA_MPI_MIN 2 /* real dtypes (integers, f32, f64) */

/* Flags of ta_mpi_init. */
#define TA_MPI_MANUAL_PROGRESS 1 /* no progress thread: call ta_mpi_progress */

/* Counters of one communicator (ta_mpi_comm_stats). Times in seconds,
 * summed over messages: from posting the request to seeing it complete. */
typedef struct ta_mpi_stats {
  uint64_t messages_sent;
  uint64_t bytes_sent;
  uint64_t messages_received;
  uint64_t bytes_received;
  uint64_t collectives;
  double message_seconds; /* sum over point-to-point messages of posted..completed */
} ta_mpi_stats;

/* Start the library after MPI_Init_thread: checks the thread level (see
 * above) and, unless `flags` has TA_MPI_MANUAL_PROGRESS, starts the progress
 * thread. Calling it again after it succeeded is a no-op returning
 * TA_STATUS_OK. TA_STATUS_UNSUPPORTED when MPI is not initialised, the level
 * is MPI_THREAD_SINGLE, or it is below MPI_THREAD_MULTIPLE without
 * TA_MPI_MANUAL_PROGRESS; these checks are made even after a simulated
 * communicator was created. If a simulated communicator started a progress
 * thread, ta_mpi_init(0) keeps it, and ta_mpi_init(TA_MPI_MANUAL_PROGRESS)
 * stops it: the simulated communicators' operations then progress through
 * ta_mpi_progress and ta_mpi_wait too. */
ta_status ta_mpi_init(uint32_t flags);

/* Wait until every operation of this library has completed (their tokens
 * finished), then stop the progress thread. Call it before MPI_Finalize and
 * after freeing the communicators or with them still live (they are freed
 * here). NULL-safe to call without ta_mpi_init (no-op). */
ta_status ta_mpi_finalize(void);

/* Run the progress engine once from the calling thread: post what became
 * ready, test what is in flight, finish what completed. Stores the number of
 * operations still unfinished in *pending_out (may be NULL). Needed only with
 * TA_MPI_MANUAL_PROGRESS; harmless otherwise (returns at once). */
ta_status ta_mpi_progress(size_t *pending_out);

/* Duplicate `comm` (collective over it) for this library's operations. */
ta_status ta_mpi_comm_new(MPI_Comm comm, ta_mpi_comm **comm_out);

/* The same for a Fortran communicator handle (MPI_Comm_f2c). */
ta_status ta_mpi_comm_new_f(MPI_Fint comm, ta_mpi_comm **comm_out);

/* A simulated communicator of `size` ranks in which this process is `rank`,
 * for planning runs of one rank of a large grid without the others: nothing
 * is sent; a send completes once its tensor is readable, a receive once it is
 * granted, leaving the receiving tensor as it was (an unconstructed one is
 * zero-filled); collectives complete leaving their outputs as they were.
 * Every message is counted in ta_mpi_comm_stats. No MPI call is made, and
 * MPI need not be initialised (without ta_mpi_init, a progress thread that
 * makes no MPI call is started here; ta_mpi_finalize stops it). Creating one
 * does not initialise the library for real communicators: ta_mpi_init is
 * still needed, with all its checks. Tags are checked against
 * ta_mpi_tag_max(). */
ta_status ta_mpi_comm_new_simulated(int size, int rank, ta_mpi_comm **comm_out);

/* Free a communicator after its operations completed (waits for them; the
 * duplicate is freed with MPI_Comm_free, collective). NULL is a no-op. A
 * small record of a freed communicator is kept: freeing it again gives
 * TA_STATUS_DOUBLE_FREE, using it TA_STATUS_STALE_HANDLE. */
ta_status ta_mpi_comm_free(ta_mpi_comm *comm);

ta_status ta_mpi_comm_rank(const ta_mpi_comm *comm, int *rank_out);
ta_status ta_mpi_comm_size(const ta_mpi_comm *comm, int *size_out);
ta_status ta_mpi_comm_stats(const ta_mpi_comm *comm, ta_mpi_stats *stats_out);

/* Record the interval from posting to completion (MPI_Wtime seconds) of
 * every point-to-point message on `comm` from now on (enable != 0), or stop
 * recording (enable == 0). Copies up to `cap` recorded intervals, as pairs
 * (start, end), to `intervals` (may be NULL) and stores their number in
 * *count_out (may be NULL). For measurements of overlap. */
ta_status ta_mpi_comm_trace(ta_mpi_comm *comm, int enable, double *intervals, size_t cap,
                            size_t *count_out);

/* The largest tag the library accepts on this MPI: (MPI_TAG_UB >> 6) - 1,
 * that is MPI_TAG_UB / 64 - 1 rounded down (the library keeps the 6 low tag
 * bits for itself: the dtype of the message and a poison flag). MPI
 * guarantees MPI_TAG_UB >= 32767, so at least 510; 33554430 with
 * MPI_TAG_UB = 2^31 - 1. Without MPI initialised (only simulated
 * communicators), (INT_MAX >> 6) - 1. */
int ta_mpi_tag_max(void);

/* The message of the last TA_STATUS_INVALID_ARGUMENT / SHAPE_MISMATCH this
 * library returned on the calling thread, as a static string of that thread
 * ("" if none). */
const char *ta_mpi_last_message(void);

/* Send `tensor` (any view, any strides: non-contiguous views are sent through
 * an MPI datatype, without a copy; views with a negative stride and
 * conjugate views are packed into a dense copy first) to rank `dest` with
 * `tag`: a read access. The receiver must receive the same number of
 * elements of the same dtype. If the tensor is poisoned when its turn comes,
 * its error travels instead of the data and the receiving tensor is poisoned
 * with it (its message and code; see Poisoned inputs above). `opts` and the
 * event are as for any submission (tensorasync.h). */
ta_status ta_mpi_send(const ta_tensor *tensor, int dest, int tag, const ta_mpi_comm *comm,
                      const ta_submit *opts, ta_event **event_out, ta_error **error);

/* Receive into `tensor` from rank `src` (not MPI_ANY_SOURCE) with `tag`: a
 * write access (an overwrite: a poisoned tensor becomes clean). A constructed
 * tensor keeps its shape: pass rank 0 and extents NULL, or its own extents.
 * An unconstructed tensor is constructed now, dense row-major with `rank`
 * `extents` (a fill with zeros that the receive overwrites), so later
 * submissions see its shape. An incoming message with another element count
 * poisons the tensor with a message that gives both sizes; the message is
 * consumed. A view with a negative stride receives into a dense buffer,
 * copied into it on completion (Open MPI 4.1 mishandles such datatypes). */
ta_status ta_mpi_recv(const ta_tensor *tensor, int src, int tag, size_t rank,
                      const size_t *extents, const ta_mpi_comm *comm, const ta_submit *opts,
                      ta_event **event_out, ta_error **error);

/* Broadcast `tensor` from `root`: a read access on the root, a write access
 * (constructed tensor of the same number of elements and dtype) on the
 * others. If the root's tensor is poisoned, the others are poisoned with its
 * error (see Poisoned inputs); other counts or dtypes on some rank poison
 * every rank's tensor (see Collectives). */
ta_status ta_mpi_bcast(const ta_tensor *tensor, int root, const ta_mpi_comm *comm,
                       const ta_submit *opts, ta_event **event_out, ta_error **error);

/* Element-wise reduction of `input` over the ranks into `output` on `root`
 * (output is ignored and may be NULL on the other ranks). On the root,
 * `output` may be NULL: then `input` is reduced in place (an update access).
 * Shapes and dtypes must agree, locally (checked at submission: nothing is
 * enrolled, an unconstructed output stays so) and between the ranks (the
 * element counts and dtypes are compared first: see Collectives); `output`
 * is constructed or unconstructed (then constructed with the input's
 * shape). A poisoned input on any rank poisons the result on every rank
 * with that input's error (the lowest such rank's; see Poisoned inputs). */
ta_status ta_mpi_reduce(const ta_tensor *output, const ta_tensor *input, ta_mpi_op op, int root,
                        const ta_mpi_comm *comm, const ta_submit *opts, ta_event **event_out,
                        ta_error **error);

/* As ta_mpi_reduce, the result on every rank. */
ta_status ta_mpi_allreduce(const ta_tensor *output, const ta_tensor *input, ta_mpi_op op,
                           const ta_mpi_comm *comm, const ta_submit *opts, ta_event **event_out,
                           ta_error **error);

/* Gather `input` from every rank into `output` on every rank: `output` holds
 * size x (elements of input), rank r's elements at [r * n, (r + 1) * n) in
 * row-major order of output (e.g. output extents {size, input extents...}).
 * An unconstructed output is constructed with extents {size, input extents}
 * (only once every submission check passed). Every rank's input has the
 * same number of elements and dtype (compared first: see Collectives). */
ta_status ta_mpi_allgather(const ta_tensor *output, const ta_tensor *input,
                           const ta_mpi_comm *comm, const ta_submit *opts, ta_event **event_out,
                           ta_error **error);

/* Wait (driving the engine from this thread if there is no progress thread)
 * until `event` completes, and return its final status. */
ta_status ta_mpi_wait(const ta_event *event);

#ifdef __cplusplus
}
#endif
#endif /* TENSORASYNC_MPI_H */
