// Command coordinator is the Lambda the EventBridge schedule runs once a
// minute: it relists the stream's shards every 10 s for its window, takes the
// lease of each leasable shard and starts a shard loop for it. A reader's
// nudge ({"nudge":true}) runs one pass at once.
// Configuration: see internal/lambdaenv.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	h, err := setup(log)
	if err != nil {
		log.Error("coordinator cold start failed", "err", err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// setup reads and validates the environment and builds the clients once.
func setup(log *slog.Logger) (*handlers.Coordinator, error) {
	env, err := lambdaenv.CoordinatorFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return nil, err
	}
	return handlers.NewCoordinator(env, cfg, log, handlers.WithMetrics(os.Stdout))
}
