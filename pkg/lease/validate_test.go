package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shardloop/shardloop/pkg/lease"
)

// refusingDynamo fails the test on any request: bad input must be caught first.
type refusingDynamo struct{ t *testing.T }

func (r refusingDynamo) fail() { r.t.Helper(); r.t.Fatal("a request was sent for invalid input") }
func (r refusingDynamo) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.fail()
	return nil, nil
}
func (r refusingDynamo) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.fail()
	return nil, nil
}
func (r refusingDynamo) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	r.fail()
	return nil, nil
}
func (r refusingDynamo) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	r.fail()
	return nil, nil
}
func (r refusingDynamo) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.fail()
	return nil, nil
}
func (r refusingDynamo) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.fail()
	return nil, nil
}

func TestInvalidInput_RefusedBeforeAnyRequest(t *testing.T) {
	ds, err := lease.NewDynamoStore(refusingDynamo{t}, "leases")
	must(t, err)
	ms, err := lease.NewMemoryStore()
	must(t, err)
	ctx := t.Context()
	cases := []struct {
		name, field string
		call        func(s lease.Store) error
	}{
		{"EmptyStream", "stream", func(s lease.Store) error { _, err := s.Take(ctx, "", "s1", "A"); return err }},
		{"ARNAsStream", "stream", func(s lease.Store) error {
			_, err := s.Take(ctx, "arn:aws:kinesis:us-east-1:1:stream/x", "s1", "A")
			return err
		}},
		{"EmptyShard", "shard id", func(s lease.Store) error { _, err := s.Renew(ctx, "st", "", "A", lease.Renewal{}); return err }},
		{"ShardWithSeparator", "shard id", func(s lease.Store) error { _, err := s.Get(ctx, "st", "a:b"); return err }},
		{"EmptyOwner", "owner", func(s lease.Store) error { return s.Release(ctx, "st", "s1", "", lease.Handover{}) }},
		{"EmptyCheckpoint", "checkpoint", func(s lease.Store) error { _, err := s.Checkpoint(ctx, "st", "s1", "A", ""); return err }},
		{"NonNumericCheckpoint", "checkpoint", func(s lease.Store) error { _, err := s.Checkpoint(ctx, "st", "s1", "A", "12x"); return err }},
		{"BadShardInBatch", "shard id", func(s lease.Store) error { _, err := s.GetMany(ctx, "st", []string{"ok", ""}); return err }},
		{"EmptyListStream", "stream", func(s lease.Store) error { _, err := s.List(ctx, ""); return err }},
		{"EmptyGeneration", "generation", func(s lease.Store) error {
			_, err := s.SetStart(ctx, "st", "s1", lease.Start{Position: "latest", Order: 1})
			return err
		}},
		{"DeleteEmptyShard", "shard id", func(s lease.Store) error { return s.Delete(ctx, "st", "", 0, 0) }},
		{"StreamWithHash", "stream", func(s lease.Store) error { _, err := s.GetGeneration(ctx, "a#b"); return err }},
		{"GenerationWithoutStart", "generation start", func(s lease.Store) error {
			return s.PutGeneration(ctx, "st", lease.Generation{ID: "g", Order: 1}, 0)
		}},
		{"PinWithoutStart", "start", func(s lease.Store) error { _, err := s.Pin(ctx, "st", "s1", "A", ""); return err }},
	}
	for _, c := range cases {
		for name, s := range map[string]lease.Store{"memory": ms, "dynamo": ds} {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				err := c.call(s)
				var ie *lease.InvalidError
				if !errors.Is(err, lease.ErrInvalid) || !errors.As(err, &ie) || ie.Field != c.field {
					t.Fatalf("err = %v, want an InvalidError for %s", err, c.field)
				}
				if !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "want") {
					t.Fatalf("message %q should name the field and what was expected", err)
				}
			})
		}
	}
	if _, err := lease.NewDynamoStore(refusingDynamo{t}, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("NewDynamoStore with no table: err = %v", err)
	}
}
