// Package shardloop is the AWS CDK construct that deploys a shardloop
// consumer: a serverless, at-least-once, in-order-per-shard reader of one
// Kinesis data stream that delivers every record to a target Lambda function.
//
// NewConsumer creates, in the scope it is given: the DynamoDB lease table (or
// uses an existing one), the coordinator Lambda with two EventBridge rules
// that run it (a one-minute schedule, and the shard loop's executions that
// end FAILED, TIMED_OUT or ABORTED), the shardreader Lambda, the Standard
// state machine "shard loop", least-privilege IAM roles, log groups with a
// retention, CloudWatch alarms and a dashboard. The defaults are the floor of
// the design's cost (docs/deploy.md): 10-minute runs, no coordinator window,
// the lag metric per stream.
//
// It needs nothing but the app's Go module and a go command. The Lambda code
// is built from source when the app is synthesized: CoordinatorPackage and
// ShardReaderPackage, at the version of github.com/shardloop/shardloop that
// the app's go.mod selects (go mod tidy records it, see functions_deps.go),
// by the go command on PATH run in the working directory (the app's module,
// where the CDK CLI runs `go run .`), for linux/arm64 with the flags of `make
// build`, so that the same source gives the same asset hash. One process
// builds once, whatever the number of consumers, and the bootstraps are kept
// in the user's cache folder, one folder per distinct binary. The
// state-machine definition is embedded: template/statemachine.asl.json, the
// file the SAM template loads, copied here by go generate. CoordinatorCode,
// ShardReaderCode and DefinitionFile replace them with code built elsewhere.
//
//	c, err := shardloop.NewConsumer(stack, "Orders", &shardloop.ConsumerProps{
//		StreamName:     "orders",
//		TargetFunction: "arn:aws:lambda:eu-west-1:123456789012:function:handle-orders",
//		StartingPosition: awslambda.StartingPosition_TRIM_HORIZON,
//	})
//
// Props are checked before anything is created; a bad prop, or a second
// consumer of the same stream in one app, is an error that names the prop. A
// build that fails is a *BuildError with the go command's output.
package shardloop
