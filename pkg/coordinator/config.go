package coordinator

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/shardloop/shardloop/pkg/lease"
	"github.com/shardloop/shardloop/pkg/shards"
)

// Defaults.
const (
	// DefaultRelistInterval is how often Run lists shards within its window.
	DefaultRelistInterval = 10 * time.Second
	// DefaultWindow is a window that fills the one-minute schedule, for Run.
	// Deployments run without one by default (Once, Watch; see Serve).
	DefaultWindow = 55 * time.Second
)

// Subscription is one stream read by one deployment.
type Subscription struct {
	// Stream is the stream's name or ARN.
	Stream string
	// Start is the explicitly configured start position in text form
	// ("latest", "horizon", "timestamp:<unix ms>", "sequence:<shard>:<seq>"),
	// or empty for none. A configured start is a generation: the first
	// coordinator of it applies it once to the shards listed then,
	// overriding their checkpoints (see lease.Generation). With none, no
	// checkpoint ever moves: a shard without one opens at the tip, pinned
	// when first recorded.
	Start string
	// Generation names the configured start; empty derives it from the
	// stream and Start, so a changed start position is a new generation.
	// Ignored without a Start.
	Generation string
	// CreateShards, when positive, creates a missing stream in provisioned
	// mode with that many shards.
	CreateShards int
	// DeployedAt is when this configuration was deployed (the coordinator
	// function's last update; a local runner's start), zero when unknown.
	// Between two configurations that both know theirs, the one deployed
	// later is the newer generation, whichever coordinator passes first;
	// otherwise the one the table has not seen is (lease.Generation).
	DeployedAt time.Time
}

// Config configures a Coordinator.
type Config struct {
	Subscriptions []Subscription
	// RelistInterval between the passes of Run; default
	// DefaultRelistInterval. Serve, Once and Watch do not relist.
	RelistInterval time.Duration
	// Logger; default discards.
	Logger *slog.Logger
	// Clock; default time.Now.
	Clock func() time.Time
	// NewOwner returns a fresh owner id for a shard; default OwnerID. It must
	// be unique and, for Step Functions, at most 80 characters of letters,
	// digits, '-' and '_'.
	NewOwner func(shardID string) string
	// LeaseDuration is how long a lease's counter must stand still, on this
	// coordinator's clock, before its shard is taken from the owner that
	// stopped renewing it; default lease.DefaultDuration. It must be at
	// least the readers' lease duration.
	LeaseDuration time.Duration
	// Name identifies this coordinator in the generation records it writes
	// (RecordedBy); default "coordinator".
	Name string
	// OnPass, when set, is called with each stream's result after every
	// pass (for metrics). It must be fast.
	OnPass func(StreamResult)
	// Observer, when set, is the lease observer the coordinator judges
	// lapses with (its LeaseDuration must be LeaseDuration's). A local
	// runner that shares a table shares its own, which also reads the rows
	// the other runners hold between passes, so that a pass after one of
	// them crashed finds its leases lapsed when they are. nil: a new one.
	Observer *lease.Observer
	// Claim, when set, chooses which of a stream's leasable shards this
	// coordinator takes in a pass: it gets the pass's decision and returns
	// the shards to take, a subset of d.Leasable. The others are left for
	// another coordinator on the same table (StreamResult.Declined). A local
	// runner that shares the table with other runners uses it to take its
	// fair share only. It must be fast. nil: every leasable shard is taken
	// (the coordinator Lambda).
	Claim func(stream string, d shards.Decision) []shards.Shard
}

// ErrInvalidConfig is matched by every configuration error.
var ErrInvalidConfig = errors.New("invalid coordinator configuration")

// ConfigError names the refused field.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string   { return fmt.Sprintf("coordinator: %s: %s", e.Field, e.Reason) }
func (e *ConfigError) Is(t error) bool { return t == ErrInvalidConfig }

func (c *Config) setDefaults() {
	if c.RelistInterval == 0 {
		c.RelistInterval = DefaultRelistInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.NewOwner == nil {
		c.NewOwner = OwnerID
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = lease.DefaultDuration
	}
	if c.Name == "" {
		c.Name = "coordinator"
	}
	for i := range c.Subscriptions {
		s := &c.Subscriptions[i]
		if s.Start != "" && s.Generation == "" {
			s.Generation = generationOf(s.Stream, s.Start)
		}
	}
}

func (c Config) validate() error {
	if len(c.Subscriptions) == 0 {
		return &ConfigError{Field: "Subscriptions", Reason: "want at least one subscription"}
	}
	if c.RelistInterval < 0 {
		return &ConfigError{Field: "RelistInterval", Reason: "want a positive duration"}
	}
	if c.LeaseDuration < 0 {
		return &ConfigError{Field: "LeaseDuration", Reason: "want a positive duration"}
	}
	seen := map[string]int{}
	for i, s := range c.Subscriptions {
		field := fmt.Sprintf("Subscriptions[%d]", i)
		name, err := shards.StreamName(s.Stream)
		if err != nil {
			return &ConfigError{Field: field + ".Stream", Reason: err.Error()}
		}
		if j, dup := seen[name]; dup {
			return &ConfigError{Field: field + ".Stream", Reason: fmt.Sprintf("stream %q is already read by Subscriptions[%d]: one deployment reads a stream through one subscription", name, j)}
		}
		seen[name] = i
		if s.Start != "" {
			if err := checkStart(s.Start); err != nil {
				return &ConfigError{Field: field + ".Start", Reason: err.Error()}
			}
			if s.Generation == lease.DefaultGeneration {
				return &ConfigError{Field: field + ".Generation", Reason: fmt.Sprintf("%q is the id of a subscription without a start", lease.DefaultGeneration)}
			}
		}
		if s.CreateShards < 0 || s.CreateShards > 10000 {
			return &ConfigError{Field: field + ".CreateShards", Reason: fmt.Sprintf("%d: want 0 (never create) to 10000", s.CreateShards)}
		}
	}
	return nil
}

func generationOf(stream, start string) string {
	h := fnv.New64a()
	name, _ := shards.StreamName(stream)
	h.Write([]byte(name + "\x00" + start))
	return fmt.Sprintf("g%016x", h.Sum64())
}
