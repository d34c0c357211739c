package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardloop/shardloop/internal/awsconf"
	"github.com/shardloop/shardloop/internal/handlers"
	"github.com/shardloop/shardloop/internal/lambdaenv"
	"github.com/shardloop/shardloop/pkg/coordinator"
	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/metrics"
	"github.com/shardloop/shardloop/pkg/reader"
	"github.com/shardloop/shardloop/pkg/runner"
	"github.com/shardloop/shardloop/pkg/shards"
)

// runSynopsis is run's usage line.
const runSynopsis = "shardloop run --stream S [--table T] [--target F] [--start P [--confirm-skip]] [flags]"

// runFlags are run's flags, checked.
type runFlags struct {
	stream, table, target, start string
	create                       int
	batch                        int
	factor                       int
	windowSeconds                int
	readAheadMiB                 int
	poll, runLength              time.Duration
	progressEvery                time.Duration
	targetTimeout                time.Duration
	invokeIdentity               string
	emf, verbose                 bool
	logFormat                    string
	confirmSkip                  bool
	deployedAt                   string    // --deployed-at as given
	deployed                     time.Time // ... parsed; zero: when this runner starts
	policy                       *policyFlags
}

func parseRunFlags(args []string) (*runFlags, reader.Options, error) {
	fs := newFlags("run", runSynopsis)
	f := &runFlags{}
	fs.StringVar(&f.stream, "stream", "", "stream name or ARN (required)")
	fs.StringVar(&f.table, "table", "", "DynamoDB lease table (created if missing); empty keeps leases in memory")
	fs.StringVar(&f.target, "target", "", "target Lambda function name or ARN; empty prints each record")
	fs.StringVar(&f.start, "start", "", "start position: "+lambdaenv.StartForms+"; empty: none, checkpoints decide and a shard without one opens at the tip")
	fs.StringVar(&f.deployedAt, "deployed-at", "", "when this configuration was deployed (RFC 3339, such as 2026-12-01T10:00:00Z), which orders start generations: a service manager that restarts the runner passes the deploy's time, so a restart is not a new deployment; empty: when this runner starts, on Kinesis's clock")
	fs.BoolVar(&f.confirmSkip, "confirm-skip", false, "start even though --start moves shards past records the table's current start has not delivered (run refuses and says which, without it)")
	fs.IntVar(&f.create, "create-shards", 0, "create the stream with this many shards if it is missing ("+lambdaenv.CreateShardsLimit.Want()+")")
	fs.IntVar(&f.batch, "batch-size", lambdaenv.DefaultBatchSize, "records per GetRecords and per target invocation ("+lambdaenv.BatchSizeLimit.Want()+")")
	fs.IntVar(&f.factor, "parallelization-factor", reader.DefaultParallelizationFactor, "lanes delivering one shard's records concurrently, by partition key; one key's records stay in order ("+lambdaenv.ParallelizationFactorLimit.Want()+")")
	fs.IntVar(&f.windowSeconds, "tumbling-window-seconds", 0, "tumbling windows of this many seconds, as Lambda's TumblingWindowInSeconds: the target gets events.KinesisTimeWindowEvent and must answer with a state ("+lambdaenv.TumblingWindowLimit.Want()+"; needs --parallelization-factor 1)")
	fs.IntVar(&f.readAheadMiB, "read-ahead-mib", lambdaenv.DefaultReadAheadMiB, "memory budget for records read and not yet delivered, in MiB: reads pause at it ("+lambdaenv.ReadAheadMiBLimit.Want()+")")
	fs.DurationVar(&f.poll, "poll-interval", reader.DefaultPollInterval, "wait after an empty read ("+lambdaenv.PollIntervalLimit.Want()+")")
	fs.DurationVar(&f.runLength, "run-length", reader.DefaultRunLength, "length of one reader run, one Lambda invocation in AWS ("+lambdaenv.RunLengthLimit.Want()+")")
	fs.DurationVar(&f.targetTimeout, "target-timeout", 0, "with --target: how long a takeover waits, past the lease, for invocations a crashed runner left running (at most "+reader.MaxFenceCut(0, 0).String()+" below the function's timeout); 0: the function's configured timeout, read with lambda:GetFunctionConfiguration (when it cannot be read, give the timeout here)")
	fs.StringVar(&f.invokeIdentity, "invoke-identity-arn", "", "the records' invokeIdentityArn (an IAM role ARN); empty: the caller's identity from STS")
	f.policy = addPolicyFlags(fs)
	fs.DurationVar(&f.progressEvery, "progress", DefaultProgressEvery, "how often to log a progress line (records delivered, shards held, the most lagging shard); 0: never")
	fs.BoolVar(&f.emf, "metrics", false, "write the CloudWatch EMF metric lines the Lambdas write to stdout here to stderr")
	logFormat, verbose := addLogFlags(fs, "info")
	for name, want := range map[string]string{
		"create-shards": lambdaenv.CreateShardsLimit.Want(), "batch-size": lambdaenv.BatchSizeLimit.Want(),
		"parallelization-factor": lambdaenv.ParallelizationFactorLimit.Want(), "tumbling-window-seconds": lambdaenv.TumblingWindowLimit.Want(),
		"poll-interval": lambdaenv.PollIntervalLimit.Want(), "run-length": lambdaenv.RunLengthLimit.Want(),
		"target-timeout": "0 (unknown) or " + lambdaenv.TargetTimeoutLimit.Want(), "max-retry-attempts": lambdaenv.RetryAttemptsLimit.Want(),
		"batching-window": lambdaenv.BatchingWindowLimit.Want(), "progress": "0 (never) or a positive duration such as 30s",
	} {
		fs.want(name, want)
	}
	if err := fs.parse(args); err != nil {
		return nil, reader.Options{}, err
	}
	f.logFormat, f.verbose = logFormat.value, *verbose
	ro, err := f.check()
	return f, ro, fs.withUsage(err)
}

// check checks the flags with the limits and checks the functions use, and
// returns the reader's failure policy.
func (f *runFlags) check() (reader.Options, error) {
	if f.stream == "" {
		return reader.Options{}, bad("--stream is required")
	}
	if _, err := shards.StreamName(f.stream); err != nil {
		return reader.Options{}, bad("--stream %q: want a stream name or a Kinesis stream ARN", f.stream)
	}
	start, err := lambdaenv.ParseStart(f.start)
	if err != nil {
		return reader.Options{}, bad("--start %q: %v", f.start, err)
	}
	f.start = start
	if f.deployedAt != "" {
		if f.deployed, err = time.Parse(time.RFC3339, f.deployedAt); err != nil {
			return reader.Options{}, bad("--deployed-at %q: want an RFC 3339 time such as 2026-12-01T10:00:00Z", f.deployedAt)
		}
	}
	if f.confirmSkip && f.start == "" {
		return reader.Options{}, bad("--confirm-skip without --start: only a start position skips records")
	}
	for _, c := range []struct {
		flag  string
		value string
		err   error
	}{
		{"--create-shards", strconv.Itoa(f.create), lambdaenv.CreateShardsLimit.Check(f.create)},
		{"--batch-size", strconv.Itoa(f.batch), lambdaenv.BatchSizeLimit.Check(f.batch)},
		{"--parallelization-factor", strconv.Itoa(f.factor), lambdaenv.ParallelizationFactorLimit.Check(f.factor)},
		{"--tumbling-window-seconds", strconv.Itoa(f.windowSeconds), lambdaenv.TumblingWindowLimit.Check(f.windowSeconds)},
		{"--read-ahead-mib", strconv.Itoa(f.readAheadMiB), lambdaenv.ReadAheadMiBLimit.Check(f.readAheadMiB)},
		{"--poll-interval", f.poll.String(), lambdaenv.PollIntervalLimit.Check(f.poll)},
		{"--run-length", f.runLength.String(), lambdaenv.RunLengthLimit.Check(f.runLength)},
	} {
		if c.err != nil {
			return reader.Options{}, bad("%s %s: %v", c.flag, c.value, c.err)
		}
	}
	if f.progressEvery < 0 {
		return reader.Options{}, bad("--progress %s: want 0 (never) or a positive duration such as 30s", f.progressEvery)
	}
	if f.targetTimeout != 0 {
		if err := lambdaenv.TargetTimeoutLimit.Check(f.targetTimeout); err != nil {
			return reader.Options{}, bad("--target-timeout %s: %v", f.targetTimeout, err)
		}
		if f.targetTimeout >= f.runLength {
			return reader.Options{}, bad("--target-timeout %s: want a timeout shorter than --run-length (%s): a run must be able to wait out one invocation", f.targetTimeout, f.runLength)
		}
	}
	if f.invokeIdentity != "" {
		if err := lambdaenv.CheckInvokeIdentityARN(f.invokeIdentity); err != nil {
			return reader.Options{}, bad("--invoke-identity-arn %q: %v", f.invokeIdentity, err)
		}
	}
	if err := lambdaenv.CheckTumblingWindow(f.windowSeconds, f.factor); err != nil {
		return reader.Options{}, bad("--parallelization-factor %d with --tumbling-window-seconds %d: %v", f.factor, f.windowSeconds, err)
	}
	o, err := f.policy.options(f.runLength)
	o.ParallelizationFactor = f.factor
	o.TumblingWindow = time.Duration(f.windowSeconds) * time.Second
	o.ReadAheadBytes = f.readAheadMiB << 20
	return o, err
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, ro, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if f.verbose {
		level = slog.LevelDebug
	}
	log := newLogger(stderr, f.logFormat, level)

	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	kc := awsconf.NewKinesis(cfg)
	streamARN, err := resolveStream(ctx, kc, f.stream, f.create, log)
	if err != nil {
		return err
	}
	var emfOut io.Writer = io.Discard
	if f.emf {
		emfOut = stderr
	}
	rec, err := metrics.New(emfOut, func(o *metrics.Options) { o.Logger = log })
	if err != nil {
		return err
	}
	defer rec.Flush()
	prog := newRunProgress(rec)
	store, err := openStore(ctx, cfg, f.table)
	if err != nil {
		return err
	}
	if err := checkStart(ctx, store, kc, streamARN, f, log); err != nil {
		return err
	}
	deployed, err := deployTime(f.deployed, kinesisNow(ctx, kc, streamARN, log))
	if err != nil {
		return err
	}
	if ro.OnFailure, err = handlers.OnFailureDestination(f.policy.destination, cfg); err != nil {
		return err
	}
	var tgt reader.Target = printTarget(stdout)
	if ro.TumblingWindow > 0 {
		tgt = printWindowTarget(stdout)
	}
	if f.target != "" {
		identity := f.invokeIdentity
		if identity == "" {
			identity = callerInvokeIdentity(ctx, awsconf.NewSTS(cfg), log)
		}
		if ro.TargetTimeout, ro.Fence, err = targetFence(ctx, cfg, f, log); err != nil {
			return err
		}
		if tgt, err = reader.NewLambdaTarget(awsconf.NewTargetLambda(cfg, ro.TargetTimeout), f.target, func(o *reader.LambdaOptions) {
			o.Region, o.InvokeIdentityARN = cfg.Region, identity
		}); err != nil {
			return err
		}
	}
	r, err := runner.New(runner.Options{
		// A start is deployed when this runner starts with it, on Kinesis's
		// clock, unless --deployed-at says when: of two runners with
		// different starts, the one deployed later is the newer generation
		// (docs/operations.md, start generations).
		Subscriptions: []coordinator.Subscription{{Stream: streamARN, Start: f.start, CreateShards: f.create, DeployedAt: deployed}},
		Store:         store,
		Kinesis:       kc,
		Reader:        withPolicy(reader.Options{Target: tgt, Mapping: reader.Mapping{BatchSize: int32(f.batch)}, PollInterval: f.poll, RunLength: f.runLength, Hooks: prog, Lag: rec.Lag, Logger: log}, ro),
		StopTimeout:   stopTimeout(ro.TargetTimeout),
		// Runners on one table share its shards (docs/operations.md, runners).
		Balance: &runner.Balance{},
		Logger:  log,
	})
	if err != nil {
		return err
	}
	log.Info("shardloop running; Ctrl-C stops (again: at once)", "stream", f.stream, "stream_arn", streamARN, "table", orMemory(f.table),
		"runner", r.ID())
	if f.progressEvery > 0 {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go reportProgress(pctx, log, f.progressEvery, prog, func() []string { return heldShards(r) })
	}
	return r.Run(ctx)
}

// targetFence reads the target's configured timeout, which the lease's
// fence covers (a takeover waits out invocations a crashed runner left
// running), and returns it with the fence: --target-timeout when given (at
// most reader.MaxFenceCut below the timeout), else the timeout. A timeout
// that cannot be read is an error unless --target-timeout stands in for it.
func targetFence(ctx context.Context, cfg aws.Config, f *runFlags, log *slog.Logger) (timeout, fence time.Duration, err error) {
	timeout, err = handlers.NewTargetTimeout(awsconf.NewLambda(cfg), f.target, "").Get(ctx)
	switch {
	case err != nil && f.targetTimeout > 0:
		log.Warn("could not read the target's configuration; taking --target-timeout as its timeout", "target_timeout", f.targetTimeout, "err", err)
		timeout = f.targetTimeout
	case err != nil:
		return 0, 0, fmt.Errorf("--target %s: %w (or give the function's timeout with --target-timeout)", f.target, err)
	}
	if fence, err = handlers.FenceFor(timeout, f.targetTimeout, f.runLength); err != nil {
		return 0, 0, fmt.Errorf("--target %s with --run-length %s and --target-timeout %s: %w", f.target, f.runLength, f.targetTimeout, err)
	}
	return timeout, fence, nil
}

// checkStart refuses a --start that would begin a new generation over
// records the table's current start has not delivered, unless
// --confirm-skip: it says on which shards, how many records and how old.
func checkStart(ctx context.Context, store coordinator.CheckStore, kc *kinesis.Client, streamARN string, f *runFlags, log *slog.Logger) error {
	if f.start == "" {
		return nil
	}
	check, err := coordinator.CheckStart(ctx, store, kc, coordinator.Subscription{Stream: streamARN, Start: f.start})
	if err != nil {
		return fmt.Errorf("--start %s: checking what it would skip: %w", f.start, err)
	}
	if !check.Begins || len(check.Skips) == 0 {
		return nil
	}
	if f.confirmSkip {
		log.Warn("--start skips records the table's current start has not delivered (--confirm-skip)", "start", f.start,
			"shards", len(check.Skips), "records", coordinator.Skipped(check.Skips), "skipped", skipLines(check.Skips))
		return nil
	}
	return &skipRefused{start: f.start, check: check}
}

// skipRefused is a --start refused because it would skip records not yet
// delivered.
type skipRefused struct {
	start string
	check coordinator.StartCheck
}

func (e *skipRefused) Error() string {
	var b strings.Builder
	rec := e.check.Recorded
	fmt.Fprintf(&b, "--start %s would skip records not yet delivered on %d shard(s) of %s", e.start, len(e.check.Skips), e.check.Stream)
	if e.check.Found {
		fmt.Fprintf(&b, ": the table's current start (%s", rec.Start)
		if rec.RecordedBy != "" {
			fmt.Fprintf(&b, ", recorded by %s", rec.RecordedBy)
		}
		if !rec.RecordedAt.IsZero() {
			fmt.Fprintf(&b, " at %s", rec.RecordedAt.UTC().Format(time.RFC3339))
		}
		b.WriteString(") has not delivered them")
	}
	b.WriteString(":\n")
	for _, l := range skipLines(e.check.Skips) {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("Start every runner of a table with the same --start (or none, to follow the start the table records), " +
		"or pass --confirm-skip to skip them: the new start applies to every shard, and these records are never delivered.")
	return b.String()
}

func skipLines(skips []coordinator.Skip) []string {
	out := make([]string, len(skips))
	for i, s := range skips {
		out[i] = s.String()
	}
	return out
}

// stopTimeout is how long Ctrl-C waits for the deliveries in flight: the
// runner's default, or one invocation of a target whose timeout is known,
// whichever is longer.
func stopTimeout(targetTimeout time.Duration) time.Duration {
	if targetTimeout == 0 {
		return runner.DefaultStopTimeout
	}
	return max(runner.DefaultStopTimeout, targetTimeout+awsconf.TargetTimeoutMargin)
}

// policyFlags are the failure policy and batching flags of run, with the
// shardreader's defaults and limits (docs/failure-policy.md).
type policyFlags struct {
	retries     int
	age         string
	bisect      bool
	destination string
	window      time.Duration
	deaggregate bool
	filters     filterFlag
}

func addPolicyFlags(fs *flags) *policyFlags {
	p := &policyFlags{}
	fs.IntVar(&p.retries, "max-retry-attempts", -1, "give a failing batch up after this many retries ("+lambdaenv.RetryAttemptsLimit.Want()+")")
	fs.StringVar(&p.age, "max-record-age", "-1", "give records older than this up (-1 for no limit, or "+lambdaenv.RecordAgeLimit.Want()+")")
	fs.BoolVar(&p.bisect, "bisect-on-error", false, "split a failing batch in halves, down to single records, to isolate bad records")
	fs.StringVar(&p.destination, "on-failure-destination", "", "SQS queue, SNS topic or S3 bucket ARN that gets a record of each batch given up; empty: logged only")
	fs.DurationVar(&p.window, "batching-window", 0, "keep reading up to this long to fill a batch ("+lambdaenv.BatchingWindowLimit.Want()+", under --run-length)")
	fs.BoolVar(&p.deaggregate, "deaggregate", false, "decode KPL-aggregated records into their user records")
	fs.Var(&p.filters, "filter", filterUsage)
	return p
}

// options checks the flags and returns them as reader options (without
// the destination, which needs the SDK config).
func (p *policyFlags) options(runLength time.Duration) (reader.Options, error) {
	var o reader.Options
	if err := lambdaenv.RetryAttemptsLimit.Check(p.retries); err != nil {
		return o, bad("--max-retry-attempts %d: %v", p.retries, err)
	}
	o.MaximumRetryAttempts = reader.RetryAttempts(p.retries)
	if p.age != "-1" && p.age != "" {
		d, err := time.ParseDuration(p.age)
		if err == nil {
			err = lambdaenv.RecordAgeLimit.Check(d)
		}
		if err != nil {
			return o, bad("--max-record-age %s: want -1 (no limit) or %s", p.age, lambdaenv.RecordAgeLimit.Want())
		}
		o.MaximumRecordAge = d
	}
	if err := lambdaenv.BatchingWindowLimit.Check(p.window); err != nil || (p.window > 0 && p.window >= runLength) {
		return o, bad("--batching-window %s: want %s, shorter than --run-length (%s)", p.window, lambdaenv.BatchingWindowLimit.Want(), runLength)
	}
	if p.destination != "" {
		if _, err := reader.ParseDestinationARN(p.destination); err != nil {
			return o, bad("--on-failure-destination %s: want %s", p.destination, reader.DestinationForms)
		}
	}
	o.BisectBatchOnFunctionError, o.MaximumBatchingWindow, o.Deaggregate = p.bisect, p.window, p.deaggregate
	if err := p.filters.check(); err != nil {
		return o, err
	}
	o.FilterCriteria = p.filters
	return o, nil
}

// withPolicy sets p's failure policy and batching fields on o.
func withPolicy(o, p reader.Options) reader.Options {
	o.MaximumRetryAttempts, o.MaximumRecordAge, o.BisectBatchOnFunctionError = p.MaximumRetryAttempts, p.MaximumRecordAge, p.BisectBatchOnFunctionError
	o.OnFailure, o.MaximumBatchingWindow, o.Deaggregate = p.OnFailure, p.MaximumBatchingWindow, p.Deaggregate
	o.TargetTimeout, o.Fence, o.ParallelizationFactor = p.TargetTimeout, p.Fence, p.ParallelizationFactor
	o.TumblingWindow = p.TumblingWindow
	o.FilterCriteria, o.ReadAheadBytes = p.FilterCriteria, p.ReadAheadBytes
	return o
}

func orMemory(table string) string {
	if table == "" {
		return "(memory)"
	}
	return table
}

func openStore(ctx context.Context, cfg aws.Config, table string) (lease.Store, error) {
	if table == "" {
		return lease.NewMemoryStore()
	}
	ddb := awsconf.NewDynamoDB(cfg)
	if err := lease.CreateTable(ctx, ddb, table); err != nil {
		return nil, fmt.Errorf("--table %s at %s: %w", table, dynamoEndpoint(ctx, ddb), err)
	}
	return lease.NewDynamoStore(ddb, table)
}

// printTarget prints each record to w and settles the batch. Loops deliver
// at once, so each batch is printed in one write under a lock: lines of two
// shards never interleave, and w needs no locking of its own.
func printTarget(w io.Writer) reader.Target {
	p := &printer{w: w}
	return reader.FuncTarget(func(_ context.Context, b reader.Batch) (int, error) {
		p.print(b.ShardID, "", b.Records)
		return len(b.Records), nil
	})
}

// printWindowTarget prints each record and each window's final invocation
// to w, counting the window's records in its state.
func printWindowTarget(w io.Writer) reader.Target {
	p := &printer{w: w}
	return reader.WindowFunc(func(_ context.Context, b reader.WindowBatch) (int, json.RawMessage, error) {
		var st struct {
			Records int `json:"records,string"`
		}
		_ = json.Unmarshal(b.State, &st)
		closed := ""
		if b.Final {
			closed = fmt.Sprintf("%s %s window %s to %s closed: %d records (terminated early: %v)\n", time.Now().Format(time.TimeOnly), b.ShardID,
				b.Window.Start.Format(time.RFC3339), b.Window.End.Format(time.RFC3339), st.Records, b.TerminatedEarly)
		}
		p.print(b.ShardID, closed, b.Records)
		st.Records += len(b.Records)
		out, err := json.Marshal(st)
		return len(b.Records), out, err
	})
}

// printer writes the batches of every loop to one writer.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

// print writes head, then a line for each record, in one write.
func (p *printer) print(shardID, head string, recs []ktypes.Record) {
	var b strings.Builder
	b.WriteString(head)
	now := time.Now().Format(time.TimeOnly)
	for _, r := range recs {
		fmt.Fprintf(&b, "%s %s %s key=%s data=%s\n", now, shardID, aws.ToString(r.SequenceNumber), aws.ToString(r.PartitionKey), printable(r.Data))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.w, b.String())
}

func printable(b []byte) string {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return "base64:" + base64.StdEncoding.EncodeToString(b)
		}
	}
	return string(b)
}

// maxDeployAhead is how far past Kinesis's clock --deployed-at may be: a
// host's clock that runs a little fast, not a time to come.
const maxDeployAhead = time.Minute

// deployTime is the deploy time a runner's configuration is ordered by:
// given (--deployed-at), or now (Kinesis's clock) when not. A given time
// later than now would order this configuration after every deployment
// made until then, so it is refused.
func deployTime(given, now time.Time) (time.Time, error) {
	if given.IsZero() {
		return now, nil
	}
	if given.After(now.Add(maxDeployAhead)) {
		return time.Time{}, bad("--deployed-at %s is later than Kinesis's clock (%s): a deploy time to come would order this configuration after every deployment made until then; give the time it was deployed",
			given.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return given, nil
}
