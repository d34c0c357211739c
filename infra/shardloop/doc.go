// Package shardloop is the AWS CDK construct that deploys a shardloop
// consumer: a serverless, at-least-once, in-order-per-shard reader of one
// Kinesis data stream that delivers every record to a target Lambda function.
//
// NewConsumer creates, in the scope it is given: the DynamoDB lease table (or
// uses an existing one), the coordinator Lambda run every minute by an
// EventBridge rule, the shardreader Lambda, the Standard state machine "shard
// loop" loaded from template/statemachine.asl.json (the same file the SAM
// template loads), least-privilege IAM roles, log groups with a retention,
// CloudWatch alarms and a dashboard.
//
// The Lambda code comes from the bootstraps that `make build` writes into
// build/coordinator and build/shardreader; the state-machine definition from
// template/statemachine.asl.json. Both are found from ConsumerProps.ProjectRoot
// (by default the nearest parent of the working directory that holds
// template/statemachine.asl.json), or given one by one.
//
//	c, err := shardloop.NewConsumer(stack, "Orders", &shardloop.ConsumerProps{
//		StreamName:     "orders",
//		TargetFunction: "arn:aws:lambda:eu-west-1:123456789012:function:handle-orders",
//		StartPosition:  "horizon",
//	})
//
// Props are checked before anything is created; a bad prop, or a second
// consumer of the same stream in one app, is an error that names the prop.
package shardloop
