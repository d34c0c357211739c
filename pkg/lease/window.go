package lease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxWindowState is the largest state a tumbling window may carry: 1 MB,
// as Lambda's Kinesis trigger allows per shard.
const MaxWindowState = 1 << 20

// Window is a shard's tumbling window as its reader last recorded it: the
// window's bounds, the state its target returned (JSON), and the checkpoint
// that state belongs to. A store writes it in the same conditional write as
// that checkpoint (CheckpointWindow), so the state and the checkpoint never
// disagree on the row; a checkpoint written without it (Checkpoint, a reset,
// a new start) leaves Seq behind the row's checkpoint, and a reader then
// starts a fresh window rather than apply a state to records it does not
// describe.
type Window struct {
	// Seq is the checkpoint the state belongs to: every record up to it is
	// folded into State (or given up); none after it is.
	Seq string
	// Start and End bound the window (End excluded), by the records'
	// arrival times.
	Start, End time.Time
	// State is the JSON the target returned for the window, at most
	// MaxWindowState bytes; nil once Closed.
	State []byte
	// Closed: the window's final invocation succeeded and its state was
	// dropped; the next record opens a new window.
	Closed bool
}

func checkWindow(stream, shardID, owner string, w Window) error {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return err
	}
	if err := checkSeq(w.Seq); err != nil {
		return err
	}
	switch {
	case len(w.State) > MaxWindowState:
		return &InvalidError{Field: "window state", Value: fmt.Sprintf("%d bytes", len(w.State)), Want: fmt.Sprintf("at most %d bytes", MaxWindowState)}
	case !w.End.After(w.Start):
		return &InvalidError{Field: "window", Value: fmt.Sprintf("%s to %s", w.Start.UTC().Format(time.RFC3339), w.End.UTC().Format(time.RFC3339)), Want: "an end after its start"}
	}
	return nil
}

func cloneWindow(w Window) Window {
	w.State = bytes.Clone(w.State)
	return w
}

// CheckpointWindow implements HolderStore.
func (m *MemoryStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w Window) error {
	if err := checkWindow(stream, shardID, owner, w); err != nil {
		return err
	}
	_, err := m.update(ctx, "checkpoint window", stream, shardID, owner, w.Seq, func(l *Lease) error {
		l.Checkpoint = w.Seq
		l.StartApplied = true
		m.windows[Key(stream, shardID)] = cloneWindow(w) // under m.mu, as the row
		return nil
	})
	return err
}

// GetWindow implements WindowReader.
func (m *MemoryStore) GetWindow(ctx context.Context, stream, shardID string) (Window, error) {
	if err := checkKey(stream, shardID); err != nil {
		return Window{}, err
	}
	if err := ctx.Err(); err != nil {
		return Window{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.windows[Key(stream, shardID)]
	if !ok {
		return Window{}, fmt.Errorf("get window of %s: %w", Key(stream, shardID), ErrNotFound)
	}
	return cloneWindow(w), nil
}

// A window lives in DynamoDB beside its lease row, never in it (the
// coordinator reads the rows often; a state may be 1 MB, and an item at most
// 400 KB): in items keyed "<stream>:<shard>#window#<version>#<i>", a fresh
// version for every write, the state cut in chunks of windowChunk bytes. The
// lease row names the live version (window_ref, window_chunks), set in the
// conditional write that moves the checkpoint. The chunks are written first
// and are unreachable until that write names them, so a refused or lost
// write leaves the live window as it was: no mismatch is possible.
const (
	attrWindowRef    = "window_ref"
	attrWindowChunks = "window_chunks"
	attrWindowSeq    = "window_seq"
	attrWindowStart  = "window_start" // epoch milliseconds
	attrWindowEnd    = "window_end"   // epoch milliseconds
	attrWindowClosed = "window_closed"
	attrWindowData   = "window_data"

	// windowChunk is the state a chunk item holds: with its key and
	// attributes, well under DynamoDB's 400 KB item limit.
	windowChunk = 350 << 10
)

func windowKey(stream, shardID, version string, i int) map[string]types.AttributeValue {
	k := Key(stream, shardID) + metaSeparator + "window" + metaSeparator + version + metaSeparator + strconv.Itoa(i)
	return map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: k}}
}

func windowVersion() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func chunks(state []byte) [][]byte {
	if len(state) == 0 {
		return [][]byte{nil}
	}
	var out [][]byte
	for len(state) > 0 {
		n := min(len(state), windowChunk)
		out = append(out, state[:n])
		state = state[n:]
	}
	return out
}

// CheckpointWindow implements HolderStore: the window's chunk items under a fresh
// version, then one conditional update of the lease row that moves the
// checkpoint to w.Seq and names that version; then the previous version's
// items are deleted (best effort). A refused update deletes the new items
// only when the row does not name them: a retry of a write that landed is
// refused too, and its items are the live window.
func (s *DynamoStore) CheckpointWindow(ctx context.Context, stream, shardID, owner string, w Window) error {
	if err := checkWindow(stream, shardID, owner, w); err != nil {
		return err
	}
	key := Key(stream, shardID)
	version := windowVersion()
	parts := chunks(w.State)
	for i, p := range parts {
		item := windowKey(stream, shardID, version, i)
		if i == 0 {
			item[attrWindowSeq] = &types.AttributeValueMemberS{Value: w.Seq}
			item[attrWindowStart] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ms(w.Start), 10)}
			item[attrWindowEnd] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ms(w.End), 10)}
			item[attrWindowClosed] = &types.AttributeValueMemberBOOL{Value: w.Closed}
			item[attrWindowChunks] = &types.AttributeValueMemberN{Value: strconv.Itoa(len(parts))}
		}
		if len(p) > 0 {
			item[attrWindowData] = &types.AttributeValueMemberB{Value: p}
		}
		if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
			s.deleteWindow(ctx, stream, shardID, version, i)
			return fmt.Errorf("checkpoint window %s: put chunk %d: %w", key, i, err)
		}
	}
	upd := setCheckpoint(expression.UpdateBuilder{}, w.Seq).
		Set(expression.Name(attrWindowRef), expression.Value(version)).
		Set(expression.Name(attrWindowChunks), expression.Value(len(parts)))
	out, err := s.updateItem(ctx, "checkpoint window", stream, shardID, forward(writableBy(owner), w.Seq), upd, types.ReturnValueUpdatedOld)
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return fmt.Errorf("checkpoint window %s: %w", key, err)
		}
		// Refused. An earlier attempt of this very write may have landed
		// (its answer lost, the SDK retried): then the row names these
		// items and they must stay. They are deleted only when the row, as
		// the refusal returned it (or as read again where the table
		// returns none), names another version; when that cannot be told,
		// they are left (an item no row names is never read).
		ref, known := namedVersion(ccf.Item)
		if !known {
			r, rerr := s.windowRef(context.WithoutCancel(ctx), stream, shardID)
			ref, known = r, rerr == nil
		}
		if known && ref == version {
			return nil
		}
		if known {
			s.deleteWindow(context.WithoutCancel(ctx), stream, shardID, version, len(parts))
		}
		refusal := conflict(err, "checkpoint window", key, owner, ErrNotOwner)
		cur, cerr := s.refused(ctx, refusal, stream, shardID, owner)
		if cerr != nil {
			return cerr
		}
		return behind(refusal, cur)
	}
	var old struct {
		Ref    string `dynamodbav:"window_ref"`
		Chunks int    `dynamodbav:"window_chunks"`
	}
	if err := attributevalue.UnmarshalMap(out.Attributes, &old); err == nil && old.Ref != "" && old.Ref != version {
		s.deleteWindow(context.WithoutCancel(ctx), stream, shardID, old.Ref, old.Chunks)
	}
	return nil
}

// namedVersion is the window version a row returned with a refusal names
// ("" for none); known is false when the refusal returned no row.
func namedVersion(item map[string]types.AttributeValue) (ref string, known bool) {
	if len(item) == 0 {
		return "", false
	}
	var r struct {
		Ref string `dynamodbav:"window_ref"`
	}
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return "", false
	}
	return r.Ref, true
}

// windowRef reads the window version the row names ("" for none),
// strongly consistent.
func (s *DynamoStore) windowRef(ctx context.Context, stream, shardID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: keyOf(stream, shardID), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(attrWindowRef)})
	if err != nil {
		return "", err
	}
	var ref struct {
		Ref string `dynamodbav:"window_ref"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &ref); err != nil {
		return "", err
	}
	return ref.Ref, nil
}

// deleteWindow removes the first n chunk items of a window version, best
// effort: an item left behind is never read again (no row names it).
func (s *DynamoStore) deleteWindow(ctx context.Context, stream, shardID, version string, n int) {
	for i := range n {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: windowKey(stream, shardID, version, i)})
		cancel()
	}
}

// dropWindow makes a row name no window.
func dropWindow(upd expression.UpdateBuilder) expression.UpdateBuilder {
	return upd.Remove(expression.Name(attrWindowRef)).Remove(expression.Name(attrWindowChunks))
}

// deleteNamedWindow deletes the chunk items of the window old, a row as it
// was before a write that dropped its window (a new start, a reset, a
// delete), named; best effort, as deleteWindow.
func (s *DynamoStore) deleteNamedWindow(ctx context.Context, stream, shardID string, old map[string]types.AttributeValue) {
	var ref struct {
		Ref    string `dynamodbav:"window_ref"`
		Chunks int    `dynamodbav:"window_chunks"`
	}
	if err := attributevalue.UnmarshalMap(old, &ref); err == nil && ref.Ref != "" {
		s.deleteWindow(context.WithoutCancel(ctx), stream, shardID, ref.Ref, ref.Chunks)
	}
}

// GetWindow implements WindowReader: the lease row (strongly consistent) for the
// live version, then its chunk items.
func (s *DynamoStore) GetWindow(ctx context.Context, stream, shardID string) (Window, error) {
	if err := checkKey(stream, shardID); err != nil {
		return Window{}, err
	}
	key := Key(stream, shardID)
	get := func(k map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: k, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("get window of %s: %w", key, err)
		}
		return out.Item, nil
	}
	rowItem, err := get(keyOf(stream, shardID))
	if err != nil {
		return Window{}, err
	}
	var ref struct {
		Ref    string `dynamodbav:"window_ref"`
		Chunks int    `dynamodbav:"window_chunks"`
	}
	if err := attributevalue.UnmarshalMap(rowItem, &ref); err != nil {
		return Window{}, fmt.Errorf("get window of %s: decode row: %w", key, err)
	}
	if ref.Ref == "" || ref.Chunks < 1 {
		return Window{}, fmt.Errorf("get window of %s: %w", key, ErrNotFound)
	}
	var w Window
	for i := range ref.Chunks {
		item, err := get(windowKey(stream, shardID, ref.Ref, i))
		if err != nil {
			return Window{}, err
		}
		var c struct {
			Seq    string `dynamodbav:"window_seq"`
			Start  int64  `dynamodbav:"window_start"`
			End    int64  `dynamodbav:"window_end"`
			Closed bool   `dynamodbav:"window_closed"`
			Data   []byte `dynamodbav:"window_data"`
		}
		if len(item) == 0 {
			return Window{}, fmt.Errorf("get window of %s: chunk %d of version %s is missing: %w", key, i, ref.Ref, ErrWindowUnreadable)
		}
		if err := attributevalue.UnmarshalMap(item, &c); err != nil {
			return Window{}, fmt.Errorf("get window of %s: decode chunk %d: %v: %w", key, i, err, ErrWindowUnreadable)
		}
		if i == 0 {
			w = Window{Seq: c.Seq, Start: time.UnixMilli(c.Start), End: time.UnixMilli(c.End), Closed: c.Closed}
		}
		w.State = append(w.State, c.Data...)
	}
	return w, nil
}
