package metrics_test

import (
	"os"
	"time"

	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
)

// A Recorder is the reader's Hooks; Flush at the end of the invocation
// writes one EMF line per shard that had activity. The line names its shard;
// its metrics carry the Stream dimension only, so a shard adds no custom
// metric unless Options.PerShardLag is set.
func Example() {
	rec, err := metrics.New(os.Stdout, func(o *metrics.Options) {
		o.Clock = func() time.Time { return time.UnixMilli(1_800_000_000_000) }
	})
	if err != nil {
		panic(err)
	}
	opts := reader.Options{Hooks: rec /* , Kinesis, Store, Target ... */}
	opts.Hooks.RecordsDelivered("orders", "shardId-000000000000", 100)
	opts.Hooks.Batch("orders", "shardId-000000000000", 100, 80*time.Millisecond)
	opts.Hooks.MillisBehindLatest("orders", "shardId-000000000000", 1200)
	rec.Flush()
	// Output:
	// {"Batches":1,"MillisBehindLatest":1200,"RecordsDelivered":100,"Shard":"shardId-000000000000","Stream":"orders","_aws":{"Timestamp":1800000000000,"CloudWatchMetrics":[{"Namespace":"Shardloop","Dimensions":[["Stream"]],"Metrics":[{"Name":"RecordsDelivered","Unit":"Count"},{"Name":"Batches","Unit":"Count"},{"Name":"MillisBehindLatest","Unit":"Milliseconds"}]}]}}
}
