package lease

import (
	"testing"
	"time"
)

// The retries of unprocessed keys wait a jittered time within the step of
// their attempt, and at most a second.
func TestBackoff_JitteredWithinEachAttemptsStep(t *testing.T) {
	for attempt, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(attempt)
			if d < 0 || d >= ceiling {
				t.Fatalf("attempt %d waits %v, want within [0, %v)", attempt, d, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 100 {
			t.Errorf("attempt %d: %d distinct waits of 200: not jittered", attempt, len(seen))
		}
	}
	for _, attempt := range []int{5, 9, 100} {
		if d := backoff(attempt); d != time.Second {
			t.Errorf("attempt %d waits %v, want the 1s cap", attempt, d)
		}
	}
}
