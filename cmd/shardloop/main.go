// Command shardloop runs shardloop locally and inspects a lease table.
//
//	shardloop run    --stream S [--table T] [--target F] [--start P] ...
//	shardloop status --stream S --table T
//	shardloop reset  --stream S --shard X --to <horizon|latest|timestamp:<ms or RFC 3339>|sequence:<seq>> [--table T] [--force]
//	shardloop demo
//	shardloop emulators
//	shardloop --version
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const usage = `usage: shardloop <command> [flags]

commands:
  run        run the coordinator and shard loops in this process
  status     print a stream's shards and lease rows: owner, checkpoint, lag, what each waits for
  reset      move where a shard's next reader opens (horizon, latest, a time or a record)
  demo       the whole system on local emulators, with a split, a merge and a takeover
  emulators  start kinesis-local and dynalite, print their endpoints, stop them at Ctrl-C
  version    print this binary's version (also --version)

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
	case "emulators":
		err = emulatorsCmd(ctx, rest, stdout, nil)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "--version", "-version", "version":
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "shardloop %s: unexpected argument %q: it takes none\n", cmd, rest[0])
			return 2
		}
		fmt.Fprintln(stdout, versionLine())
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

// flags is a command's flag set and its synopsis. Its flags are written
// with two dashes (--stream), one for a single letter (-v, -o), as the
// usage prints them; Go's flag package takes either.
type flags struct {
	*flag.FlagSet
	synopsis string
	// wants says, by flag name, what a value must look like, for the
	// message when one does not parse; a flag without one is described by
	// its type.
	wants map[string]string
	// aliases maps a short name to the long flag it stands for (-o for
	// --output), which the usage prints on one line.
	aliases map[string]string
	// bad is the first value a flag refused during parse.
	bad *flagValueError
}

// newFlags returns a command's flags; synopsis is what follows "usage: ".
func newFlags(name, synopsis string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // cli prints the error and the usage, once
	fs.Usage = func() {}
	return &flags{FlagSet: fs, synopsis: synopsis, wants: map[string]string{}, aliases: map[string]string{}}
}

// want records what a value of the named flag must look like.
func (f *flags) want(name, want string) { f.wants[name] = want }

// alias makes -short another name of the flag long.
func (f *flags) alias(short, long string) {
	fl := f.Lookup(long)
	f.Var(fl.Value, short, "same as --"+long)
	f.aliases[short] = long
}

// dashed is a flag's name as the usage and the messages write it.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagValueError is a flag value that does not parse: it names the flag,
// the value and the form expected.
type flagValueError struct {
	flag, value, want string
}

func (e *flagValueError) Error() string {
	return fmt.Sprintf("%s %s: want %s", dashed(e.flag), shown(e.value), e.want)
}

// shown is a value as a message quotes it: as typed, in quotes when it is
// empty or has spaces.
func shown(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\"") {
		return strconv.Quote(v)
	}
	return v
}

// checkedValue records a value its flag refuses, for parse's message.
type checkedValue struct {
	flag.Value
	name string
	fs   *flags
}

func (v *checkedValue) String() string { return v.Value.String() }

func (v *checkedValue) Set(s string) error {
	err := v.Value.Set(s)
	if err != nil && v.fs.bad == nil {
		v.fs.bad = &flagValueError{flag: v.name, value: s, want: v.fs.wantOf(v.name, v.Value, s)}
	}
	return err
}

// IsBoolFlag keeps a boolean flag one that needs no value.
func (v *checkedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *checkedValue) Get() any {
	if g, ok := v.Value.(flag.Getter); ok {
		return g.Get()
	}
	return v.String()
}

// wantOf is what the named flag's value must look like: what was recorded
// for it, else what its type takes.
func (f *flags) wantOf(name string, v flag.Value, given string) string {
	if long, ok := f.aliases[name]; ok {
		name = long
	}
	want := f.wants[name]
	var typ any
	if g, ok := v.(flag.Getter); ok {
		typ = g.Get()
	}
	switch typ.(type) {
	case time.Duration:
		if want == "" {
			want = "a Go duration"
		}
		want += " (a number with a unit: 500ms, 30s, 1m30s)"
		if _, err := strconv.ParseFloat(given, 64); err == nil {
			want += "; " + given + " has no unit: " + given + "s?"
		}
	case int, int64, uint, uint64:
		if want == "" {
			want = "a whole number"
		}
	case bool:
		want = "true or false (the flag alone is true)"
	}
	if want == "" {
		want = "a value"
		if fl := f.Lookup(name); fl != nil {
			_, want = flag.UnquoteUsage(unwrapped(fl))
		}
	}
	return want
}

func (f *flags) printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\nflags:\n", f.synopsis)
	f.VisitAll(func(fl *flag.Flag) {
		if _, isAlias := f.aliases[fl.Name]; isAlias {
			return
		}
		names := dashed(fl.Name)
		for short, long := range f.aliases {
			if long == fl.Name {
				names = dashed(short) + ", " + names
			}
		}
		typ, usage := flag.UnquoteUsage(unwrapped(fl))
		line := "  " + names
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintln(w, line)
		if !zeroDefault(fl) {
			usage += fmt.Sprintf(" (default %s)", fl.DefValue)
		}
		fmt.Fprintf(w, "    \t%s\n", strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}

// unwrapped is fl with the value parse wrapped, so that its type names it.
func unwrapped(fl *flag.Flag) *flag.Flag {
	c := *fl
	if v, ok := c.Value.(*checkedValue); ok {
		c.Value = v.Value
	}
	return &c
}

// zeroDefault reports whether a flag's default is its type's zero value,
// which the usage leaves out.
func zeroDefault(fl *flag.Flag) bool {
	switch fl.DefValue {
	case "", "0", "0s", "false":
		return true
	}
	return false
}

// parse parses args and refuses what the command does not take: an unknown
// flag, a value that does not parse (naming the flag, the value and what it
// wants), and any word that is not a flag. Go's flag package stops at the
// first word that is not a flag, so without this `run --stream s oops
// --target f` would run without its target.
func (f *flags) parse(args []string) error {
	f.VisitAll(func(fl *flag.Flag) {
		if _, done := fl.Value.(*checkedValue); !done {
			fl.Value = &checkedValue{Value: fl.Value, name: fl.Name, fs: f}
		}
	})
	f.bad = nil
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{f}
		}
		return usageError{msg: f.parseMessage(err), fs: f}
	}
	if f.NArg() > 0 {
		return usageError{msg: fmt.Sprintf("unexpected argument %q: %s takes flags only, and every flag after it would be ignored", f.Arg(0), f.Name()), fs: f}
	}
	return nil
}

// parseMessage turns an error of Go's flag package into one that writes
// flags as the usage does and says what was expected.
func (f *flags) parseMessage(err error) string {
	if f.bad != nil {
		return f.bad.Error()
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag %s: %s takes the flags below", dashed(name), f.Name())
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		want := "a value"
		if fl := f.Lookup(name); fl != nil {
			want = f.wantOf(name, fl.Value, "")
		}
		return fmt.Sprintf("%s needs a value: want %s", dashed(name), want)
	}
	return msg
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
