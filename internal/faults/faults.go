// Package faults wraps the interfaces shardloop talks through — the Kinesis
// client, a lease.Store and a reader.Target — and makes a chosen share of
// calls fail, so that tests can put the reader and the coordinator under the
// errors real AWS produces and the local emulators never do (kinesis-local
// never throttles). Every wrapper draws from one Injector, seeded for
// reproducibility, which also counts what it injected.
//
// Rates are probabilities per call, from 0 (never) to 1 (always). An
// Injector can be switched off and on while calls go through it.
package faults

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
)

// ErrInjected is matched by every error a wrapper makes up.
var ErrInjected = errors.New("fault injected")

// Error is an injected failure of one call. It matches ErrInjected, and
// errors.As reaches Err, so an injected SDK exception (a throttle, an expired
// iterator) is handled by the caller exactly as the real one would be.
type Error struct {
	Op   string // e.g. "GetRecords", "lease.Renew"
	Kind string // the counter it was counted under
	// After is true when the call was made and its answer then lost: the
	// write happened although the caller sees a failure.
	After bool
	Err   error
}

func (e *Error) Error() string {
	when := "before the call"
	if e.After {
		when = "after the call succeeded"
	}
	return fmt.Sprintf("%s: %s (injected %s): %v", e.Op, e.Kind, when, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrInjected.
func (e *Error) Is(target error) bool { return target == ErrInjected }

// Injector draws the faults of every wrapper built on it and counts them.
// It is safe for concurrent use.
type Injector struct {
	mu     sync.Mutex
	rng    *rand.Rand
	off    bool
	counts map[string]int64
}

// NewInjector returns an enabled injector seeded with seed.
func NewInjector(seed uint64) *Injector {
	return &Injector{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), counts: map[string]int64{}}
}

// SetEnabled switches injection on or off; while off every call goes through.
func (in *Injector) SetEnabled(on bool) {
	in.mu.Lock()
	in.off = !on
	in.mu.Unlock()
}

// Counts returns how many faults of each kind were injected so far.
func (in *Injector) Counts() map[string]int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.counts)
}

// Total returns the number of faults injected so far.
func (in *Injector) Total() int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	var n int64
	for _, c := range in.counts {
		n += c
	}
	return n
}

// pick draws one outcome: the index of the first rate that hits, or -1. The
// rates of one call are exclusive and should sum to at most 1.
func (in *Injector) pick(rates ...float64) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.off {
		return -1
	}
	x := in.rng.Float64()
	for i, p := range rates {
		if x < p {
			return i
		}
		x -= p
	}
	return -1
}

// intN returns a number in [0, n).
func (in *Injector) intN(n int) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rng.IntN(n)
}

func (in *Injector) count(kind string) {
	in.mu.Lock()
	in.counts[kind]++
	in.mu.Unlock()
}
