package tensorasync

// #include <tensorasync.h>
import "C"

import (
	"fmt"
	"runtime"
)

// Blocks is a block array: one allocation cut into blocks (tiles of a tiled
// array, or a list of blocks of any shapes), each with its own epoch queue.
type Blocks struct {
	h *C.ta_blocks
}

func newBlocks(st C.ta_status, h *C.ta_blocks, cerr *C.ta_error) (*Blocks, error) {
	if err := takeError(st, cerr); err != nil {
		return nil, err
	}
	b := &Blocks{h: h}
	runtime.SetFinalizer(b, (*Blocks).Close)
	return b, nil
}

// NewTiled makes a zero-filled tiled host array of the given shape cut in
// tiles (the last tile on an axis may be ragged), stored in order.
func NewTiled(dt DType, shape, tile []int, order Order) (*Blocks, error) {
	if len(tile) != len(shape) {
		return nil, &Error{Status: StatusShapeMismatch, Code: int64(StatusShapeMismatch), Origin: "NewTiled",
			Message: "tile extents of another rank than the shape"}
	}
	ext, err := sizeArgs("NewTiled", "extent", shape)
	if err != nil {
		return nil, err
	}
	te, err := sizeArgs("NewTiled", "tile extent", tile)
	if err != nil {
		return nil, err
	}
	var h *C.ta_blocks
	var cerr *C.ta_error
	st := C.ta_blocks_new_tiled(C.ta_dtype(dt), C.TA_DOMAIN_HOST, C.size_t(len(ext)), firstSize(ext), firstSize(te),
		C.ta_order(order), &h, &cerr)
	return newBlocks(st, h, cerr)
}

// NewBlockList makes a zero-filled list of host blocks of the given shapes.
func NewBlockList(dt DType, shapes [][]int, order Order) (*Blocks, error) {
	ranks := make([]C.size_t, len(shapes))
	var ext []C.size_t
	for i, s := range shapes {
		e, err := sizeArgs("NewBlockList", fmt.Sprintf("extent of block %d:", i), s)
		if err != nil {
			return nil, err
		}
		ranks[i] = C.size_t(len(s))
		ext = append(ext, e...)
	}
	var h *C.ta_blocks
	var cerr *C.ta_error
	st := C.ta_blocks_new_list(C.ta_dtype(dt), C.TA_DOMAIN_HOST, C.size_t(len(shapes)), firstSize(ranks), firstSize(ext),
		C.ta_order(order), &h, &cerr)
	return newBlocks(st, h, cerr)
}

// Count is the number of blocks.
func (b *Blocks) Count() (int, error) {
	var n C.size_t
	err := check(C.ta_blocks_count(b.h, &n))
	runtime.KeepAlive(b)
	return int(n), err
}

// Grid is the number of tiles per axis of a tiled array.
func (b *Blocks) Grid() ([]int, error) {
	g := make([]C.size_t, 32)
	err := check(C.ta_blocks_grid(b.h, &g[0], C.size_t(len(g))))
	runtime.KeepAlive(b)
	if err != nil {
		return nil, err
	}
	n, _ := b.rank()
	out := make([]int, n)
	for i := range out {
		out[i] = int(g[i])
	}
	return out, nil
}

func (b *Blocks) rank() (int, error) {
	t, err := b.Block(0)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	s, err := t.Shape()
	return len(s), err
}

// Block is a tensor handle for block i (row-major over the grid of a tiled
// array), ordered on that block's own queue.
func (b *Blocks) Block(i int) (*Tensor, error) {
	ci, err := sizeArg("Block", "block index", i)
	if err != nil {
		return nil, err
	}
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_blocks_block(b.h, ci, &h, &cerr)
	runtime.KeepAlive(b)
	return newView(st, h, cerr)
}

// Tile is a tensor handle for the tile at a multi-index of a tiled array.
func (b *Blocks) Tile(index ...int) (*Tensor, error) {
	idx, err := sizeArgs("Tile", "tile index", index)
	if err != nil {
		return nil, err
	}
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_blocks_tile(b.h, C.size_t(len(idx)), firstSize(idx), &h, &cerr)
	runtime.KeepAlive(b)
	return newView(st, h, cerr)
}

// Coalesce is one view over the tiles lo[k] up to but not including hi[k]
// on each axis (hi is exclusive, like a Go slice expression and the C API's
// ta_blocks_coalesce; CoalesceRange's last is inclusive), enrolled in every
// covered tile's queue as one composite access. Coalesce(lo, hi) of a grid
// with tiles of 2x3 elements and lo = [1, 1], hi = [3, 3] covers tile rows
// 1 and 2 and tile columns 1 and 2.
func (b *Blocks) Coalesce(lo, hi []int) (*Tensor, error) {
	if len(lo) != len(hi) {
		return nil, &Error{Status: StatusShapeMismatch, Code: int64(StatusShapeMismatch), Origin: "Coalesce",
			Message: fmt.Sprintf("lo has %d entries, hi %d", len(lo), len(hi))}
	}
	l, err := sizeArgs("Coalesce", "tile index", lo)
	if err != nil {
		return nil, err
	}
	u, err := sizeArgs("Coalesce", "tile index", hi)
	if err != nil {
		return nil, err
	}
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_blocks_coalesce(b.h, C.size_t(len(l)), firstSize(l), firstSize(u), &h, &cerr)
	runtime.KeepAlive(b)
	return newView(st, h, cerr)
}

// CoalesceRange is one view over list blocks first through last (inclusive),
// which must stack into one dense array (ErrNotContiguous otherwise).
func (b *Blocks) CoalesceRange(first, last int) (*Tensor, error) {
	cf, err := sizeArg("CoalesceRange", "block index", first)
	if err != nil {
		return nil, err
	}
	cl, err := sizeArg("CoalesceRange", "block index", last)
	if err != nil {
		return nil, err
	}
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_blocks_coalesce_range(b.h, cf, cl, &h, &cerr)
	runtime.KeepAlive(b)
	return newView(st, h, cerr)
}

// All is the whole array as one view over every block.
func (b *Blocks) All() (*Tensor, error) {
	var h *C.ta_tensor
	var cerr *C.ta_error
	st := C.ta_blocks_all(b.h, &h, &cerr)
	runtime.KeepAlive(b)
	return newView(st, h, cerr)
}

// Close frees the array handle; block and view handles stay valid. Idempotent.
func (b *Blocks) Close() error {
	if b == nil || b.h == nil {
		return nil
	}
	h := b.h
	b.h = nil
	runtime.SetFinalizer(b, nil)
	return check(C.ta_blocks_free(h))
}
