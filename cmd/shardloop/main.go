// Command shardloop runs shardloop locally and inspects a lease table.
//
//	shardloop run    --stream S [--table T] [--target F | --print] ...
//	shardloop status --stream S --table T
//	shardloop reset  --stream S --shard X --to <horizon|latest|timestamp:<ms>|sequence:<seq>> [--table T] [--force]
//	shardloop demo
//
// Every AWS client honours AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>, so
// the same commands run against LocalStack, the local emulators or AWS.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: shardloop <command> [flags]

commands:
  run     run the coordinator and shard loops in this process
  status  print a stream's lease table, with each shard's lag
  reset   move where a shard's next reader opens (horizon, latest, a time or a record)
  demo    the whole system on local emulators, with a split, a merge and a takeover

Run "shardloop <command> -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "run":
		err = runCmd(ctx, args)
	case "status":
		err = statusCmd(ctx, args, os.Stdout)
	case "reset":
		err = resetCmd(ctx, args, os.Stdout)
	case "demo":
		err = demoCmd(ctx, args, os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "shardloop: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "shardloop %s: %v\n", os.Args[1], err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "shardloop %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// usageError is bad command-line input.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }
