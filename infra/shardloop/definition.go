package shardloop

import _ "embed"

//go:generate cp ../../template/statemachine.asl.json statemachine.asl.json

// embeddedDefinition is the shard loop's state machine:
// template/statemachine.asl.json, the one file the SAM template loads too,
// copied next to this package by go generate so that the construct's module
// carries it. A test fails when the copy and the file differ.
//
//go:embed statemachine.asl.json
var embeddedDefinition []byte
