package filter

import (
	"bytes"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Record is what a filter sees of one Kinesis record: its payload and its
// metadata, the fields of the "kinesis" object of Lambda's event.
type Record struct {
	// Data is the payload as bytes (what Lambda's event carries in base64).
	Data []byte
	// PartitionKey and SequenceNumber are the record's own.
	PartitionKey   string
	SequenceNumber string
	// ApproximateArrivalTimestamp is when Kinesis took the record. A
	// pattern sees it as Lambda's event shows it: a JSON number of seconds
	// since the epoch with milliseconds as the fraction (1545084650.987).
	// The zero time means the record has none.
	ApproximateArrivalTimestamp time.Time
}

// kinesisSchemaVersion is the value of the field of that name in every
// record of Lambda's Kinesis event.
const kinesisSchemaVersion = "1.0"

// Match reports whether the record passes: whether any filter matches it.
// A Set with no filters passes every record. A filter that names data
// never matches a record whose data is not JSON (Lambda drops such a
// record); filters that name only metadata are evaluated on the metadata
// whatever the data holds.
//
// Match parses the data once, and only when no metadata-only filter has
// matched and some filter names data.
func (s *Set) Match(r Record) bool {
	if s == nil || len(s.patterns) == 0 {
		return true
	}
	m := matchers.Get().(*matcher)
	defer matchers.Put(m)
	m.reset(s, r)
	for _, p := range s.meta {
		if m.top(p) {
			return true
		}
	}
	if len(s.data) == 0 {
		return false
	}
	root, ok := m.t.parse(r.Data)
	if !ok {
		return false
	}
	m.dataRoot = root
	for _, p := range s.data {
		if m.top(p) {
			return true
		}
	}
	return false
}

var matchers = sync.Pool{New: func() any { return new(matcher) }}

type matcher struct {
	t        tape
	meta     [rootCount]int32 // node of each metadata field; -1 when absent
	dataRoot int32
}

func (m *matcher) reset(s *Set, r Record) {
	m.t.reset()
	m.dataRoot = -1
	for i := range m.meta {
		m.meta[i] = -1
	}
	if s.need[rootPartitionKey] {
		m.meta[rootPartitionKey] = m.t.addString(r.PartitionKey)
	}
	if s.need[rootSequenceNumber] {
		m.meta[rootSequenceNumber] = m.t.addString(r.SequenceNumber)
	}
	if s.need[rootSchemaVersion] {
		m.meta[rootSchemaVersion] = m.t.addString(kinesisSchemaVersion)
	}
	if s.need[rootArrival] && !r.ApproximateArrivalTimestamp.IsZero() {
		var b [32]byte
		secs := float64(r.ApproximateArrivalTimestamp.UnixMilli()) / 1000
		m.meta[rootArrival] = m.t.addNumber(strconv.AppendFloat(b[:0], secs, 'f', -1, 64))
	}
}

// top matches a pattern's top level against the record.
func (m *matcher) top(p *objPat) bool {
	for i := range p.fields {
		f := &p.fields[i]
		if f.root == rootData {
			if !m.object(f.sub, m.dataRoot) {
				return false
			}
			continue
		}
		if !m.leaf(f.leaf, m.meta[f.root]) {
			return false
		}
	}
	for _, branches := range p.ors {
		ok := false
		for _, b := range branches {
			if m.top(b) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// object matches nested fields against node n (-1: absent). An array
// matches when one of its elements does, so that fields matched together
// come from the same element; an empty array, a scalar or an absent value
// has none of the fields.
func (m *matcher) object(p *objPat, n int32) bool {
	if n >= 0 {
		if nd := &m.t.nodes[n]; nd.kind == kArray {
			if nd.n == 0 {
				return m.object(p, -1)
			}
			for _, e := range m.t.elems[nd.first : nd.first+nd.n] {
				if m.object(p, e) {
					return true
				}
			}
			return false
		}
	}
	for i := range p.fields {
		if !m.field(&p.fields[i], n) {
			return false
		}
	}
	for _, branches := range p.ors {
		ok := false
		for _, b := range branches {
			if m.object(b, n) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// field matches one named field of node n (an object, or -1 / a scalar:
// the field is absent).
func (m *matcher) field(f *fieldPat, n int32) bool {
	found := false
	if n >= 0 {
		if nd := &m.t.nodes[n]; nd.kind == kObject {
			for _, mb := range m.t.members[nd.first : nd.first+nd.n] {
				if string(mb.key) != f.name {
					continue
				}
				found = true
				if f.sub != nil {
					if m.object(f.sub, mb.val) {
						return true
					}
				} else if m.leaf(f.leaf, mb.val) {
					return true
				}
			}
		}
	}
	if found {
		return false
	}
	if f.sub != nil {
		return m.object(f.sub, -1)
	}
	return f.leaf.absent
}

// leaf matches a field's rules against its value n (-1: absent). The
// values are the field's scalars: the value itself, or every scalar in it
// when it is an array (nested arrays too). Objects are not values: exists
// matches leaf nodes only.
func (m *matcher) leaf(l *leafPat, n int32) bool {
	if n < 0 {
		return l.absent
	}
	hit, has := m.values(l, n)
	if hit {
		return true
	}
	return !has && l.absent
}

// values reports whether a rule matches one of n's scalars, and whether n
// has any scalar at all.
func (m *matcher) values(l *leafPat, n int32) (hit, has bool) {
	nd := &m.t.nodes[n]
	switch nd.kind {
	case kObject:
		return false, false
	case kArray:
		for _, e := range m.t.elems[nd.first : nd.first+nd.n] {
			h, a := m.values(l, e)
			if h {
				return true, true
			}
			has = has || a
		}
		return false, has
	}
	for i := range l.rules {
		if l.rules[i].match(nd) {
			return true, true
		}
	}
	return false, true
}

func (r *rule) match(n *node) bool {
	switch r.kind {
	case rExists:
		return true // a scalar is there; {"exists": false} is leafPat.absent
	case rEqString:
		return n.kind == kString && string(n.s) == r.s
	case rEqNumber:
		return n.kind == kNumber && string(n.s) == r.s
	case rTrue:
		return n.kind == kTrue
	case rFalse:
		return n.kind == kFalse
	case rNull:
		return n.kind == kNull
	case rPrefix:
		return n.kind == kString && len(n.s) >= len(r.s) && string(n.s[:len(r.s)]) == r.s
	case rSuffix:
		return n.kind == kString && len(n.s) >= len(r.s) && string(n.s[len(n.s)-len(r.s):]) == r.s
	case rEqualsFold:
		return n.kind == kString && bytes.EqualFold(n.s, r.b)
	case rPrefixFold:
		return n.kind == kString && hasPrefixFold(n.s, r.s)
	case rSuffixFold:
		return n.kind == kString && hasSuffixFold(n.s, r.s)
	case rAnythingBut:
		switch n.kind {
		case kString:
			for _, s := range r.strs {
				if string(n.s) == s {
					return false
				}
			}
		case kNumber:
			for _, s := range r.nums {
				if string(n.s) == s {
					return false
				}
			}
		}
		return true
	case rNumeric:
		if n.kind != kNumber {
			return false
		}
		f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(n.s), len(n.s)), 64)
		if err != nil || f < -numericLimit || f > numericLimit {
			return false
		}
		q := quantize(f)
		if r.hasLo && (q < r.lo || (q == r.lo && !r.loIncl)) {
			return false
		}
		if r.hasHi && (q > r.hi || (q == r.hi && !r.hiIncl)) {
			return false
		}
		return true
	}
	return false
}

// hasPrefixFold reports whether s begins with prefix under Unicode simple
// case folding, comparing character by character.
func hasPrefixFold(s []byte, prefix string) bool {
	for prefix != "" {
		if len(s) == 0 {
			return false
		}
		pr, pn := utf8.DecodeRuneInString(prefix)
		sr, sn := utf8.DecodeRune(s)
		if !equalFoldRune(pr, sr) {
			return false
		}
		prefix, s = prefix[pn:], s[sn:]
	}
	return true
}

func hasSuffixFold(s []byte, suffix string) bool {
	for suffix != "" {
		if len(s) == 0 {
			return false
		}
		pr, pn := utf8.DecodeLastRuneInString(suffix)
		sr, sn := utf8.DecodeLastRune(s)
		if !equalFoldRune(pr, sr) {
			return false
		}
		suffix, s = suffix[:len(suffix)-pn], s[:len(s)-sn]
	}
	return true
}

func equalFoldRune(a, b rune) bool {
	if a == b {
		return true
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}
