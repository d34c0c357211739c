package e2e

import (
	"os"
	"testing"

	"github.com/shardloop/shardloop/internal/testaws"
)

func TestMain(m *testing.M) {
	code := testaws.Main(m) // stops kinesis-local and dynalite
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
