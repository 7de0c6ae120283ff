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

  ! Fails with a message given with trailing blanks (which are not part of it).
  function k_fails_padded(views, nviews, userdata, ctx) result(status) bind(c)
    type(ta_view), intent(in) :: views(*)
    integer(c_size_t), value :: nviews
    type(c_ptr), value :: userdata, ctx
    integer(c_int32_t) :: status
    character(len=40) :: text
    if (nviews < 1 .or. c_associated(userdata) .or. .not. c_associated(views(1)%data)) then
      status = ta_kernel_fail(ctx, 'k_fails_padded: unexpected arguments')
      return
    end if
    text = 'padded message'
    status = ta_kernel_fail(ctx, text)
  end function k_fails_padded

  ! y = -y on a 2-d view of any layout ta_view_ptr maps (stat: the kernel fails).
  function k_negate(views, nviews, userdata, ctx) result(status) bind(c)
    type(ta_view), intent(in) :: views(*)
    integer(c_size_t), value :: nviews
    type(c_ptr), value :: userdata, ctx
    integer(c_int32_t) :: status
    real(c_double), pointer :: y(:, :)
    integer :: st
    call ta_view_ptr(views(1), y, st)
    if (st /= 0 .or. nviews /= 1 .or. c_associated(userdata)) then
      status = ta_kernel_fail(ctx, 'k_negate: ta_view_ptr refused the view')
      return
    end if
    y = -y
    status = TA_STATUS_OK
  end function k_negate
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
  call test_host_copies()
  call test_view_ptr()
  call test_strings()
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

  ! ta_get and ta_put check the tensor's dtype against the array's, and
  ! ta_get the shape, before anything is copied.
  subroutine test_host_copies()
    complex(c_double_complex), target :: zc(2, 2)
    real(c_float), target :: af(3, 2)
    real(c_double), target :: buf(8)
    real(c_double), pointer, contiguous :: d2(:, :)
    real(c_double) :: d32(3, 2), d6(6), d23(2, 3), src(2, 3), sc
    type(ta_tensor) :: tz, tf, t23, t0
    character(len=200) :: msg
    integer :: st, i, j
    ! a c128 tensor into a real64 array of as many elements: refused, nothing written
    zc = cmplx(1, 2, c_double_complex)
    call ta_wrap(tz, zc)
    buf = 42
    d2(1:2, 1:2) => buf(1:4)
    msg = ''
    call ta_get(tz, d2, stat=st, errmsg=msg)
    call check(st == TA_STATUS_DTYPE_MISMATCH, 'ta_get c128 into real64: status')
    call check(trim(msg) == 'the tensor''s dtype is c128, the array''s f64', 'ta_get c128 into real64: message')
    call check(all(buf == 42), 'ta_get c128 into real64: nothing written')
    call ta_free(tz)
    ! an f32 tensor and real64 arrays, both ways
    af = 1.5
    call ta_wrap(tf, af)
    d32 = 0
    msg = ''
    call ta_get(tf, d32, stat=st, errmsg=msg)
    call check(st == TA_STATUS_DTYPE_MISMATCH .and. trim(msg) == 'the tensor''s dtype is f32, the array''s f64', &
        'ta_get f32 into real64: status and message')
    call check(all(d32 == 0), 'ta_get f32 into real64: nothing written')
    d32 = 2.5
    msg = ''
    call ta_put(tf, d32, stat=st, errmsg=msg)
    call check(st == TA_STATUS_DTYPE_MISMATCH .and. trim(msg) == 'the tensor''s dtype is f32, the array''s f64', &
        'ta_put real64 into f32: status and message')
    call ta_wait(tf)
    call check(all(af == 1.5), 'ta_put real64 into f32: tensor unchanged')
    call ta_free(tf)
    ! shapes: another rank, or the same rank and another shape
    call ta_zeros(t23, TA_DTYPE_F64, [2, 3])
    call ta_fill(t23, 3.0_c_double, runtime=rt)
    d6 = 0
    msg = ''
    call ta_get(t23, d6, stat=st, errmsg=msg)
    call check(st == TA_STATUS_SHAPE_MISMATCH .and. trim(msg) == 'the tensor''s shape [2, 3] is not the array''s [6]', &
        'ta_get 2x3 into d(6): status and message')
    call check(all(d6 == 0), 'ta_get 2x3 into d(6): nothing written')
    d32 = 0
    msg = ''
    call ta_get(t23, d32, stat=st, errmsg=msg)
    call check(st == TA_STATUS_SHAPE_MISMATCH .and. trim(msg) == 'the tensor''s shape [2, 3] is not the array''s [3, 2]', &
        'ta_get 2x3 into d(3, 2): status and message')
    call check(all(d32 == 0), 'ta_get 2x3 into d(3, 2): nothing written')
    ! the right dtype and shape: values both ways
    call ta_get(t23, d23, stat=st)
    call check(st == TA_STATUS_OK .and. all(d23 == 3), 'ta_get 2x3 into d(2, 3)')
    do j = 1, 3
      do i = 1, 2
        src(i, j) = real(10 * i + j, c_double)
      end do
    end do
    call ta_put(t23, src, stat=st)
    d23 = 0
    call ta_get(t23, d23)
    call check(st == TA_STATUS_OK .and. all(d23 == src), 'ta_put then ta_get')
    msg = ''
    call ta_put(t23, d32, stat=st, errmsg=msg)
    call check(st == TA_STATUS_SHAPE_MISMATCH, 'ta_put of another shape: status')
    ! a 0-d tensor and a scalar
    call ta_zeros(t0, TA_DTYPE_F64, [integer ::])
    call ta_fill(t0, 7.25_c_double, runtime=rt)
    sc = 0
    call ta_get(t0, sc, stat=st)
    call check(st == TA_STATUS_OK .and. sc == 7.25_c_double, 'ta_get of a 0-d tensor into a scalar')
    msg = ''
    call ta_get(t0, d6, stat=st, errmsg=msg)
    call check(st == TA_STATUS_SHAPE_MISMATCH .and. trim(msg) == 'the tensor''s shape [] is not the array''s [6]', &
        'ta_get of a 0-d tensor into an array')
    call ta_free(t0)
    call ta_free(t23)
  end subroutine test_host_copies

  ! ta_view_ptr maps every view whose first axis has the smaller stride:
  ! sections of column-major arrays with any steps, negative ones included.
  subroutine test_view_ptr()
    real(c_double), target, asynchronous :: x(5, 4), y(10)
    real(c_double) :: x0(5, 4), expect(5, 4)
    type(ta_tensor) :: tx, ty, v
    type(ta_mapping) :: m
    type(ta_view) :: w
    real(c_double), pointer :: p(:, :), q(:)
    integer :: st, i, j
    do j = 1, 4
      do i = 1, 5
        x(i, j) = real(10 * i + j, c_double)
      end do
    end do
    x0 = x
    y = [(real(i, c_double), i = 1, 10)]
    call ta_wrap(tx, x)
    call ta_wrap(ty, y)
    ! x(2:5:3, 1:4:2): strides 3 and 10, not a multiple of 3
    call ta_section(v, tx, [2, 1], [5, 4], [3, 2])
    call ta_map(m, w, v, TA_MODE_READ)
    call ta_view_ptr(w, p, st)
    call check(st == 0, 'view_ptr of x(2:5:3, 1:4:2): status')
    if (st == 0) call check(all(shape(p) == [2, 2]) .and. all(p == x0(2:5:3, 1:4:2)), 'view_ptr of x(2:5:3, 1:4:2)')
    call ta_free(m)
    ! a kernel writes through such a pointer
    call ta_submit_kernel(c_funloc(k_negate), [v], [TA_MODE_UPDATE], runtime=rt)
    call ta_wait(tx, stat=st)
    expect = x0
    expect(2:5:3, 1:4:2) = -x0(2:5:3, 1:4:2)
    call check(st == TA_STATUS_OK .and. all(x == expect), 'kernel through view_ptr on x(2:5:3, 1:4:2)')
    call ta_free(v)
    x = x0
    ! x(1:5:2, 1:4:2), x(5:1:-2, 4:1:-1), x(4:2:-1, 1:4:3), x(2:4, 3:3), x(3:3, 4:1:-3)
    call section_matches([1, 1], [5, 4], [2, 2], x0(1:5:2, 1:4:2), 'x(1:5:2, 1:4:2)')
    call section_matches([5, 4], [1, 1], [-2, -1], x0(5:1:-2, 4:1:-1), 'x(5:1:-2, 4:1:-1)')
    call section_matches([4, 1], [2, 4], [-1, 3], x0(4:2:-1, 1:4:3), 'x(4:2:-1, 1:4:3)')
    call section_matches([2, 3], [4, 3], [1, 1], x0(2:4, 3:3), 'x(2:4, 3:3)')
    call section_matches([3, 4], [3, 1], [1, -3], x0(3:3, 4:1:-3), 'x(3:3, 4:1:-3)')
    ! a kernel through a pointer with both steps negative
    call ta_section(v, tx, [5, 4], [1, 1], [-2, -1])
    call ta_submit_kernel(c_funloc(k_negate), [v], [TA_MODE_UPDATE], runtime=rt)
    call ta_wait(tx, stat=st)
    expect = x0
    expect(5:1:-2, 4:1:-1) = -x0(5:1:-2, 4:1:-1)
    call check(st == TA_STATUS_OK .and. all(x == expect), 'kernel through view_ptr on x(5:1:-2, 4:1:-1)')
    call ta_free(v)
    ! a transposed view has its first axis on the larger stride: refused
    call ta_transpose(v, tx)
    call ta_map(m, w, v, TA_MODE_READ)
    call ta_view_ptr(w, p, st)
    call check(st == TA_STATUS_NOT_CONTIGUOUS .and. .not. associated(p), 'view_ptr of a transpose is refused')
    call ta_free(m)
    call ta_free(v)
    ! 1-d: a negative step
    call ta_section(v, ty, [9], [2], [-3])
    call ta_map(m, w, v, TA_MODE_READ)
    call ta_view_ptr(w, q, st)
    call check(st == 0, 'view_ptr of y(9:2:-3): status')
    if (st == 0) call check(size(q) == 3 .and. all(q == y(9:2:-3)), 'view_ptr of y(9:2:-3)')
    call ta_free(m)
    call ta_free(v)
    call ta_free(ty)
    call ta_free(tx)
  end subroutine test_view_ptr

  ! The view of tx's section lower:upper:step, mapped with ta_view_ptr, is `want`.
  subroutine section_matches(lower, upper, step, want, what)
    integer, intent(in) :: lower(2), upper(2), step(2)
    real(c_double), intent(in) :: want(:, :)
    character(len=*), intent(in) :: what
    type(ta_tensor) :: tx, v
    type(ta_mapping) :: m
    type(ta_view) :: w
    real(c_double), pointer :: p(:, :)
    real(c_double), target :: x(5, 4)
    integer :: st, i, j
    do j = 1, 4
      do i = 1, 5
        x(i, j) = real(10 * i + j, c_double)
      end do
    end do
    call ta_wrap(tx, x)
    call ta_section(v, tx, lower, upper, step)
    call ta_map(m, w, v, TA_MODE_READ)
    call ta_view_ptr(w, p, st)
    call check(st == 0, 'view_ptr of ' // what // ': status')
    if (st == 0) then
      call check(all(shape(p) == shape(want)), 'view_ptr of ' // what // ': shape')
      if (all(shape(p) == shape(want))) call check(all(p == want), 'view_ptr of ' // what // ': values')
    end if
    call ta_free(m)
    call ta_free(v)
    call ta_free(tx)
  end subroutine section_matches

  ! Names, paths and messages lose their trailing blanks; ta_trace_start
  ! takes a default integer.
  subroutine test_strings()
    interface
      function c_access(path, mode) result(r) bind(c, name='access')
        import :: c_char, c_int
        character(kind=c_char), intent(in) :: path(*)
        integer(c_int), value :: mode
        integer(c_int) :: r
      end function c_access
    end interface
    character(len=80) :: path
    character(len=:), allocatable :: trace
    character(len=24) :: kname
    character(len=200) :: msg
    type(ta_tensor) :: t
    type(ta_event) :: ev
    type(c_ptr) :: err
    integer(c_size_t) :: n
    integer :: st, u, sz
    path = 'target/bindings-fortran/trace_padded.json'   ! blank-padded to 80
    open(newunit=u, file=path, status='replace')
    close(u, status='delete')
    kname = 'fortran_padded'
    call ta_zeros(t, TA_DTYPE_F64, [2])
    call ta_wait_idle(rt)
    call ta_trace_start(1000, runtime=rt, stat=st)   ! a default integer capacity
    call check(st == TA_STATUS_OK, 'trace_start with a default integer')
    call ta_submit_kernel(c_funloc(k_fails_padded), [t], [TA_MODE_UPDATE], name=kname, runtime=rt, event=ev)
    msg = ''
    call ta_wait(ev, stat=st, errmsg=msg)
    call check(st == TA_STATUS_KERNEL_FAILED .and. trim(msg) == 'padded message', 'padded kernel: status and message')
    ! the error object's message and origin, without the blanks
    err = c_null_ptr
    call check(c_ta_tensor_wait(t%ptr, TA_WAIT_FOREVER, err) == TA_STATUS_KERNEL_FAILED, 'padded kernel: poisoned')
    n = 0
    call check(c_ta_error_message(err, c_null_ptr, 0_c_size_t, n) == TA_STATUS_OK .and. &
        n == len('padded message'), 'kernel message trimmed')
    n = 0
    call check(c_ta_error_origin(err, c_null_ptr, 0_c_size_t, n) == TA_STATUS_OK .and. &
        n == len('fortran_padded'), 'kernel name trimmed')
    if (c_ta_error_free(err) /= TA_STATUS_OK) call check(.false., 'error freed')
    call ta_wait_idle(rt)
    call ta_trace_stop(path, runtime=rt, stat=st)
    call check(st == TA_STATUS_OK, 'trace written to a padded path')
    call check(c_access('target/bindings-fortran/trace_padded.json' // c_null_char, 0_c_int) == 0, &
        'the trace file has the trimmed name')
    open(newunit=u, file=path, access='stream', form='unformatted', status='old', action='read')
    inquire(unit=u, size=sz)
    allocate(character(len=sz) :: trace)
    read(u) trace
    close(u)
    call check(count_of(trace, '"fortran_padded"') == 1, 'trace: the kernel under its trimmed name')
    call ta_trace_start(capacity=64, runtime=rt)
    call ta_trace_stop(runtime=rt, stat=st)
    call check(st == TA_STATUS_OK, 'trace_start(capacity=64) then discarded')
    call ta_free(ev)
    call ta_free(t)
  end subroutine test_strings

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
