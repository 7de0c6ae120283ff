"""
    TensorAsync

Asynchronous tensors over the tensorasync C library. Operations are enrolled
on each tensor's epoch queue when called and run on the library's workers;
`wait(t)` waits through Julia's event loop (the completion queue's file
descriptor, watched with `FileWatching.poll_fd`), so other tasks keep running.

Julia arrays are column-major, and so are the tensors made here: a tensor's
axes are the Julia array's axes, with no reversal. `wrap(A)` shares `A`'s
memory; `Tensor(A)` copies it.
"""
module TensorAsync

using FileWatching: poll_fd
using LinearAlgebra
import LinearAlgebra: axpy!, mul!, rmul!, dot, norm

include("LibTensorAsync.jl")
using .LibTensorAsync
const L = LibTensorAsync

# `Event` is not exported (Base has one); use `TensorAsync.Event`.
export Tensor, TensorAsyncError, CompletionQueue, wrap, tzeros,
       assign_product!, add_product!, contract!, dot!, norm2!, potrf!, trsm!, syrk!,
       submit, acquire, ready

# ---------------------------------------------------------------- errors

"""
    TensorAsyncError(status, code, origin, message)

A failure reported by the library, built from the error object returned with
the failure itself (never from a thread's last error).
"""
struct TensorAsyncError <: Exception
    status::L.ta_status
    code::Int64
    origin::String
    message::String
end

statusname(s) = unsafe_string(L.ta_status_name(L.ta_status(s)))

function Base.showerror(io::IO, e::TensorAsyncError)
    print(io, "TensorAsyncError: ", isempty(e.origin) ? "" : e.origin * ": ", statusname(e.status), ": ", e.message)
end

function read_string(f)
    len = Ref{Csize_t}(0)
    f(C_NULL, 0, len)
    buf = Vector{UInt8}(undef, len[] + 1)
    GC.@preserve buf f(pointer(buf), length(buf), len)
    return String(buf[1:len[]])
end

"""Convert an error object to a TensorAsyncError and free the object."""
function take_error(st, err::Ptr{L.ta_error})
    if err == C_NULL
        return TensorAsyncError(st, st, "", unsafe_string(L.ta_status_describe(st)))
    end
    s = Ref{L.ta_status}(st)
    code = Ref{Int64}(st)
    L.ta_error_status(err, s)
    L.ta_error_code(err, code)
    msg = read_string((b, n, l) -> L.ta_error_message(err, b, n, l))
    origin = read_string((b, n, l) -> L.ta_error_origin(err, b, n, l))
    L.ta_error_free(err)
    return TensorAsyncError(s[], code[], origin, msg)
end

"""Throw the error of a failed call (`err` is its `ta_error **` slot)."""
@inline function check(st, err::Ref{Ptr{L.ta_error}}=Ref{Ptr{L.ta_error}}(C_NULL))
    st == L.TA_STATUS_OK || throw(take_error(st, err[]))
    return nothing
end

# ---------------------------------------------------------------- dtypes

const DTYPES = Dict{DataType,L.ta_dtype}(
    Float32 => L.TA_DTYPE_F32, Float64 => L.TA_DTYPE_F64,
    ComplexF32 => L.TA_DTYPE_C64, ComplexF64 => L.TA_DTYPE_C128,
    Int8 => L.TA_DTYPE_I8, Int16 => L.TA_DTYPE_I16, Int32 => L.TA_DTYPE_I32, Int64 => L.TA_DTYPE_I64,
    UInt8 => L.TA_DTYPE_U8, UInt16 => L.TA_DTYPE_U16, UInt32 => L.TA_DTYPE_U32, UInt64 => L.TA_DTYPE_U64)
const ELTYPES = Dict(v => k for (k, v) in DTYPES)

dtype(::Type{T}) where {T} = haskey(DTYPES, T) ? DTYPES[T] : throw(ArgumentError("no tensorasync dtype for $T"))
scalar(x::Number) = L.ta_scalar(Float64(real(x)), Float64(imag(x)))

# ---------------------------------------------------------------- the dispatcher

# One completion queue per process, watched by one task through the event
# loop. Each waiter or clean-up is registered under a tag; the task runs it
# when the entry with that tag arrives. The registry also keeps Julia objects
# that the library uses asynchronously (wrapped arrays, copy buffers) alive
# until the library says it is done with them.
mutable struct Dispatcher
    cq::Ptr{L.ta_cq}
    fd::Cint
    lock::ReentrantLock
    next::UInt64
    actions::Dict{UInt64,Any}     # tag => f(error_or_nothing)
    task::Union{Task,Nothing}
end

const DISPATCH = Ref{Union{Dispatcher,Nothing}}(nothing)
const DISPATCH_LOCK = ReentrantLock()

function dispatcher()
    d = DISPATCH[]
    d === nothing || return d
    lock(DISPATCH_LOCK) do
        DISPATCH[] === nothing || return DISPATCH[]
        cq = Ref{Ptr{L.ta_cq}}(C_NULL)
        err = Ref{Ptr{L.ta_error}}(C_NULL)
        check(L.ta_cq_new(cq, err), err)
        fd = Ref{Cint}(-1)
        check(L.ta_cq_fd(cq[], fd))
        d = Dispatcher(cq[], fd[], ReentrantLock(), 0, Dict{UInt64,Any}(), nothing)
        d.task = errormonitor(@async drain_loop(d))
        DISPATCH[] = d
        return d
    end
end

function drain_loop(d::Dispatcher)
    buf = Vector{L.ta_completion}(undef, 64)
    n = Ref{Csize_t}(0)
    while true
        # Yields to the event loop until the descriptor is readable; the
        # library keeps it readable exactly while entries are pending.
        poll_fd(RawFD(d.fd), -1; readable=true)
        while true
            GC.@preserve buf L.ta_cq_poll(d.cq, pointer(buf), length(buf), n)
            n[] == 0 && break
            for i in 1:n[]
                c = buf[i]
                outcome = c.status == L.TA_STATUS_OK ? nothing : take_error(c.status, c.error)
                f = lock(d.lock) do
                    pop!(d.actions, c.tag, nothing)
                end
                f === nothing || f(outcome)
            end
        end
    end
end

"""Register `f(outcome)` under a new tag; returns the tag."""
function register!(f)
    d = dispatcher()
    lock(d.lock) do
        d.next += 1
        d.actions[d.next] = f
        d.next
    end
end

function unregister!(tag)
    d = dispatcher()
    lock(d.lock) do
        pop!(d.actions, tag, nothing)
    end
end

# ---------------------------------------------------------------- events

"""
    Event

The completion of one operation. `wait(ev)` waits through the event loop and
throws the operation's error; `isready(ev)` polls.
"""
mutable struct Event
    ptr::Ptr{L.ta_event}
    function Event(p::Ptr{L.ta_event})
        ev = new(p)
        finalizer(close, ev)
    end
end

Base.unsafe_convert(::Type{Ptr{L.ta_event}}, e::Event) = e.ptr

function Base.close(e::Event)
    p = e.ptr
    e.ptr = C_NULL
    p == C_NULL || L.ta_event_free(p)
    return nothing
end

Base.isready(e::Event) = L.ta_event_poll(e) != L.TA_STATUS_PENDING

"""Run `f(outcome)` on the dispatcher task once the operation has completed."""
function when_done(f, ev::Ptr{L.ta_event})
    tag = register!(f)
    st = L.ta_event_notify(ev, dispatcher().cq, tag)
    if st != L.TA_STATUS_OK
        unregister!(tag)
        check(st)
    end
    return nothing
end

function Base.wait(e::Event)
    st = L.ta_event_poll(e)
    if st == L.TA_STATUS_PENDING
        done = Base.Event()
        result = Ref{Any}(nothing)
        when_done(e.ptr) do outcome
            result[] = outcome
            notify(done)
        end
        wait(done)
        result[] === nothing || throw(result[])
        return nothing
    end
    st == L.TA_STATUS_OK && return nothing
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    L.ta_event_error(e, err)
    throw(take_error(st, err[]))
end

# ---------------------------------------------------------------- completion queues

"""
    CompletionQueue()

A completion queue of your own: pass `cq=(q, tag)` to an operation, then
`take!(q)` returns `(tag, outcome)` pairs (outcome `nothing` or a
`TensorAsyncError`), waiting through the event loop. `fd(q)` is its
descriptor for other event loops.
"""
mutable struct CompletionQueue
    ptr::Ptr{L.ta_cq}
    function CompletionQueue()
        p = Ref{Ptr{L.ta_cq}}(C_NULL)
        err = Ref{Ptr{L.ta_error}}(C_NULL)
        check(L.ta_cq_new(p, err), err)
        finalizer(close, new(p[]))
    end
end

Base.unsafe_convert(::Type{Ptr{L.ta_cq}}, q::CompletionQueue) = q.ptr
Base.close(q::CompletionQueue) = (p = q.ptr; q.ptr = C_NULL; p == C_NULL || L.ta_cq_free(p); nothing)

function Base.fd(q::CompletionQueue)
    f = Ref{Cint}(-1)
    check(L.ta_cq_fd(q, f))
    return RawFD(f[])
end

function Base.take!(q::CompletionQueue)
    c = Ref{L.ta_completion}()
    n = Ref{Csize_t}(0)
    while true
        L.ta_cq_poll(q, c, 1, n)
        if n[] == 1
            e = c[]
            return (e.tag, e.status == L.TA_STATUS_OK ? nothing : take_error(e.status, e.error))
        end
        poll_fd(fd(q), -1; readable=true)
    end
end

# ---------------------------------------------------------------- tensors

"""
    Tensor{T}

A handle to an asynchronous tensor (or a view of one) with elements of type
`T`. `close(t)` frees the handle at once; a finalizer frees forgotten ones.
Freeing never blocks: pending operations keep the data alive.
"""
mutable struct Tensor{T}
    ptr::Ptr{L.ta_tensor}
    function Tensor{T}(p::Ptr{L.ta_tensor}) where {T}
        t = new{T}(p)
        finalizer(close, t)
    end
end

Base.unsafe_convert(::Type{Ptr{L.ta_tensor}}, t::Tensor) = t.ptr
Base.eltype(::Tensor{T}) where {T} = T

function Base.close(t::Tensor)
    p = t.ptr
    t.ptr = C_NULL
    p == C_NULL || L.ta_tensor_free(p)
    return nothing
end

function new_handle(::Type{T}, f) where {T}
    out = Ref{Ptr{L.ta_tensor}}(C_NULL)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    check(f(out, err), err)
    return Tensor{T}(out[])
end

csizes(dims) = Csize_t[d for d in dims]

"""An unconstructed host tensor of element type `T` (an overwrite gives it a shape)."""
Tensor{T}() where {T} = new_handle(T, (o, e) -> L.ta_tensor_new(dtype(T), L.TA_DOMAIN_HOST, o, e))

"""`tzeros(T, dims...)`: a zero-filled column-major host tensor."""
function tzeros(::Type{T}, dims::Integer...) where {T}
    ext = csizes(dims)
    new_handle(T, (o, e) -> L.ta_tensor_new_zeros(dtype(T), L.TA_DOMAIN_HOST, length(ext), ext,
                                                  L.TA_ORDER_COL_MAJOR, o, e))
end

"""`Tensor(A)`: a tensor holding a copy of `A`, made before this returns."""
function Tensor(A::AbstractArray{T}) where {T}
    B = A isa Array ? A : collect(A)
    ext = csizes(size(B))
    GC.@preserve B new_handle(T, (o, e) -> L.ta_tensor_new_copy(dtype(T), length(ext), ext, C_NULL,
                                                              L.TA_ORDER_COL_MAJOR, pointer(B), o, e))
end

"""
    wrap(A::Array; readonly=false) -> Tensor

Zero-copy: the tensor's storage is `A`'s memory. `A` is kept referenced (in
the dispatcher's registry) until the library reports, through the completion
queue, that its last access is over, so it cannot be collected while an
operation may still touch it, even after the tensor is closed. Do not touch
`A` while operations on the tensor may be running (`wait(t)` first).
"""
function wrap(A::Array{T}; readonly::Bool=false) where {T}
    d = dispatcher()
    tag = register!(_ -> A)          # the closure holds A until the release entry
    opts = Ref(L.ta_wrap_options(sizeof(L.ta_wrap_options), readonly ? L.TA_WRAP_READ_ONLY : 0,
                                 C_NULL, C_NULL, d.cq, tag))
    ext = csizes(size(A))
    try
        GC.@preserve A new_handle(T, (o, e) -> L.ta_tensor_wrap_ex(dtype(T), length(ext), ext, C_NULL,
                                                                 L.TA_ORDER_COL_MAJOR, pointer(A), opts, o, e))
    catch
        unregister!(tag)             # on failure the memory stays the caller's
        rethrow()
    end
end

function Base.size(t::Tensor)
    r = Ref{Csize_t}(0)
    check(L.ta_tensor_rank(t, r))
    ext = Vector{Csize_t}(undef, max(r[], 1))
    check(L.ta_tensor_extents(t, ext, length(ext)))
    return Tuple(Int(ext[i]) for i in 1:r[])
end
Base.size(t::Tensor, i::Integer) = size(t)[i]
Base.ndims(t::Tensor) = length(size(t))
Base.length(t::Tensor) = prod(size(t); init=1)

function Base.strides(t::Tensor)
    n = ndims(t)
    s = Vector{Cptrdiff_t}(undef, max(n, 1))
    check(L.ta_tensor_strides(t, s, length(s)))
    return Tuple(Int(s[i]) for i in 1:n)
end

isview(t::Tensor) = (v = Ref{Int32}(0); check(L.ta_tensor_is_view(t, v)); v[] != 0)
isreadonly(t::Tensor) = (v = Ref{Int32}(0); check(L.ta_tensor_is_read_only(t, v)); v[] != 0)

"""
    ready(t) -> Event

An event for everything enrolled on `t` so far (`ta_tensor_ready`); never blocks.
"""
function ready(t::Tensor)
    ev = Ref{Ptr{L.ta_event}}(C_NULL)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    check(L.ta_tensor_ready(t, ev, err), err)
    return Event(ev[])
end

"""
    wait(t::Tensor)

Wait, through the event loop, for everything enrolled on `t` so far; throws
the error that poisoned `t`, if any.
"""
function Base.wait(t::Tensor)
    ev = ready(t)
    try
        wait(ev)
    finally
        close(ev)
    end
end

# ---------------------------------------------------------------- host data

"""
    Array(t) / collect(t)

Wait for `t`'s writes and copy its elements into a new `Array` (column-major,
`t`'s shape). The destination is kept in the registry until the copy
completes, even if the waiting task is interrupted.
"""
function Base.Array(t::Tensor{T}) where {T}
    A = Array{T}(undef, size(t))
    copyto!(A, t)
end
Base.collect(t::Tensor) = Array(t)

colmajor_strides(dims) = Cptrdiff_t[prod(dims[1:k-1]; init=1) for k in 1:length(dims)]

function Base.copyto!(A::Array{T}, t::Tensor{T}) where {T}
    ev = Ref{Ptr{L.ta_event}}(C_NULL)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    s = colmajor_strides(size(A))
    GC.@preserve A s check(L.ta_copy_out(t, pointer(A), length(A), s, C_NULL, ev, err), err)
    e = Event(ev[])
    when_done(_ -> A, e.ptr)          # keeps A until the copy has completed
    try
        wait(e)
    finally
        close(e)
    end
    return A
end

"""
    copyto!(t::Tensor, A::Array)

Overwrite `t` (constructing an unconstructed `t`) with `A`, asynchronously:
`A` is kept referenced until the copy completes, and must not be modified
before then (`wait(t)`).
"""
function Base.copyto!(t::Tensor{T}, A::Array{T}) where {T}
    ev = Ref{Ptr{L.ta_event}}(C_NULL)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    ext = csizes(size(A))
    s = colmajor_strides(size(A))
    GC.@preserve A check(L.ta_copy_in(t, pointer(A), length(ext), ext, s, C_NULL, ev, err), err)
    when_done(_ -> A, ev[])
    L.ta_event_free(ev[])
    return t
end

# ---------------------------------------------------------------- views

"""
    view(t, inds...)

A view with Julia's 1-based inclusive ranges: `view(t, 1:2:9, :)`; an integer
index drops its axis; reversed ranges (`5:-1:1`) give negative steps. The view
shares `t`'s queue, and writes through it update `t`.
"""
function Base.view(t::Tensor{T}, inds...) where {T}
    dims = size(t)
    length(inds) == length(dims) || throw(DimensionMismatch("$(length(inds)) indices for a rank-$(length(dims)) tensor"))
    specs = Vector{L.ta_slice}(undef, length(inds))
    for (k, r) in enumerate(inds)
        specs[k] = slice_spec(r, dims[k])
    end
    new_handle(T, (o, e) -> L.ta_tensor_slice(t, specs, length(specs), o, e))
end

slice_spec(::Colon, n) = L.ta_slice(0, n, 1, 0)
slice_spec(i::Integer, n) = L.ta_slice(i - 1, i, 1, 1)
function slice_spec(r::AbstractRange{<:Integer}, n)
    isempty(r) && return L.ta_slice(0, 0, 1, 0)
    # 0-based start, and an exclusive stop one step past the last index.
    L.ta_slice(first(r) - 1, last(r) - 1 + sign(step(r)), step(r), 0)
end

"""`permutedims(t, perm)`: a view with axes reordered (1-based `perm`)."""
function Base.permutedims(t::Tensor{T}, perm) where {T}
    p = Csize_t[i - 1 for i in perm]
    new_handle(T, (o, e) -> L.ta_tensor_permute(t, p, length(p), o, e))
end
Base.transpose(t::Tensor{T}) where {T} = new_handle(T, (o, e) -> L.ta_tensor_transpose(t, o, e))
Base.adjoint(t::Tensor{T}) where {T} = conj(transpose(t))
Base.conj(t::Tensor{T}) where {T} = new_handle(T, (o, e) -> L.ta_tensor_conj(t, o, e))
function Base.reshape(t::Tensor{T}, dims::Integer...) where {T}
    ext = csizes(dims)
    new_handle(T, (o, e) -> L.ta_tensor_reshape(t, length(ext), ext, L.TA_ORDER_COL_MAJOR, o, e))
end

# ---------------------------------------------------------------- operations

# Each operation is enrolled at the call and runs later; submission errors
# (dtype, known shape, read-only, alias) throw at once. Keyword `cq=(q, tag)`
# also reports the completion on a CompletionQueue of yours.

function submit_opts(cq)
    cq === nothing && return nothing
    q, tag = cq
    Ref(L.ta_submit(C_NULL, C_NULL, C_NULL, q.ptr, tag, 0, 0))
end

function run_op(f, cq)
    opts = submit_opts(cq)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    p = opts === nothing ? Ptr{L.ta_submit}(C_NULL) : Base.unsafe_convert(Ptr{L.ta_submit}, opts)
    GC.@preserve opts check(f(p, err), err)
    return nothing
end

Base.fill!(t::Tensor, v; cq=nothing) = (run_op((o, e) -> L.ta_fill(t, scalar(v), o, C_NULL, e), cq); t)
rmul!(t::Tensor, a::Number; cq=nothing) = (run_op((o, e) -> L.ta_scale(t, scalar(a), o, C_NULL, e), cq); t)
axpy!(a::Number, x::Tensor, y::Tensor; cq=nothing) = (run_op((o, e) -> L.ta_axpy(y, scalar(a), x, o, C_NULL, e), cq); y)
Base.copyto!(dst::Tensor, src::Tensor; cq=nothing) = (run_op((o, e) -> L.ta_copy(dst, src, o, C_NULL, e), cq); dst)

"""`mul!(C, A, B, α, β)`: `C = α·A·B + β·C` (`ta_gemm`)."""
mul!(C::Tensor, A::Tensor, B::Tensor, α::Number=1, β::Number=0; cq=nothing) =
    (run_op((o, e) -> L.ta_gemm(C, scalar(α), A, B, scalar(β), o, C_NULL, e), cq); C)
"""`assign_product!(C, A, B, α=1)`: `C = α·A·B`, constructing or reshaping `C`."""
assign_product!(C::Tensor, A::Tensor, B::Tensor, α::Number=1; cq=nothing) =
    (run_op((o, e) -> L.ta_assign_product(C, scalar(α), A, B, o, C_NULL, e), cq); C)
"""`add_product!(C, A, B, α=1)`: `C += α·A·B`."""
add_product!(C::Tensor, A::Tensor, B::Tensor, α::Number=1; cq=nothing) =
    (run_op((o, e) -> L.ta_add_product(C, scalar(α), A, B, o, C_NULL, e), cq); C)

"""`A * B`: a new tensor holding the product (asynchronous)."""
function Base.:*(A::Tensor{T}, B::Tensor{T}) where {T}
    C = Tensor{T}()
    assign_product!(C, A, B)
end

"""
    contract!(C, A, B, a_axes, b_axes; α=1, β=nothing)

Tensordot over pairs of (1-based) axes; `β === nothing` overwrites (and
constructs) `C`.
"""
function contract!(C::Tensor, A::Tensor, B::Tensor, a_axes, b_axes; α=1, β=nothing, cq=nothing)
    length(a_axes) == length(b_axes) || throw(DimensionMismatch("axis lists of different lengths"))
    aa = Csize_t[i - 1 for i in a_axes]
    bb = Csize_t[i - 1 for i in b_axes]
    beta = β === nothing ? nothing : Ref(scalar(β))
    GC.@preserve beta run_op(cq) do o, e
        bp = beta === nothing ? Ptr{L.ta_scalar}(C_NULL) : Base.unsafe_convert(Ptr{L.ta_scalar}, beta)
        L.ta_contract(C, scalar(α), A, B, length(aa), aa, bb, bp, o, C_NULL, e)
    end
    return C
end

"""`sum!(out, x; dims=nothing)`: sum over `dims` (1-based), or of every element into a 0-d `out`."""
function Base.sum!(out::Tensor, x::Tensor; dims=nothing, cq=nothing)
    if dims === nothing
        run_op((o, e) -> L.ta_sum(out, x, 0, C_NULL, o, C_NULL, e), cq)
    else
        ax = Csize_t[d - 1 for d in dims]
        run_op((o, e) -> L.ta_sum(out, x, length(ax), ax, o, C_NULL, e), cq)
    end
    return out
end

"""`dot!(out, x, y; conjugate=true)`: `sum(conj(x)·y)` into a 0-d `out`."""
dot!(out::Tensor, x::Tensor, y::Tensor; conjugate::Bool=true, cq=nothing) =
    (run_op((o, e) -> L.ta_dot(out, x, y, Int32(conjugate), o, C_NULL, e), cq); out)
"""`norm2!(out, x)`: the Euclidean norm into a 0-d `out` of the real type."""
norm2!(out::Tensor, x::Tensor; cq=nothing) = (run_op((o, e) -> L.ta_norm2(out, x, o, C_NULL, e), cq); out)

"""`dot(x, y)`: waits and returns the number."""
function dot(x::Tensor{T}, y::Tensor{T}) where {T}
    out = Tensor{T}()
    dot!(out, x, y)
    only(Array(out))
end

"""`norm(x)`: waits and returns the number."""
function norm(x::Tensor{T}) where {T}
    out = Tensor{real(T)}()
    norm2!(out, x)
    only(Array(out))
end

uplo_c(s::Symbol) = s === :L ? L.TA_UPLO_LOWER : s === :U ? L.TA_UPLO_UPPER : throw(ArgumentError("uplo must be :L or :U"))
side_c(s::Symbol) = s === :L ? L.TA_SIDE_LEFT : s === :R ? L.TA_SIDE_RIGHT : throw(ArgumentError("side must be :L or :R"))
diag_c(s::Symbol) = s === :N ? L.TA_DIAG_NON_UNIT : s === :U ? L.TA_DIAG_UNIT : throw(ArgumentError("diag must be :N or :U"))

"""`potrf!(A; uplo=:L)`: in-place Cholesky factorisation of one triangle."""
potrf!(A::Tensor; uplo::Symbol=:L, cq=nothing) = (run_op((o, e) -> L.ta_potrf(A, uplo_c(uplo), o, C_NULL, e), cq); A)
"""`trsm!(B, A; side=:L, uplo=:L, diag=:N, α=1)`: `op(A)·X = α·B` (or `X·op(A)`), X overwriting B."""
trsm!(B::Tensor, A::Tensor; side::Symbol=:L, uplo::Symbol=:L, diag::Symbol=:N, α=1, cq=nothing) =
    (run_op((o, e) -> L.ta_trsm(B, side_c(side), uplo_c(uplo), diag_c(diag),
                                scalar(α), A, o, C_NULL, e), cq); B)
"""`syrk!(C, A; uplo=:L, α=1, β=0)`: one triangle of `C = α·A·Aᴴ + β·C`."""
syrk!(C::Tensor, A::Tensor; uplo::Symbol=:L, α=1, β=0, cq=nothing) =
    (run_op((o, e) -> L.ta_syrk(C, uplo_c(uplo), scalar(α), A, scalar(β), o, C_NULL, e), cq); C)

# ---------------------------------------------------------------- strided arrays over library memory

"""
    StridedTensorArray{T,N}

Library-owned memory seen as an `AbstractArray`: element `I` is at
`ptr + sum((I[k]-1) * strides[k])` elements. Valid only while the library
grants it (during a kernel call, or until a mapping is released).
"""
struct StridedTensorArray{T,N} <: AbstractArray{T,N}
    ptr::Ptr{T}
    dims::NTuple{N,Int}
    strides::NTuple{N,Int}
end
Base.size(a::StridedTensorArray) = a.dims
Base.strides(a::StridedTensorArray) = a.strides
@inline offset(a::StridedTensorArray{T,N}, I::NTuple{N,Int}) where {T,N} =
    sum(ntuple(k -> (I[k] - 1) * a.strides[k], N); init=0)
Base.@propagate_inbounds function Base.getindex(a::StridedTensorArray{T,N}, I::Vararg{Int,N}) where {T,N}
    @boundscheck checkbounds(a, I...)
    unsafe_load(a.ptr, offset(a, I) + 1)
end
Base.@propagate_inbounds function Base.setindex!(a::StridedTensorArray{T,N}, v, I::Vararg{Int,N}) where {T,N}
    @boundscheck checkbounds(a, I...)
    unsafe_store!(a.ptr, convert(T, v), offset(a, I) + 1)
end

function array_of(v::L.ta_view)
    T = ELTYPES[v.dtype]
    n = Int(v.rank)
    dims = ntuple(k -> Int(unsafe_load(v.extents, k)), n)
    strides = ntuple(k -> Int(unsafe_load(v.strides, k)), n)
    if strides == Tuple(colmajor_strides(dims))
        # Dense column-major: an ordinary Array over the library's memory.
        return unsafe_wrap(Array, Ptr{T}(v.data), dims; own=false)
    end
    return StridedTensorArray{T,n}(Ptr{T}(v.data), dims, strides)
end

# ---------------------------------------------------------------- host access

"""
    acquire(f, t; mode=:read)

Run `f(A)` with `A` an array over `t`'s memory once every earlier access
allows it (`:read` waits for earlier writers, `:write`/`:update` for every
earlier access), then release the access. The grant is awaited through the
event loop. `A` must not be used after `f` returns.
"""
function acquire(f, t::Tensor; mode::Symbol=:read)
    m = mode_c(mode)
    mp = Ref{Ptr{L.ta_mapping}}(C_NULL)
    ev = Ref{Ptr{L.ta_event}}(C_NULL)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    check(L.ta_tensor_acquire_async(t, m, mp, ev, err), err)
    granted = Event(ev[])
    try
        wait(granted)
        v = Ref{L.ta_view}()
        check(L.ta_mapping_view(mp[], v))
        return f(array_of(v[]))
    finally
        close(granted)
        L.ta_mapping_free(mp[])
    end
end

# ---------------------------------------------------------------- user kernels

# Kernels run through one @cfunction trampoline; the Julia function travels as
# a pointer to a Ref kept in the registry until the operation completes.
#
# Threading caveat: the trampoline runs on a library worker thread, which is
# not a Julia thread. Julia 1.9+ adopts such a thread on entry, so the kernel
# may allocate and run Julia code, but it must not yield: no I/O, no `wait`,
# no task switches, no locks that other Julia tasks hold. A kernel that needs
# any of these must do its work in a task instead (use the completion of an
# operation to trigger it). On Julia before 1.9 calling Julia from the worker
# thread crashes; this package requires 1.9.
function kernel_trampoline(views::Ptr{L.ta_view}, n::Csize_t, ud::Ptr{Cvoid}, ctx::Ptr{L.ta_kernel_ctx})::L.ta_status
    try
        f = unsafe_pointer_to_objref(ud)[]
        arrays = [array_of(unsafe_load(views, i)) for i in 1:n]
        f(arrays...)
        return L.TA_STATUS_OK
    catch e
        msg = sprint(showerror, e)
        L.ta_kernel_set_error(ctx, msg)
        return L.ta_status(1)
    end
end

const TRAMPOLINE = Ref{Ptr{Cvoid}}(C_NULL)

mode_c(m::Symbol) = m === :read ? L.TA_MODE_READ : m === :write ? L.TA_MODE_WRITE :
    m === :update ? L.TA_MODE_UPDATE : throw(ArgumentError("mode must be :read, :write or :update"))

"""
    submit(f, accesses...; name="julia_kernel", on=:worker)

Submit a Julia kernel: `accesses` are `t => :read`, `t => :write` or
`t => :update`; once granted, `f(arrays...)` runs with one array per access
over the library's memory (valid only during the call). An exception fails
the operation and poisons what it writes; its text is the error message.

- `on=:worker`: `f` runs on a library worker thread through a `@cfunction`
  trampoline (see the threading caveat above: it must not yield).
- `on=:task`: `f` runs in a Julia task on this process's Julia threads, once
  the accesses are granted (`ta_external_submit`; the grant is awaited
  through the event loop), so it may do I/O, wait, and yield. The
  operation holds its accesses until `f` returns, without occupying a
  library worker.
"""
function submit(f, accesses::Pair{<:Tensor,Symbol}...; name::AbstractString="julia_kernel", cq=nothing,
                on::Symbol=:worker)
    on === :task && return submit_task(f, accesses; name=name, cq=cq)
    on === :worker || throw(ArgumentError("on must be :worker or :task"))
    if TRAMPOLINE[] == C_NULL
        TRAMPOLINE[] = @cfunction(kernel_trampoline, L.ta_status,
                                  (Ptr{L.ta_view}, Csize_t, Ptr{Cvoid}, Ptr{L.ta_kernel_ctx}))
    end
    acc = [L.ta_access(t.ptr, mode_c(m)) for (t, m) in accesses]
    box = Ref{Any}(f)
    cname = String(name)
    ev = Ref{Ptr{L.ta_event}}(C_NULL)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    opts = submit_opts(cq)
    p = opts === nothing ? Ptr{L.ta_submit}(C_NULL) : Base.unsafe_convert(Ptr{L.ta_submit}, opts)
    GC.@preserve box cname opts accesses begin
        check(L.ta_kernel_submit(TRAMPOLINE[], pointer_from_objref(box), pointer(cname), acc, length(acc),
                                 p, ev, err), err)
    end
    # The function and its name stay referenced until the operation completes.
    when_done(_ -> (box, cname), ev[])
    L.ta_event_free(ev[])
    return nothing
end

function submit_task(f, accesses; name, cq)
    acc = [L.ta_access(t.ptr, mode_c(m)) for (t, m) in accesses]
    cname = String(name)
    tok = Ref{Ptr{L.ta_token}}(C_NULL)
    started = Ref{Ptr{L.ta_event}}(C_NULL)
    ev = Ref{Ptr{L.ta_event}}(C_NULL)
    err = Ref{Ptr{L.ta_error}}(C_NULL)
    opts = submit_opts(cq)
    p = opts === nothing ? Ptr{L.ta_submit}(C_NULL) : Base.unsafe_convert(Ptr{L.ta_submit}, opts)
    GC.@preserve cname opts accesses begin
        check(L.ta_external_submit(acc, length(acc), pointer(cname), p, tok, started, ev, err), err)
    end
    when_done(_ -> cname, ev[])       # the name lives until the operation completes
    L.ta_event_free(ev[])
    token = tok[]
    granted = Event(started[])
    errormonitor(@async begin
        try
            wait(granted)
        catch
            # An input was poisoned: the operation has failed already; the
            # token only needs finishing.
            L.ta_token_finish(token, L.TA_STATUS_CANCELLED, C_NULL)
            return
        finally
            close(granted)
        end
        views = Vector{L.ta_view}(undef, length(acc))
        n = Ref{Csize_t}(0)
        st = L.ta_token_views(token, views, length(views), n)
        if st != L.TA_STATUS_OK
            L.ta_token_finish(token, st, "ta_token_views failed")
            return
        end
        try
            f(map(array_of, views[1:n[]])...)
            L.ta_token_finish(token, L.TA_STATUS_OK, C_NULL)
        catch e
            L.ta_token_finish(token, L.ta_status(1), sprint(showerror, e))
        end
    end)
    return nothing
end

# ---------------------------------------------------------------- observability

# These act on the default runtime, which every operation of this package
# runs on. They are not exported (`dump` would shadow `Base.dump`): call them
# as `TensorAsync.stats()` and so on.

function with_default_runtime(f)
    r = Ref{Ptr{L.ta_runtime}}(C_NULL)
    check(L.ta_runtime_default(r))
    try
        return f(r[])
    finally
        L.ta_runtime_free(r[])
    end
end

"""
    trace_start(; capacity=0)

Start recording a trace of everything the runtime runs from now on: per
operation its worker, submission, ready, start and end times, name, tensors
and the operations it waited for. `capacity` operations are kept (0: the
library's default); when full, the oldest are dropped. A recording in
progress is restarted. `trace_stop(path)` writes it.
"""
function trace_start(; capacity::Integer=0)
    opts = Ref(L.ta_trace_options(UInt32(sizeof(L.ta_trace_options)), UInt32(0), UInt64(capacity)))
    with_default_runtime() do r
        err = Ref{Ptr{L.ta_error}}(C_NULL)
        check(L.ta_runtime_trace_start(r, opts, err), err)
    end
end

"""
    trace_stop(path)
    trace_stop(nothing)

Stop recording and write the trace to the file `path` as Chrome trace-event
JSON (chrome://tracing, ui.perfetto.dev); `nothing` discards it. Throws a
`TensorAsyncError` (TA_STATUS_INVALID_ARGUMENT) when nothing is recorded.
"""
function trace_stop(path::Union{AbstractString,Nothing})
    cpath = path === nothing ? nothing : String(path)
    cpath !== nothing && occursin('\0', cpath) && throw(ArgumentError("path contains a NUL character"))
    with_default_runtime() do r
        err = Ref{Ptr{L.ta_error}}(C_NULL)
        p = cpath === nothing ? Ptr{UInt8}(C_NULL) : pointer(cpath)
        GC.@preserve cpath check(L.ta_runtime_trace_stop(r, p, err), err)
    end
end

"""`trace_discard()`: stop recording and discard the trace (`trace_stop(nothing)`)."""
trace_discard() = trace_stop(nothing)

"""
    track(enable=true)

Turn tracking of pending work on or off: `dump()` lists only the operations
submitted while it is on (it costs up to about a microsecond per operation).
"""
track(enable::Bool=true) = with_default_runtime(r -> check(L.ta_runtime_track(r, Int32(enable))))

"""
    dump(; format=:text)

A report of the runtime's unfinished operations (those submitted while
`track` was on): per operation its state (RUNNING, READY or WAITING), the
tensors it accesses, and which operation it waits for on which tensor.
`format=:dot` gives the same graph in Graphviz DOT.
"""
function dump(; format::Symbol=:text)
    fmt = format === :text ? L.TA_DUMP_TEXT : format === :dot ? L.TA_DUMP_DOT :
          throw(ArgumentError("format must be :text or :dot"))
    with_default_runtime() do r
        cap = 1024
        while true
            buf = Vector{UInt8}(undef, cap)
            len = Ref{Csize_t}(0)
            err = Ref{Ptr{L.ta_error}}(C_NULL)
            st = GC.@preserve buf L.ta_runtime_dump_string(r, fmt, pointer(buf), cap, len, err)
            st == L.TA_STATUS_OK && return String(buf[1:len[]])
            st == L.TA_STATUS_BUFFER_TOO_SMALL || check(st, err)
            err[] == C_NULL || L.ta_error_free(err[])
            cap = Int(len[]) + Int(len[]) ÷ 2 + 64   # the report may grow meanwhile
        end
    end
end

"""
    stats()

The runtime's counters as a NamedTuple: `threads`, `tasks_submitted`,
`tasks_completed` (whatever their status), `tasks_failed`, `tasks_cancelled`,
`steals`, `queue_depth`, `pending`, `peak_pending` (sampled) and `busy_ns`
(see `ta_stats` in the C header).
"""
function stats()
    s = Ref(L.ta_stats(UInt32(sizeof(L.ta_stats)), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    with_default_runtime(r -> check(L.ta_runtime_stats(r, s)))
    c = s[]
    return (threads=Int(c.threads), tasks_submitted=Int(c.tasks_submitted), tasks_completed=Int(c.tasks_completed),
            tasks_failed=Int(c.tasks_failed), tasks_cancelled=Int(c.tasks_cancelled), steals=Int(c.steals),
            queue_depth=Int(c.queue_depth), pending=Int(c.pending), peak_pending=Int(c.peak_pending),
            busy_ns=Int(c.busy_ns))
end

end # module TensorAsync
