! Fortran consumer: gemm on Fortran arrays through the module, against matmul.
program consumer_fortran
  use, intrinsic :: iso_c_binding
  use tensorasync
  implicit none
  real(c_double), target, asynchronous :: a(2, 3), b(3, 2), c(2, 2)
  type(ta_tensor) :: ta, tb, tc
  a = reshape([1, 2, 3, 4, 5, 6], [2, 3])
  b = reshape([1, 0, 2, 1, 1, 3], [3, 2])
  c = 0
  call ta_wrap(ta, a)
  call ta_wrap(tb, b)
  call ta_wrap(tc, c)
  call ta_gemm(tc, 1.0_c_double, ta, tb, 0.0_c_double)
  call ta_wait(tc)
  call ta_free(ta)
  call ta_free(tb)
  call ta_free(tc)
  if (maxval(abs(c - matmul(a, b))) > 1e-12_c_double) then
    print '(a)', 'Fortran consumer: WRONG'
    error stop 1
  end if
  print '(a,a,a)', 'Fortran consumer (tensorasync ', ta_library_version(), '): ok'
end program consumer_fortran
