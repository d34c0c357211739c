package awsconf_test

import (
	"fmt"
	"time"

	"github.com/shardloop/shardloop/internal/awsconf"
)

// The bounds of a lease-store call, and of the invocation of a target whose
// own timeout is one minute.
func ExampleSettings() {
	fmt.Println("DynamoDB:", awsconf.DynamoDB)
	fmt.Println("target:", awsconf.Target(time.Minute))
	// Output:
	// DynamoDB: 1s per attempt, 2 attempts, at most 2.1s
	// target: 1m30s per attempt, 3 attempts, at most 4m34s
}
