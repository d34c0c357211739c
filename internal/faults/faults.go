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
//
// Every kind of fault with a rate above zero is injected at least once: the
// first call that can draw a kind not injected yet draws it. A run's coverage
// of its fault kinds ("a slow renewal was injected") then holds by
// construction, however few calls a slow machine makes; the rates decide
// the rest.
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

// chance is one outcome a call may draw: a kind of fault and its rate.
type chance struct {
	kind string
	rate float64
}

// pick draws one outcome: the index of the first chance that hits, or -1.
// The chances of one call are exclusive and their rates should sum to at
// most 1. A kind with a rate above zero not injected yet is drawn at once
// (two concurrent calls may both draw it; a call that cannot inject what
// it drew leaves it to the next).
func (in *Injector) pick(chances ...chance) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.off {
		return -1
	}
	for i, c := range chances {
		if c.rate > 0 && in.counts[c.kind] == 0 {
			return i
		}
	}
	x := in.rng.Float64()
	for i, c := range chances {
		if x < c.rate {
			return i
		}
		x -= c.rate
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
