package reader

import (
	"errors"
	"testing"
)

func TestParseUserPosition_ReadsRFC3339TimesAndEveryTextForm(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"latest", "latest"},
		{"horizon", "horizon"},
		{"timestamp:1700000000123", "timestamp:1700000000123"},
		{"timestamp:2023-11-14T22:13:20Z", "timestamp:1700000000000"},
		{"timestamp:2023-11-14T23:13:20.123456+01:00", "timestamp:1700000000123"},
		{"sequence:shardId-000000000001:4959", "sequence:shardId-000000000001:4959"},
	} {
		p, err := ParseUserPosition(c.in)
		if err != nil || p.String() != c.want {
			t.Errorf("ParseUserPosition(%q) = %q, %v; want %q", c.in, p.String(), err, c.want)
		}
	}
	for _, in := range []string{"timestamp:yesterday", "timestamp:-5", "timestamp:1969-12-31T23:59:59Z", "timestamp:2024-01-01", "oldest", "sequence:4959"} {
		if _, err := ParseUserPosition(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseUserPosition(%q): err = %v, want ErrInvalid", in, err)
		}
	}
}
