package shards

import (
	"os"
	"testing"

	"github.com/shardloop/shardloop/internal/testaws"
)

func TestMain(m *testing.M) { os.Exit(testaws.Main(m)) }
