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
    @testset "observability: stats, trace, dump" begin
        TA = TensorAsync
        # Wait until nothing is pending, through the event loop (kernels of
        # earlier tests may need the dispatcher task to run).
        settle() = while TA.stats().pending != 0
            sleep(0.001)
        end
        x = tzeros(Float64, 4)
        z = tzeros(Float64, 2)
        w = tzeros(Float64, 2)
        settle()
        s0 = TA.stats()
        @test s0.threads >= 1
        # 4 operations: the throwing kernel and the copy of its poisoned
        # output fail.
        fill!(x, 1.0)
        rmul!(x, 3.0)
        submit(z => :update; name="stats_fails") do b
            error("stats failure")
        end
        copyto!(w, z)
        settle()
        s1 = TA.stats()
        @test s1.tasks_submitted - s0.tasks_submitted == 4
        @test s1.tasks_completed - s0.tasks_completed == 4
        @test s1.tasks_failed - s0.tasks_failed == 2
        @test s1.tasks_cancelled == s0.tasks_cancelled
        @test s1.pending == 0 && s1.queue_depth == 0
        @test s1.peak_pending >= s0.peak_pending && s1.busy_ns >= s0.busy_ns && s1.steals >= s0.steals
        @test Array(x) == fill(3.0, 4)
        @test_throws TensorAsyncError wait(w)

        # A trace names each of its operations exactly once.
        q = tzeros(Float64, 2, 2)
        settle()
        TA.trace_start(capacity=1024)
        fill!(q, 2.0)
        submit(q => :update; name="jl_traced") do a
            a .+= 1
        end
        rmul!(q, 2.0)
        settle()
        path = tempname() * ".json"
        TA.trace_stop(path)
        txt = read(path, String)
        @test occursin("\"traceEvents\"", txt)
        @test length(findall("\"fill\"", txt)) == 1
        @test length(findall("\"jl_traced\"", txt)) == 1
        @test length(findall("\"scale\"", txt)) == 1
        @test Array(q) == fill(6.0, 2, 2)
        e = try
            TA.trace_stop(path); nothing
        catch err
            err
        end
        @test e isa TensorAsyncError && e.status == L.TA_STATUS_INVALID_ARGUMENT
        @test e.message == "the runtime is not recording a trace"
        TA.trace_start()
        TA.trace_discard()
        rm(path)

        # The dump names a fill waiting behind a held write mapping.
        TA.track(true)
        t = tzeros(Float64, 3)
        acquire(t; mode=:write) do A
            A .= 1
            fill!(t, 5.0)
            rep = TA.dump()
            @test occursin("\"fill\": WAITING", rep)
            @test occursin("waits for op #", rep)
            @test occursin("\"ta_tensor_acquire_async\" (running) on tensor", rep)
            dot = TA.dump(format=:dot)
            @test startswith(dot, "digraph") && occursin(" -> ", dot)
        end
        @test Array(t) == fill(5.0, 3)
        settle()
        @test !occursin("\"fill\"", TA.dump())
        TA.track(false)
        @test_throws ArgumentError TA.dump(format=:svg)
        foreach(close, (x, z, w, q, t))
    end
end
