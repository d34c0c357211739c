package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of a lease row in DynamoDB.
const (
	attrKey          = "lease_key"
	attrStream       = "stream"
	attrShard        = "shard_id"
	attrOwner        = "lease_owner"
	attrExpiry       = "lease_expiry" // epoch milliseconds
	attrCounter      = "lease_counter"
	attrCheckpoint   = "checkpoint"
	attrParents      = "parent_shard_ids"
	attrStart        = "start_position"
	attrGeneration   = "generation"
	attrStartApplied = "start_applied"
	attrMillisBehind = "lease_millis_behind"
	attrLagAt        = "lease_lag_at" // epoch milliseconds
	attrGenOrder     = "generation_order"
	attrIncarnation  = "stream_incarnation" // the stream's creation, epoch milliseconds
	attrRevoked      = "lease_revoked"
	attrFence        = "lease_fence_ms"   // Lease.Fence in milliseconds
	attrWriteSeq     = "lease_write_seq"  // Lease.WriteSeq
	attrCkptOrder    = "checkpoint_order" // checkpointOrder of the checkpoint; removed by a new start
	attrFailing      = "lease_failing"    // Lease.Failing; removed by a new start

	// The generation record, a row of its own keyed "<stream>#generation".
	// It has no "stream" attribute, so List's filter never returns it.
	attrGenStream      = "generation_stream"
	attrGenID          = "generation_id"
	attrGenStart       = "generation_start"
	attrGenTip         = "generation_tip"
	attrGenSuperseded  = "generation_superseded"
	attrGenShards      = "generation_shards"
	attrGenApplied     = "generation_applied"
	attrGenRecordedAt  = "generation_recorded_at" // epoch milliseconds, the recorder's clock
	attrGenRecordedBy  = "generation_recorded_by"
	attrGenIncarnation = "generation_incarnation"
	attrGenDeployedAt  = "generation_deployed_at" // epoch milliseconds

	// A runner's heartbeat row, keyed "<stream>#runner#<id>", and the row
	// listing a stream's runners, keyed "<stream>#runners". Neither has a
	// "stream" attribute, so List's filter never returns them.
	attrRunnerStream  = "runner_stream"
	attrRunnerID      = "runner_id"
	attrRunnerHost    = "runner_host"
	attrRunnerPID     = "runner_pid"
	attrRunnerLeases  = "runner_leases"
	attrRunnerCounter = "runner_counter"
	attrRunnerBeatAt  = "runner_beat_at" // epoch milliseconds, the runner's clock
	attrRunnerIDs     = "runner_ids"     // a string set, on the stream's runners row
)

// batchGetLimit is DynamoDB's limit of keys per BatchGetItem request.
const batchGetLimit = 100

// DynamoAPI is the part of the DynamoDB client a DynamoStore uses.
type DynamoAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// DynamoStore keeps leases in a DynamoDB table whose single string hash key is
// "lease_key". Every operation is one conditional request (no read before a
// write); reads are strongly consistent. List scans the table with a filter
// on the stream, so it reads every row of every stream in the table: the
// coordinator reads the rows of listed shards with GetMany instead.
type DynamoStore struct {
	client DynamoAPI
	table  string
	opts   Options
}

var _ Store = (*DynamoStore)(nil)

// NewDynamoStore returns a store over table, which must exist (see CreateTable).
func NewDynamoStore(client DynamoAPI, table string, optFns ...func(*Options)) (*DynamoStore, error) {
	if client == nil {
		return nil, &InvalidError{Field: "client", Value: "nil", Want: "a DynamoDB client"}
	}
	if table == "" {
		return nil, &InvalidError{Field: "table", Value: table, Want: "a DynamoDB table name"}
	}
	var o Options
	for _, f := range optFns {
		f(&o)
	}
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return &DynamoStore{client: client, table: table, opts: o}, nil
}

// row is a lease row as stored.
type row struct {
	Key          string   `dynamodbav:"lease_key"`
	Stream       string   `dynamodbav:"stream"`
	ShardID      string   `dynamodbav:"shard_id"`
	Owner        string   `dynamodbav:"lease_owner,omitempty"`
	Expiry       int64    `dynamodbav:"lease_expiry,omitempty"`
	Counter      int64    `dynamodbav:"lease_counter,omitempty"`
	Checkpoint   string   `dynamodbav:"checkpoint,omitempty"`
	Parents      []string `dynamodbav:"parent_shard_ids,omitempty"`
	Start        string   `dynamodbav:"start_position,omitempty"`
	Generation   string   `dynamodbav:"generation,omitempty"`
	StartApplied bool     `dynamodbav:"start_applied,omitempty"`
	MillisBehind int64    `dynamodbav:"lease_millis_behind,omitempty"`
	LagAt        int64    `dynamodbav:"lease_lag_at,omitempty"`
	GenOrder     int64    `dynamodbav:"generation_order,omitempty"`
	Incarnation  int64    `dynamodbav:"stream_incarnation,omitempty"`
	Revoked      bool     `dynamodbav:"lease_revoked,omitempty"`
	FenceMillis  int64    `dynamodbav:"lease_fence_ms,omitempty"`
	WriteSeq     int64    `dynamodbav:"lease_write_seq,omitempty"`
	Failing      string   `dynamodbav:"lease_failing,omitempty"`
}

// genRow is a stream's generation record as stored.
type genRow struct {
	Key         string   `dynamodbav:"lease_key"`
	Stream      string   `dynamodbav:"generation_stream"`
	ID          string   `dynamodbav:"generation_id"`
	Start       string   `dynamodbav:"generation_start"`
	Configured  string   `dynamodbav:"generation_configured,omitempty"`
	Tip         string   `dynamodbav:"generation_tip,omitempty"`
	Order       int64    `dynamodbav:"generation_order"`
	Superseded  []string `dynamodbav:"generation_superseded,omitempty"`
	Shards      []string `dynamodbav:"generation_shards,omitempty"`
	Applied     bool     `dynamodbav:"generation_applied,omitempty"`
	RecordedAt  int64    `dynamodbav:"generation_recorded_at,omitempty"`
	RecordedBy  string   `dynamodbav:"generation_recorded_by,omitempty"`
	Incarnation int64    `dynamodbav:"generation_incarnation,omitempty"`
	DeployedAt  int64    `dynamodbav:"generation_deployed_at,omitempty"`
}

func decode(item map[string]types.AttributeValue) (Lease, error) {
	var r row
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return Lease{}, fmt.Errorf("decode lease row: %w", err)
	}
	l := Lease{
		Stream: r.Stream, ShardID: r.ShardID, Owner: r.Owner, Counter: r.Counter,
		Checkpoint: r.Checkpoint, ParentShardIDs: r.Parents,
		Start: r.Start, Generation: r.Generation, StartApplied: r.StartApplied,
		MillisBehind: r.MillisBehind, GenerationOrder: r.GenOrder, Incarnation: r.Incarnation,
		Revoked:  r.Revoked && r.Owner != "", // a revoked mark outlives its owner only until the next take
		Fence:    time.Duration(r.FenceMillis) * time.Millisecond,
		WriteSeq: r.WriteSeq,
		Failing:  r.Failing,
	}
	if r.Expiry != 0 {
		l.Expiry = time.UnixMilli(r.Expiry)
	}
	if r.LagAt != 0 {
		l.LagAt = time.UnixMilli(r.LagAt)
	}
	return l, nil
}

func keyOf(stream, shardID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: Key(stream, shardID)}}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// conflict turns a failed condition into a lease error; other errors pass
// through wrapped with the operation.
func conflict(err error, op, key, owner string, sentinel error) error {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("%s %s: %w", op, key, err)
	}
	ce := &ConflictError{Op: op, Key: key, Owner: owner, Err: sentinel}
	if len(ccf.Item) > 0 {
		if cur, derr := decode(ccf.Item); derr == nil {
			ce.Current = &cur
		}
	}
	return ce
}

func (s *DynamoStore) update(ctx context.Context, op, stream, shardID, owner string, c cond, upd expression.UpdateBuilder, sentinel error, rv types.ReturnValue) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.updateItem(ctx, op, stream, shardID, c, upd, rv)
	if err != nil {
		return nil, conflict(err, op, Key(stream, shardID), owner, sentinel)
	}
	return out, nil
}

// updateItem sends one conditional UpdateItem asking for the row as it was
// when the condition failed; its error is the client's, untranslated.
func (s *DynamoStore) updateItem(ctx context.Context, op, stream, shardID string, c cond, upd expression.UpdateBuilder, rv types.ReturnValue) (*dynamodb.UpdateItemOutput, error) {
	ce, err := c.build()
	if err != nil {
		return nil, fmt.Errorf("%s %s: build expression: %w", op, Key(stream, shardID), err)
	}
	condition, update, names, values, err := ce.with(upd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: build expression: %w", op, Key(stream, shardID), err)
	}
	return s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(stream, shardID),
		ConditionExpression:                 condition,
		UpdateExpression:                    update,
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        rv,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
}

func heldBy(owner string) cond { return eq(attrOwner, owner) }

// revoke marks the holder's lease revoked (see Lease.Revoked). It is set
// whether or not the row has an owner (an update cannot tell); on a row
// without one it means nothing and the next take removes it.
func revoke(upd expression.UpdateBuilder) expression.UpdateBuilder {
	return upd.Set(expression.Name(attrRevoked), expression.Value(true))
}

// writableBy is true while owner holds the row and its lease is not
// revoked: what a renew, checkpoint or pin needs.
func writableBy(owner string) cond {
	return and(heldBy(owner), notExists(attrRevoked))
}

// noFence is true when the row records no fence (or a fence of 0).
func noFence() cond {
	return or(notExists(attrFence), eq(attrFence, 0))
}

// forward adds to cond that the row's checkpoint may become seq:
// checkpoints only move forward, and ShardEnd is last, until a new start.
func forward(c cond, seq string) cond {
	if seq == ShardEnd {
		return c
	}
	return and(c,
		or(notExists(attrCheckpoint), ne(attrCheckpoint, ShardEnd)),
		or(notExists(attrCkptOrder), atMost(attrCkptOrder, checkpointOrder(seq))))
}

// setCheckpoint records seq and its order.
func setCheckpoint(upd expression.UpdateBuilder, seq string) expression.UpdateBuilder {
	return upd.Set(expression.Name(attrCheckpoint), expression.Value(seq)).
		Set(expression.Name(attrCkptOrder), expression.Value(checkpointOrder(seq))).
		Set(expression.Name(attrStartApplied), expression.Value(true))
}

func fenceMillis(d time.Duration) int64 { return (d + time.Millisecond - 1).Milliseconds() }

// counterIs is true when the row's counter is c (a row never taken has
// none: counter 0).
func counterIs(c int64) cond {
	if c == 0 {
		return notExists(attrCounter)
	}
	return eq(attrCounter, c)
}

// takeCond is a take's condition: the row has no owner (and no fence; not
// for a loop's run), or is owner's (or its loop's, without a fence) and not
// a revoked child; or its counter is the one the taker saw stand still
// (IfCounter); and it is unchanged (IfUnchanged).
func takeCond(owner string, o takeOptions) cond {
	mine := heldBy(owner)
	if o.family != "" {
		mine = or(mine, and(heldBy(o.family), noFence()))
	}
	mine = and(mine, or(notExists(attrRevoked), notExists(attrParents)))
	// A loop's run never takes a free row: its loop read the shard to its
	// end or gave it up, and a new start may have opened it again with its
	// parents, or before descendants still held under an older start; only
	// a coordinator checks both. A row that does not exist (deleted as
	// stale) it takes afresh.
	c := or(notExists(attrKey), mine)
	if o.family == "" {
		c = or(and(notExists(attrOwner), noFence()), mine)
	}
	if o.ifCounter {
		c = or(c, counterIs(o.counter))
	}
	if o.ifUnchanged {
		c = and(c, counterIs(o.unchanged))
	}
	if o.incarnation != 0 {
		// Never a row of a later incarnation of the stream (see
		// WithIncarnation).
		c = and(c, or(notExists(attrIncarnation), atMost(attrIncarnation, o.incarnation)))
	}
	return c
}

// Take implements HolderStore.
func (s *DynamoStore) Take(ctx context.Context, stream, shardID, owner string, opts ...TakeOption) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	o := applyTake(opts)
	now := s.opts.Clock()
	// The row's holder (or its loop) may take it back, unless it is a
	// revoked child: a new start may have opened a parent again, and only
	// a coordinator checks the parents (see Lease.Revoked).
	c := takeCond(owner, o)
	upd := expression.Set(expression.Name(attrOwner), expression.Value(owner)).
		Remove(expression.Name(attrRevoked)).
		Remove(expression.Name(attrWriteSeq)).
		Set(expression.Name(attrFence), expression.Value(fenceMillis(o.fence))).
		Set(expression.Name(attrExpiry), expression.Value(ms(now.Add(s.opts.Duration)))).
		Add(expression.Name(attrCounter), expression.Value(1)).
		Set(expression.Name(attrStream), expression.Value(stream)).
		Set(expression.Name(attrShard), expression.Value(shardID))
	if len(o.parents) > 0 {
		upd = upd.Set(expression.Name(attrParents), expression.Value(o.parents))
	}
	if o.incarnation != 0 {
		upd = upd.Set(expression.Name(attrIncarnation), expression.Value(o.incarnation))
	}
	out, err := s.update(ctx, "take", stream, shardID, owner, c, upd, ErrHeld, types.ReturnValueAllNew)
	if err != nil {
		return Lease{}, err
	}
	return decode(out.Attributes)
}

// Renew implements HolderStore. A refused renewal is told apart (another owner,
// an earlier attempt of it that landed, a checkpoint behind the row's) by
// the row the refusal returns, or by reading it again where the table
// returns none.
func (s *DynamoStore) Renew(ctx context.Context, stream, shardID, owner string, rn Renewal) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkRenewal(rn); err != nil {
		return Lease{}, err
	}
	now := s.opts.Clock()
	c := writableBy(owner)
	upd := expression.Set(expression.Name(attrExpiry), expression.Value(ms(now.Add(s.opts.Duration)))).
		Add(expression.Name(attrCounter), expression.Value(1)).
		Set(expression.Name(attrFence), expression.Value(fenceMillis(rn.Fence)))
	if rn.Seq > 0 {
		c = and(c, or(notExists(attrWriteSeq), less(attrWriteSeq, rn.Seq)))
		upd = upd.Set(expression.Name(attrWriteSeq), expression.Value(rn.Seq))
	}
	if rn.Checkpoint != "" {
		c = forward(c, rn.Checkpoint)
		upd = setCheckpoint(upd, rn.Checkpoint)
	}
	if rn.MillisBehind != nil {
		upd = upd.Set(expression.Name(attrMillisBehind), expression.Value(*rn.MillisBehind)).
			Set(expression.Name(attrLagAt), expression.Value(ms(now)))
	}
	upd = setFailing(upd, rn.Failing)
	out, err := s.update(ctx, "renew", stream, shardID, owner, c, upd, ErrNotOwner, types.ReturnValueAllNew)
	if err != nil {
		cur, cerr := s.refused(ctx, err, stream, shardID, owner)
		switch {
		case cerr != nil:
			return Lease{}, cerr
		case rn.Seq > 0 && cur.WriteSeq >= rn.Seq:
			return cur, nil // an earlier attempt of this renewal landed
		}
		return Lease{}, behind(err, cur)
	}
	return decode(out.Attributes)
}

// refused looks at a write refused while owner's: it returns the row as
// the refusal found it (read again when the table did not return it), or
// err itself when it was not a refusal, or ErrNotOwner when the row is
// another owner's or revoked. Otherwise the caller tells why.
func (s *DynamoStore) refused(ctx context.Context, err error, stream, shardID, owner string) (Lease, error) {
	var ce *ConflictError
	if !errors.As(err, &ce) {
		return Lease{}, err
	}
	if ce.Current == nil {
		cur, gerr := s.Get(ctx, stream, shardID)
		if gerr != nil && !errors.Is(gerr, ErrNotFound) {
			return Lease{}, fmt.Errorf("%w (reading the row again: %v)", err, gerr)
		}
		if gerr == nil {
			ce.Current = &cur
		}
	}
	if ce.Current == nil || ce.Current.Owner != owner || ce.Current.Revoked {
		return Lease{}, ce
	}
	return *ce.Current, nil
}

// behind turns a refusal of a live owner's checkpoint into ErrBehind.
func behind(err error, cur Lease) error {
	var ce *ConflictError
	if errors.As(err, &ce) {
		c := *ce
		c.Err, c.Current = ErrBehind, &cur
		return &c
	}
	return err
}

// Checkpoint implements HolderStore.
func (s *DynamoStore) Checkpoint(ctx context.Context, stream, shardID, owner, seq string, opts ...CheckpointOption) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkSeq(seq); err != nil {
		return Lease{}, err
	}
	o := applyCheckpoint(opts)
	if o.millisBehind != nil {
		if err := checkLag(*o.millisBehind); err != nil {
			return Lease{}, err
		}
	}
	return s.checkpoint(ctx, stream, shardID, owner, seq, o.millisBehind)
}

func (s *DynamoStore) checkpoint(ctx context.Context, stream, shardID, owner, seq string, millisBehind *int64) (Lease, error) {
	upd := setCheckpoint(expression.UpdateBuilder{}, seq)
	if millisBehind != nil {
		upd = upd.Set(expression.Name(attrMillisBehind), expression.Value(*millisBehind)).
			Set(expression.Name(attrLagAt), expression.Value(ms(s.opts.Clock())))
	}
	out, err := s.update(ctx, "checkpoint", stream, shardID, owner, forward(writableBy(owner), seq), upd, ErrNotOwner, types.ReturnValueAllNew)
	if err != nil {
		cur, cerr := s.refused(ctx, err, stream, shardID, owner)
		if cerr != nil {
			return Lease{}, cerr
		}
		return Lease{}, behind(err, cur)
	}
	return decode(out.Attributes)
}

// Pin implements HolderStore.
func (s *DynamoStore) Pin(ctx context.Context, stream, shardID, owner, start string) (Lease, error) {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return Lease{}, err
	}
	if err := checkReset(stream, shardID, start); err != nil {
		return Lease{}, err
	}
	upd := expression.Set(expression.Name(attrStart), expression.Value(start)).
		Set(expression.Name(attrStartApplied), expression.Value(false))
	out, err := s.update(ctx, "pin", stream, shardID, owner, writableBy(owner), upd, ErrNotOwner, types.ReturnValueAllNew)
	if err != nil {
		return Lease{}, err
	}
	return decode(out.Attributes)
}

// setFailing records f as the row's Failing: nothing when nil, a removal
// when empty.
func setFailing(upd expression.UpdateBuilder, f *string) expression.UpdateBuilder {
	switch {
	case f == nil:
		return upd
	case *f == "":
		return upd.Remove(expression.Name(attrFailing))
	}
	return upd.Set(expression.Name(attrFailing), expression.Value(*f))
}

// Release implements HolderStore.
func (s *DynamoStore) Release(ctx context.Context, stream, shardID, owner string, ho Handover) error {
	if err := checkOwned(stream, shardID, owner); err != nil {
		return err
	}
	if err := checkHandover(ho); err != nil {
		return err
	}
	upd := expression.Set(expression.Name(attrFence), expression.Value(fenceMillis(ho.Fence))).
		Add(expression.Name(attrCounter), expression.Value(1))
	if ho.To == "" {
		upd = upd.Remove(expression.Name(attrOwner)).Remove(expression.Name(attrExpiry)).Remove(expression.Name(attrRevoked))
	} else {
		upd = upd.Set(expression.Name(attrOwner), expression.Value(ho.To))
	}
	upd = setFailing(upd, ho.Failing)
	_, err := s.update(ctx, "release", stream, shardID, owner, heldBy(owner), upd, ErrNotOwner, types.ReturnValueNone)
	return err
}

// Get implements HolderStore.
func (s *DynamoStore) Get(ctx context.Context, stream, shardID string) (Lease, error) {
	if err := checkKey(stream, shardID); err != nil {
		return Lease{}, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyOf(stream, shardID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Lease{}, fmt.Errorf("get %s: %w", Key(stream, shardID), err)
	}
	if len(out.Item) == 0 {
		return Lease{}, notFound(stream, shardID)
	}
	return decode(out.Item)
}

// GetMany implements CoordinatorStore. It sends one BatchGetItem per 100 keys and
// retries unprocessed keys with a short backoff until ctx ends.
func (s *DynamoStore) GetMany(ctx context.Context, stream string, shardIDs []string) (map[string]Lease, error) {
	if err := checkMany(stream, shardIDs); err != nil {
		return nil, err
	}
	keys := make([]map[string]types.AttributeValue, 0, len(shardIDs))
	for _, id := range shardIDs {
		keys = append(keys, keyOf(stream, id))
	}
	out := make(map[string]Lease, len(shardIDs))
	err := s.batchGet(ctx, keys, func(item map[string]types.AttributeValue) error {
		l, err := decode(item)
		if err == nil {
			out[l.ShardID] = l
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("batch get %s: %w", stream, err)
	}
	return out, nil
}

// batchGet reads the items of keys (each once), strongly consistent, with
// one BatchGetItem per 100 keys, retrying unprocessed keys with a short
// backoff until ctx ends, and hands each item found to got.
func (s *DynamoStore) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, got func(map[string]types.AttributeValue) error) error {
	seen := make(map[string]bool, len(keys))
	var todo []map[string]types.AttributeValue
	for _, k := range keys {
		id := k[attrKey].(*types.AttributeValueMemberS).Value
		if !seen[id] {
			seen[id] = true
			todo = append(todo, k)
		}
	}
	for len(todo) > 0 {
		n := min(len(todo), batchGetLimit)
		pending := todo[:n]
		todo = todo[n:]
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > 0 {
				if err := sleep(ctx, backoff(attempt)); err != nil {
					return err
				}
			}
			res, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{s.table: {Keys: pending, ConsistentRead: aws.Bool(true)}},
			})
			if err != nil {
				return err
			}
			for _, item := range res.Responses[s.table] {
				if err := got(item); err != nil {
					return err
				}
			}
			pending = res.UnprocessedKeys[s.table].Keys
		}
	}
	return nil
}

// List implements CoordinatorStore.
func (s *DynamoStore) List(ctx context.Context, stream string) ([]Lease, error) {
	if err := checkName("stream", stream); err != nil {
		return nil, err
	}
	expr, err := expression.NewBuilder().WithFilter(expression.Name(attrStream).Equal(expression.Value(stream))).Build()
	if err != nil {
		return nil, fmt.Errorf("list %s: build expression: %w", stream, err)
	}
	var out []Lease
	p := dynamodb.NewScanPaginator(s.client, &dynamodb.ScanInput{
		TableName:                 aws.String(s.table),
		FilterExpression:          expr.Filter(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", stream, err)
		}
		for _, item := range page.Items {
			l, err := decode(item)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		}
	}
	sortByShard(out)
	return out, nil
}

// startCond is when SetStart writes st: over a lower generation order (or
// no row, with IfAbsent; and no checkpoint, with IfUnread), of the same
// incarnation or of none recorded; over a row of an earlier incarnation of
// the stream whatever its order; never over a row of a later incarnation
// (st is for a stream deleted since).
func startCond(st Start) cond {
	c := or(notExists(attrGenOrder), less(attrGenOrder, st.Order))
	if st.IfFrom {
		c = and(exists(attrKey), fromCond(st.From))
	}
	if st.IfAbsent {
		c = notExists(attrKey)
	}
	if st.IfUnread {
		c = and(c, or(notExists(attrCheckpoint), eq(attrCheckpoint, "")))
	}
	if st.Incarnation == 0 {
		return c
	}
	return or(and(c, or(notExists(attrIncarnation), eq(attrIncarnation, st.Incarnation))), less(attrIncarnation, st.Incarnation))
}

// SetStart implements CoordinatorStore.
func (s *DynamoStore) SetStart(ctx context.Context, stream, shardID string, st Start) (bool, error) {
	if err := checkStart(stream, shardID, st); err != nil {
		return false, err
	}
	if st.Keep {
		return s.keepStart(ctx, stream, shardID, st)
	}
	c := startCond(st)
	upd := expression.Set(expression.Name(attrStream), expression.Value(stream)).
		Set(expression.Name(attrShard), expression.Value(shardID)).
		Set(expression.Name(attrStart), expression.Value(st.Position)).
		Set(expression.Name(attrGeneration), expression.Value(st.Generation)).
		Set(expression.Name(attrGenOrder), expression.Value(st.Order)).
		Set(expression.Name(attrStartApplied), expression.Value(st.Finished)).
		Remove(expression.Name(attrCkptOrder)). // checkpoints may go anywhere from the new start
		Remove(expression.Name(attrFailing)).   // no failure counts before it
		Add(expression.Name(attrCounter), expression.Value(1))
	upd = revoke(upd)
	if st.Incarnation != 0 {
		upd = upd.Set(expression.Name(attrIncarnation), expression.Value(st.Incarnation))
	}
	if st.Fresh {
		upd = upd.Remove(expression.Name(attrParents)).Remove(expression.Name(attrMillisBehind)).Remove(expression.Name(attrLagAt))
	}
	switch {
	case st.Finished:
		upd = upd.Set(expression.Name(attrCheckpoint), expression.Value(ShardEnd))
	case st.ClearCheckpoint || st.Fresh:
		upd = upd.Remove(expression.Name(attrCheckpoint))
	}
	upd = dropWindow(upd) // no window describes the records after a new start
	out, err := s.update(ctx, "set start", stream, shardID, "", c, upd, ErrHeld, types.ReturnValueAllOld)
	if errors.Is(err, ErrHeld) {
		return false, nil // this generation, or a later one, is already recorded
	}
	if err != nil {
		return false, err
	}
	s.deleteNamedWindow(ctx, stream, shardID, out.Attributes)
	return true, nil
}

// fromCond: the row's order is from (Start.IfFrom), 0 standing for none.
func fromCond(from int64) cond {
	if from == 0 {
		return or(notExists(attrGenOrder), eq(attrGenOrder, from))
	}
	return eq(attrGenOrder, from)
}

// keepStart raises a row's generation and order, nothing else, while its
// order is st.From (Start.Keep).
func (s *DynamoStore) keepStart(ctx context.Context, stream, shardID string, st Start) (bool, error) {
	c := and(exists(attrKey), fromCond(st.From))
	if st.Incarnation != 0 {
		c = and(c, or(notExists(attrIncarnation), eq(attrIncarnation, st.Incarnation)))
	}
	upd := expression.Set(expression.Name(attrGeneration), expression.Value(st.Generation)).
		Set(expression.Name(attrGenOrder), expression.Value(st.Order))
	_, err := s.update(ctx, "keep start", stream, shardID, "", c, upd, ErrHeld, types.ReturnValueNone)
	if errors.Is(err, ErrHeld) {
		return false, nil // the row changed since it was read, or carries a newer order
	}
	return err == nil, err
}

// Delete implements CoordinatorStore.
func (s *DynamoStore) Delete(ctx context.Context, stream, shardID string, counter, incarnation int64) error {
	if err := checkKey(stream, shardID); err != nil {
		return err
	}
	inc := notExists(attrIncarnation)
	if incarnation != 0 {
		inc = eq(attrIncarnation, incarnation)
	}
	expr, err := or(notExists(attrKey), and(counterIs(counter), inc)).build()
	if err != nil {
		return fmt.Errorf("delete %s: build expression: %w", Key(stream, shardID), err)
	}
	var values map[string]types.AttributeValue
	if len(expr.values) > 0 {
		values = expr.values
	}
	out, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyOf(stream, shardID),
		ConditionExpression:                 aws.String(expr.text),
		ExpressionAttributeNames:            expr.names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return conflict(err, "delete", Key(stream, shardID), "", ErrHeld)
	}
	s.deleteNamedWindow(ctx, stream, shardID, out.Attributes)
	return nil
}

// GetGeneration implements CoordinatorStore.
func (s *DynamoStore) GetGeneration(ctx context.Context, stream string) (Generation, error) {
	if err := checkName("stream", stream); err != nil {
		return Generation{}, err
	}
	key := generationKey(stream)
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		return Generation{}, fmt.Errorf("get %s: %w", key, err)
	}
	if len(out.Item) == 0 {
		return Generation{}, fmt.Errorf("get generation of %s: %w", stream, ErrNotFound)
	}
	var r genRow
	if err := attributevalue.UnmarshalMap(out.Item, &r); err != nil {
		return Generation{}, fmt.Errorf("decode %s: %w", key, err)
	}
	g := Generation{ID: r.ID, Start: r.Start, Configured: r.Configured, Tip: r.Tip, Order: r.Order, Superseded: r.Superseded, Incarnation: r.Incarnation,
		Shards: r.Shards, Applied: r.Applied, RecordedBy: r.RecordedBy}
	if r.RecordedAt != 0 {
		g.RecordedAt = time.UnixMilli(r.RecordedAt)
	}
	if r.DeployedAt != 0 {
		g.DeployedAt = time.UnixMilli(r.DeployedAt)
	}
	return g, nil
}

// PutGeneration implements CoordinatorStore.
func (s *DynamoStore) PutGeneration(ctx context.Context, stream string, g Generation, prevOrder int64) error {
	if err := checkGeneration(stream, g, prevOrder); err != nil {
		return err
	}
	key := generationKey(stream)
	item, err := attributevalue.MarshalMap(genRow{Key: key, Stream: stream, ID: g.ID, Start: g.Start, Configured: g.Configured, Tip: g.Tip, Order: g.Order,
		Superseded: g.Superseded, Shards: g.Shards, Applied: g.Applied, RecordedAt: ms(g.RecordedAt),
		RecordedBy: g.RecordedBy, Incarnation: g.Incarnation})
	if err != nil {
		return fmt.Errorf("put %s: encode: %w", key, err)
	}
	if g.RecordedAt.IsZero() {
		delete(item, attrGenRecordedAt)
	}
	if !g.DeployedAt.IsZero() {
		item[attrGenDeployedAt] = &types.AttributeValueMemberN{Value: fmt.Sprint(ms(g.DeployedAt))}
	}
	cond := expression.AttributeNotExists(expression.Name(attrKey))
	if prevOrder > 0 {
		cond = expression.Name(attrGenOrder).Equal(expression.Value(prevOrder))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("put %s: build expression: %w", key, err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return &ConflictError{Op: "put generation", Key: key, Err: ErrChanged}
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Reset implements AdminStore. A refused condition is told apart (no row, or a
// live owner) by reading the row again, since not every DynamoDB
// implementation returns the old item with the failure.
func (s *DynamoStore) Reset(ctx context.Context, stream, shardID, start string, force bool) (Lease, error) {
	if err := checkReset(stream, shardID, start); err != nil {
		return Lease{}, err
	}
	c := exists(attrKey)
	if !force {
		c = and(c, notExists(attrOwner))
	}
	upd := expression.Set(expression.Name(attrStart), expression.Value(start)).
		Set(expression.Name(attrStartApplied), expression.Value(false)).
		Remove(expression.Name(attrCkptOrder)).
		Remove(expression.Name(attrFailing)).
		Add(expression.Name(attrCounter), expression.Value(1))
	upd = dropWindow(revoke(upd)) // no window describes the records after the new start
	// The row as it was, to delete the window it named; the row as it is
	// now follows from it (Lease has no field for what else changed).
	out, err := s.update(ctx, "reset", stream, shardID, "", c, upd, ErrHeld, types.ReturnValueAllOld)
	var ce *ConflictError
	if errors.As(err, &ce) {
		cur, gerr := s.Get(ctx, stream, shardID)
		switch {
		case errors.Is(gerr, ErrNotFound):
			return Lease{}, fmt.Errorf("reset %s: %w", Key(stream, shardID), ErrNotFound)
		case gerr == nil:
			ce.Current = &cur
		}
		return Lease{}, ce
	}
	if err != nil {
		return Lease{}, err
	}
	s.deleteNamedWindow(ctx, stream, shardID, out.Attributes)
	l, err := decode(out.Attributes)
	if err != nil {
		return Lease{}, err
	}
	l.Start, l.StartApplied, l.Revoked = start, false, l.Owner != ""
	l.Counter++
	return l, nil
}

// unprocessedBackoff spaces the retries of a BatchGetItem's unprocessed
// keys, which DynamoDB leaves when it throttles, with the AWS SDK's jittered
// exponential backoff (the one its retryer spaces throttled requests with),
// so that readers throttled together do not retry together.
var unprocessedBackoff = retry.NewExponentialJitterBackoff(20 * time.Second)

// backoff is the wait before retry attempt (from 1) of unprocessed keys:
// the SDK's delay, whose steps are seconds (up to 2^attempt s, then its 20 s
// maximum), taken at a twentieth, since a lease table's few keys are worth
// asking for again sooner: up to 100 ms, 200 ms, 400 ms, 800 ms, then 1 s.
func backoff(attempt int) time.Duration {
	d, err := unprocessedBackoff.BackoffDelay(attempt, nil)
	if err != nil { // no randomness to be had: the top of the step
		d = min(time.Second<<min(attempt, 5), 20*time.Second)
	}
	return d / 20
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// TableAPI is the part of the DynamoDB client CreateTable uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CreateTable creates a lease table (PAY_PER_REQUEST, hash key lease_key) for
// local runs and tests, and waits up to a minute until it is ACTIVE. A table
// that already exists is left as it is.
func CreateTable(ctx context.Context, client TableAPI, table string) error {
	if table == "" {
		return &InvalidError{Field: "table", Value: table, Want: "a DynamoDB table name"}
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return fmt.Errorf("create table %s: wait for ACTIVE: %w", table, err)
	}
	return nil
}
