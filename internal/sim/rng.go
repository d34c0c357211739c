package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"
)

// streams hands out independent random streams, one per name, all derived
// from the world's seed. Each actor (a shard's Kinesis calls, a lease row's
// store calls, a shard's deliveries, a host's clock) draws from its own
// stream, so what one actor draws does not depend on how the goroutines of
// the others interleave: the main source of run-to-run variation that is
// left is the order of goroutines woken at the same virtual instant.
type streams struct {
	seed uint64
	mu   sync.Mutex
	m    map[string]*stream
}

// stream is one named random stream; safe for concurrent use.
type stream struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newStreams(seed uint64) *streams { return &streams{seed: seed, m: map[string]*stream{}} }

// get returns the stream named by parts joined. The name is joined in a
// buffer on the stack and looked up without a string of its own: most
// calls find a stream made earlier, and then allocate nothing.
func (s *streams) get(parts ...string) *stream {
	var buf [128]byte
	name := buf[:0]
	for _, p := range parts {
		name = append(name, p...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[string(name)]
	if st == nil {
		st = &stream{r: rand.New(rand.NewPCG(s.seed, hash64(string(name))))}
		s.m[string(name)] = st
	}
	return st
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// float returns a number in [0, 1).
func (st *stream) float() float64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.r.Float64()
}

// hit reports whether an event of probability p happens.
func (st *stream) hit(p float64) bool { return p > 0 && st.float() < p }

// intN returns a number in [0, n); 0 when n < 1.
func (st *stream) intN(n int) int {
	if n < 1 {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.r.IntN(n)
}

// dur returns a duration uniform in [lo, hi].
func (st *stream) dur(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return lo + time.Duration(st.r.Int64N(int64(hi-lo)+1))
}

// latency draws a call's latency: mostly near typical, with a tail to
// tail (one call in twenty). Zero typical means no latency at all.
func (st *stream) latency(typical, tail time.Duration) time.Duration {
	if typical <= 0 {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if tail > typical && st.r.IntN(20) == 0 {
		return typical + time.Duration(st.r.Int64N(int64(tail-typical)+1))
	}
	return typical/2 + time.Duration(st.r.Int64N(int64(typical)+1))
}
