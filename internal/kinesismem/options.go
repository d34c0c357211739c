package kinesismem

import (
	"fmt"
	"time"
)

// Kinesis's fixed limits, as the model applies them.
const (
	// IteratorLifetime is how long a shard iterator may be used after it is
	// issued.
	IteratorLifetime = 5 * time.Minute
	// NextTokenLifetime is how long a ListShards NextToken may be used.
	NextTokenLifetime = 300 * time.Second
	// MaxRecordSize bounds a record's data plus partition key (a stream's
	// default maximum record size).
	MaxRecordSize = 1 << 20
	// MaxPutRecordsEntries and MaxPutRecordsSize bound one PutRecords call.
	MaxPutRecordsEntries = 500
	MaxPutRecordsSize    = 10 << 20
	// MaxGetRecordsLimit is the largest GetRecords Limit, and its default.
	MaxGetRecordsLimit = 10000
	// MaxGetRecordsSize bounds the data one GetRecords call returns.
	MaxGetRecordsSize = 10 << 20
	// MaxListShardsResults is the most shards one ListShards page holds;
	// MaxResults may be up to 10,000 but pages hold at most 1,000.
	MaxListShardsResults = 1000

	// Per-shard throughput limits of a provisioned stream.
	GetRecordsPerSecond       = 5
	GetShardIteratorPerSecond = 5
	ReadBytesPerSecond        = 2 << 20
	WriteRecordsPerSecond     = 1000
	WriteBytesPerSecond       = 1 << 20

	// DefaultRetention is a new stream's retention period; MinRetention and
	// MaxRetention are Kinesis's bounds.
	DefaultRetention = 24 * time.Hour
	MinRetention     = 24 * time.Hour
	MaxRetention     = 8760 * time.Hour

	// DefaultShardLimit is the default number of open shards a Client (an
	// account in a region) may hold.
	DefaultShardLimit = 500
	// DefaultShardCount is the number of shards of a stream created with no
	// ShardCount, and of an on-demand stream.
	DefaultShardCount = 4
	// maxCreating is how many streams may be CREATING at once.
	maxCreating = 5
	// maxScalings is how many UpdateShardCount calls a stream takes in a
	// rolling 24 hours.
	maxScalings = 10
)

// Options configure a Client. The zero value is Kinesis's defaults with
// changes that complete at once.
type Options struct {
	// Clock is the server's clock: it stamps ApproximateArrivalTimestamp and
	// the server time of every answer, and times iterator and NextToken
	// expiry, retention, throughput limits and status changes. Default
	// time.Now, which is virtual under testing/synctest. A clock that steps
	// back is held at the latest time it gave.
	Clock func() time.Time
	// Region and Account appear in stream ARNs. Defaults "us-east-1" and
	// "000000000000" (as kinesis-local).
	Region, Account string
	// Retention is the retention period of new streams. Default 24 h;
	// Kinesis allows 24 h to 8,760 h.
	Retention time.Duration
	// CreateDelay, DeleteDelay and ReshardDelay are how long a stream stays
	// CREATING after CreateStream, DELETING after DeleteStream and UPDATING
	// after SplitShard, MergeShards or UpdateShardCount. The change happens
	// on the first call at or after that time. Default 0: done when the call
	// returns.
	CreateDelay, DeleteDelay, ReshardDelay time.Duration
	// ShardLimit is how many open shards all streams together may have.
	// Default DefaultShardLimit.
	ShardLimit int
	// NoReadLimits turns off the per-shard read limits (GetRecords and
	// GetShardIterator calls, bytes read); NoWriteLimits the write limits.
	// Both limits are on by default, as on a provisioned stream.
	NoReadLimits, NoWriteLimits bool
}

// InvalidOptionError names the Options field New refused.
type InvalidOptionError struct {
	Field string
	Value string
	Want  string
}

func (e *InvalidOptionError) Error() string {
	return fmt.Sprintf("kinesismem: invalid %s %s: want %s", e.Field, e.Value, e.Want)
}

func (o *Options) setDefaults() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Account == "" {
		o.Account = "000000000000"
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.ShardLimit == 0 {
		o.ShardLimit = DefaultShardLimit
	}
}

func (o *Options) validate() error {
	bad := func(field string, v any, want string) error {
		return &InvalidOptionError{Field: field, Value: fmt.Sprint(v), Want: want}
	}
	switch {
	case o.Retention < MinRetention || o.Retention > MaxRetention:
		return bad("Retention", o.Retention, "24h to 8760h")
	case o.Retention%time.Hour != 0:
		return bad("Retention", o.Retention, "whole hours")
	case o.CreateDelay < 0:
		return bad("CreateDelay", o.CreateDelay, "0 or a positive duration")
	case o.DeleteDelay < 0:
		return bad("DeleteDelay", o.DeleteDelay, "0 or a positive duration")
	case o.ReshardDelay < 0:
		return bad("ReshardDelay", o.ReshardDelay, "0 or a positive duration")
	case o.ShardLimit < 1:
		return bad("ShardLimit", o.ShardLimit, "at least 1")
	case !validAccount(o.Account):
		return bad("Account", o.Account, "12 digits")
	case !validRegion(o.Region):
		return bad("Region", o.Region, "a region name such as us-east-1")
	}
	return nil
}

func validAccount(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func validRegion(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
