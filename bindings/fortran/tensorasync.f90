! tensorasync: the Fortran interface of tensorasync (Fortran 2018, gfortran >= 12).
!
! Build this file and tensorasync_c.f90 (generated from the C header) with
! your compiler, then link with -ltensorasync:
!     gfortran -c tensorasync_c.f90 tensorasync.f90
!
! Handles are derived types holding the C handle (component `ptr`); free each
! one with ta_free (there is no finalizer: compilers differ in when they run
! them). Freeing never blocks and never cancels pending work.
!
! Arrays: ta_wrap(t, a) makes a tensor of a Fortran array without copying.
! The tensor has the array's shape, in the array's order: axis k of the
! tensor is dimension k of the array, and element a(i, j) is tensor element
! (i-1, j-1) (column-major). The array must be contiguous and have the
! TARGET attribute (and should have ASYNCHRONOUS), and must not be touched
! by the program while operations on the tensor may run: call ta_wait first.
!
! Errors: every procedure takes optional `stat` and `errmsg` arguments, as
! Fortran's own statements do. With `stat` present, it receives the status
! (TA_STATUS_OK = 0 on success) and `errmsg` the error's message; without
! `stat`, a failure stops the program with the message (error stop).
!
! Kernels are bind(c) functions with the interface ta_kernel_fn below,
! passed with c_funloc; ta_view_ptr gives a Fortran pointer to a view.
module tensorasync
  use, intrinsic :: iso_c_binding
  use tensorasync_c
  implicit none
  public

  type :: ta_tensor
    type(c_ptr) :: ptr = c_null_ptr
  end type ta_tensor
  type :: ta_event
    type(c_ptr) :: ptr = c_null_ptr
  end type ta_event
  type :: ta_runtime
    type(c_ptr) :: ptr = c_null_ptr
  end type ta_runtime
  type :: ta_block_array
    type(c_ptr) :: ptr = c_null_ptr
  end type ta_block_array
  ! Host access to a tensor's elements, held until ta_free.
  type :: ta_mapping
    type(c_ptr) :: ptr = c_null_ptr
  end type ta_mapping

  abstract interface
    ! A kernel: views(1:nviews) are the operands in the order given to
    ! ta_submit_kernel. Return TA_STATUS_OK, or fail with ta_kernel_fail.
    function ta_kernel_fn(views, nviews, userdata, ctx) result(status) bind(c)
      import :: ta_view, c_size_t, c_ptr, c_int32_t
      type(ta_view), intent(in) :: views(*)
      integer(c_size_t), value :: nviews
      type(c_ptr), value :: userdata, ctx
      integer(c_int32_t) :: status
    end function ta_kernel_fn
  end interface

  interface ta_wrap
    module procedure wrap_f64, wrap_f32, wrap_c128, wrap_c64, wrap_i32, wrap_i64
  end interface ta_wrap
  interface ta_free
    module procedure free_tensor, free_event, free_runtime, free_blocks, free_mapping
  end interface ta_free
  interface ta_wait
    module procedure wait_tensor, wait_event
  end interface ta_wait
  interface ta_view_ptr
    module procedure view_ptr_f64_1, view_ptr_f64_2
  end interface ta_view_ptr
  interface ta_put
    module procedure put_f64
  end interface ta_put
  interface ta_get
    module procedure get_f64
  end interface ta_get
  ! ta_trace_start(capacity): a default integer or an integer(c_int64_t).
  interface ta_trace_start
    module procedure trace_start_i64, trace_start_int
  end interface ta_trace_start

  private :: wrap_f64, wrap_f32, wrap_c128, wrap_c64, wrap_i32, wrap_i64, wrap_any
  private :: free_tensor, free_event, free_runtime, free_blocks, free_mapping, wait_tensor, wait_event
  private :: view_ptr_f64_1, view_ptr_f64_2, put_f64, get_f64, trace_start_i64, trace_start_int
  private :: finish, fail, c_string, error_text, submit_opts, real_scalar, intern, c_chars, dtype_label, &
      check_host_array, shape_label, c_ptr_offset, no_f64
  private :: names, name_entry, runtime_ptr, release_runtime

  ! Kernel names are kept for the life of the program (the C ABI does not copy them).
  type :: name_entry
    character(kind=c_char), allocatable :: s(:)
  end type name_entry
  type(name_entry), allocatable, target, save :: names(:)
  ! What ta_view_ptr points a pointer of no elements at.
  real(c_double), target, save :: no_f64(0)

contains

  ! ---------------------------------------------------------------- errors

  ! The text of a C error object (which is freed), or the status description.
  function error_text(s, err) result(msg)
    integer(c_int32_t), intent(in) :: s
    type(c_ptr), intent(in) :: err
    character(len=:), allocatable :: msg
    character(kind=c_char), allocatable, target :: buf(:)
    integer(c_size_t) :: n, cap, got
    integer(c_int32_t) :: rc
    integer :: i
    msg = ''
    n = 0
    got = 0
    if (c_associated(err)) then
      rc = c_ta_error_message(err, c_null_ptr, 0_c_size_t, n)
      if (rc == TA_STATUS_OK .and. n > 0) then
        cap = n + 1
        allocate(buf(cap))
        rc = c_ta_error_message(err, c_loc(buf), cap, got)
        n = min(n, got)
        deallocate(msg)
        allocate(character(len=n) :: msg)
        do i = 1, int(n)
          msg(i:i) = buf(i)
        end do
      end if
      rc = c_ta_error_free(err)
    end if
    if (len(msg) == 0) msg = c_string(c_ta_status_describe(s))
  end function error_text

  ! A NUL-terminated C string as a Fortran string.
  function c_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: n
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    call c_f_pointer(p, chars, [huge(0)])
    n = 0
    do while (chars(n + 1) /= c_null_char)
      n = n + 1
    end do
    allocate(character(len=n) :: s)
    s = transfer(chars(1:n), s)
  end function c_string

  ! Report status `s`: into stat/errmsg when present, else stop on failure.
  subroutine finish(s, err, stat, errmsg, where)
    integer(c_int32_t), intent(in) :: s
    type(c_ptr), intent(in) :: err
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    character(len=*), intent(in) :: where
    character(len=:), allocatable :: msg
    integer(c_int32_t) :: rc
    if (present(stat)) stat = int(s)
    if (s == TA_STATUS_OK) then
      if (c_associated(err)) rc = c_ta_error_free(err)
      return
    end if
    msg = error_text(s, err)
    if (present(errmsg)) errmsg = msg
    if (.not. present(stat)) error stop 'tensorasync: ' // where // ': ' // msg
  end subroutine finish

  ! Report failure `s` with the message `msg` (no C error object), as finish does.
  subroutine fail(s, msg, stat, errmsg, where)
    integer(c_int32_t), intent(in) :: s
    character(len=*), intent(in) :: msg
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    character(len=*), intent(in) :: where
    if (present(stat)) stat = int(s)
    if (present(errmsg)) errmsg = msg
    if (.not. present(stat)) error stop 'tensorasync: ' // where // ': ' // msg
  end subroutine fail

  ! `text` without trailing blanks, NUL-terminated (Fortran strings are
  ! blank-padded: names and paths are trimmed, as OPEN(FILE=) trims them).
  subroutine c_chars(text, buf)
    character(len=*), intent(in) :: text
    character(kind=c_char), allocatable, intent(out) :: buf(:)
    integer :: k, n
    n = len_trim(text)
    allocate(buf(n + 1))
    do k = 1, n
      buf(k) = text(k:k)
    end do
    buf(n + 1) = c_null_char
  end subroutine c_chars

  ! The name of a dtype ('f64', 'c128', ...).
  function dtype_label(dt) result(name)
    integer(c_int32_t), intent(in) :: dt
    character(len=:), allocatable :: name
    select case (dt)
    case (TA_DTYPE_F32); name = 'f32'
    case (TA_DTYPE_F64); name = 'f64'
    case (TA_DTYPE_C64); name = 'c64'
    case (TA_DTYPE_C128); name = 'c128'
    case (TA_DTYPE_I8); name = 'i8'
    case (TA_DTYPE_I16); name = 'i16'
    case (TA_DTYPE_I32); name = 'i32'
    case (TA_DTYPE_I64); name = 'i64'
    case (TA_DTYPE_U8); name = 'u8'
    case (TA_DTYPE_U16); name = 'u16'
    case (TA_DTYPE_U32); name = 'u32'
    case (TA_DTYPE_U64); name = 'u64'
    case default; name = 'unknown'
    end select
  end function dtype_label

  ! Before a copy between tensor `t` and an array of dtype `dtype` and shape
  ! `shp`: the tensor's dtype must be the array's (TA_STATUS_DTYPE_MISMATCH)
  ! and, with `same_shape`, its shape the array's (TA_STATUS_SHAPE_MISMATCH).
  ! `s` is the status, `msg` the message of a failure ('' for a status of
  ! the C calls, described by error_text).
  subroutine check_host_array(t, dtype, shp, same_shape, s, msg)
    type(ta_tensor), intent(in) :: t
    integer(c_int32_t), intent(in) :: dtype
    integer(c_size_t), intent(in) :: shp(:)
    logical, intent(in) :: same_shape
    integer(c_int32_t), intent(out) :: s
    character(len=:), allocatable, intent(out) :: msg
    integer(c_int32_t) :: dt
    integer(c_size_t) :: r
    integer(c_size_t), allocatable :: ext(:)
    msg = ''
    dt = 0
    s = c_ta_tensor_dtype(t%ptr, dt)
    if (s /= TA_STATUS_OK) return
    if (dt /= dtype) then
      s = TA_STATUS_DTYPE_MISMATCH
      msg = 'the tensor''s dtype is ' // dtype_label(dt) // ', the array''s ' // dtype_label(dtype)
      return
    end if
    if (.not. same_shape) return
    r = 0
    s = c_ta_tensor_rank(t%ptr, r)
    if (s /= TA_STATUS_OK) return
    allocate(ext(max(r, 1_c_size_t)))
    s = c_ta_tensor_extents(t%ptr, ext, r)
    if (s /= TA_STATUS_OK) return
    if (r /= size(shp, kind=c_size_t)) then
      s = TA_STATUS_SHAPE_MISMATCH
    else if (any(ext(1:r) /= shp)) then
      s = TA_STATUS_SHAPE_MISMATCH
    end if
    if (s == TA_STATUS_SHAPE_MISMATCH) &
      msg = 'the tensor''s shape ' // shape_label(ext(1:r)) // ' is not the array''s ' // shape_label(shp)
  end subroutine check_host_array

  ! A shape as text: '[2, 3]'.
  function shape_label(x) result(text)
    integer(c_size_t), intent(in) :: x(:)
    character(len=:), allocatable :: text
    character(len=24) :: num
    integer :: k
    text = '['
    do k = 1, size(x)
      write (num, '(i0)') x(k)
      if (k > 1) text = text // ', '
      text = text // trim(num)
    end do
    text = text // ']'
  end function shape_label

  ! The status name of a status value, e.g. 'TA_STATUS_SHAPE_MISMATCH'.
  function ta_status_string(s) result(name)
    integer, intent(in) :: s
    character(len=:), allocatable :: name
    name = c_string(c_ta_status_name(int(s, c_int32_t)))
  end function ta_status_string

  ! The library's version, "MAJOR.MINOR.PATCH" (equals TA_VERSION_STRING for a matching header).
  function ta_library_version() result(v)
    character(len=:), allocatable :: v
    v = c_string(c_ta_version())
  end function ta_library_version

  function submit_opts(runtime) result(o)
    type(ta_runtime), intent(in), optional :: runtime
    type(ta_submit) :: o
    o%runtime = c_null_ptr
    o%callback = c_null_funptr
    o%callback_userdata = c_null_ptr
    o%cq = c_null_ptr
    o%cq_tag = 0
    o%backends = 0
    o%flags = 0
    if (present(runtime)) o%runtime = runtime%ptr
  end function submit_opts

  function real_scalar(x) result(s)
    real(c_double), intent(in) :: x
    type(ta_scalar) :: s
    s%re = x
    s%im = 0.0_c_double
  end function real_scalar

  ! A NUL-terminated copy of `name` without its trailing blanks, that lives
  ! as long as the program.
  function intern(name) result(p)
    character(len=*), intent(in) :: name
    type(c_ptr) :: p
    type(name_entry), allocatable :: grown(:)
    character(kind=c_char), allocatable :: cname(:)
    integer :: i, n
    call c_chars(name, cname)
    if (.not. allocated(names)) allocate(names(0))
    do i = 1, size(names)
      if (size(names(i)%s) == size(cname)) then
        if (all(names(i)%s == cname)) then
          p = c_loc(names(i)%s)
          return
        end if
      end if
    end do
    n = size(names)
    allocate(grown(n + 1))
    do i = 1, n
      call move_alloc(names(i)%s, grown(i)%s)
    end do
    call move_alloc(cname, grown(n + 1)%s)
    call move_alloc(grown, names)
    p = c_loc(names(n + 1)%s)
  end function intern

  ! ---------------------------------------------------------------- handles

  subroutine free_tensor(t)
    type(ta_tensor), intent(inout) :: t
    integer(c_int32_t) :: rc
    rc = c_ta_tensor_free(t%ptr)
    t%ptr = c_null_ptr
  end subroutine free_tensor
  subroutine free_event(e)
    type(ta_event), intent(inout) :: e
    integer(c_int32_t) :: rc
    rc = c_ta_event_free(e%ptr)
    e%ptr = c_null_ptr
  end subroutine free_event
  ! Drains and stops a runtime made by ta_runtime_create.
  subroutine free_runtime(r)
    type(ta_runtime), intent(inout) :: r
    integer(c_int32_t) :: rc
    rc = c_ta_runtime_free(r%ptr)
    r%ptr = c_null_ptr
  end subroutine free_runtime
  subroutine free_blocks(b)
    type(ta_block_array), intent(inout) :: b
    integer(c_int32_t) :: rc
    rc = c_ta_blocks_free(b%ptr)
    b%ptr = c_null_ptr
  end subroutine free_blocks

  ! Ends a host access (later writers then run).
  subroutine free_mapping(m)
    type(ta_mapping), intent(inout) :: m
    integer(c_int32_t) :: rc
    rc = c_ta_mapping_free(m%ptr)
    m%ptr = c_null_ptr
  end subroutine free_mapping

  ! Blocking host access to a tensor: waits until an access of `mode`
  ! (TA_MODE_READ, TA_MODE_WRITE, TA_MODE_UPDATE) is granted, and gives its
  ! view (use ta_view_ptr for a Fortran pointer). The access is held, and
  ! the view's data valid, until ta_free(m). Reading a poisoned tensor fails
  ! with its error.
  subroutine ta_map(m, view, t, mode, stat, errmsg)
    type(ta_mapping), intent(out) :: m
    type(ta_view), intent(out) :: view
    type(ta_tensor), intent(in) :: t
    integer(c_int32_t), intent(in) :: mode
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    integer(c_int32_t) :: s
    err = c_null_ptr
    s = c_ta_tensor_acquire(t%ptr, mode, TA_WAIT_FOREVER, m%ptr, err)
    if (s == TA_STATUS_OK) s = c_ta_mapping_view(m%ptr, view)
    call finish(s, err, stat, errmsg, 'ta_map')
  end subroutine ta_map

  ! A runtime with `threads` workers (0: one per core).
  subroutine ta_runtime_create(r, threads, stat, errmsg)
    type(ta_runtime), intent(out) :: r
    integer, intent(in) :: threads
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_runtime_new(int(threads, c_size_t), r%ptr, err), err, stat, errmsg, 'ta_runtime_create')
  end subroutine ta_runtime_create

  ! Blocks until everything submitted to the runtime so far has completed.
  subroutine ta_wait_idle(r, stat, errmsg)
    type(ta_runtime), intent(in) :: r
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_runtime_wait_idle(r%ptr, TA_WAIT_FOREVER, err), err, stat, errmsg, 'ta_wait_idle')
  end subroutine ta_wait_idle

  ! ---------------------------------------------------------------- observability
  !
  ! Each takes an optional `runtime`; without it, the default runtime (the
  ! one operations without `runtime` run on, and mappings use).

  ! The C handle of `runtime`, or a new handle to the default runtime
  ! (`owned`: release it with release_runtime).
  subroutine runtime_ptr(runtime, p, owned, s)
    type(ta_runtime), intent(in), optional :: runtime
    type(c_ptr), intent(out) :: p
    logical, intent(out) :: owned
    integer(c_int32_t), intent(out) :: s
    p = c_null_ptr
    owned = .not. present(runtime)
    s = TA_STATUS_OK
    if (present(runtime)) then
      p = runtime%ptr
    else
      s = c_ta_runtime_default(p)
    end if
  end subroutine runtime_ptr
  subroutine release_runtime(p, owned)
    type(c_ptr), intent(in) :: p
    logical, intent(in) :: owned
    integer(c_int32_t) :: rc
    if (owned) rc = c_ta_runtime_free(p)
  end subroutine release_runtime

  ! Start recording a trace of everything the runtime runs from now on
  ! (`capacity` operations kept, 0 or absent: the library's default; the
  ! oldest are dropped when it is full). A recording in progress restarts.
  subroutine trace_start_i64(capacity, runtime, stat, errmsg)
    integer(c_int64_t), intent(in), optional :: capacity
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(ta_trace_options) :: o
    type(c_ptr) :: err, r
    logical :: owned
    integer(c_int32_t) :: s
    err = c_null_ptr
    o%struct_size = int(c_sizeof(o), c_int32_t)
    o%flags = 0
    o%capacity = 0
    if (present(capacity)) o%capacity = capacity
    call runtime_ptr(runtime, r, owned, s)
    if (s == TA_STATUS_OK) s = c_ta_runtime_trace_start(r, o, err)
    call release_runtime(r, owned)
    call finish(s, err, stat, errmsg, 'ta_trace_start')
  end subroutine trace_start_i64
  subroutine trace_start_int(capacity, runtime, stat, errmsg)
    integer, intent(in) :: capacity
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call trace_start_i64(int(capacity, c_int64_t), runtime, stat, errmsg)
  end subroutine trace_start_int

  ! Stop recording and write the trace to the file `path` (trailing blanks
  ! trimmed) as Chrome
  ! trace-event JSON (chrome://tracing, ui.perfetto.dev); without `path`,
  ! discard it. TA_STATUS_INVALID_ARGUMENT if the runtime is not recording.
  subroutine ta_trace_stop(path, runtime, stat, errmsg)
    character(len=*), intent(in), optional :: path
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    character(kind=c_char), allocatable, target :: cpath(:)
    type(c_ptr) :: err, r, pp
    logical :: owned
    integer(c_int32_t) :: s
    err = c_null_ptr
    pp = c_null_ptr
    if (present(path)) then
      call c_chars(path, cpath)   ! trailing blanks trimmed
      pp = c_loc(cpath)
    end if
    call runtime_ptr(runtime, r, owned, s)
    if (s == TA_STATUS_OK) s = c_ta_runtime_trace_stop(r, pp, err)
    call release_runtime(r, owned)
    call finish(s, err, stat, errmsg, 'ta_trace_stop')
  end subroutine ta_trace_stop

  ! Turn tracking of pending work on or off: ta_dump lists only the
  ! operations submitted while it is on.
  subroutine ta_track(enable, runtime, stat, errmsg)
    logical, intent(in) :: enable
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: r
    logical :: owned
    integer(c_int32_t) :: s
    call runtime_ptr(runtime, r, owned, s)
    if (s == TA_STATUS_OK) s = c_ta_runtime_track(r, merge(1_c_int32_t, 0_c_int32_t, enable))
    call release_runtime(r, owned)
    call finish(s, c_null_ptr, stat, errmsg, 'ta_track')
  end subroutine ta_track

  ! Let small library operations whose tensors are idle run on the calling
  ! thread before the call returns (enable = .true., the default) or send
  ! every operation to the workers; `enabled` returns the setting in force.
  subroutine ta_small_in_place(enable, enabled, runtime, stat, errmsg)
    logical, intent(in), optional :: enable
    logical, intent(out), optional :: enabled
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: r
    logical :: owned
    integer(c_int32_t) :: s, flag
    call runtime_ptr(runtime, r, owned, s)
    if (s == TA_STATUS_OK .and. present(enable)) &
      s = c_ta_runtime_set_small_in_place(r, merge(1_c_int32_t, 0_c_int32_t, enable))
    flag = 0
    if (s == TA_STATUS_OK) s = c_ta_runtime_small_in_place(r, flag)
    if (present(enabled)) enabled = flag /= 0
    call release_runtime(r, owned)
    call finish(s, c_null_ptr, stat, errmsg, 'ta_small_in_place')
  end subroutine ta_small_in_place

  ! A report of the runtime's unfinished operations (those submitted while
  ! tracking was on): per operation its state, accesses, and what it waits
  ! for on which tensor. `format`: TA_DUMP_TEXT (default) or TA_DUMP_DOT
  ! (Graphviz). Lines end with new_line('a').
  subroutine ta_dump(report, format, runtime, stat, errmsg)
    character(len=:), allocatable, intent(out) :: report
    integer(c_int32_t), intent(in), optional :: format
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    character(kind=c_char), allocatable, target :: buf(:)
    type(c_ptr) :: err, r
    logical :: owned
    integer(c_int32_t) :: s, fmt
    integer(c_size_t) :: cap, n
    integer :: k
    fmt = TA_DUMP_TEXT
    if (present(format)) fmt = format
    report = ''
    cap = 1024
    call runtime_ptr(runtime, r, owned, s)
    err = c_null_ptr
    do while (s == TA_STATUS_OK)
      allocate(buf(cap))
      n = 0
      s = c_ta_runtime_dump_string(r, fmt, c_loc(buf), cap, n, err)
      if (s == TA_STATUS_OK) then
        deallocate(report)
        allocate(character(len=n) :: report)
        do k = 1, int(n)
          report(k:k) = buf(k)
        end do
        exit
      end if
      deallocate(buf)
      if (s /= TA_STATUS_BUFFER_TOO_SMALL) exit
      if (c_associated(err)) s = c_ta_error_free(err)
      err = c_null_ptr
      s = TA_STATUS_OK
      cap = n + n / 2 + 64   ! the report may grow meanwhile
    end do
    call release_runtime(r, owned)
    call finish(s, err, stat, errmsg, 'ta_dump')
  end subroutine ta_dump

  ! The runtime's counters (ta_stats: threads, tasks_submitted,
  ! tasks_completed, tasks_failed, tasks_cancelled, steals, queue_depth,
  ! pending, peak_pending, busy_ns; see the C header for each).
  subroutine ta_stats_get(stats, runtime, stat, errmsg)
    type(ta_stats), intent(out) :: stats
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: r
    logical :: owned
    integer(c_int32_t) :: s
    stats = ta_stats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    stats%struct_size = int(c_sizeof(stats), c_int32_t)
    call runtime_ptr(runtime, r, owned, s)
    if (s == TA_STATUS_OK) s = c_ta_runtime_stats(r, stats)
    call release_runtime(r, owned)
    call finish(s, c_null_ptr, stat, errmsg, 'ta_stats_get')
  end subroutine ta_stats_get

  ! ---------------------------------------------------------------- tensors

  ! Shared body of ta_wrap: `p` is the array's address, `shp` its shape.
  subroutine wrap_any(t, dtype, p, shp, contig, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    integer(c_int32_t), intent(in) :: dtype
    type(c_ptr), intent(in) :: p
    integer(c_size_t), intent(in) :: shp(:)
    logical, intent(in) :: contig
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    integer(c_size_t) :: ext(max(size(shp), 1))
    if (.not. contig) then
      if (present(stat)) stat = int(TA_STATUS_INVALID_ARGUMENT)
      if (present(errmsg)) errmsg = 'ta_wrap needs a contiguous array: wrap the whole array and take a ' // &
          'ta_section view of the section'
      if (.not. present(stat)) error stop 'tensorasync: ta_wrap needs a contiguous array'
      return
    end if
    ext = 1
    ext(1:size(shp)) = shp
    err = c_null_ptr
    call finish(c_ta_tensor_wrap(dtype, size(shp, kind=c_size_t), ext, order=TA_ORDER_COL_MAJOR, data=p, &
        release=c_null_funptr, release_userdata=c_null_ptr, tensor_out=t%ptr, error=err), &
        err, stat, errmsg, 'ta_wrap')
  end subroutine wrap_any

  subroutine wrap_f64(t, a, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    real(c_double), intent(inout), target :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (is_contiguous(a) .and. size(a) > 0) then
      call wrap_any(t, TA_DTYPE_F64, c_loc(a), shape(a, kind=c_size_t), .true., stat, errmsg)
    else
      call wrap_any(t, TA_DTYPE_F64, c_null_ptr, shape(a, kind=c_size_t), .false., stat, errmsg)
    end if
  end subroutine wrap_f64
  subroutine wrap_f32(t, a, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    real(c_float), intent(inout), target :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (is_contiguous(a) .and. size(a) > 0) then
      call wrap_any(t, TA_DTYPE_F32, c_loc(a), shape(a, kind=c_size_t), .true., stat, errmsg)
    else
      call wrap_any(t, TA_DTYPE_F32, c_null_ptr, shape(a, kind=c_size_t), .false., stat, errmsg)
    end if
  end subroutine wrap_f32
  subroutine wrap_c128(t, a, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    complex(c_double_complex), intent(inout), target :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (is_contiguous(a) .and. size(a) > 0) then
      call wrap_any(t, TA_DTYPE_C128, c_loc(a), shape(a, kind=c_size_t), .true., stat, errmsg)
    else
      call wrap_any(t, TA_DTYPE_C128, c_null_ptr, shape(a, kind=c_size_t), .false., stat, errmsg)
    end if
  end subroutine wrap_c128
  subroutine wrap_c64(t, a, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    complex(c_float_complex), intent(inout), target :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (is_contiguous(a) .and. size(a) > 0) then
      call wrap_any(t, TA_DTYPE_C64, c_loc(a), shape(a, kind=c_size_t), .true., stat, errmsg)
    else
      call wrap_any(t, TA_DTYPE_C64, c_null_ptr, shape(a, kind=c_size_t), .false., stat, errmsg)
    end if
  end subroutine wrap_c64
  subroutine wrap_i32(t, a, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    integer(c_int32_t), intent(inout), target :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (is_contiguous(a) .and. size(a) > 0) then
      call wrap_any(t, TA_DTYPE_I32, c_loc(a), shape(a, kind=c_size_t), .true., stat, errmsg)
    else
      call wrap_any(t, TA_DTYPE_I32, c_null_ptr, shape(a, kind=c_size_t), .false., stat, errmsg)
    end if
  end subroutine wrap_i32
  subroutine wrap_i64(t, a, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    integer(c_int64_t), intent(inout), target :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    if (is_contiguous(a) .and. size(a) > 0) then
      call wrap_any(t, TA_DTYPE_I64, c_loc(a), shape(a, kind=c_size_t), .true., stat, errmsg)
    else
      call wrap_any(t, TA_DTYPE_I64, c_null_ptr, shape(a, kind=c_size_t), .false., stat, errmsg)
    end if
  end subroutine wrap_i64

  ! A zero-filled tensor of `dtype` (TA_DTYPE_F64, ...) and Fortran shape `shp`, column-major.
  subroutine ta_zeros(t, dtype, shp, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    integer(c_int32_t), intent(in) :: dtype
    integer, intent(in) :: shp(:)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    integer(c_size_t) :: ext(max(size(shp), 1))
    ext = 1
    ext(1:size(shp)) = int(shp, c_size_t)
    err = c_null_ptr
    call finish(c_ta_tensor_new_zeros(dtype, TA_DOMAIN_HOST, size(shp, kind=c_size_t), ext, &
        TA_ORDER_COL_MAJOR, t%ptr, err), err, stat, errmsg, 'ta_zeros')
  end subroutine ta_zeros

  ! The tensor's shape (Fortran order = tensor axis order).
  subroutine ta_shape(t, shp, stat, errmsg)
    type(ta_tensor), intent(in) :: t
    integer, allocatable, intent(out) :: shp(:)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_size_t) :: r
    integer(c_size_t), allocatable :: ext(:)
    integer(c_int32_t) :: s
    s = c_ta_tensor_rank(t%ptr, r)
    if (s == TA_STATUS_OK) then
      allocate(ext(max(r, 1_c_size_t)))
      s = c_ta_tensor_extents(t%ptr, ext, r)
      if (s == TA_STATUS_OK) shp = int(ext(1:r))
    end if
    call finish(s, c_null_ptr, stat, errmsg, 'ta_shape')
  end subroutine ta_shape

  ! Waits for everything enrolled on the tensor so far; its error if it is poisoned.
  subroutine wait_tensor(t, stat, errmsg)
    type(ta_tensor), intent(in) :: t
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_tensor_wait(t%ptr, TA_WAIT_FOREVER, err), err, stat, errmsg, 'ta_wait')
  end subroutine wait_tensor

  ! An event that completes once everything enrolled on the tensor so far has
  ! (never blocks); its status is what ta_wait on the tensor would give then.
  subroutine ta_ready(event, t, stat, errmsg)
    type(ta_event), intent(out) :: event
    type(ta_tensor), intent(in) :: t
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_tensor_ready(t%ptr, event%ptr, err), err, stat, errmsg, 'ta_ready')
  end subroutine ta_ready

  ! Whether an operation has completed (never blocks).
  function ta_done(event) result(done)
    type(ta_event), intent(in) :: event
    logical :: done
    done = c_ta_event_poll(event%ptr) /= TA_STATUS_PENDING
  end function ta_done

  ! Waits for an operation; its error if it failed.
  subroutine wait_event(e, stat, errmsg)
    type(ta_event), intent(in) :: e
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: s, rc
    type(c_ptr) :: err
    err = c_null_ptr
    s = c_ta_event_wait(e%ptr, TA_WAIT_FOREVER)
    if (s /= TA_STATUS_OK) rc = c_ta_event_error(e%ptr, err)
    call finish(s, err, stat, errmsg, 'ta_wait')
  end subroutine wait_event

  ! Blocking copy of a tensor's elements into a Fortran array of the same
  ! shape. The tensor's dtype must be the array's (TA_STATUS_DTYPE_MISMATCH)
  ! and its shape the array's (TA_STATUS_SHAPE_MISMATCH).
  subroutine get_f64(t, a, stat, errmsg)
    type(ta_tensor), intent(in) :: t
    real(c_double), intent(inout), target, contiguous :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err, ev
    integer(c_ptrdiff_t) :: str(max(rank(a), 1))
    integer(c_int32_t) :: s, rc
    integer :: k
    character(len=:), allocatable :: why
    call check_host_array(t, TA_DTYPE_F64, shape(a, kind=c_size_t), .true., s, why)
    if (s /= TA_STATUS_OK) then
      if (len(why) > 0) then
        call fail(s, why, stat, errmsg, 'ta_get')
      else
        call finish(s, c_null_ptr, stat, errmsg, 'ta_get')
      end if
      return
    end if
    str(1) = 1
    do k = 2, rank(a)
      str(k) = str(k - 1) * size(a, k - 1)
    end do
    err = c_null_ptr
    ev = c_null_ptr
    s = c_ta_copy_out(t%ptr, c_loc(a), size(a, kind=c_size_t), str, event_out=ev, error=err)
    if (s == TA_STATUS_OK) then
      s = c_ta_event_wait(ev, TA_WAIT_FOREVER)
      if (s /= TA_STATUS_OK) rc = c_ta_event_error(ev, err)
      rc = c_ta_event_free(ev)
    end if
    call finish(s, err, stat, errmsg, 'ta_get')
  end subroutine get_f64

  ! Blocking copy of a Fortran array into a tensor (an overwrite). The
  ! tensor's dtype must be the array's (TA_STATUS_DTYPE_MISMATCH); a
  ! constructed tensor must have the array's shape (TA_STATUS_SHAPE_MISMATCH),
  ! an unconstructed one takes it.
  subroutine put_f64(t, a, stat, errmsg)
    type(ta_tensor), intent(in) :: t
    real(c_double), intent(in), target, contiguous :: a(..)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err, ev
    integer(c_ptrdiff_t) :: str(max(rank(a), 1))
    integer(c_size_t) :: ext(max(rank(a), 1))
    integer(c_int32_t) :: s, rc
    integer :: k
    character(len=:), allocatable :: why
    call check_host_array(t, TA_DTYPE_F64, shape(a, kind=c_size_t), .false., s, why)
    if (s /= TA_STATUS_OK) then
      if (len(why) > 0) then
        call fail(s, why, stat, errmsg, 'ta_put')
      else
        call finish(s, c_null_ptr, stat, errmsg, 'ta_put')
      end if
      return
    end if
    str(1) = 1
    ext(1) = 1
    do k = 1, rank(a)
      ext(k) = size(a, k)
    end do
    do k = 2, rank(a)
      str(k) = str(k - 1) * int(ext(k - 1), c_ptrdiff_t)
    end do
    err = c_null_ptr
    ev = c_null_ptr
    s = c_ta_copy_in(t%ptr, c_loc(a), int(rank(a), c_size_t), ext, str, event_out=ev, error=err)
    if (s == TA_STATUS_OK) then
      s = c_ta_event_wait(ev, TA_WAIT_FOREVER)
      if (s /= TA_STATUS_OK) rc = c_ta_event_error(ev, err)
      rc = c_ta_event_free(ev)
    end if
    call finish(s, err, stat, errmsg, 'ta_put')
  end subroutine put_f64

  ! ---------------------------------------------------------------- views

  ! A view of the section t(lower(1):upper(1):step(1), ...) in Fortran's
  ! convention (1-based, inclusive upper bounds); step defaults to 1.
  subroutine ta_section(view, t, lower, upper, step, stat, errmsg)
    type(ta_tensor), intent(out) :: view
    type(ta_tensor), intent(in) :: t
    integer, intent(in) :: lower(:), upper(:)
    integer, intent(in), optional :: step(:)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(ta_slice) :: sl(size(lower))
    type(c_ptr) :: err
    integer :: k, st
    do k = 1, size(lower)
      st = 1
      if (present(step)) st = step(k)
      sl(k)%start = lower(k) - 1
      sl(k)%step = st
      sl(k)%drop = 0
      if (st > 0) then
        sl(k)%stop = upper(k)
      else
        sl(k)%stop = upper(k) - 2
      end if
    end do
    err = c_null_ptr
    call finish(c_ta_tensor_slice(t%ptr, sl, size(lower, kind=c_size_t), view%ptr, err), err, stat, errmsg, &
        'ta_section')
  end subroutine ta_section

  ! The transpose (axes reversed) as a view.
  subroutine ta_transpose(view, t, stat, errmsg)
    type(ta_tensor), intent(out) :: view
    type(ta_tensor), intent(in) :: t
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_tensor_transpose(t%ptr, view%ptr, err), err, stat, errmsg, 'ta_transpose')
  end subroutine ta_transpose

  ! ---------------------------------------------------------------- operations

  ! C = alpha*A*B + beta*C (asynchronous). `event` receives the operation's event.
  subroutine ta_gemm(c, alpha, a, b, beta, runtime, event, stat, errmsg)
    type(ta_tensor), intent(in) :: c, a, b
    real(c_double), intent(in) :: alpha, beta
    type(ta_runtime), intent(in), optional :: runtime
    type(ta_event), intent(out), optional :: event
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err, ev
    integer(c_int32_t) :: s
    err = c_null_ptr
    if (present(event)) then
      s = c_ta_gemm(c%ptr, real_scalar(alpha), a%ptr, b%ptr, real_scalar(beta), submit_opts(runtime), ev, err)
      if (s == TA_STATUS_OK) event%ptr = ev
    else
      s = c_ta_gemm(c%ptr, real_scalar(alpha), a%ptr, b%ptr, real_scalar(beta), submit_opts(runtime), error=err)
    end if
    call finish(s, err, stat, errmsg, 'ta_gemm')
  end subroutine ta_gemm

  subroutine ta_fill(t, value, runtime, stat, errmsg)
    type(ta_tensor), intent(in) :: t
    real(c_double), intent(in) :: value
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_fill(t%ptr, real_scalar(value), submit_opts(runtime), error=err), err, stat, errmsg, &
        'ta_fill')
  end subroutine ta_fill

  subroutine ta_scale(x, alpha, runtime, stat, errmsg)
    type(ta_tensor), intent(in) :: x
    real(c_double), intent(in) :: alpha
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_scale(x%ptr, real_scalar(alpha), submit_opts(runtime), error=err), err, stat, errmsg, &
        'ta_scale')
  end subroutine ta_scale

  ! y = alpha*x + y
  subroutine ta_axpy(y, alpha, x, runtime, stat, errmsg)
    type(ta_tensor), intent(in) :: y, x
    real(c_double), intent(in) :: alpha
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_axpy(y%ptr, real_scalar(alpha), x%ptr, submit_opts(runtime), error=err), err, stat, &
        errmsg, 'ta_axpy')
  end subroutine ta_axpy

  ! dst = src
  subroutine ta_copy(dst, src, runtime, stat, errmsg)
    type(ta_tensor), intent(in) :: dst, src
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_copy(dst%ptr, src%ptr, submit_opts(runtime), error=err), err, stat, errmsg, 'ta_copy')
  end subroutine ta_copy

  ! In-place Cholesky; uplo is TA_UPLO_LOWER or TA_UPLO_UPPER.
  subroutine ta_potrf(a, uplo, runtime, stat, errmsg)
    type(ta_tensor), intent(in) :: a
    integer(c_int32_t), intent(in) :: uplo
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_potrf(a%ptr, uplo, submit_opts(runtime), error=err), err, stat, errmsg, 'ta_potrf')
  end subroutine ta_potrf

  ! Triangular solve, X overwriting B (see ta_trsm in the C header).
  subroutine ta_trsm(b, side, uplo, diag, alpha, a, runtime, stat, errmsg)
    type(ta_tensor), intent(in) :: b, a
    integer(c_int32_t), intent(in) :: side, uplo, diag
    real(c_double), intent(in) :: alpha
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_trsm(b%ptr, side, uplo, diag, real_scalar(alpha), a%ptr, submit_opts(runtime), error=err), &
        err, stat, errmsg, 'ta_trsm')
  end subroutine ta_trsm

  ! C = alpha*A*A^T + beta*C on one triangle.
  subroutine ta_syrk(c, uplo, alpha, a, beta, runtime, stat, errmsg)
    type(ta_tensor), intent(in) :: c, a
    integer(c_int32_t), intent(in) :: uplo
    real(c_double), intent(in) :: alpha, beta
    type(ta_runtime), intent(in), optional :: runtime
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_syrk(c%ptr, uplo, real_scalar(alpha), a%ptr, real_scalar(beta), submit_opts(runtime), &
        error=err), err, stat, errmsg, 'ta_syrk')
  end subroutine ta_syrk

  ! ---------------------------------------------------------------- kernels

  ! Submits kernel (c_funloc of a ta_kernel_fn) over tensors(k) with modes(k)
  ! (TA_MODE_READ, TA_MODE_WRITE, TA_MODE_UPDATE). `userdata` (default NULL)
  ! is passed through; `name` names the operation in its errors.
  subroutine ta_submit_kernel(kernel, tensors, modes, userdata, name, runtime, event, stat, errmsg)
    type(c_funptr), value :: kernel
    type(ta_tensor), intent(in) :: tensors(:)
    integer(c_int32_t), intent(in) :: modes(:)
    type(c_ptr), intent(in), optional :: userdata
    character(len=*), intent(in), optional :: name
    type(ta_runtime), intent(in), optional :: runtime
    type(ta_event), intent(out), optional :: event
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(ta_access) :: acc(max(size(tensors), 1))
    type(c_ptr) :: err, ud, nm, ev
    integer(c_int32_t) :: s
    integer :: k
    if (size(modes) /= size(tensors)) then
      call finish(TA_STATUS_INVALID_ARGUMENT, c_null_ptr, stat, errmsg, 'ta_submit_kernel')
      return
    end if
    do k = 1, size(tensors)
      acc(k)%tensor = tensors(k)%ptr
      acc(k)%mode = modes(k)
    end do
    ud = c_null_ptr
    if (present(userdata)) ud = userdata
    nm = c_null_ptr
    if (present(name)) nm = intern(name)
    err = c_null_ptr
    if (present(event)) then
      s = c_ta_kernel_submit(kernel, ud, nm, acc, size(tensors, kind=c_size_t), submit_opts(runtime), ev, err)
      if (s == TA_STATUS_OK) event%ptr = ev
    else
      s = c_ta_kernel_submit(kernel, ud, nm, acc, size(tensors, kind=c_size_t), submit_opts(runtime), &
          error=err)
    end if
    call finish(s, err, stat, errmsg, 'ta_submit_kernel')
  end subroutine ta_submit_kernel

  ! In a kernel: set the error message and return the status to return.
  function ta_kernel_fail(ctx, message) result(status)
    type(c_ptr), intent(in) :: ctx
    character(len=*), intent(in) :: message
    integer(c_int32_t) :: status
    character(kind=c_char), allocatable, target :: buf(:)
    call c_chars(message, buf)   ! trailing blanks trimmed
    status = c_ta_kernel_set_error(ctx, c_loc(buf))
    status = TA_STATUS_KERNEL_FAILED
  end function ta_kernel_fail

  ! A Fortran pointer to a 1-d f64 view (any stride, negative ones
  ! included: sections with negative steps). stat /= 0 (and p null) for
  ! another dtype or rank (TA_STATUS_DTYPE_MISMATCH), or a stride of 0
  ! (TA_STATUS_NOT_CONTIGUOUS).
  subroutine view_ptr_f64_1(v, p, stat)
    type(ta_view), intent(in) :: v
    real(c_double), pointer, intent(out) :: p(:)
    integer, intent(out) :: stat
    integer(c_size_t), pointer :: ext(:)
    integer(c_ptrdiff_t), pointer :: str(:)
    real(c_double), pointer :: flat(:)
    integer(c_ptrdiff_t) :: e, s, span
    p => null()
    stat = int(TA_STATUS_DTYPE_MISMATCH)
    if (v%dtype /= TA_DTYPE_F64 .or. v%rank /= 1) return
    call c_f_pointer(v%extents, ext, [1])
    call c_f_pointer(v%strides, str, [1])
    e = int(ext(1), c_ptrdiff_t)
    if (e == 0) then
      p => no_f64
      stat = 0
      return
    end if
    s = str(1)
    if (e == 1) s = 1
    stat = int(TA_STATUS_NOT_CONTIGUOUS)
    if (s == 0) return
    span = (e - 1) * abs(s) + 1
    if (s > 0) then
      call c_f_pointer(v%data, flat, [span])
      p => flat(1::s)
    else
      ! The lowest address is that of the last element.
      call c_f_pointer(c_ptr_offset(v%data, (e - 1) * s), flat, [span])
      p => flat(span:1:s)
    end if
    stat = 0
  end subroutine view_ptr_f64_1

  ! A Fortran pointer p(i, j) to a 2-d f64 view whose first axis has the
  ! smaller stride (column-major arrays, their sections and tiles, negative
  ! steps included): any view whose column j+1 lies past column j, that is
  ! abs(stride 2) > (extent 1 - 1) * abs(stride 1). stat /= 0 (and p null)
  ! for another dtype or rank (TA_STATUS_DTYPE_MISMATCH) or another layout
  ! (TA_STATUS_NOT_CONTIGUOUS: a transposed view, for example).
  subroutine view_ptr_f64_2(v, p, stat)
    type(ta_view), intent(in) :: v
    real(c_double), pointer, intent(out) :: p(:, :)
    integer, intent(out) :: stat
    integer(c_size_t), pointer :: ext(:)
    integer(c_ptrdiff_t), pointer :: str(:)
    real(c_double), pointer :: full(:, :)
    integer(c_ptrdiff_t) :: e1, e2, s1, s2, col, ld, lo
    p => null()
    stat = int(TA_STATUS_DTYPE_MISMATCH)
    if (v%dtype /= TA_DTYPE_F64 .or. v%rank /= 2) return
    call c_f_pointer(v%extents, ext, [2])
    call c_f_pointer(v%strides, str, [2])
    e1 = int(ext(1), c_ptrdiff_t)
    e2 = int(ext(2), c_ptrdiff_t)
    if (e1 == 0 .or. e2 == 0) then
      p(1:e1, 1:e2) => no_f64
      stat = 0
      return
    end if
    s1 = str(1)
    s2 = str(2)
    if (e1 == 1) s1 = 1
    col = (e1 - 1) * abs(s1) + 1        ! the span of one column
    if (e2 == 1) s2 = col
    stat = int(TA_STATUS_NOT_CONTIGUOUS)
    if (s1 == 0 .or. abs(s2) < col) return
    ! full(:, :) starts at the lowest address, with leading dimension
    ! abs(s2): element (i, j) of the view is full(r0 + i*s1, c0 + j*sign(s2)).
    ld = abs(s2)
    lo = min(0_c_ptrdiff_t, (e1 - 1) * s1) + min(0_c_ptrdiff_t, (e2 - 1) * s2)
    call c_f_pointer(c_ptr_offset(v%data, lo), full, [ld, e2])
    if (s1 > 0 .and. s2 > 0) then
      p => full(1:col:s1, 1:e2)
    else if (s1 > 0) then
      p => full(1:col:s1, e2:1:-1)
    else if (s2 > 0) then
      p => full(col:1:s1, 1:e2)
    else
      p => full(col:1:s1, e2:1:-1)
    end if
    stat = 0
  end subroutine view_ptr_f64_2

  ! The C address `elements` f64 elements from `base`.
  function c_ptr_offset(base, elements) result(q)
    type(c_ptr), intent(in) :: base
    integer(c_ptrdiff_t), intent(in) :: elements
    type(c_ptr) :: q
    integer(c_intptr_t) :: a
    a = transfer(base, a)
    a = a + int(elements, c_intptr_t) * int(c_sizeof(0.0_c_double), c_intptr_t)
    q = transfer(a, q)
  end function c_ptr_offset

  ! ---------------------------------------------------------------- block arrays

  ! A tiled block array of Fortran shape `shp` cut in tiles of `tile`, column-major.
  subroutine ta_blocks_tiled(b, dtype, shp, tile, stat, errmsg)
    type(ta_block_array), intent(out) :: b
    integer(c_int32_t), intent(in) :: dtype
    integer, intent(in) :: shp(:), tile(:)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_blocks_new_tiled(dtype, TA_DOMAIN_HOST, size(shp, kind=c_size_t), int(shp, c_size_t), &
        int(tile, c_size_t), TA_ORDER_COL_MAJOR, b%ptr, err), err, stat, errmsg, 'ta_blocks_tiled')
  end subroutine ta_blocks_tiled

  ! The tile at 1-based tile index `idx` (a tensor on that tile's own queue).
  subroutine ta_tile(t, b, idx, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    type(ta_block_array), intent(in) :: b
    integer, intent(in) :: idx(:)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_blocks_tile(b%ptr, size(idx, kind=c_size_t), int(idx - 1, c_size_t), t%ptr, err), err, &
        stat, errmsg, 'ta_tile')
  end subroutine ta_tile

  ! The whole block array as one view.
  subroutine ta_blocks_whole(t, b, stat, errmsg)
    type(ta_tensor), intent(out) :: t
    type(ta_block_array), intent(in) :: b
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    type(c_ptr) :: err
    err = c_null_ptr
    call finish(c_ta_blocks_all(b%ptr, t%ptr, err), err, stat, errmsg, 'ta_blocks_whole')
  end subroutine ta_blocks_whole

end module tensorasync
