package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// StartExecutionAPI is the Step Functions call the SFN starter makes.
type StartExecutionAPI interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
}

// SFNStarter starts a shard loop as a Step Functions execution named after
// the owner id, with the Loop as its input. An execution of that name that
// already exists counts as started.
type SFNStarter struct {
	Client          StartExecutionAPI
	StateMachineARN string
}

// Start implements Starter.
func (s SFNStarter) Start(ctx context.Context, loop Loop) error {
	input, err := json.Marshal(loop)
	if err != nil {
		return fmt.Errorf("start execution %s: %w", loop.Owner, err)
	}
	_, err = s.Client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(s.StateMachineARN),
		Name:            aws.String(loop.Owner),
		Input:           aws.String(string(input)),
	})
	var exists *types.ExecutionAlreadyExists
	if errors.As(err, &exists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start execution %s: %w", loop.Owner, err)
	}
	return nil
}

// StarterFunc adapts a function to Starter.
type StarterFunc func(ctx context.Context, loop Loop) error

// Start implements Starter.
func (f StarterFunc) Start(ctx context.Context, loop Loop) error { return f(ctx, loop) }
