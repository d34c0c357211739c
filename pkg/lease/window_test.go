package lease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shardloop/shardloop/internal/testaws"
	"github.com/shardloop/shardloop/pkg/lease"
)

// TestWindowStoreConformance holds every store to the same rules for
// tumbling windows (HolderStore.CheckpointWindow and WindowReader): the
// window and its checkpoint are written in one conditional write, read
// back whole (a state of 1 MB included), and a refused write changes
// neither.
func TestWindowStoreConformance(t *testing.T) { runConformance(t, windowCases) }

func window(seq string, state []byte) lease.Window {
	start := time.UnixMilli(1_800_000_000_000).UTC()
	return lease.Window{Seq: seq, Start: start, End: start.Add(time.Minute), State: state}
}

func sameWindow(t *testing.T, got, want lease.Window) {
	t.Helper()
	if got.Seq != want.Seq || !got.Start.Equal(want.Start) || !got.End.Equal(want.End) || got.Closed != want.Closed || !bytes.Equal(got.State, want.State) {
		t.Fatalf("window = {seq %s %s-%s closed %v state %d bytes}, want {seq %s %s-%s closed %v state %d bytes}",
			got.Seq, got.Start, got.End, got.Closed, len(got.State), want.Seq, want.Start, want.End, want.Closed, len(want.State))
	}
}

var windowCases = []conformanceCase{
	{"WindowAndCheckpointWrittenTogether", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		if _, err := s.GetWindow(ctx, stream, "s1"); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("get window before any = %v, want ErrNotFound", err)
		}
		w := window("100", []byte(`{"a":1}`))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, w)
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if row.Checkpoint != "100" || row.Owner != "A" {
			t.Fatalf("row = %+v, want checkpoint 100 owner A", row)
		}
		// A later write replaces it; a closed window has no state.
		closed := window("200", nil)
		closed.Closed = true
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", closed))
		got, err = s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, closed)
	}},
	{"WindowOfOneMegabyteRoundTrips", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		big := bytes.Repeat([]byte("0123456789abcdef"), lease.MaxWindowState/16)
		big[0], big[len(big)-1] = '{', '}'
		w := window("100", big)
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, w)
		// A small one after a large one is read as written.
		small := window("101", []byte(`{}`))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", small))
		got, err = s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, small)
	}},
	{"WindowOverOneMegabyteRefused", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		err := s.CheckpointWindow(ctx, stream, "s1", "A", window("100", make([]byte, lease.MaxWindowState+1)))
		var ie *lease.InvalidError
		if !errors.As(err, &ie) || ie.Field != "window state" {
			t.Fatalf("checkpoint of a state over 1 MB = %v, want an InvalidError naming the window state", err)
		}
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if row.Checkpoint != "" {
			t.Fatalf("checkpoint = %q after a refused write, want none", row.Checkpoint)
		}
	}},
	{"WindowWriteByAnotherOwnerRefusedAndChangesNothing", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		w := window("100", []byte(`{"n":1}`))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
		noErr(t)(s.Take(ctx, stream, "s1", "B", lease.IfCounter(1)))
		err := s.CheckpointWindow(ctx, stream, "s1", "A", window("200", []byte(`{"n":2}`)))
		if !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("window write by the old owner = %v, want ErrNotOwner", err)
		}
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		sameWindow(t, got, w)
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if row.Checkpoint != "100" {
			t.Fatalf("checkpoint = %q, want 100", row.Checkpoint)
		}
	}},
	{"WindowWriteRefusedOnRevokedLease", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		if _, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g2", Order: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckpointWindow(ctx, stream, "s1", "A", window("100", []byte(`{}`))); !errors.Is(err, lease.ErrNotOwner) {
			t.Fatalf("window write on a revoked lease = %v, want ErrNotOwner", err)
		}
	}},
	{"CheckpointWithoutWindowLeavesWindowBehind", func(t *testing.T, ctx context.Context, s lease.Store, clock *fakeClock) {
		noErr(t)(s.Take(ctx, stream, "s1", "A"))
		must(t, s.CheckpointWindow(ctx, stream, "s1", "A", window("100", []byte(`{}`))))
		noErr(t)(s.Checkpoint(ctx, stream, "s1", "A", "150"))
		got, err := s.GetWindow(ctx, stream, "s1")
		must(t, err)
		row, err := s.Get(ctx, stream, "s1")
		must(t, err)
		if got.Seq != "100" || row.Checkpoint != "150" {
			t.Fatalf("window seq %q, row checkpoint %q: want 100 and 150 (the window describes earlier records)", got.Seq, row.Checkpoint)
		}
	}},
}

// lostAnswerClient is a DynamoDB client whose next window checkpoint loses
// its answer: the write lands, meanwhile runs (another owner takes the
// row), and the same request is sent again, as the SDK's retryer does. With
// fillRefusal a refused request carries the row as real DynamoDB returns it
// (ReturnValuesOnConditionCheckFailure), which dynalite does not.
type lostAnswerClient struct {
	*dynamodb.Client
	fillRefusal bool

	mu        sync.Mutex
	meanwhile func()
}

func (c *lostAnswerClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, optFns...)
	c.mu.Lock()
	f := c.meanwhile
	if err == nil && f != nil && slices.Contains(slices.Collect(maps.Values(in.ExpressionAttributeNames)), "window_ref") {
		c.meanwhile = nil
	} else {
		f = nil
	}
	c.mu.Unlock()
	if f == nil {
		return out, err
	}
	f()
	out, err = c.Client.UpdateItem(ctx, in, optFns...)
	var ccf *types.ConditionalCheckFailedException
	if c.fillRefusal && errors.As(err, &ccf) && len(ccf.Item) == 0 {
		got, gerr := c.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
		if gerr != nil {
			return nil, gerr
		}
		ccf.Item = got.Item
	}
	return out, err
}

// TestRefusedRetryOfLandedWindowCheckpointKeepsItsChunks: a window
// checkpoint lands with its answer lost, another owner takes the row, and
// the retry is refused; the row names the first attempt's window, so its
// chunks must stay and the next owner reads it.
func TestRefusedRetryOfLandedWindowCheckpointKeepsItsChunks(t *testing.T) {
	type setup func(t *testing.T, meanwhile func(s lease.Store)) (s lease.Store, checkpointWindow func(context.Context, lease.Window) error)
	dynamo := func(fill bool) setup {
		return func(t *testing.T, meanwhile func(s lease.Store)) (lease.Store, func(context.Context, lease.Window) error) {
			client := &lostAnswerClient{Client: testaws.Dynamo(t), fillRefusal: fill}
			table := testaws.Name(t)
			must(t, lease.CreateTable(t.Context(), client, table))
			s, err := lease.NewDynamoStore(client, table)
			must(t, err)
			return s, func(ctx context.Context, w lease.Window) error {
				client.mu.Lock()
				client.meanwhile = func() { meanwhile(s) }
				client.mu.Unlock()
				return s.CheckpointWindow(ctx, stream, "s1", "A", w)
			}
		}
	}
	for _, c := range []struct {
		name  string
		setup setup
	}{
		{"memory", func(t *testing.T, meanwhile func(s lease.Store)) (lease.Store, func(context.Context, lease.Window) error) {
			s := memoryFactory(t, time.Now)
			// The memory store has no lower layer to retry in: the caller
			// retries the same write.
			return s, func(ctx context.Context, w lease.Window) error {
				must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
				meanwhile(s)
				return s.CheckpointWindow(ctx, stream, "s1", "A", w)
			}
		}},
		{"dynamo", dynamo(false)},
		{"dynamo returning the row with a refusal", dynamo(true)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			takeover := func(s lease.Store) { noErr(t)(s.Take(ctx, stream, "s1", "B", lease.IfCounter(1))) }
			s, checkpointWindow := c.setup(t, takeover)
			noErr(t)(s.Take(ctx, stream, "s1", "A"))
			w := window("100", bytes.Repeat([]byte("x"), 400<<10)) // two chunks
			if err := checkpointWindow(ctx, w); err != nil && !errors.Is(err, lease.ErrNotOwner) {
				t.Fatalf("window checkpoint whose retry was refused = %v, want nil or ErrNotOwner", err)
			}
			row, err := s.Get(ctx, stream, "s1")
			must(t, err)
			if row.Owner != "B" || row.Checkpoint != "100" {
				t.Fatalf("row = owner %q checkpoint %q, want B and 100 (the first attempt landed)", row.Owner, row.Checkpoint)
			}
			got, err := s.GetWindow(ctx, stream, "s1")
			must(t, err)
			sameWindow(t, got, w)
		})
	}
}

// TestStartsResetsAndDeletesDropTheWindow: a new start, a reset and a
// delete leave no window for the shard (the row names none, and in
// DynamoDB no chunk item of it remains); a start that changes nothing
// keeps it.
func TestStartsResetsAndDeletesDropTheWindow(t *testing.T) {
	// windowItems counts the shard's window chunk items (-1: the store has
	// no such items to count).
	type setup func(t *testing.T) (s lease.Store, windowItems func() int)
	stores := []struct {
		name  string
		setup setup
	}{
		{"memory", func(t *testing.T) (lease.Store, func() int) {
			return memoryFactory(t, time.Now), func() int { return -1 }
		}},
		{"dynamo", func(t *testing.T) (lease.Store, func() int) {
			client := testaws.Dynamo(t)
			table := testaws.Name(t)
			must(t, lease.CreateTable(t.Context(), client, table))
			s, err := lease.NewDynamoStore(client, table)
			must(t, err)
			return s, func() int {
				n := 0
				p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
				for p.HasMorePages() {
					page, err := p.NextPage(t.Context())
					must(t, err)
					for _, item := range page.Items {
						k := item["lease_key"].(*types.AttributeValueMemberS).Value
						if strings.HasPrefix(k, lease.Key(stream, "s1")+"#window#") {
							n++
						}
					}
				}
				return n
			}
		}},
	}
	cases := []struct {
		name string
		drop func(ctx context.Context, s lease.Store) error
		kept bool
	}{
		{"NewStart", func(ctx context.Context, s lease.Store) error {
			ok, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g2", Order: 2})
			if err == nil && !ok {
				err = errors.New("set start recorded nothing")
			}
			return err
		}, false},
		{"StartOfAnEarlierGenerationChangesNothing", func(ctx context.Context, s lease.Store) error {
			ok, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g0", Order: 1})
			if err == nil && ok {
				err = errors.New("set start of an earlier generation recorded it")
			}
			return err
		}, true},
		{"Reset", func(ctx context.Context, s lease.Store) error {
			l, err := s.Reset(ctx, stream, "s1", "horizon", true)
			if err != nil {
				return err
			}
			row, err := s.Get(ctx, stream, "s1")
			if err != nil {
				return err
			}
			if l.Start != row.Start || l.StartApplied != row.StartApplied || l.Counter != row.Counter || l.Revoked != row.Revoked || l.Owner != row.Owner || l.Checkpoint != row.Checkpoint {
				return fmt.Errorf("reset returned %+v, the row reads %+v", l, row)
			}
			return nil
		}, false},
		{"Delete", func(ctx context.Context, s lease.Store) error {
			row, err := s.Get(ctx, stream, "s1")
			if err != nil {
				return err
			}
			return s.Delete(ctx, stream, "s1", row.Counter, row.Incarnation)
		}, false},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					ctx := t.Context()
					s, windowItems := st.setup(t)
					_, err := s.SetStart(ctx, stream, "s1", lease.Start{Position: "horizon", Generation: "g1", Order: 1})
					must(t, err)
					noErr(t)(s.Take(ctx, stream, "s1", "A"))
					w := window("100", bytes.Repeat([]byte("x"), 400<<10)) // two chunks
					must(t, s.CheckpointWindow(ctx, stream, "s1", "A", window("90", []byte(`{}`))))
					must(t, s.CheckpointWindow(ctx, stream, "s1", "A", w))
					if n := windowItems(); n != -1 && n != 2 {
						t.Fatalf("%d window items before, want 2 (the replaced version's deleted)", n)
					}
					must(t, c.drop(ctx, s))
					got, err := s.GetWindow(ctx, stream, "s1")
					n := windowItems()
					switch {
					case c.kept:
						must(t, err)
						sameWindow(t, got, w)
						if n != -1 && n != 2 {
							t.Fatalf("%d window items, want the 2 of the kept window", n)
						}
					case !errors.Is(err, lease.ErrNotFound):
						t.Fatalf("get window after = seq %q (%d bytes), %v; want ErrNotFound", got.Seq, len(got.State), err)
					case n > 0:
						t.Fatalf("%d window items remain, want none", n)
					}
				})
			}
		})
	}
}

// TestWindowWithAMissingChunkIsUnreadable: a row naming a window whose
// chunk item is gone reads as ErrWindowUnreadable (a reader restarts the
// window), not as an error of the store.
func TestWindowWithAMissingChunkIsUnreadable(t *testing.T) {
	ctx := t.Context()
	client := testaws.Dynamo(t)
	table := testaws.Name(t)
	must(t, lease.CreateTable(ctx, client, table))
	s, err := lease.NewDynamoStore(client, table)
	must(t, err)
	noErr(t)(s.Take(ctx, stream, "s1", "A"))
	must(t, s.CheckpointWindow(ctx, stream, "s1", "A", window("100", bytes.Repeat([]byte("x"), 400<<10))))
	row, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: lease.Key(stream, "s1")}}, ConsistentRead: aws.Bool(true)})
	must(t, err)
	ref := row.Item["window_ref"].(*types.AttributeValueMemberS).Value
	_, err = client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: lease.Key(stream, "s1") + "#window#" + ref + "#1"}}})
	must(t, err)
	if _, err := s.GetWindow(ctx, stream, "s1"); !errors.Is(err, lease.ErrWindowUnreadable) {
		t.Fatalf("get window with a chunk missing = %v, want ErrWindowUnreadable", err)
	}
}
