// Package e2e holds the end-to-end test of shardloop: the real coordinator,
// shardreader and a sample target Lambda, built as bootstrap files and hosted
// in the AWS Lambda Runtime Interface Emulator, with kinesis-local and
// dynalite as the AWS peers, a small Lambda host in front of the emulators
// and a fake of Step Functions that drives each shard loop the way
// template/statemachine.asl.json does. The test plays EventBridge too: the
// one-minute schedule, and the rule that sends the coordinator each shard
// loop execution that ends FAILED or ABORTED, which is how the killed
// loop's shard is taken over.
//
// A second test runs template/statemachine.asl.json itself in an ASL
// interpreter (aws-local-stepfunctions, e2e/aslrunner, installed by the test
// with `npm ci` when missing) with its Read task served by the same hosted
// shardreader.
//
// It runs as part of `go test ./...`; `make deps` installs what it needs.
// The first run compiles the bootstraps for linux (about 1.5 min on two
// cores with a cold build cache); later runs take about 25 s. Set
// E2E_LOG_DIR to keep each emulator instance's log (the functions' JSON
// logs and the RIE's own lines); a failed run prints their last lines.
package e2e
