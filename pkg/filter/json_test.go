package filter

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// toAny turns a tape node into what encoding/json decodes (UseNumber), so
// the parser can be checked against the standard library. Duplicate keys
// keep the last value, as encoding/json does.
func toAny(t *tape, n int32) any {
	nd := t.nodes[n]
	switch nd.kind {
	case kNull:
		return nil
	case kTrue:
		return true
	case kFalse:
		return false
	case kNumber:
		return json.Number(nd.s)
	case kString:
		return string(nd.s)
	case kArray:
		a := []any{}
		for _, e := range t.elems[nd.first : nd.first+nd.n] {
			a = append(a, toAny(t, e))
		}
		return a
	}
	m := map[string]any{}
	for _, mb := range t.members[nd.first : nd.first+nd.n] {
		m[string(mb.key)] = toAny(t, mb.val)
	}
	return m
}

// stdDecode is the reference: valid JSON (and UTF-8, which RFC 8259
// requires and encoding/json does not check) decoded with numbers kept as
// written.
func stdDecode(b []byte) (any, bool) {
	if !utf8.Valid(b) || !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func checkParse(t *testing.T, in []byte) {
	t.Helper()
	var tp tape
	root, ok := tp.parse(in)
	want, wantOK := stdDecode(in)
	if ok != wantOK {
		t.Fatalf("parse(%q) ok = %v, encoding/json says valid = %v", in, ok, wantOK)
	}
	if ok {
		if got := toAny(&tp, root); !reflect.DeepEqual(got, want) {
			t.Fatalf("parse(%q) = %#v, encoding/json decodes %#v", in, got, want)
		}
	}
}

var parseSeeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `-1.5e+10`, `1E-2`, `"x"`, ` {"a" : [1, "b", null, true, false, {"c": {}}]} `,
	`{"a": "\"\\\/\b\f\n\r\t\u00e9\u20ac\ud83d\ude00"}`, `{"lone": "\ud800", "low": "\udc00x", "pair-bad": "\ud800\u0041"}`,
	`{"a":1,"a":2}`, `[[[[]]]]`, `{"k\u0000": 1}`,
	// not JSON
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a: 1}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`, `tru`, `nul`, `"abc`, `"\x"`, `"\u12"`,
	"\"a\x01\"", `{"a":1} {"b":2}`, `[1] x`, `NaN`, `Infinity`, "\xff", "\"\xc3\x28\"", `'a'`, `{"a":[1 2]}`,
}

func TestParse_AgreesWithEncodingJSON(t *testing.T) {
	for _, s := range parseSeeds {
		checkParse(t, []byte(s))
	}
}

func TestParse_DeepNestingIsNotJSON(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	var tp tape
	if _, ok := tp.parse([]byte(deep)); ok {
		t.Error("a document nested deeper than maxDepth parsed")
	}
	ok := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	if _, good := tp.parse([]byte(ok)); !good {
		t.Error("a document nested exactly maxDepth deep did not parse")
	}
}

func TestParse_ReusesItsSpaceAcrossRecords(t *testing.T) {
	var tp tape
	doc := []byte(`{"a": [1, 2, {"b": "c\n"}], "d": "e"}`)
	tp.parse(doc)
	allocs := testing.AllocsPerRun(100, func() {
		tp.reset()
		if _, ok := tp.parse(doc); !ok {
			t.Fatal("parse failed")
		}
	})
	if allocs != 0 {
		t.Errorf("parse allocates %.0f times per record once warm", allocs)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkParse(t, in)
	})
}

// FuzzMatch: Compile never panics, and Match never panics on any record
// for a pattern Compile accepted.
func FuzzMatch(f *testing.F) {
	f.Add(`{"data": {"a": [{"numeric": [">", 0]}, "x", null, {"prefix": {"equals-ignore-case": "Ab"}}]}}`, []byte(`{"a": [1, {"a": 2}, "abc"]}`), "pk")
	f.Add(`{"$or": [{"partitionKey": [{"suffix": "k"}]}, {"data": {"b": {"c": [{"exists": false}]}}}]}`, []byte(`[{"b": []}]`), "k")
	f.Add(`{"data": {"s": [{"anything-but": [1, 2]}], "t": [{"equals-ignore-case": "ß"}]}}`, []byte(`{"s": 3, "t": "SS"}`), "")
	f.Fuzz(func(t *testing.T, pattern string, data []byte, pk string) {
		s, err := Compile([]string{pattern})
		if err != nil {
			return
		}
		r := rec(string(data))
		r.PartitionKey = pk
		s.Match(r)
	})
}
