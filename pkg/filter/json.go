package filter

import (
	"unicode/utf16"
	"unicode/utf8"
)

// A tape is one record's JSON parsed into flat slices, reused from record
// to record so that parsing allocates nothing once the slices have grown.
// Strings point into the record's bytes, or into buf when they had escapes.

type kind uint8

const (
	kNull kind = iota
	kTrue
	kFalse
	kNumber
	kString
	kArray
	kObject
)

// node is one JSON value. For a string, s is its decoded content; for a
// number, its literal text. An object's members are members[first :
// first+n]; an array's elements are elems[first : first+n].
type node struct {
	s     []byte
	first int32
	n     int32
	kind  kind
}

type member struct {
	key []byte
	val int32
}

// maxDepth bounds nesting: deeper documents are treated as not JSON (as
// Go's encoding/json refuses them), so a hostile record cannot exhaust
// the stack.
const maxDepth = 10000

type tape struct {
	nodes   []node
	members []member
	elems   []int32
	mstack  []member
	estack  []int32
	buf     []byte

	in    []byte
	pos   int
	depth int
}

func (t *tape) reset() {
	t.nodes = t.nodes[:0]
	t.members = t.members[:0]
	t.elems = t.elems[:0]
	t.mstack = t.mstack[:0]
	t.estack = t.estack[:0]
	t.buf = t.buf[:0]
	t.in, t.pos, t.depth = nil, 0, 0
}

// addString appends a string node whose content is a copy of s.
func (t *tape) addString(s string) int32 {
	start := len(t.buf)
	t.buf = append(t.buf, s...)
	return t.add(node{kind: kString, s: t.buf[start:len(t.buf):len(t.buf)]})
}

// addNumber appends a number node whose literal text is a copy of b.
func (t *tape) addNumber(b []byte) int32 {
	start := len(t.buf)
	t.buf = append(t.buf, b...)
	return t.add(node{kind: kNumber, s: t.buf[start:len(t.buf):len(t.buf)]})
}

func (t *tape) add(n node) int32 {
	t.nodes = append(t.nodes, n)
	return int32(len(t.nodes) - 1)
}

// parse parses in as one JSON text (RFC 8259: UTF-8, one value, optional
// white space around it) and returns its root node, or false when in is
// not valid JSON.
func (t *tape) parse(in []byte) (int32, bool) {
	if !utf8.Valid(in) {
		return 0, false
	}
	t.in, t.pos, t.depth = in, 0, 0
	t.skipSpace()
	root, ok := t.value()
	if !ok {
		return 0, false
	}
	t.skipSpace()
	if t.pos != len(t.in) {
		return 0, false
	}
	return root, true
}

func (t *tape) skipSpace() {
	for t.pos < len(t.in) {
		switch t.in[t.pos] {
		case ' ', '\t', '\n', '\r':
			t.pos++
		default:
			return
		}
	}
}

func (t *tape) value() (int32, bool) {
	if t.pos >= len(t.in) {
		return 0, false
	}
	switch c := t.in[t.pos]; c {
	case '{':
		return t.object()
	case '[':
		return t.array()
	case '"':
		s, ok := t.str()
		if !ok {
			return 0, false
		}
		return t.add(node{kind: kString, s: s}), true
	case 't':
		return t.literal("true", kTrue)
	case 'f':
		return t.literal("false", kFalse)
	case 'n':
		return t.literal("null", kNull)
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return t.number()
		}
		return 0, false
	}
}

func (t *tape) literal(word string, k kind) (int32, bool) {
	if len(t.in)-t.pos < len(word) || string(t.in[t.pos:t.pos+len(word)]) != word {
		return 0, false
	}
	t.pos += len(word)
	return t.add(node{kind: k}), true
}

func (t *tape) object() (int32, bool) {
	if t.depth++; t.depth > maxDepth {
		return 0, false
	}
	t.pos++ // '{'
	base := len(t.mstack)
	t.skipSpace()
	if t.pos < len(t.in) && t.in[t.pos] == '}' {
		t.pos++
	} else {
		for {
			if t.pos >= len(t.in) || t.in[t.pos] != '"' {
				return 0, false
			}
			key, ok := t.str()
			if !ok {
				return 0, false
			}
			t.skipSpace()
			if t.pos >= len(t.in) || t.in[t.pos] != ':' {
				return 0, false
			}
			t.pos++
			t.skipSpace()
			v, ok := t.value()
			if !ok {
				return 0, false
			}
			t.mstack = append(t.mstack, member{key: key, val: v})
			t.skipSpace()
			if t.pos >= len(t.in) {
				return 0, false
			}
			if c := t.in[t.pos]; c == ',' {
				t.pos++
				t.skipSpace()
				continue
			} else if c == '}' {
				t.pos++
				break
			}
			return 0, false
		}
	}
	first := int32(len(t.members))
	t.members = append(t.members, t.mstack[base:]...)
	n := int32(len(t.mstack) - base)
	t.mstack = t.mstack[:base]
	t.depth--
	return t.add(node{kind: kObject, first: first, n: n}), true
}

func (t *tape) array() (int32, bool) {
	if t.depth++; t.depth > maxDepth {
		return 0, false
	}
	t.pos++ // '['
	base := len(t.estack)
	t.skipSpace()
	if t.pos < len(t.in) && t.in[t.pos] == ']' {
		t.pos++
	} else {
		for {
			v, ok := t.value()
			if !ok {
				return 0, false
			}
			t.estack = append(t.estack, v)
			t.skipSpace()
			if t.pos >= len(t.in) {
				return 0, false
			}
			if c := t.in[t.pos]; c == ',' {
				t.pos++
				t.skipSpace()
				continue
			} else if c == ']' {
				t.pos++
				break
			}
			return 0, false
		}
	}
	first := int32(len(t.elems))
	t.elems = append(t.elems, t.estack[base:]...)
	n := int32(len(t.estack) - base)
	t.estack = t.estack[:base]
	t.depth--
	return t.add(node{kind: kArray, first: first, n: n}), true
}

// number checks the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and keeps the literal.
func (t *tape) number() (int32, bool) {
	in, i := t.in, t.pos
	start := i
	if in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	if i < len(in) && in[i] == '.' {
		i++
		d := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		d := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		if i == d {
			return 0, false
		}
	}
	t.pos = i
	return t.add(node{kind: kNumber, s: in[start:i:i]}), true
}

// str reads the string at t.pos (its opening quote) and returns its
// decoded content.
func (t *tape) str() ([]byte, bool) {
	in := t.in
	start := t.pos + 1
	for i := start; i < len(in); i++ {
		switch c := in[i]; {
		case c == '"':
			t.pos = i + 1
			return in[start:i:i], true
		case c == '\\':
			return t.escaped(start, i)
		case c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// escaped decodes a string with escapes into buf: in[start:i] is the part
// before the first backslash.
func (t *tape) escaped(start, i int) ([]byte, bool) {
	in := t.in
	b0 := len(t.buf)
	t.buf = append(t.buf, in[start:i]...)
	for i < len(in) {
		c := in[i]
		switch {
		case c == '"':
			t.pos = i + 1
			return t.buf[b0:len(t.buf):len(t.buf)], true
		case c < 0x20:
			return nil, false
		case c != '\\':
			t.buf = append(t.buf, c)
			i++
			continue
		}
		if i+1 >= len(in) {
			return nil, false
		}
		switch e := in[i+1]; e {
		case '"', '\\', '/':
			t.buf = append(t.buf, e)
		case 'b':
			t.buf = append(t.buf, '\b')
		case 'f':
			t.buf = append(t.buf, '\f')
		case 'n':
			t.buf = append(t.buf, '\n')
		case 'r':
			t.buf = append(t.buf, '\r')
		case 't':
			t.buf = append(t.buf, '\t')
		case 'u':
			r, ok := hex4(in, i+2)
			if !ok {
				return nil, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by \u and a low one is one
				// character; anything else decodes as U+FFFD, as
				// encoding/json does.
				if r2, ok := hex4(in, i+2); ok && i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						t.buf = utf8.AppendRune(t.buf, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			t.buf = utf8.AppendRune(t.buf, r)
			continue
		default:
			return nil, false
		}
		i += 2
	}
	return nil, false
}

func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	var r rune
	for _, c := range in[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
