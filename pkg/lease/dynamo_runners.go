package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// hbRow is a runner's heartbeat row as stored.
type hbRow struct {
	Key     string `dynamodbav:"lease_key"`
	Stream  string `dynamodbav:"runner_stream"`
	Runner  string `dynamodbav:"runner_id"`
	Host    string `dynamodbav:"runner_host,omitempty"`
	PID     int    `dynamodbav:"runner_pid,omitempty"`
	Leases  int    `dynamodbav:"runner_leases"`
	Counter int64  `dynamodbav:"runner_counter"`
	BeatAt  int64  `dynamodbav:"runner_beat_at,omitempty"`
}

func (r hbRow) heartbeat() Heartbeat {
	hb := Heartbeat{Runner: r.Runner, Host: r.Host, PID: r.PID, Leases: r.Leases, Counter: r.Counter}
	if r.BeatAt != 0 {
		hb.BeatAt = time.UnixMilli(r.BeatAt)
	}
	return hb
}

func keyS(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: key}}
}

// Beat implements HeartbeatStore: one update of the runner's row (creating it if
// needed), then one of the stream's runners row (adding the runner to its
// set, which changes nothing when it is there). Both are written at every
// beat, so a runner that a watcher took off the set while it was slow is
// listed again by its next beat.
func (s *DynamoStore) Beat(ctx context.Context, stream string, hb Heartbeat) (Heartbeat, error) {
	if err := checkBeat(stream, hb); err != nil {
		return Heartbeat{}, err
	}
	key := runnerKey(stream, hb.Runner)
	upd := expression.Set(expression.Name(attrRunnerStream), expression.Value(stream)).
		Set(expression.Name(attrRunnerID), expression.Value(hb.Runner)).
		Set(expression.Name(attrRunnerHost), expression.Value(hb.Host)).
		Set(expression.Name(attrRunnerPID), expression.Value(hb.PID)).
		Set(expression.Name(attrRunnerLeases), expression.Value(hb.Leases)).
		Set(expression.Name(attrRunnerBeatAt), expression.Value(ms(hb.BeatAt))).
		Add(expression.Name(attrRunnerCounter), expression.Value(1))
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return Heartbeat{}, fmt.Errorf("beat %s: build expression: %w", key, err)
	}
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyS(key),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return Heartbeat{}, fmt.Errorf("beat %s: %w", key, err)
	}
	var r hbRow
	if err := attributevalue.UnmarshalMap(out.Attributes, &r); err != nil {
		return Heartbeat{}, fmt.Errorf("beat %s: decode: %w", key, err)
	}
	expr, err = expression.NewBuilder().WithUpdate(
		expression.Add(expression.Name(attrRunnerIDs), expression.Value(&types.AttributeValueMemberSS{Value: []string{hb.Runner}})),
	).Build()
	if err != nil {
		return Heartbeat{}, fmt.Errorf("beat %s: build expression: %w", runnersKey(stream), err)
	}
	if _, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyS(runnersKey(stream)),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}); err != nil {
		return Heartbeat{}, fmt.Errorf("beat %s: %w", runnersKey(stream), err)
	}
	return r.heartbeat(), nil
}

// Runners implements HeartbeatStore: one GetItem of the stream's runners row, then
// one BatchGetItem per 100 runners.
func (s *DynamoStore) Runners(ctx context.Context, stream string) ([]Heartbeat, error) {
	if err := checkName("stream", stream); err != nil {
		return nil, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: keyS(runnersKey(stream)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", runnersKey(stream), err)
	}
	set, _ := out.Item[attrRunnerIDs].(*types.AttributeValueMemberSS)
	if set == nil {
		return nil, nil
	}
	byID := make(map[string]Heartbeat, len(set.Value))
	keys := make([]map[string]types.AttributeValue, 0, len(set.Value))
	for _, id := range set.Value {
		byID[id] = Heartbeat{Runner: id}
		keys = append(keys, keyS(runnerKey(stream, id)))
	}
	err = s.batchGet(ctx, keys, func(item map[string]types.AttributeValue) error {
		var r hbRow
		if err := attributevalue.UnmarshalMap(item, &r); err != nil {
			return fmt.Errorf("decode heartbeat row: %w", err)
		}
		if _, listed := byID[r.Runner]; listed {
			byID[r.Runner] = r.heartbeat()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get heartbeat rows of %s: %w", stream, err)
	}
	hs := make([]Heartbeat, 0, len(byID))
	for _, hb := range byID {
		hs = append(hs, hb)
	}
	sortByRunner(hs)
	return hs, nil
}

// Leave implements HeartbeatStore: a conditional delete of the runner's row, then
// the runner taken off the stream's runners row.
func (s *DynamoStore) Leave(ctx context.Context, stream, runner string, counter int64) error {
	if err := checkLeave(stream, runner, counter); err != nil {
		return err
	}
	key := runnerKey(stream, runner)
	cond := expression.AttributeNotExists(expression.Name(attrRunnerCounter))
	if counter > 0 {
		cond = expression.Or(expression.AttributeNotExists(expression.Name(attrKey)),
			expression.Name(attrRunnerCounter).Equal(expression.Value(counter)))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("leave %s: build expression: %w", key, err)
	}
	_, err = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyS(key),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return conflict(err, "leave", key, runner, ErrHeld)
	}
	expr, err = expression.NewBuilder().
		WithCondition(expression.AttributeExists(expression.Name(attrKey))).
		WithUpdate(expression.Delete(expression.Name(attrRunnerIDs), expression.Value(&types.AttributeValueMemberSS{Value: []string{runner}}))).
		Build()
	if err != nil {
		return fmt.Errorf("leave %s: build expression: %w", runnersKey(stream), err)
	}
	_, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyS(runnersKey(stream)),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) { // no runners row: nothing to take the runner off
		return fmt.Errorf("leave %s: %w", runnersKey(stream), err)
	}
	return nil
}
