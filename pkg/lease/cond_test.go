package lease

import (
	"fmt"
	"regexp"
	"testing"
)

func TestCondRendersFlat(t *testing.T) {
	for _, c := range []struct {
		name string
		cond cond
		want string
	}{
		{"none", cond{}, ""},
		{"one term", notExists("a"), "attribute_not_exists(#k0)"},
		{"a conjunction needs no parentheses", and(eq("a", "x"), notExists("b")), "#k0 = :k0 AND attribute_not_exists(#k1)"},
		{"nor a disjunction of conjunctions", or(and(eq("a", 1), eq("b", 2)), notExists("c")), "#k0 = :k0 AND #k1 = :k1 OR attribute_not_exists(#k2)"},
		{"a small conjunction of disjunctions is written out",
			forward(writableBy("A"), "5"),
			"#k0 = :k0 AND attribute_not_exists(#k1) AND attribute_not_exists(#k2) AND attribute_not_exists(#k3) OR " +
				"#k0 = :k0 AND attribute_not_exists(#k1) AND attribute_not_exists(#k2) AND #k3 <= :k1 OR " +
				"#k0 = :k0 AND attribute_not_exists(#k1) AND #k2 <> :k2 AND attribute_not_exists(#k3) OR " +
				"#k0 = :k0 AND attribute_not_exists(#k1) AND #k2 <> :k2 AND #k3 <= :k1"},
		{"a larger one keeps one level of parentheses",
			and(eq("a", 1), or(exists("b"), exists("c")), or(exists("d"), exists("e")), or(exists("f"), exists("g"))),
			"#k0 = :k0 AND (attribute_exists(#k1) OR attribute_exists(#k2)) AND (attribute_exists(#k3) OR attribute_exists(#k4)) AND (attribute_exists(#k5) OR attribute_exists(#k6))"},
		{"nested conjunctions and disjunctions merge", and(and(eq("a", 1), and(eq("b", 1))), or(or(exists("c"), less("d", int64(3))))),
			"#k0 = :k0 AND #k1 = :k0 AND attribute_exists(#k2) OR #k0 = :k0 AND #k1 = :k0 AND #k3 < :k1"},
		{"a deeper conjunction is distributed", and(or(eq("a", 1), and(eq("b", 2), or(exists("c"), exists("d")))), exists("e")),
			"#k0 = :k0 AND attribute_exists(#k1) OR #k2 = :k1 AND attribute_exists(#k3) AND attribute_exists(#k1) OR #k2 = :k1 AND attribute_exists(#k4) AND attribute_exists(#k1)"},
		{"a true operand makes a disjunction true", or(eq("a", 1), cond{}), ""},
		{"and adds nothing", and(cond{}, eq("a", 1)), "#k0 = :k0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := c.cond.build()
			if err != nil {
				t.Fatal(err)
			}
			if e.text != c.want {
				t.Fatalf("got  %s\nwant %s", e.text, c.want)
			}
		})
	}
}

// eval is c's value where each term has the value truth gives it.
func (c cond) eval(truth map[condTerm]bool) bool {
	switch c.op {
	case condLeaf:
		return truth[c.term]
	case condAnd:
		for _, k := range c.kids {
			if !k.eval(truth) {
				return false
			}
		}
		return true
	case condOr:
		for _, k := range c.kids {
			if k.eval(truth) {
				return true
			}
		}
		return false
	}
	return true
}

func (c cond) terms(seen map[condTerm]bool, out []condTerm) []condTerm {
	if c.op == condLeaf && !seen[c.term] {
		seen[c.term] = true
		return append(out, c.term)
	}
	for _, k := range c.kids {
		out = k.terms(seen, out)
	}
	return out
}

// parenDepth is how deep the text's parentheses go, function calls aside.
func parenDepth(text string) int {
	text = regexp.MustCompile(`attribute_(not_)?exists\(#k\d+\)`).ReplaceAllString(text, "f")
	d, deepest := 0, 0
	for _, r := range text {
		switch r {
		case '(':
			d++
			deepest = max(deepest, d)
		case ')':
			d--
		}
	}
	return deepest
}

// TestStoreConditionsAreFlatAndMeanTheSame: every condition the store
// writes, in every variant, renders at most one level of parentheses deep
// and has the value of the nested condition it was built as, under every
// assignment of its terms.
func TestStoreConditionsAreFlatAndMeanTheSame(t *testing.T) {
	take := func(family string, ifCounter, ifUnchanged bool, incarnation int64) cond {
		return takeCond("A", takeOptions{family: family, ifCounter: ifCounter, counter: 3, ifUnchanged: ifUnchanged, unchanged: 4, incarnation: incarnation})
	}
	conds := map[string]cond{
		"renew":                     writableBy("A"),
		"renew numbered":            and(writableBy("A"), or(notExists(attrWriteSeq), less(attrWriteSeq, int64(2)))),
		"renew numbered checkpoint": forward(and(writableBy("A"), or(notExists(attrWriteSeq), less(attrWriteSeq, int64(2)))), "7"),
		"checkpoint":                forward(writableBy("A"), "7"),
		"set start":                 startCond(Start{Order: 2, Incarnation: 9}),
		"set start if absent":       startCond(Start{Order: 2, Incarnation: 9, IfAbsent: true}),
	}
	for _, family := range []string{"", "F"} {
		for _, ifc := range []bool{false, true} {
			for _, ifu := range []bool{false, true} {
				for _, inc := range []int64{0, 9} {
					conds[fmt.Sprintf("take family=%s ifCounter=%v ifUnchanged=%v incarnation=%d", family, ifc, ifu, inc)] = take(family, ifc, ifu, inc)
				}
			}
		}
	}
	for name, c := range conds {
		t.Run(name, func(t *testing.T) {
			e, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			if d := parenDepth(e.text); d > 1 {
				t.Fatalf("%s: parentheses %d deep", e.text, d)
			}
			flat := c.flat()
			if d := flat.depth(); d > 1 {
				t.Fatalf("flat depth %d", d)
			}
			terms := c.terms(map[condTerm]bool{}, nil)
			if len(terms) > 16 {
				t.Fatalf("%d terms: too many to try every assignment", len(terms))
			}
			for bits := range 1 << len(terms) {
				truth := map[condTerm]bool{}
				for i, term := range terms {
					truth[term] = bits&(1<<i) != 0
				}
				if c.eval(truth) != flat.eval(truth) {
					t.Fatalf("flat %s differs from the nested condition where %v", e.text, truth)
				}
			}
		})
	}
}
