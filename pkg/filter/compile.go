package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of Lambda's FilterCriteria.
const (
	// MaxFilters is the most filters one event source mapping can have:
	// 5 by default, up to 10 with a quota increase ("Control which events
	// Lambda sends to your function",
	// https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html).
	// shardloop has no quota and takes up to 10, so a mapping with the
	// raised quota translates as it is.
	MaxFilters = 10
	// MaxPatternLength is the longest pattern, in characters (Filter.Pattern,
	// https://docs.aws.amazon.com/lambda/latest/api/API_Filter.html).
	MaxPatternLength = 4096
	// numericLimit bounds the operands of a numeric rule: EventBridge's
	// pattern engine compares numbers between -5.0e9 and +5.0e9 with six
	// digits after the decimal point (Event Ruler's README, "Numeric
	// matching"; the EventBridge user guide, "Numeric matching").
	numericLimit = 5e9
)

// The fields of a Kinesis record a pattern may name at its top level. The
// data key is the record's payload, decoded from base64 and parsed as
// JSON; the others are the record's metadata as Lambda's event shows them
// in its "kinesis" object.
const (
	FieldData                        = "data"
	FieldPartitionKey                = "partitionKey"
	FieldSequenceNumber              = "sequenceNumber"
	FieldApproximateArrivalTimestamp = "approximateArrivalTimestamp"
	FieldKinesisSchemaVersion        = "kinesisSchemaVersion"
)

type rootField uint8

const (
	rootNone rootField = iota
	rootData
	rootPartitionKey
	rootSequenceNumber
	rootArrival
	rootSchemaVersion
	rootCount
)

var rootFields = map[string]rootField{
	FieldData:                        rootData,
	FieldPartitionKey:                rootPartitionKey,
	FieldSequenceNumber:              rootSequenceNumber,
	FieldApproximateArrivalTimestamp: rootArrival,
	FieldKinesisSchemaVersion:        rootSchemaVersion,
}

// objPat is an object of field patterns, all of which must match, and of
// $or lists, each of which needs one matching branch.
type objPat struct {
	fields []fieldPat
	ors    [][]*objPat
}

// fieldPat is one named field: either nested fields (sub) or a list of
// rules for its value (leaf). At the top level, root says which field of
// the record it is.
type fieldPat struct {
	name string
	root rootField
	sub  *objPat
	leaf *leafPat
}

// leafPat is a field's list of rules, any of which may match.
type leafPat struct {
	rules []rule
	// absent: a rule {"exists": false} is in the list, so a field that is
	// missing (or has no value that is not an object) matches.
	absent bool
}

type ruleKind uint8

const (
	rEqString ruleKind = iota
	rEqNumber
	rTrue
	rFalse
	rNull
	rPrefix
	rSuffix
	rEqualsFold
	rPrefixFold
	rSuffixFold
	rAnythingBut
	rNumeric
	rExists
)

type rule struct {
	kind ruleKind
	s    string   // the operand of an equality, prefix, suffix
	b    []byte   // s as bytes, for equals-ignore-case
	strs []string // anything-but strings
	nums []string // anything-but numbers, as written
	// numeric: bounds in millionths (see quantize).
	lo, hi         int64
	hasLo, hasHi   bool
	loIncl, hiIncl bool
}

// Set is a compiled FilterCriteria: a record passes when any of its filters
// matches it. The zero Set (and a Set from no patterns) passes everything.
// A Set is safe for concurrent use.
type Set struct {
	patterns []string
	meta     []*objPat // filters that name no data field
	data     []*objPat // filters that name data
	// need says which metadata fields some filter names, so Match builds
	// only those.
	need [rootCount]bool
}

// Compile checks and compiles the patterns of one FilterCriteria, the
// strings of its Filters[].Pattern, in order. No patterns means every
// record passes. A bad pattern is an *Error naming the filter, where in it
// the problem is and what was expected.
func Compile(patterns []string) (*Set, error) {
	if len(patterns) > MaxFilters {
		return nil, &Error{Index: -1, Problem: fmt.Sprintf("%d filters: Lambda allows at most %d per event source mapping (5 by default)", len(patterns), MaxFilters)}
	}
	s := &Set{patterns: append([]string(nil), patterns...)}
	for i, p := range patterns {
		c := compiler{index: i}
		root, err := c.pattern(p)
		if err != nil {
			return nil, err
		}
		if c.need[rootData] {
			s.data = append(s.data, root)
		} else {
			s.meta = append(s.meta, root)
		}
		for f, n := range c.need {
			s.need[f] = s.need[f] || n
		}
	}
	return s, nil
}

// Len is the number of filters.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.patterns)
}

// Patterns returns the patterns the Set was compiled from, in order.
func (s *Set) Patterns() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.patterns...)
}

// NeedsData reports whether some filter names the data field, that is
// whether Match parses records' data.
func (s *Set) NeedsData() bool { return s != nil && len(s.data) > 0 }

// ParseCriteria reads a FilterCriteria in the JSON shape of Lambda's API,
// CLI and CloudFormation ({"Filters": [{"Pattern": "..."}]}; key case is
// not significant, as the CLI also writes "filters" and "pattern") and
// compiles its patterns. An empty object, or no Filters, passes
// everything.
func ParseCriteria(criteria []byte) (*Set, error) {
	var fc struct {
		Filters []struct {
			Pattern *string
		}
	}
	dec := json.NewDecoder(bytes.NewReader(criteria))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return nil, &Error{Index: -1, Problem: fmt.Sprintf(`not a FilterCriteria object {"Filters": [{"Pattern": "..."}]}: %v`, err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Index: -1, Problem: "text after the FilterCriteria object"}
	}
	patterns := make([]string, 0, len(fc.Filters))
	for i, f := range fc.Filters {
		if f.Pattern == nil {
			return nil, &Error{Index: i, Problem: "the filter has no Pattern"}
		}
		patterns = append(patterns, *f.Pattern)
	}
	return Compile(patterns)
}

type compiler struct {
	index int
	need  [rootCount]bool
}

func (c *compiler) errf(path, format string, args ...any) error {
	return &Error{Index: c.index, Path: path, Problem: fmt.Sprintf(format, args...)}
}

func (c *compiler) pattern(p string) (*objPat, error) {
	if strings.TrimSpace(p) == "" {
		return nil, c.errf("", "the pattern is empty")
	}
	if n := utf8.RuneCountInString(p); n > MaxPatternLength {
		return nil, c.errf("", "the pattern is %d characters long; Lambda takes at most %d", n, MaxPatternLength)
	}
	dec := json.NewDecoder(strings.NewReader(p))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, c.errf("", "the pattern is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, c.errf("", "the pattern is not valid JSON: text after its closing brace")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, c.errf("", "a pattern is a JSON object of fields, such as {\"data\": {\"type\": [\"buy\"]}}; got %s", describe(v))
	}
	return c.object(obj, "", true)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func at(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// object compiles an object of fields; top says it is the pattern's top
// level (or a $or branch there), where the names are the record's fields.
func (c *compiler) object(m map[string]any, path string, top bool) (*objPat, error) {
	if len(m) == 0 {
		if path == "" {
			return nil, c.errf("", "the pattern names no field, so Lambda would refuse it")
		}
		return nil, c.errf(path, "an empty object names no field; give the nested fields to match, or a list of rules such as [{\"exists\": true}]")
	}
	p := &objPat{}
	for _, key := range sortedKeys(m) {
		v := m[key]
		kp := join(path, key)
		if key == "$or" {
			branches, err := c.or(v, kp, top)
			if err != nil {
				return nil, err
			}
			p.ors = append(p.ors, branches)
			continue
		}
		f := fieldPat{name: key}
		if top {
			f.root = rootFields[key]
			if f.root == rootNone {
				return nil, c.errf(kp, "Lambda filters a Kinesis record on %q (its payload, parsed as JSON) and on its metadata %q, %q, %q and %q; %q is none of them (data fields go inside \"data\")",
					FieldData, FieldPartitionKey, FieldSequenceNumber, FieldApproximateArrivalTimestamp, FieldKinesisSchemaVersion, key)
			}
			c.need[f.root] = true
		}
		switch v := v.(type) {
		case map[string]any:
			if top && f.root != rootData {
				return nil, c.errf(kp, "%s is a single value: give it a list of rules, such as [\"value\"] or [{\"prefix\": \"x\"}]", key)
			}
			sub, err := c.object(v, kp, false)
			if err != nil {
				return nil, err
			}
			f.sub = sub
		case []any:
			if top && f.root == rootData {
				return nil, c.errf(kp, "the data pattern must be a JSON object of data fields, such as {\"data\": {\"type\": [\"buy\"]}}: Lambda refuses a data pattern that is not JSON")
			}
			leaf, err := c.rules(v, kp)
			if err != nil {
				return nil, err
			}
			f.leaf = leaf
		default:
			return nil, c.errf(kp, "a field takes a list of rules, such as [%s], or an object of nested fields; got %s", jsonText(v), describe(v))
		}
		p.fields = append(p.fields, f)
	}
	return p, nil
}

func (c *compiler) or(v any, path string, top bool) ([]*objPat, error) {
	list, ok := v.([]any)
	if !ok || len(list) < 2 {
		return nil, c.errf(path, "$or takes a list of at least two patterns, such as [{\"a\": [1]}, {\"b\": [2]}]; got %s", describe(v))
	}
	branches := make([]*objPat, 0, len(list))
	for i, b := range list {
		bm, ok := b.(map[string]any)
		if !ok {
			return nil, c.errf(at(path, i), "a $or branch is an object of fields; got %s", describe(b))
		}
		if len(bm) == 0 {
			return nil, c.errf(at(path, i), "an empty $or branch names no field")
		}
		p, err := c.object(bm, at(path, i), top)
		if err != nil {
			return nil, err
		}
		branches = append(branches, p)
	}
	return branches, nil
}

func (c *compiler) rules(list []any, path string) (*leafPat, error) {
	if len(list) == 0 {
		return nil, c.errf(path, "the list of rules is empty, so it can never match (to match null, write [null])")
	}
	leaf := &leafPat{rules: make([]rule, 0, len(list))}
	for i, v := range list {
		rp := at(path, i)
		switch v := v.(type) {
		case string:
			leaf.rules = append(leaf.rules, rule{kind: rEqString, s: v})
		case json.Number:
			leaf.rules = append(leaf.rules, rule{kind: rEqNumber, s: v.String()})
		case bool:
			k := rFalse
			if v {
				k = rTrue
			}
			leaf.rules = append(leaf.rules, rule{kind: k})
		case nil:
			leaf.rules = append(leaf.rules, rule{kind: rNull})
		case map[string]any:
			r, err := c.operator(v, rp)
			if err != nil {
				return nil, err
			}
			if r.kind == rExists && r.s == "false" {
				leaf.absent = true
				continue
			}
			leaf.rules = append(leaf.rules, r)
		default:
			return nil, c.errf(rp, "a rule is a value (string, number, true, false, null) or an operator object such as {\"prefix\": \"x\"}; got %s", describe(v))
		}
	}
	return leaf, nil
}

// Operators of EventBridge that Lambda event filtering does not take:
// the EventBridge user guide's table of comparison operators marks them
// "Pipe support: No" (Lambda and Pipes share the filter syntax), and
// Lambda's own list of operators leaves them out.
var unsupported = map[string]string{
	"wildcard": "wildcard is an EventBridge event-bus operator that Lambda event filtering does not support",
	"cidr":     "cidr (IP address matching) is an EventBridge event-bus operator that Lambda event filtering does not support",
}

func (c *compiler) operator(m map[string]any, path string) (rule, error) {
	if len(m) != 1 {
		return rule{}, c.errf(path, "an operator object takes exactly one operator, such as {\"prefix\": \"us-\"}; got %d keys", len(m))
	}
	var op string
	var v any
	for op, v = range m {
	}
	opPath := join(path, op)
	switch op {
	case "prefix", "suffix":
		fold := rPrefixFold
		plain := rPrefix
		if op == "suffix" {
			fold, plain = rSuffixFold, rSuffix
		}
		switch v := v.(type) {
		case string:
			return rule{kind: plain, s: v}, nil
		case map[string]any:
			s, ok := v["equals-ignore-case"].(string)
			if len(v) != 1 || !ok {
				return rule{}, c.errf(opPath, "%s takes a string, or {\"equals-ignore-case\": \"string\"}; got %s", op, jsonText(v))
			}
			return rule{kind: fold, s: s}, nil
		}
		return rule{}, c.errf(opPath, "%s takes a string; got %s", op, describe(v))
	case "equals-ignore-case":
		s, ok := v.(string)
		if !ok {
			return rule{}, c.errf(opPath, "equals-ignore-case takes a string; got %s", describe(v))
		}
		return rule{kind: rEqualsFold, s: s, b: []byte(s)}, nil
	case "anything-but":
		return c.anythingBut(v, opPath)
	case "numeric":
		return c.numeric(v, opPath)
	case "exists":
		b, ok := v.(bool)
		if !ok {
			return rule{}, c.errf(opPath, "exists takes true or false; got %s", describe(v))
		}
		return rule{kind: rExists, s: strconv.FormatBool(b)}, nil
	}
	if why, ok := unsupported[op]; ok {
		return rule{}, c.errf(opPath, "%s", why)
	}
	return rule{}, c.errf(opPath, "unknown operator %q; Lambda takes prefix, suffix, equals-ignore-case, anything-but, numeric and exists", op)
}

func (c *compiler) anythingBut(v any, path string) (rule, error) {
	r := rule{kind: rAnythingBut}
	switch v := v.(type) {
	case string:
		r.strs = []string{v}
		return r, nil
	case json.Number:
		r.nums = []string{v.String()}
		return r, nil
	case []any:
		if len(v) == 0 {
			return rule{}, c.errf(path, "anything-but takes a value or a non-empty list of values")
		}
		for i, e := range v {
			switch e := e.(type) {
			case string:
				r.strs = append(r.strs, e)
			case json.Number:
				r.nums = append(r.nums, e.String())
			default:
				return rule{}, c.errf(at(path, i), "anything-but lists strings or numbers; got %s", describe(e))
			}
		}
		if len(r.strs) > 0 && len(r.nums) > 0 {
			return rule{}, c.errf(path, "anything-but lists only strings or only numbers, not both")
		}
		return r, nil
	case map[string]any:
		for _, k := range sortedKeys(v) {
			switch k {
			case "prefix", "suffix", "equals-ignore-case", "wildcard":
				return rule{}, c.errf(join(path, k), "anything-but with %s is an EventBridge event-bus operator that Lambda event filtering does not support", k)
			}
		}
	}
	return rule{}, c.errf(path, "anything-but takes a string, a number, or a list of strings or of numbers; got %s", describe(v))
}

func (c *compiler) numeric(v any, path string) (rule, error) {
	list, ok := v.([]any)
	if !ok || (len(list) != 2 && len(list) != 4) {
		n := "not a list"
		if ok {
			n = fmt.Sprintf("%d elements", len(list))
		}
		return rule{}, c.errf(path, "numeric takes one or two operator and value pairs, such as [\">\", 0, \"<=\", 5]; got %s", n)
	}
	r := rule{kind: rNumeric}
	for i := 0; i < len(list); i += 2 {
		op, ok := list[i].(string)
		if !ok {
			return rule{}, c.errf(at(path, i), "expected an operator (=, <, <=, >, >=); got %s", describe(list[i]))
		}
		num, ok := list[i+1].(json.Number)
		if !ok {
			return rule{}, c.errf(at(path, i+1), "expected a number after %q; got %s", op, describe(list[i+1]))
		}
		f, err := num.Float64()
		if err != nil || f < -numericLimit || f > numericLimit {
			return rule{}, c.errf(at(path, i+1), "%s is out of range: numeric matching takes numbers from -5.0e9 to 5.0e9", num)
		}
		q := quantize(f)
		switch op {
		case "=":
			if len(list) != 2 {
				return rule{}, c.errf(at(path, i), "\"=\" stands alone: write [\"=\", value]")
			}
			r.lo, r.hi, r.hasLo, r.hasHi, r.loIncl, r.hiIncl = q, q, true, true, true, true
		case ">", ">=":
			if r.hasLo {
				return rule{}, c.errf(at(path, i), "two lower bounds: a range takes one of > or >= and one of < or <=")
			}
			r.lo, r.hasLo, r.loIncl = q, true, op == ">="
		case "<", "<=":
			if r.hasHi {
				return rule{}, c.errf(at(path, i), "two upper bounds: a range takes one of > or >= and one of < or <=")
			}
			r.hi, r.hasHi, r.hiIncl = q, true, op == "<="
		default:
			return rule{}, c.errf(at(path, i), "unknown numeric operator %q; expected =, <, <=, > or >=", op)
		}
	}
	if r.hasLo && r.hasHi && (r.lo > r.hi || (r.lo == r.hi && !(r.loIncl && r.hiIncl))) {
		return rule{}, c.errf(path, "the range is empty: its lower bound is not below its upper bound")
	}
	return r, nil
}

// quantize turns a number into millionths, the precision of EventBridge's
// numeric matching (six digits after the decimal point). |f| <= 5e9 keeps
// the result within float64's exact integers.
func quantize(f float64) int64 { return int64(math.Round(f * 1e6)) }

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + v.String()
	case string:
		return "the string " + strconv.Quote(v)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
