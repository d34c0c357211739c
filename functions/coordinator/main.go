// Command coordinator is the Lambda that takes shard leases and starts shard
// loops, run when there is something to do: the EventBridge schedule once a
// minute (one pass; with SHARDLOOP_WINDOW, a relisting window), a reader's
// nudge ({"nudge":true}, one pass), and a shard loop's execution that ended
// FAILED, TIMED_OUT or ABORTED (an EventBridge rule on the state machine's
// status changes: it watches that shard until its lease lapses, then takes
// it). See internal/handlers; configuration: internal/lambdaenv.
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
		log.Error("coordinator cold start failed", "err", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// setup reads and validates the environment and builds the clients once.
func setup(log *slog.Logger, invocations *handlers.Invocations) (*handlers.Coordinator, error) {
	env, err := lambdaenv.CoordinatorFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, err
	}
	return handlers.NewCoordinator(context.Background(), env, cfg, log, handlers.WithMetrics(os.Stdout), handlers.WithInvocations(invocations))
}
