package shards

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Shard is one shard of a stream as ListShards reports it.
type Shard struct {
	ID string
	// ParentID is the shard this one was split from, or the first of the two
	// merged into it; AdjacentParentID is the second of a merge. Empty when
	// there is none.
	ParentID, AdjacentParentID string
	// HashKeyStart and HashKeyEnd bound the shard's hash key range
	// (inclusive), as decimal strings.
	HashKeyStart, HashKeyEnd string
	// StartingSequence is the shard's first sequence number; EndingSequence
	// is set once the shard is closed (by a split or merge) and names its
	// last possible record.
	StartingSequence, EndingSequence string
}

// Closed reports whether the shard was closed by a split or a merge: it
// takes no new records, and reading past its last one gives SHARD_END.
func (s Shard) Closed() bool { return s.EndingSequence != "" }

// Parents returns the shard's parent ids: none for a shard the stream was
// created with, one after a split, two after a merge.
func (s Shard) Parents() []string {
	var ps []string
	for _, p := range [2]string{s.ParentID, s.AdjacentParentID} {
		if p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// ListAPI is the part of the Kinesis client that List calls.
type ListAPI interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
}

var _ ListAPI = (*kinesis.Client)(nil)

// listPageSize is the ListShards page asked for: one request lists 1,000
// shards (AWS allows up to 10,000; its default page is 1,000, some
// emulators' 100).
const listPageSize = 1000

// List returns every shard of a stream that ListShards reports, open and
// closed (closed shards stay listed until retention trims them), in the
// order Kinesis returns them (by shard id). It follows NextToken across
// pages. stream is a stream name or a stream ARN; an ARN is sent as
// StreamARN.
func List(ctx context.Context, api ListAPI, stream string) ([]Shard, error) {
	name, err := StreamName(stream)
	if err != nil {
		return nil, err
	}
	first := &kinesis.ListShardsInput{MaxResults: aws.Int32(listPageSize)}
	if isARN(stream) {
		first.StreamARN = aws.String(stream)
	} else {
		first.StreamName = aws.String(name)
	}
	var out []Shard
	in := first
	for page := 1; ; page++ {
		res, err := api.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list shards of %s (page %d): %w", name, page, err)
		}
		for _, s := range res.Shards {
			out = append(out, fromSDK(s))
		}
		if res.NextToken == nil || *res.NextToken == "" {
			return out, nil
		}
		// A request with NextToken names no stream: the token does.
		in = &kinesis.ListShardsInput{NextToken: res.NextToken, MaxResults: aws.Int32(listPageSize)}
	}
}

func fromSDK(s types.Shard) Shard {
	sh := Shard{
		ID:               aws.ToString(s.ShardId),
		ParentID:         aws.ToString(s.ParentShardId),
		AdjacentParentID: aws.ToString(s.AdjacentParentShardId),
	}
	if r := s.HashKeyRange; r != nil {
		sh.HashKeyStart, sh.HashKeyEnd = aws.ToString(r.StartingHashKey), aws.ToString(r.EndingHashKey)
	}
	if r := s.SequenceNumberRange; r != nil {
		sh.StartingSequence, sh.EndingSequence = aws.ToString(r.StartingSequenceNumber), aws.ToString(r.EndingSequenceNumber)
	}
	return sh
}

// ErrInvalid matches every InvalidError: bad input, refused before any
// request is sent.
var ErrInvalid = errors.New("invalid shards input")

// InvalidError names the input field that was refused and what was
// expected. It matches ErrInvalid with errors.Is.
type InvalidError struct {
	Field string
	Value string
	Want  string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("shards: invalid %s %q: want %s", e.Field, e.Value, e.Want)
}

func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

const wantStream = "a stream name (1-128 of a-z A-Z 0-9 _ . -) or a stream ARN arn:<partition>:kinesis:<region>:<account>:stream/<name>"

func isARN(s string) bool { return strings.HasPrefix(s, "arn:") }

// StreamName returns the stream name of a stream name or stream ARN
// ("arn:aws:kinesis:us-east-1:123456789012:stream/orders" gives "orders").
// Anything else, such as a consumer ARN or a name with characters Kinesis
// refuses, is an *InvalidError for the field "stream".
func StreamName(nameOrARN string) (string, error) {
	bad := func() (string, error) {
		return "", &InvalidError{Field: "stream", Value: nameOrARN, Want: wantStream}
	}
	name := nameOrARN
	if isARN(nameOrARN) {
		// arn:partition:service:region:account:resource
		parts := strings.SplitN(nameOrARN, ":", 6)
		if len(parts) != 6 || parts[1] == "" || parts[2] != "kinesis" || parts[3] == "" || parts[4] == "" {
			return bad()
		}
		var ok bool
		if name, ok = strings.CutPrefix(parts[5], "stream/"); !ok {
			return bad()
		}
	}
	if !validName(name) {
		return bad()
	}
	return name, nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
		default:
			return false
		}
	}
	return true
}
