package lambdaenv_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardloop/shardloop/internal/lambdaenv"
)

func TestTumblingWindow_ReaderFromEnvTakesOneTo900SecondsAndRefusesTheRest(t *testing.T) {
	base := func(kv ...string) map[string]string {
		m := map[string]string{"SHARDLOOP_LEASE_TABLE": "t", "SHARDLOOP_TARGET_FUNCTION": "f"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	r, err := lambdaenv.ReaderFromEnv(getenv(base()))
	if err != nil || r.ReaderPolicy().TumblingWindow != 0 {
		t.Fatalf("default: %+v, %v; want no window", r, err)
	}
	for v, want := range map[string]time.Duration{"0": 0, "1": time.Second, "120": 2 * time.Minute, "900": 15 * time.Minute} {
		r, err := lambdaenv.ReaderFromEnv(getenv(base("SHARDLOOP_TUMBLING_WINDOW_SECONDS", v)))
		if err != nil || r.ReaderPolicy().TumblingWindow != want {
			t.Errorf("SHARDLOOP_TUMBLING_WINDOW_SECONDS=%s: %v, %v; want %s", v, r.TumblingWindow, err, want)
		}
	}
	for _, v := range []string{"901", "-1", "1m", "two"} {
		_, err := lambdaenv.ReaderFromEnv(getenv(base("SHARDLOOP_TUMBLING_WINDOW_SECONDS", v)))
		if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), "SHARDLOOP_TUMBLING_WINDOW_SECONDS=\""+v+"\"") || !strings.Contains(err.Error(), "from 0 to 900") {
			t.Errorf("SHARDLOOP_TUMBLING_WINDOW_SECONDS=%s: err = %v, want one naming the variable and 0 to 900", v, err)
		}
	}
	_, err = lambdaenv.ReaderFromEnv(getenv(base("SHARDLOOP_TUMBLING_WINDOW_SECONDS", "60", "SHARDLOOP_PARALLELIZATION_FACTOR", "2")))
	if !errors.Is(err, lambdaenv.ErrEnv) || !strings.Contains(err.Error(), "SHARDLOOP_PARALLELIZATION_FACTOR=\"2\"") || !strings.Contains(err.Error(), "SHARDLOOP_TUMBLING_WINDOW_SECONDS = 60") {
		t.Errorf("a window with factor 2: err = %v, want one naming both variables", err)
	}
}
