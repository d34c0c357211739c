package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTumblingWindow_RunFlagCheckedNamingTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--tumbling-window-seconds", "901"}, []string{"--tumbling-window-seconds 901", "from 0 to 900", "TumblingWindowInSeconds"}},
		{[]string{"--tumbling-window-seconds", "-1"}, []string{"--tumbling-window-seconds -1", "from 0 to 900"}},
		{[]string{"--tumbling-window-seconds", "60", "--parallelization-factor", "2"}, []string{"--parallelization-factor 2 with --tumbling-window-seconds 60", "refuses ParallelizationFactor above 1"}},
	} {
		_, _, err := parseRunFlags(append([]string{"--stream", "orders"}, c.args...))
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", c.args, err, w)
			}
		}
	}
	_, o, err := parseRunFlags([]string{"--stream", "orders", "--tumbling-window-seconds", "120"})
	if err != nil || o.TumblingWindow != 2*time.Minute {
		t.Fatalf("--tumbling-window-seconds 120: %v, %v; want a 2m window", o.TumblingWindow, err)
	}
}
