! Tests of the Fortran module tensorasync: gemm on Fortran arrays against
! matmul, a wrapped array updated asynchronously and read after a wait, a
! view of an array section, kernels as bind(c) procedures, and errors with
! their messages.
module test_kernels
  use, intrinsic :: iso_c_binding
  use tensorasync
  implicit none
contains
  ! x(i) = 2*x(i) + i * userdata, on a 1-d view; a strided view is fine.
  function k_affine(views, nviews, userdata, ctx) result(status) bind(c)
    type(ta_view), intent(in) :: views(*)
    integer(c_size_t), value :: nviews
    type(c_ptr), value :: userdata, ctx
    integer(c_int32_t) :: status
    real(c_double), pointer :: x(:), s
    integer :: i, st
    call ta_view_ptr(views(1), x, st)
    if (st /= 0 .or. nviews /= 1) then
      status = ta_kernel_fail(ctx, 'k_affine: not a 1-d f64 view')
      return
    end if
    call c_f_pointer(userdata, s)
    do i = 1, size(x)
      x(i) = 2.0_c_double * x(i) + real(i, c_double) * s
    end do
    status = TA_STATUS_OK
  end function k_affine

  ! out = in + 100 on 2-d views (the section view: Fortran indices of the view).
  function k_plus100(views, nviews, userdata, ctx) result(status) bind(c)
    type(ta_view), intent(in) :: views(*)
    integer(c_size_t), value :: nviews
    type(c_ptr), value :: userdata, ctx
    integer(c_int32_t) :: status
    real(c_double), pointer :: a(:, :)
    integer :: st
    call ta_view_ptr(views(1), a, st)
    if (st /= 0 .or. nviews /= 1 .or. c_associated(userdata)) then
      status = ta_kernel_fail(ctx, 'k_plus100: bad view')
      return
    end if
    a = a + 100.0_c_double
    status = TA_STATUS_OK
  end function k_plus100

  function k_fails(views, nviews, userdata, ctx) result(status) bind(c)
    type(ta_view), intent(in) :: views(*)
    integer(c_size_t), value :: nviews
    type(c_ptr), value :: userdata, ctx
    integer(c_int32_t) :: status
    if (nviews < 1 .or. c_associated(userdata) .or. .not. c_associated(views(1)%data)) then
      status = ta_kernel_fail(ctx, 'k_fails: unexpected arguments')
      return
    end if
    status = ta_kernel_fail(ctx, 'the Fortran kernel refused')
  end function k_fails
end module test_kernels

program test_fortran
  use, intrinsic :: iso_c_binding
  use tensorasync
  use test_kernels
  implicit none
  integer :: failures = 0, checks = 0
  type(ta_runtime) :: rt
  integer(c_size_t) :: live

  call ta_runtime_create(rt, 2)
  call check(ta_library_version() == TA_VERSION_STRING, 'version')
  call test_gemm()
  call test_async_update()
  call test_section()
  call test_errors()
  call test_blas1()
  call test_mapping()
  call test_observability()
  call ta_free(rt)
  ! every handle made by the tests (tensors, views, events, errors) was freed
  call check(c_ta_handles_live(live) == TA_STATUS_OK .and. live == 0, 'no live handles at the end')
  print '(a,i0,a,i0,a)', 'test_fortran: ', checks, ' checks, ', failures, ' failed'
  if (failures /= 0) error stop 1

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (.not. ok) then
      failures = failures + 1
      print '(a,a)', 'FAIL: ', what
    end if
  end subroutine check

  subroutine fill_det(a, s)
    real(c_double), intent(out) :: a(:, :)
    real(c_double), intent(in) :: s
    integer :: i, j
    do j = 1, size(a, 2)
      do i = 1, size(a, 1)
        a(i, j) = s * real(mod(7 * i + 3 * j, 11), c_double) / 11.0_c_double - 0.3_c_double
      end do
    end do
  end subroutine fill_det

  subroutine test_gemm()
    real(c_double), target, asynchronous :: a(5, 3), b(3, 4), c(5, 4), at(3, 5)
    real(c_double) :: c0(5, 4), ref(5, 4)
    type(ta_tensor) :: ta, tb, tc, tat, tatt
    type(ta_event) :: ev
    integer, allocatable :: shp(:)
    call fill_det(a, 1.0_c_double)
    call fill_det(b, 2.0_c_double)
    call fill_det(c, -1.0_c_double)
    c0 = c
    call ta_wrap(ta, a)
    call ta_wrap(tb, b)
    call ta_wrap(tc, c)
    call ta_shape(ta, shp)
    call check(all(shp == [5, 3]), 'wrapped shape is the array shape')
    call ta_gemm(tc, 1.5_c_double, ta, tb, 0.5_c_double, runtime=rt, event=ev)
    call ta_wait(ev)
    ref = 1.5_c_double * matmul(a, b) + 0.5_c_double * c0
    call check(maxval(abs(c - ref)) < 1e-12_c_double, 'gemm on Fortran arrays equals matmul')
    ! a transposed view as an operand: C = (A^T)^T B
    at = transpose(a)
    call ta_wrap(tat, at)
    call ta_transpose(tatt, tat)
    call ta_gemm(tc, 1.0_c_double, tatt, tb, 0.0_c_double, runtime=rt)
    call ta_wait(tc)
    call check(maxval(abs(c - matmul(a, b))) < 1e-12_c_double, 'gemm with a transposed view')
    call ta_free(ev)
    call ta_free(tatt)
    call ta_free(tat)
    call ta_free(ta)
    call ta_free(tb)
    call ta_free(tc)
  end subroutine test_gemm

  subroutine test_async_update()
    real(c_double), target, asynchronous :: x(1000)
    real(c_double), target :: s
    real(c_double) :: ref(1000)
    type(ta_tensor) :: t, every3
    type(ta_event) :: ev
    integer :: i
    x = [(real(i, c_double), i = 1, 1000)]
    s = 0.5_c_double
    call ta_wrap(t, x)
    ! two kernels and a library operation, ordered by the tensor's queue
    call ta_submit_kernel(c_funloc(k_affine), [t], [TA_MODE_UPDATE], userdata=c_loc(s), name='affine', runtime=rt)
    call ta_scale(t, 3.0_c_double, runtime=rt)
    call ta_section(every3, t, [1], [1000], [3])
    call ta_submit_kernel(c_funloc(k_affine), [every3], [TA_MODE_UPDATE], userdata=c_loc(s), runtime=rt)
    call ta_ready(ev, t)
    call ta_wait(ev)
    call ta_free(ev)
    do i = 1, 1000
      ref(i) = 3.0_c_double * (2.0_c_double * real(i, c_double) + real(i, c_double) * 0.5_c_double)
    end do
    do i = 1, 1000, 3
      ref(i) = 2.0_c_double * ref(i) + real((i - 1) / 3 + 1, c_double) * 0.5_c_double
    end do
    call check(maxval(abs(x - ref)) == 0.0_c_double, 'wrapped array updated asynchronously, read after its ready event')
    call ta_free(every3)
    call ta_free(t)
  end subroutine test_async_update

  subroutine test_section()
    real(c_double), target, asynchronous :: a(6, 5)
    real(c_double) :: a0(6, 5), expect(6, 5), got(3, 3), rev(4, 1)
    type(ta_tensor) :: t, v
    integer, allocatable :: shp(:)
    integer :: st
    call fill_det(a, 1.0_c_double)
    a0 = a
    call ta_wrap(t, a)
    ! the view of the section a(2:4, 1:5:2)
    call ta_section(v, t, [2, 1], [4, 5], [1, 2])
    call ta_shape(v, shp)
    call check(all(shp == [3, 3]), 'section view shape')
    call ta_get(v, got)
    call check(all(got == a0(2:4, 1:5:2)), 'ta_get of a section view equals the section')
    call ta_submit_kernel(c_funloc(k_plus100), [v], [TA_MODE_UPDATE], runtime=rt)
    call ta_wait(t)
    expect = a0
    expect(2:4, 1:5:2) = a0(2:4, 1:5:2) + 100.0_c_double
    call check(all(a == expect), 'kernel on a section view changes exactly the section')
    call ta_fill(v, -1.0_c_double, runtime=rt)
    call ta_wait(v)
    expect(2:4, 1:5:2) = -1.0_c_double
    call check(all(a == expect), 'fill of a section view')
    ! a reversed section of a column: a(5:2:-1, 4)
    call ta_free(v)
    call ta_section(v, t, [5, 4], [2, 4], [-1, 1])
    call ta_shape(v, shp)
    call check(all(shp == [4, 1]), 'reversed section shape')
    call ta_get(v, rev)
    call check(all(rev(:, 1) == a(5:2:-1, 4)), 'reversed section values')
    ! a non-contiguous actual argument cannot be wrapped
    call ta_free(v)
    call ta_wrap(v, a(2:4, 1:5:2), stat=st)
    call check(st == TA_STATUS_INVALID_ARGUMENT, 'wrapping a non-contiguous section is refused')
    call ta_free(t)
  end subroutine test_section

  subroutine test_errors()
    real(c_double), target, asynchronous :: a(3, 3), b(4, 2), c(3, 2), y(4)
    type(ta_tensor) :: ta, tb, tc, ty
    type(ta_event) :: ev
    character(len=200) :: msg
    integer :: st
    a = 1
    b = 1
    c = 0
    y = 0
    call ta_wrap(ta, a)
    call ta_wrap(tb, b)
    call ta_wrap(tc, c)
    msg = ''
    call ta_gemm(tc, 1.0_c_double, ta, tb, 0.0_c_double, runtime=rt, stat=st, errmsg=msg)
    call check(st == TA_STATUS_SHAPE_MISMATCH, 'gemm shape mismatch: status')
    call check(ta_status_string(st) == 'TA_STATUS_SHAPE_MISMATCH', 'status name')
    call check(len_trim(msg) > 10, 'gemm shape mismatch: message')
    print '(a,a)', '  gemm error message: ', trim(msg)
    ! a failing kernel poisons its output with its message
    call ta_wrap(ty, y)
    call ta_submit_kernel(c_funloc(k_fails), [ty], [TA_MODE_UPDATE], name='fortran_kernel', runtime=rt, event=ev)
    msg = ''
    call ta_wait(ev, stat=st, errmsg=msg)
    call check(st == TA_STATUS_KERNEL_FAILED, 'failed kernel: event status')
    call check(trim(msg) == 'the Fortran kernel refused', 'failed kernel: event message')
    msg = ''
    call ta_wait(ty, stat=st, errmsg=msg)
    call check(st == TA_STATUS_KERNEL_FAILED, 'failed kernel: tensor poisoned')
    call check(trim(msg) == 'the Fortran kernel refused', 'failed kernel: tensor message')
    ! the readiness event of the poisoned tensor carries the same error
    call ta_free(ev)
    call ta_ready(ev, ty)
    msg = ''
    call ta_wait(ev, stat=st, errmsg=msg)
    call check(ta_done(ev), 'ready event done after ta_wait')
    call check(st == TA_STATUS_KERNEL_FAILED .and. trim(msg) == 'the Fortran kernel refused', &
        'ready event of a poisoned tensor: status and message')
    ! Cholesky of a matrix that is not positive definite
    a = reshape([1, 2, 0, 2, 1, 0, 0, 0, 1], [3, 3])
    call ta_potrf(ta, TA_UPLO_LOWER, runtime=rt)
    msg = ''
    call ta_wait(ta, stat=st, errmsg=msg)
    call check(st /= TA_STATUS_OK .and. index(msg, 'positive definite') > 0, 'potrf failure message')
    ! an overwrite clears the poison
    call ta_fill(ty, 2.0_c_double, runtime=rt)
    call ta_wait(ty, stat=st)
    call check(st == TA_STATUS_OK .and. all(y == 2), 'fill clears the poison')
    call ta_free(ev)
    call ta_free(ta)
    call ta_free(tb)
    call ta_free(tc)
    call ta_free(ty)
  end subroutine test_errors

  subroutine test_blas1()
    real(c_double), target, asynchronous :: x(7), y(7), z(7)
    real(c_double) :: x0(7), y0(7)
    type(ta_tensor) :: tx, ty, tz
    integer :: i
    x = [(real(i, c_double), i = 1, 7)]
    y = [(real(10 - i, c_double), i = 1, 7)]
    x0 = x
    y0 = y
    call ta_wrap(tx, x)
    call ta_wrap(ty, y)
    call ta_wrap(tz, z)
    call ta_axpy(ty, 2.0_c_double, tx, runtime=rt)
    call ta_copy(tz, ty, runtime=rt)
    call ta_scale(tz, -1.0_c_double, runtime=rt)
    call ta_wait(tz)
    call ta_wait(ty)
    call check(all(y == 2 * x0 + y0), 'axpy')
    call check(all(z == -(2 * x0 + y0)), 'copy and scale')
    call ta_free(tx)
    call ta_free(ty)
    call ta_free(tz)
  end subroutine test_blas1
  ! Host access through a mapping to a tensor the library allocated.
  subroutine test_mapping()
    type(ta_tensor) :: t, p
    type(ta_mapping) :: m
    type(ta_view) :: v
    real(c_double), pointer :: x(:, :)
    real(c_double) :: back(3, 4)
    character(len=200) :: msg
    integer :: st
    call ta_zeros(t, TA_DTYPE_F64, [3, 4])
    call ta_fill(t, 2.0_c_double, runtime=rt)
    call ta_map(m, v, t, TA_MODE_READ)        ! waits for the fill
    call ta_view_ptr(v, x, st)
    call check(st == 0 .and. all(shape(x) == [3, 4]), 'mapped view shape')
    call check(all(abs(x - 2.0_c_double) < 1e-15_c_double), 'mapped view values after the fill')
    call ta_free(m)
    call ta_map(m, v, t, TA_MODE_UPDATE)
    call ta_view_ptr(v, x, st)
    x(2, 3) = 5.0_c_double
    call ta_free(m)
    call ta_get(t, back)
    call check(abs(back(2, 3) - 5.0_c_double) < 1e-15_c_double .and. abs(back(1, 1) - 2.0_c_double) < 1e-15_c_double, &
        'an update mapping writes the tensor')
    ! reading a poisoned tensor fails with its message
    call ta_zeros(p, TA_DTYPE_F64, [2])
    call ta_submit_kernel(c_funloc(k_fails), [p], [TA_MODE_UPDATE], runtime=rt)
    msg = ''
    call ta_map(m, v, p, TA_MODE_READ, stat=st, errmsg=msg)
    call check(st == TA_STATUS_KERNEL_FAILED .and. trim(msg) == 'the Fortran kernel refused', &
        'mapping a poisoned tensor: status and message')
    call ta_free(m)
    call ta_free(p)
    call ta_free(t)
  end subroutine test_mapping

  ! Stats deltas of a known program, a trace of it, and the dump of a fill
  ! blocked behind a held write mapping.
  subroutine test_observability()
    type(ta_tensor) :: x, z, w, t, q
    type(ta_mapping) :: m
    type(ta_view) :: v
    type(ta_stats) :: s0, s1
    logical :: flag
    type(ta_event) :: ev
    character(len=:), allocatable :: rep, trace
    character(len=200) :: msg
    character(len=*), parameter :: path = 'target/bindings-fortran/trace.json'
    real(c_double) :: got(4), got3(3), got22(2, 2)
    integer :: st, u, sz
    call ta_zeros(x, TA_DTYPE_F64, [4])
    call ta_zeros(z, TA_DTYPE_F64, [2])
    call ta_zeros(w, TA_DTYPE_F64, [2])
    call ta_wait_idle(rt)
    call ta_stats_get(s0, runtime=rt, stat=st)
    call check(st == TA_STATUS_OK .and. s0%threads == 2, 'stats: status and threads')
    ! 4 operations; the failing kernel and the copy of its poisoned output fail
    call ta_fill(x, 1.0_c_double, runtime=rt)
    call ta_scale(x, 3.0_c_double, runtime=rt)
    call ta_submit_kernel(c_funloc(k_fails), [z], [TA_MODE_UPDATE], runtime=rt)
    call ta_copy(w, z, runtime=rt)
    call ta_wait_idle(rt, stat=st)
    call ta_stats_get(s1, runtime=rt)
    call check(s1%tasks_submitted - s0%tasks_submitted == 4, 'stats: 4 submitted')
    call check(s1%tasks_completed - s0%tasks_completed == 4, 'stats: 4 completed')
    call check(s1%tasks_failed - s0%tasks_failed == 2, 'stats: 2 failed (kernel and poisoned copy)')
    call check(s1%tasks_cancelled == s0%tasks_cancelled, 'stats: none cancelled')
    call check(s1%pending == 0 .and. s1%queue_depth == 0, 'stats: nothing pending')
    call check(s1%peak_pending >= s0%peak_pending .and. s1%busy_ns >= s0%busy_ns .and. s1%steals >= s0%steals, &
        'stats: monotone counters')
    call ta_get(x, got)
    call check(all(got == 3.0_c_double), 'stats program result')

    ! a small fill on an idle tensor runs in place (done at return, no
    ! steal); with in place off, a worker takes the next one
    call ta_small_in_place(enabled=flag, runtime=rt, stat=st)
    call check(st == TA_STATUS_OK .and. flag, 'in place: on by default')
    call ta_stats_get(s0, runtime=rt)
    call ta_fill(x, 5.0_c_double, runtime=rt)
    call ta_stats_get(s1, runtime=rt)
    call check(s1%tasks_completed - s0%tasks_completed == 1 .and. s1%steals == s0%steals, 'in place: done at return')
    call ta_small_in_place(enable=.false., enabled=flag, runtime=rt)
    call check(.not. flag, 'in place: turned off')
    call ta_fill(x, 6.0_c_double, runtime=rt)
    call ta_wait_idle(rt)
    call ta_stats_get(s0, runtime=rt)
    call check(s0%steals - s1%steals == 1, 'in place off: a worker took it')
    call ta_small_in_place(enable=.true., runtime=rt)
    call ta_get(x, got)
    call check(all(got == 6.0_c_double), 'in place program result')

    ! a trace of a fill, a kernel and a scale names each exactly once
    call ta_zeros(q, TA_DTYPE_F64, [2, 2])
    call ta_wait_idle(rt)
    call ta_trace_start(1024_c_int64_t, runtime=rt)
    call ta_fill(q, 2.0_c_double, runtime=rt)
    call ta_submit_kernel(c_funloc(k_plus100), [q], [TA_MODE_UPDATE], name='fortran_traced', runtime=rt)
    call ta_scale(q, 2.0_c_double, runtime=rt)
    call ta_wait_idle(rt)
    call ta_trace_stop(path, runtime=rt, stat=st)
    call check(st == TA_STATUS_OK, 'trace written')
    call ta_get(q, got22)
    call check(all(got22 == 204.0_c_double), 'traced program result')
    open(newunit=u, file=path, access='stream', form='unformatted', status='old', action='read')
    inquire(unit=u, size=sz)
    allocate(character(len=sz) :: trace)
    read(u) trace
    close(u)
    call check(count_of(trace, '"traceEvents"') == 1, 'trace: trace-event JSON')
    call check(count_of(trace, '"fill"') == 1, 'trace: the fill once')
    call check(count_of(trace, '"fortran_traced"') == 1, 'trace: the kernel once')
    call check(count_of(trace, '"scale"') == 1, 'trace: the scale once')
    msg = ''
    call ta_trace_stop(path, runtime=rt, stat=st, errmsg=msg)
    call check(st == TA_STATUS_INVALID_ARGUMENT .and. trim(msg) == 'the runtime is not recording a trace', &
        'trace_stop without a recording: status and message')
    call ta_trace_start(runtime=rt)
    call ta_trace_stop(runtime=rt, stat=st)
    call check(st == TA_STATUS_OK, 'trace discarded')

    ! the dump names a fill waiting behind a held write mapping (mappings and
    ! operations without `runtime` use the default runtime)
    call ta_track(.true.)
    call ta_zeros(t, TA_DTYPE_F64, [3])
    call ta_map(m, v, t, TA_MODE_WRITE)
    call ta_fill(t, 5.0_c_double)
    call ta_ready(ev, t)
    call check(.not. ta_done(ev), 'the fill waits for the mapping')
    call ta_dump(rep, stat=st)
    call check(st == TA_STATUS_OK .and. index(rep, '"fill": WAITING') > 0, 'dump: the fill is waiting')
    call check(index(rep, 'waits for op #') > 0 .and. index(rep, '"ta_tensor_acquire" (running) on tensor') > 0, &
        'dump: it waits for the mapping')
    call ta_dump(rep, TA_DUMP_DOT)
    call check(len(rep) > 7, 'dot dump not empty')
    if (len(rep) > 7) call check(rep(1:7) == 'digraph' .and. index(rep, ' -> ') > 0, 'dot dump: a graph with an edge')
    call ta_free(m)
    call ta_wait(ev)
    call ta_get(t, got3)
    call check(all(got3 == 5.0_c_double), 'the fill ran after the mapping')
    call ta_dump(rep)
    call check(index(rep, '"fill"') == 0, 'dump: nothing left after the fill')
    call ta_track(.false.)
    call ta_free(ev)
    call ta_free(t)
    call ta_free(w)
    call ta_free(z)
    call ta_free(q)
    call ta_free(x)
  end subroutine test_observability

  integer function count_of(hay, needle) result(n)
    character(len=*), intent(in) :: hay, needle
    integer :: at, k
    n = 0
    at = 1
    do
      k = index(hay(at:), needle)
      if (k == 0) exit
      n = n + 1
      at = at + k
    end do
  end function count_of
end program test_fortran
