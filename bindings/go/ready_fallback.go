package tensorasync

import "context"

// Temporary until ta_tensor_ready exists.
func (t *Tensor) wait(ctx context.Context) error { return t.WaitBlocking(-1) }
