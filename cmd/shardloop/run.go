package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
)

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	stream := fs.String("stream", "", "stream name or ARN (required)")
	table := fs.String("table", "", "DynamoDB lease table (created if missing); empty keeps leases in memory")
	target := fs.String("target", "", "target Lambda function name or ARN; empty prints each record")
	start := fs.String("start", "", "start position, applied once over the checkpoints: latest, horizon, timestamp:<unix ms>, sequence:<shard>:<seq>; empty: resume from the checkpoints (a shard without one opens at the tip)")
	create := fs.Int("create-shards", 0, "create the stream with this many shards if it is missing (0: never)")
	batch := fs.Int("batch-size", 100, "records per GetRecords and per target invocation (1-10000)")
	poll := fs.Duration("poll-interval", reader.DefaultPollInterval, "wait after an empty read")
	runLen := fs.Duration("run-length", reader.DefaultRunLength, "length of one reader run (one Lambda invocation in AWS)")
	policy := addPolicyFlags(fs)
	emf := fs.Bool("metrics", false, "write the CloudWatch EMF metric lines the Lambdas write to stdout here to stderr")
	verbose := fs.Bool("v", false, "debug logs")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *stream == "" {
		return usageError{"--stream is required"}
	}
	if *batch < 1 || *batch > reader.MaxBatchSize {
		return usageError{fmt.Sprintf("--batch-size %d: want 1 to %d", *batch, reader.MaxBatchSize)}
	}
	ro, err := policy.options(*runLen)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	var emfOut io.Writer = io.Discard
	if *emf {
		emfOut = os.Stderr
	}
	rec, err := metrics.New(emfOut, func(o *metrics.Options) { o.Logger = log })
	if err != nil {
		return err
	}
	defer rec.Flush()
	store, err := openStore(ctx, cfg, *table)
	if err != nil {
		return err
	}
	store = lease.WithLag(store, rec.Lag) // shardloop status shows it
	if ro.OnFailure, err = handlers.OnFailureDestination(policy.destination, cfg); err != nil {
		return err
	}
	var tgt reader.Target = printTarget()
	if *target != "" {
		if tgt, err = reader.NewLambdaTarget(lambda.NewFromConfig(cfg), *target, func(o *reader.LambdaOptions) { o.Region = cfg.Region }); err != nil {
			return err
		}
	}
	r, err := runner.New(runner.Options{
		Subscriptions: []coordinator.Subscription{{Stream: *stream, Start: *start, CreateShards: *create}},
		Store:         store,
		Kinesis:       kinesis.NewFromConfig(cfg),
		Reader:        withPolicy(reader.Options{Target: tgt, BatchSize: int32(*batch), PollInterval: *poll, RunLength: *runLen, Hooks: rec, Logger: log}, ro),
		Logger:        log,
	})
	if err != nil {
		return err
	}
	log.Info("shardloop running; Ctrl-C stops", "stream", *stream, "table", orMemory(*table))
	return r.Run(ctx)
}

// policyFlags are the failure policy and batching flags of run, with the
// shardreader's defaults and limits (docs/failure-policy.md).
type policyFlags struct {
	retries     int
	age         string
	bisect      bool
	destination string
	window      time.Duration
	deaggregate bool
}

func addPolicyFlags(fs *flag.FlagSet) *policyFlags {
	p := &policyFlags{}
	fs.IntVar(&p.retries, "max-retry-attempts", -1, "give a failing batch up after this many retries (0-10000); -1 retries until the records expire")
	fs.StringVar(&p.age, "max-record-age", "-1", "give records older than this up (60s-168h); -1 is no limit")
	fs.BoolVar(&p.bisect, "bisect-on-error", false, "split a failing batch in halves, down to single records, to isolate bad records")
	fs.StringVar(&p.destination, "on-failure-destination", "", "SQS queue or SNS topic ARN that gets a record of each batch given up; empty: logged only")
	fs.DurationVar(&p.window, "batching-window", 0, "keep reading up to this long (0-300s, under --run-length) to fill a batch")
	fs.BoolVar(&p.deaggregate, "deaggregate", false, "decode KPL-aggregated records into their user records")
	return p
}

// options checks the flags and returns them as reader options (without
// the destination, which needs the SDK config).
func (p *policyFlags) options(runLength time.Duration) (reader.Options, error) {
	var o reader.Options
	if p.retries < -1 || p.retries > reader.MaxRetryAttemptsLimit {
		return o, usageError{fmt.Sprintf("--max-retry-attempts %d: want -1 (no limit) or 0 to %d", p.retries, reader.MaxRetryAttemptsLimit)}
	}
	o.MaxRetryAttempts = reader.RetryAttempts(p.retries)
	if p.age != "-1" && p.age != "" {
		d, err := time.ParseDuration(p.age)
		if err != nil || d < lambdaenv.MinRecordAge || d > lambdaenv.MaxRecordAge {
			return o, usageError{fmt.Sprintf("--max-record-age %s: want -1 (no limit) or a duration from %s to %s", p.age, lambdaenv.MinRecordAge, lambdaenv.MaxRecordAge)}
		}
		o.MaxRecordAge = d
	}
	if p.window < 0 || p.window > reader.MaxBatchingWindow || (p.window > 0 && p.window >= runLength) {
		return o, usageError{fmt.Sprintf("--batching-window %s: want 0 to %s, shorter than --run-length (%s)", p.window, reader.MaxBatchingWindow, runLength)}
	}
	if p.destination != "" {
		if _, err := reader.ParseDestinationARN(p.destination); err != nil {
			return o, usageError{fmt.Sprintf("--on-failure-destination %s: want an SQS queue or SNS topic ARN", p.destination)}
		}
	}
	o.BisectOnError, o.BatchingWindow, o.Deaggregate = p.bisect, p.window, p.deaggregate
	return o, nil
}

// withPolicy sets p's failure policy and batching fields on o.
func withPolicy(o, p reader.Options) reader.Options {
	o.MaxRetryAttempts, o.MaxRecordAge, o.BisectOnError = p.MaxRetryAttempts, p.MaxRecordAge, p.BisectOnError
	o.OnFailure, o.BatchingWindow, o.Deaggregate = p.OnFailure, p.BatchingWindow, p.Deaggregate
	return o
}

func orMemory(table string) string {
	if table == "" {
		return "(memory)"
	}
	return table
}

func openStore(ctx context.Context, cfg aws.Config, table string) (lease.Store, error) {
	if table == "" {
		return lease.NewMemoryStore()
	}
	ddb := dynamodb.NewFromConfig(cfg)
	if err := lease.CreateTable(ctx, ddb, table); err != nil {
		return nil, err
	}
	return lease.NewDynamoStore(ddb, table)
}

// printTarget prints each record and settles the batch.
func printTarget() reader.Target {
	return reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		for _, r := range b.Records {
			fmt.Printf("%s %s %s key=%s data=%s\n", time.Now().Format(time.TimeOnly), b.ShardID, aws.ToString(r.SequenceNumber),
				aws.ToString(r.PartitionKey), printable(r.Data))
		}
		return len(b.Records), nil
	})
}

func printable(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "base64:" + base64.StdEncoding.EncodeToString(b)
		}
	}
	return string(b)
}
