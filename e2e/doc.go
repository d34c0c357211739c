// Package e2e holds the end-to-end test of shardloop: the real coordinator,
// shardreader and a sample target Lambda, built as bootstrap files and hosted
// in the AWS Lambda Runtime Interface Emulator, with kinesis-local and
// dynalite as the AWS peers, a small Lambda host in front of the emulators
// and a fake of Step Functions that drives each shard loop the way
// template/statemachine.asl.json does.
//
// It runs as part of `go test ./...`; `make deps` installs what it needs.
package e2e
