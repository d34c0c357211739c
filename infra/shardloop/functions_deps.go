//go:build shardloop_deps

// This file is in no build: the construct builds the two functions with the
// go command at synth (build.go), and the go command can only do that from
// the app's module when the app's go.mod and go.sum cover the functions'
// module and everything they import. go mod tidy and go get read every file
// whatever its build tags, so these imports make them record exactly that.

package shardloop

import (
	_ "github.com/shardloop/shardloop/functions/coordinator"
	_ "github.com/shardloop/shardloop/functions/shardreader"
)
