package main

import (
	"context"
	"fmt"
	"io"

	"github.com/shardloop/shardloop/internal/emulators"
)

// emulatorsCmd starts kinesis-local and dynalite on free loopback ports,
// prints their endpoints as the environment that points the AWS CLI, the
// SDKs and shardloop itself at them, and keeps them up until ctx ends
// (Ctrl-C), then stops them. ready, when set, is called once they answer.
func emulatorsCmd(ctx context.Context, args []string, w io.Writer, ready func(kinesis, dynamodb string)) error {
	fs := newFlags("emulators", "shardloop emulators")
	if err := fs.parse(args); err != nil {
		return err
	}
	kin, err := emulators.Start(ctx, emulators.Kinesis, emulators.Options{})
	if err != nil {
		return err
	}
	defer kin.Stop()
	ddb, err := emulators.Start(ctx, emulators.DynamoDB, emulators.Options{})
	if err != nil {
		return err
	}
	defer ddb.Stop()
	fmt.Fprintf(w, `# kinesis-local and dynalite are up; in another shell:
export AWS_ENDPOINT_URL_KINESIS=%s
export AWS_ENDPOINT_URL_DYNAMODB=%s
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
# then e.g.: shardloop run --stream demo --create-shards 2 --table leases
#            aws kinesis put-record --stream-name demo --partition-key k --data aGk= --endpoint-url $AWS_ENDPOINT_URL_KINESIS
# Ctrl-C stops both (they keep everything in memory).
`, kin.Endpoint, ddb.Endpoint)
	if ready != nil {
		ready(kin.Endpoint, ddb.Endpoint)
	}
	<-ctx.Done()
	fmt.Fprintln(w, "# stopping the emulators")
	return nil
}
