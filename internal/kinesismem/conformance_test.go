package kinesismem_test

import (
	"os"
	"testing"

	"github.com/shardloop/shardloop/internal/kinesismem"
	"github.com/shardloop/shardloop/internal/kinesismem/kinesistest"
	"github.com/shardloop/shardloop/internal/testaws"
)

func TestMain(m *testing.M) { os.Exit(testaws.Main(m)) }

// TestConformance_Model runs the suite on the model, with the default clock
// and without read limits (the suite reads a shard far more than 5 times a
// second; it would pass with them, retrying, but take seconds a case; the
// limits have their own tests). The model follows AWS, so no case is
// skipped.
func TestConformance_Model(t *testing.T) {
	kinesistest.Run(t, func(t *testing.T) kinesistest.Target {
		c, err := kinesismem.New(kinesismem.Options{NoReadLimits: true})
		if err != nil {
			t.Fatal(err)
		}
		return kinesistest.Target{API: c, Name: testaws.Name}
	})
}

// TestConformance_KinesisLocal runs the suite on kinesis-local, skipping the
// cases where it is known to differ from AWS.
func TestConformance_KinesisLocal(t *testing.T) {
	kinesistest.Run(t, func(t *testing.T) kinesistest.Target {
		return kinesistest.Target{API: testaws.Kinesis(t), Quirks: kinesistest.KinesisLocal, Name: testaws.Name}
	})
}
