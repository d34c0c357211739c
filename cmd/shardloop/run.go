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
	start := fs.String("start", "latest", "start position: latest, horizon, timestamp:<unix ms>, sequence:<shard>:<seq>")
	create := fs.Int("create-shards", 0, "create the stream with this many shards if it is missing (0: never)")
	batch := fs.Int("batch-size", 100, "records per GetRecords and per target invocation (1-10000)")
	poll := fs.Duration("poll-interval", reader.DefaultPollInterval, "wait after an empty read")
	runLen := fs.Duration("run-length", reader.DefaultRunLength, "length of one reader run (one Lambda invocation in AWS)")
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
		Reader:        reader.Options{Target: tgt, BatchSize: int32(*batch), PollInterval: *poll, RunLength: *runLen, Hooks: rec, Logger: log},
		Logger:        log,
	})
	if err != nil {
		return err
	}
	log.Info("shardloop running; Ctrl-C stops", "stream", *stream, "table", orMemory(*table))
	return r.Run(ctx)
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
