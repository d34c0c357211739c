// Command cdk-app is a CDK app of its own, outside the shardloop module, that
// deploys one shardloop consumer with the construct: see README.md.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/shardloop/shardloop/infra/shardloop"
)

func main() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("OrdersConsumer"), nil)
	_, err := shardloop.NewConsumer(stack, "Orders", &shardloop.ConsumerProps{
		StreamName:     "orders",        // or Stream: an awskinesis.IStream, or CreateShards: 4
		TargetFunction: "handle-orders", // or Target: an awslambda.IFunction
		// StartingPosition: awslambda.StartingPosition_TRIM_HORIZON, // optional: a start applied once, over the checkpoints
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		jsii.Close()
		os.Exit(1)
	}
	app.Synth(nil)
	jsii.Close()
}
