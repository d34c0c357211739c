// Command shardloop runs shardloop locally and inspects a lease table.
//
//	shardloop run    --stream S [--table T] [--target F] [--start P] ...
//	shardloop status --stream S --table T
//	shardloop reset  --stream S --shard X --to <horizon|latest|timestamp:<ms or RFC 3339>|sequence:<seq>> [--table T] [--force]
//	shardloop demo
//
// Every AWS client honours AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>, so
// the same commands run against LocalStack, the local emulators or AWS. Every
// AWS call is bounded (internal/awsconf): a silent endpoint is an error
// naming it, not a hang.
//
// Exit status: 0 on success, 1 on an error, 2 on bad command-line input (an
// unknown flag, a word a command does not take, a value out of range); the
// command's usage follows the message.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

const usage = `usage: shardloop <command> [flags]

commands:
  run     run the coordinator and shard loops in this process
  status  print a stream's shards and lease rows: owner, checkpoint, lag, what each waits for
  reset   move where a shard's next reader opens (horizon, latest, a time or a record)
  demo    the whole system on local emulators, with a split, a merge and a takeover

Run "shardloop <command> -h" for a command's flags.
`

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := interruptible(context.Background(), sigs, os.Stderr, os.Exit)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interruptible returns a context that ends at the first signal on sigs
// (Ctrl-C, SIGTERM): a command stops gracefully (run lets each loop's
// delivery in flight settle, checkpoints and releases its leases). A second
// signal exits at once through exit, with status 128 + the signal's number
// (130 for Ctrl-C), as a shell reports a process killed by it. stop ends the
// watch.
func interruptible(parent context.Context, sigs <-chan os.Signal, stderr io.Writer, exit func(int)) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		fmt.Fprintln(stderr, "shardloop: stopping: finishing the deliveries in flight and releasing the leases; press Ctrl-C again to exit at once")
		cancel()
		select {
		case s := <-sigs:
			fmt.Fprintln(stderr, "shardloop: exiting at once; leases still held lapse after a lease duration")
			exit(128 + signalNumber(s))
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(done); cancel() }) }
}

func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGINT)
}

// cli runs one command and returns the exit status.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = runCmd(ctx, rest, stdout, stderr)
	case "status":
		err = statusCmd(ctx, rest, stdout)
	case "reset":
		err = resetCmd(ctx, rest, stdout)
	case "demo":
		err = demoCmd(ctx, rest, stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "shardloop: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var help helpRequested
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		help.fs.printUsage(stdout)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "shardloop %s: %v\n", args[0], err)
		if ue.fs != nil {
			fmt.Fprintln(stderr)
			ue.fs.printUsage(stderr)
		}
		return 2
	default:
		fmt.Fprintf(stderr, "shardloop %s: %v\n", args[0], err)
		return 1
	}
}

// usageError is bad command-line input: exit status 2, then the usage of
// the command's flags.
type usageError struct {
	msg string
	fs  *flags
}

func (e usageError) Error() string { return e.msg }

// helpRequested is -h or --help: the usage on stdout, exit status 0.
type helpRequested struct{ fs *flags }

func (helpRequested) Error() string { return "help requested" }

// flags is a command's flag set and its synopsis.
type flags struct {
	*flag.FlagSet
	synopsis string
}

// newFlags returns a command's flags; synopsis is what follows "usage: ".
func newFlags(name, synopsis string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // cli prints the error and the usage, once
	fs.Usage = func() {}
	return &flags{FlagSet: fs, synopsis: synopsis}
}

func (f *flags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\nflags:\n", f.synopsis)
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// parse parses args and refuses what the command does not take: an unknown
// flag, and any word that is not a flag. Go's flag package stops at the
// first word that is not a flag, so without this `run --stream s oops
// --target f` would run without its target.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{f}
		}
		return usageError{msg: err.Error(), fs: f}
	}
	if f.NArg() > 0 {
		return usageError{msg: fmt.Sprintf("unexpected argument %q: %s takes flags only, and every flag after it would be ignored", f.Arg(0), f.Name()), fs: f}
	}
	return nil
}

// withUsage gives a usage error of the command its flags.
func (f *flags) withUsage(err error) error {
	var ue usageError
	if errors.As(err, &ue) && ue.fs == nil {
		ue.fs = f
		return ue
	}
	return err
}

// bad is a usage error.
func bad(format string, a ...any) error { return usageError{msg: fmt.Sprintf(format, a...)} }
