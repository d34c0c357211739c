package lease_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/shardloop/shardloop/pkg/lease"
)

// TestTakeRace_ExactlyOneWinnerPerRound has 20 owners race to take one row
// each round, alternating a released (free) row and a lapsed one: exactly
// one take may succeed per round, on every store. On a lapsed row every
// owner takes with IfCounter of the counter it saw, as the coordinator does.
func TestTakeRace_ExactlyOneWinnerPerRound(t *testing.T) {
	const owners, rounds = 20, 30
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			s := st.make(t, clock.Now)
			ctx := t.Context()
			winner := ""
			var seen int64
			for round := range rounds {
				if winner != "" && round%2 == 0 {
					must(t, s.Release(ctx, stream, "hot", winner, lease.Handover{}))
				}
				var (
					wg   sync.WaitGroup
					mu   sync.Mutex
					wins []string
					errs []error
				)
				start := make(chan struct{})
				for i := range owners {
					owner := fmt.Sprintf("r%d-o%d", round, i)
					wg.Go(func() {
						<-start
						_, err := s.Take(ctx, stream, "hot", owner, lease.IfCounter(seen))
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							wins = append(wins, owner)
						case !errors.Is(err, lease.ErrHeld):
							errs = append(errs, err)
						}
					})
				}
				close(start)
				wg.Wait()
				if len(errs) > 0 {
					t.Fatalf("round %d: unexpected errors: %v", round, errs)
				}
				if len(wins) != 1 {
					t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(wins), wins)
				}
				winner = wins[0]
				got, err := s.Get(ctx, stream, "hot")
				must(t, err)
				if got.Owner != winner {
					t.Fatalf("round %d: row owner %q, winner %q", round, got.Owner, winner)
				}
				seen = got.Counter
			}
		})
	}
}
