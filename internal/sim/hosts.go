package sim

import (
	"context"
	"strings"
	"sync"
	"time"
)

// hostFaults are what happens to whole hosts, beside the per-call faults:
// a partition (the host loses the lease table, or the target, for longer
// than a lease) and a pause (the process is frozen, descheduled or in a
// long GC pause, then wakes up and carries on).
type hostFaults struct {
	mu     sync.Mutex
	names  []string             // every host, in order of creation
	cut    map[string]time.Time // "store|host" or "target|host": unreachable until
	frozen map[string]time.Time // host: frozen until
}

// noteHost registers a new host.
func (h *hostFaults) noteHost(name string) {
	h.mu.Lock()
	h.names = append(h.names, name)
	h.mu.Unlock()
}

// pickHost picks one of a deployment's reading hosts made so far (a
// runner process, a shardreader instance; "" when none).
func (h *hostFaults) pickHost(dep string, pick float64) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var of []string
	for _, n := range h.names {
		if strings.HasPrefix(n, dep+"#") || strings.HasPrefix(n, dep+"-reader#") {
			of = append(of, n)
		}
	}
	if len(of) == 0 {
		return ""
	}
	return of[int(pick*float64(len(of)))%len(of)]
}

func hostOf(ctx context.Context) string {
	host, _ := ctx.Value(hostKey{}).(string)
	return host
}

// partition cuts host off from what ("store" or "target") for d.
func (w *World) partition(host, what string, d time.Duration) {
	w.hf.mu.Lock()
	if w.hf.cut == nil {
		w.hf.cut = map[string]time.Time{}
	}
	w.hf.cut[what+"|"+host] = time.Now().Add(d)
	w.hf.mu.Unlock()
}

// cutOff reports whether ctx's host cannot reach what now.
func (w *World) cutOff(ctx context.Context, what string) bool {
	host := hostOf(ctx)
	if host == "" {
		return false
	}
	w.hf.mu.Lock()
	defer w.hf.mu.Unlock()
	return time.Now().Before(w.hf.cut[what+"|"+host])
}

// freeze freezes host for d.
func (w *World) freeze(host string, d time.Duration) {
	w.hf.mu.Lock()
	if w.hf.frozen == nil {
		w.hf.frozen = map[string]time.Time{}
	}
	w.hf.frozen[host] = time.Now().Add(d)
	w.hf.mu.Unlock()
}

// wake blocks a call of ctx's host while the host is frozen, whatever
// ctx does (a frozen process does not see its context end): what it was
// about to do, it does when it wakes up.
func (w *World) wake(ctx context.Context) {
	host := hostOf(ctx)
	if host == "" {
		return
	}
	w.hf.mu.Lock()
	until := w.hf.frozen[host]
	w.hf.mu.Unlock()
	if d := time.Until(until); d > 0 {
		time.Sleep(d)
	}
}
