package faults

import (
	"context"
	"fmt"

	"github.com/shardloop/shardloop/pkg/reader"
)

// TargetRates are the shares of deliveries that fail.
type TargetRates struct {
	// Fail: the whole batch fails; the wrapped target is not called.
	Fail float64
	// Partial: the wrapped target gets only a leading part of the batch (at
	// least one record short of the whole) and the delivery reports that
	// part settled with an error, as a batchItemFailures answer would.
	Partial float64
}

// Target wraps a reader.Target and makes deliveries fail now and then.
type Target struct {
	Target reader.Target
	Rates  TargetRates
	In     *Injector
}

var _ reader.Target = (*Target)(nil)

// Counter names of target faults.
const (
	TargetFail    = "target.failed"
	TargetPartial = "target.partial"
)

// errTarget is a failure the function answered with (or, for Fail, a call
// refused before it ran): nothing of it may still be running.
var errTarget = fmt.Errorf("target function error (injected): %w", reader.ErrFunction)

// Deliver implements reader.Target.
func (t *Target) Deliver(ctx context.Context, b reader.Batch) (int, error) {
	switch t.In.pick(chance{TargetFail, t.Rates.Fail}, chance{TargetPartial, t.Rates.Partial}) {
	case 0:
		t.In.count(TargetFail)
		return 0, &Error{Op: "Deliver", Kind: TargetFail, Err: errTarget}
	case 1:
		if len(b.Records) < 2 {
			break
		}
		t.In.count(TargetPartial)
		part := b
		part.Records = b.Records[:t.In.intN(len(b.Records))]
		n := 0
		if len(part.Records) > 0 {
			var err error
			if n, err = t.Target.Deliver(ctx, part); err != nil {
				return n, err
			}
		}
		return n, &Error{Op: "Deliver", Kind: TargetPartial, Err: errTarget}
	}
	return t.Target.Deliver(ctx, b)
}
