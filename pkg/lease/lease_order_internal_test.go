package lease

import (
	"fmt"
	"strings"
	"testing"
)

// checkpointOrder writes the length as fmt's %03d did, at every length.
func TestCheckpointOrder_AsFmtWroteIt(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 56, 99, 100, 128, 999, 1000, 1234} {
		for _, zeros := range []string{"", "000"} {
			seq := zeros + strings.Repeat("7", n)
			digits := strings.Repeat("7", n)
			if got, want := checkpointOrder(seq), fmt.Sprintf("%03d", n)+digits; got != want {
				t.Errorf("checkpointOrder(%d digits after %q zeros) = %.10q…, want %.10q…", n, zeros, got, want)
			}
		}
	}
	if got := checkpointOrder(ShardEnd); got != "~" {
		t.Errorf("checkpointOrder(ShardEnd) = %q, want ~", got)
	}
}
