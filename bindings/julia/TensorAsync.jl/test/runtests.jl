# Tests of TensorAsync.jl, for a real Julia (1.9 or later):
#
#     TENSORASYNC_LIB=/path/to/libtensorasync.so julia --project=bindings/julia/TensorAsync.jl \
#         -e 'using Pkg; Pkg.test()'
#
# Every result is checked against plain Julia arrays.
using Test
using LinearAlgebra
using TensorAsync
using TensorAsync: LibTensorAsync as L

@testset "TensorAsync" begin
    @testset "copies in and out, column-major" begin
        A = reshape(collect(1.0:12.0), 3, 4)
        t = Tensor(A)
        @test size(t) == (3, 4)
        @test strides(t) == (1, 3)
        @test Array(t) == A
        u = Tensor{Float64}()
        copyto!(u, A .* 2)
        wait(u)
        @test Array(u) == A .* 2
        close(t); close(u); close(u)          # close is idempotent
    end

    @testset "wrap is zero-copy and keeps the array alive" begin
        A = rand(5, 5)
        ref = copy(A)
        t = wrap(A)
        rmul!(t, 3.0)
        wait(t)
        @test A ≈ 3 .* ref                     # the library wrote A itself
        # Drop every Julia reference to the array but the registry's: the
        # pending operations must still find it.
        B = rand(1000)
        refB = copy(B)
        tb = wrap(B)
        B = nothing
        for _ in 1:100
            rmul!(tb, 1.0)
        end
        GC.gc(true)
        fill!(tb, 0.5)
        @test all(==(0.5), Array(tb))
        close(tb)
        GC.gc(true)
        c = wrap(zeros(3); readonly=true)
        @test_throws TensorAsyncError fill!(c, 1.0)
    end

    @testset "operations against Julia references" begin
        A, B, C = rand(4, 6), rand(6, 3), rand(4, 3)
        tA, tB, tC = Tensor(A), Tensor(B), Tensor(C)
        mul!(tC, tA, tB, 2.0, -1.0)
        @test Array(tC) ≈ 2 .* (A * B) .- C
        P = tA * tB
        @test Array(P) ≈ A * B
        add_product!(P, tA, tB, 0.5)
        @test Array(P) ≈ 1.5 .* (A * B)
        x, y = rand(10), rand(10)
        tx, ty = Tensor(x), Tensor(y)
        axpy!(2.0, tx, ty)
        @test Array(ty) ≈ 2 .* x .+ y
        @test dot(tx, tx) ≈ dot(x, x)
        @test norm(tx) ≈ norm(x)
        s = Tensor{Float64}()
        sum!(s, tA)
        @test only(Array(s)) ≈ sum(A)
        cols = Tensor{Float64}()
        sum!(cols, tA; dims=(1,))
        @test Array(cols) ≈ vec(sum(A; dims=1))
        K = Tensor{Float64}()
        contract!(K, tA, tB, (2,), (1,))
        @test Array(K) ≈ A * B
        z = [1.0 + 2im, 3 - 1im]
        tz = Tensor(z)
        @test dot(tz, tz) ≈ dot(z, z)          # conjugating, like Julia's dot
    end

    @testset "Cholesky tiles" begin
        G = rand(5, 5)
        S = G * G' + 5I
        tS = Tensor(S)
        potrf!(tS; uplo=:L)
        Lf = LowerTriangular(Array(tS))
        @test Lf * Lf' ≈ S
        Bm = rand(5, 2)
        tL = Tensor(Matrix(Lf))
        tB = Tensor(Bm)
        trsm!(tB, tL; side=:L, uplo=:L)
        @test Matrix(Lf) * Array(tB) ≈ Bm
        tC = tzeros(Float64, 5, 5)
        syrk!(tC, tL; uplo=:L)
        @test LowerTriangular(Array(tC)) ≈ LowerTriangular(Matrix(Lf) * Matrix(Lf)')
        bad = Tensor([1.0 2.0; 2.0 1.0])
        potrf!(bad)
        err = try
            wait(bad); nothing
        catch e
            e
        end
        @test err isa TensorAsyncError
        @test !isempty(err.message) && !isempty(err.origin)
    end

    @testset "views with 1-based inclusive ranges" begin
        A = reshape(collect(1.0:50.0), 10, 5)
        t = Tensor(A)
        v = view(t, 1:2:9, :)
        @test size(v) == (5, 5)
        @test Array(v) == A[1:2:9, :]
        r = view(t, 10:-3:1, 2)
        @test Array(r) == A[10:-3:1, 2]
        fill!(view(t, :, 3), -1.0)
        B = copy(A); B[:, 3] .= -1
        @test Array(t) == B
        @test Array(transpose(t)) == permutedims(B)
        @test Array(permutedims(t, (2, 1))) == permutedims(B)
        @test Array(reshape(t, 5, 10)) == reshape(B, 5, 10)
        @test_throws TensorAsyncError view(t, 1:11, :)
    end

    @testset "errors are values with status, origin and message" begin
        x, y = tzeros(Float64, 3), tzeros(Float64, 4)
        e = try
            axpy!(1.0, x, y); nothing
        catch err
            err
        end
        @test e isa TensorAsyncError
        @test e.status == L.TA_STATUS_SHAPE_MISMATCH
        @test occursin("3", e.message) && occursin("4", e.message)
        @test_throws TensorAsyncError axpy!(1.0, x, x)   # alias
    end

    @testset "completion through the event loop" begin
        x = tzeros(Float64, 1000)
        # Many tasks waiting at once: each waits on the cq fd through poll_fd.
        tasks = [@async begin
                     t = Tensor(fill(Float64(i), 100))
                     rmul!(t, 2.0)
                     wait(t)
                     Array(t)
                 end for i in 1:20]
        for (i, tk) in enumerate(tasks)
            @test fetch(tk) == fill(2.0i, 100)
        end
        q = CompletionQueue()
        for k in 1:10
            fill!(x, k; cq=(q, k))
        end
        tags = sort([first(take!(q)) for _ in 1:10])
        @test tags == collect(1:10)
        @test Array(x) == fill(10.0, 1000)
        ev = ready(x)
        wait(ev)
        @test isready(ev)
        close(ev)
    end

    @testset "host access mappings" begin
        t = Tensor(collect(1.0:6.0))
        rmul!(t, 2.0)
        s = acquire(A -> sum(A), t; mode=:read)
        @test s == 2 * sum(1.0:6.0)
        acquire(A -> (A .= 1.0), t; mode=:write)
        @test Array(t) == ones(6)
    end

    @testset "Julia kernels through @cfunction" begin
        x = Tensor(collect(1.0:6.0))
        y = tzeros(Float64, 6)
        submit(x => :read, y => :write; name="double") do a, b
            b .= 2 .* a
        end
        @test Array(y) == 2 .* collect(1.0:6.0)
        submit(y => :update; name="fails") do b
            error("no thanks")
        end
        e = try
            wait(y); nothing
        catch err
            err
        end
        @test e isa TensorAsyncError
        @test e.status == L.TA_STATUS_KERNEL_FAILED
        @test occursin("no thanks", e.message) && e.origin == "fails"
    end

    @testset "Julia kernels in tasks (external operations)" begin
        x = Tensor(collect(1.0:4.0))
        y = tzeros(Float64, 4)
        gate = Channel{Nothing}(1)
        submit(x => :read, y => :write; name="in_a_task", on=:task) do a, b
            take!(gate)                      # a task may wait: no worker is held
            b .= a .^ 2
        end
        later = Tensor{Float64}()
        copyto!(later, y)                    # ordered after the task's write
        put!(gate, nothing)
        @test Array(later) == collect(1.0:4.0) .^ 2
        submit(y => :update; name="task_fails", on=:task) do b
            error("task says no")
        end
        e = try
            wait(y); nothing
        catch err
            err
        end
        @test e isa TensorAsyncError && e.status == L.TA_STATUS_KERNEL_FAILED
        @test occursin("task says no", e.message) && e.origin == "task_fails"
    end
end
