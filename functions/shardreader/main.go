// Command shardreader is the Lambda that runs one iteration of a shard loop:
// one bounded reader run, the loop state in and the next state out.
// Configuration: see internal/lambdaenv; state: docs/state.md.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
)

func main() {
	logCfg, logErr := lambdaenv.LogFromEnv(os.Getenv)
	log, invocations := handlers.NewLogger(os.Stdout, logCfg) // each line carries its invocation's requestId
	h, err := setup(log, invocations)
	if err = errors.Join(logErr, err); err != nil {
		log.Error("shardreader cold start failed", "err", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// setup reads and validates the environment and builds the clients once.
func setup(log *slog.Logger, invocations *handlers.Invocations) (*handlers.ShardReader, error) {
	env, err := lambdaenv.ReaderFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, err
	}
	return handlers.NewShardReader(context.Background(), env, cfg, log, handlers.WithMetrics(os.Stdout), handlers.WithInvocations(invocations))
}
