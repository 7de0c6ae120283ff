! tiled_cholesky.f90: tiled Cholesky factorisation (lower) of a Fortran
! array with the Fortran module, on a block array of nt x nt tiles. The
! tasks are submitted in program order with no waits in between; each
! tile's epoch queue orders them. The result is checked against a plain
! Fortran Cholesky of the same matrix and by the residual max|A - L L^T|;
! the program stops with a non-zero code on a mismatch.
program tiled_cholesky
  use, intrinsic :: iso_c_binding
  use tensorasync
  implicit none
  type(ta_runtime) :: rt
  integer :: bad = 0

  call ta_runtime_create(rt, 0)
  call run_case(64, 16)
  call run_case(100, 32)   ! ragged last tiles
  call run_case(30, 30)    ! one tile
  call ta_free(rt)
  if (bad /= 0) error stop 1

contains

  subroutine run_case(n, nb)
    integer, intent(in) :: n, nb
    real(c_double), allocatable, target :: a(:, :), l(:, :), ref(:, :), m(:, :)
    type(ta_block_array) :: blocks
    type(ta_tensor) :: whole, akk, aik, akkt, ajk, ajkt, tile_ii, tile_ij
    integer :: nt, i, j, k, p
    real(c_double) :: err, res, s, tol
    allocate(a(n, n), l(n, n), ref(n, n), m(n, n))
    do j = 1, n
      do i = 1, n
        m(i, j) = real(mod(i * 37 + j * 11, 17), c_double) / 17.0_c_double - 0.5_c_double
      end do
    end do
    a = matmul(m, transpose(m))
    do i = 1, n
      a(i, i) = a(i, i) + real(n, c_double)
    end do
    nt = (n + nb - 1) / nb
    call ta_blocks_tiled(blocks, TA_DTYPE_F64, [n, n], [nb, nb])
    call ta_blocks_whole(whole, blocks)
    call ta_put(whole, a)
    do k = 1, nt
      call ta_tile(akk, blocks, [k, k])
      call ta_potrf(akk, TA_UPLO_LOWER, runtime=rt)
      call ta_transpose(akkt, akk)
      do i = k + 1, nt
        call ta_tile(aik, blocks, [i, k])
        call ta_trsm(aik, TA_SIDE_RIGHT, TA_UPLO_UPPER, TA_DIAG_NON_UNIT, 1.0_c_double, akkt, runtime=rt)
        call ta_free(aik)
      end do
      do i = k + 1, nt
        call ta_tile(aik, blocks, [i, k])
        call ta_tile(tile_ii, blocks, [i, i])
        call ta_syrk(tile_ii, TA_UPLO_LOWER, -1.0_c_double, aik, 1.0_c_double, runtime=rt)
        call ta_free(tile_ii)
        do j = k + 1, i - 1
          call ta_tile(tile_ij, blocks, [i, j])
          call ta_tile(ajk, blocks, [j, k])
          call ta_transpose(ajkt, ajk)
          call ta_gemm(tile_ij, -1.0_c_double, aik, ajkt, 1.0_c_double, runtime=rt)
          call ta_free(ajkt)
          call ta_free(ajk)
          call ta_free(tile_ij)
        end do
        call ta_free(aik)
      end do
      call ta_free(akkt)
      call ta_free(akk)
    end do
    call ta_get(whole, l)
    ! reference: plain Fortran Cholesky (lower) of a
    ref = a
    do j = 1, n
      s = ref(j, j) - sum(ref(j, 1:j - 1)**2)
      ref(j, j) = sqrt(s)
      do i = j + 1, n
        ref(i, j) = (ref(i, j) - dot_product(ref(i, 1:j - 1), ref(j, 1:j - 1))) / ref(j, j)
      end do
    end do
    err = 0
    res = 0
    do j = 1, n
      do i = j, n
        err = max(err, abs(l(i, j) - ref(i, j)))
        s = 0
        do p = 1, j
          s = s + l(i, p) * l(j, p)
        end do
        res = max(res, abs(s - a(i, j)))
      end do
    end do
    tol = 1e-10_c_double * n
    if (err <= tol .and. res <= tol * n) then
      print '(a,i0,a,i0,a,es9.2,a,es9.2,a)', 'n = ', n, ', tile ', nb, ': max|L - Lref| = ', err, &
          ', max|A - LL^T| = ', res, ': verified'
    else
      print '(a,i0,a,i0,a,es9.2,a,es9.2,a)', 'n = ', n, ', tile ', nb, ': max|L - Lref| = ', err, &
          ', max|A - LL^T| = ', res, ': MISMATCH'
      bad = bad + 1
    end if
    call ta_free(whole)
    call ta_free(blocks)
  end subroutine run_case
end program tiled_cholesky
