package lease

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// cond is a condition on a lease row, written flat. The SDK's expression
// builder puts every operand in parentheses, so a condition of a few nested
// ANDs and ORs reads as parentheses five deep; dynalite's parser (a PEG
// without memoization) parses each level several times over, so the cost
// of a condition grows exponentially with its depth: Take, Renew and
// Checkpoint cost about six times a plain update. A cond renders with
// AND binding tighter than OR (as DynamoDB's grammar has it), so that a
// disjunction of conjunctions needs no parentheses, and with at most one
// level of them: a conjunction that would hold a parenthesized group of
// its own, or whose disjunctive normal form is small (flatProducts), is
// distributed into a disjunction of conjunctions (the same condition: the
// terms are two-valued, there is no NOT).
//
// The zero cond is no condition (always true; it renders as "").
type cond struct {
	op   condOp
	term condTerm // op == condLeaf
	kids []cond   // op == condAnd, condOr
}

type condOp int

const (
	condTrue condOp = iota
	condLeaf
	condAnd
	condOr
)

// condTerm is one comparison or function of an attribute.
type condTerm struct {
	fn    string // "attribute_exists", "attribute_not_exists", or "" for a comparison
	name  string
	cmp   string // "=", "<>", "<", "<="
	value any
}

func condFunc(fn, name string) cond {
	return cond{op: condLeaf, term: condTerm{fn: fn, name: name}}
}

func condCmp(name, cmp string, v any) cond {
	return cond{op: condLeaf, term: condTerm{name: name, cmp: cmp, value: v}}
}

func notExists(name string) cond   { return condFunc("attribute_not_exists", name) }
func exists(name string) cond      { return condFunc("attribute_exists", name) }
func eq(name string, v any) cond   { return condCmp(name, "=", v) }
func ne(name string, v any) cond   { return condCmp(name, "<>", v) }
func less(name string, v any) cond { return condCmp(name, "<", v) }
func atMost(name string, v any) cond {
	return condCmp(name, "<=", v)
}

// and is the conjunction of cs (the zero cond among them adds nothing).
func and(cs ...cond) cond { return join(condAnd, cs) }

// or is the disjunction of cs (the zero cond among them makes it true).
func or(cs ...cond) cond {
	for _, c := range cs {
		if c.op == condTrue {
			return cond{}
		}
	}
	return join(condOr, cs)
}

func join(op condOp, cs []cond) cond {
	var kids []cond
	for _, c := range cs {
		switch {
		case c.op == condTrue:
		case c.op == op:
			kids = append(kids, c.kids...)
		default:
			kids = append(kids, c)
		}
	}
	switch len(kids) {
	case 0:
		return cond{}
	case 1:
		return kids[0]
	}
	return cond{op: op, kids: kids}
}

// depth is how many levels of parentheses c renders with.
func (c cond) depth() int {
	d := 0
	for _, k := range c.kids {
		kd := k.depth()
		if c.op == condAnd && k.op == condOr {
			kd++
		}
		d = max(d, kd)
	}
	return d
}

// flat returns c with at most one level of parentheses.
func (c cond) flat() cond {
	if c.op != condAnd && c.op != condOr {
		return c
	}
	kids := make([]cond, len(c.kids))
	for i, k := range c.kids {
		kids[i] = k.flat()
	}
	c = join(c.op, kids)
	if c.op == condAnd && (c.depth() > 1 || c.depth() == 1 && c.products() <= flatProducts) {
		return c.dnf()
	}
	return c
}

// flatProducts is the most conjunctions a condition one level deep is
// written out in, with no parentheses at all. Measured on dynalite, a
// checkpoint's condition of four conjunctions costs about 20% less than its
// form with two parenthesized groups, and a take's 30% less; one of eight
// conjunctions of five terms costs the same as its three groups.
const flatProducts = 4

// products is how many conjunctions c's disjunctive normal form has.
func (c cond) products() int {
	switch c.op {
	case condOr:
		n := 0
		for _, k := range c.kids {
			n += k.products()
		}
		return n
	case condAnd:
		n := 1
		for _, k := range c.kids {
			n *= k.products()
		}
		return n
	}
	return 1
}

// dnf is c as a disjunction of conjunctions of terms.
func (c cond) dnf() cond {
	switch c.op {
	case condOr:
		out := make([]cond, 0, len(c.kids))
		for _, k := range c.kids {
			out = append(out, k.dnf())
		}
		return join(condOr, out)
	case condAnd:
		prods := []cond{{}}
		for _, k := range c.kids {
			alts := []cond{k}
			if d := k.dnf(); d.op == condOr {
				alts = d.kids
			}
			next := make([]cond, 0, len(prods)*len(alts))
			for _, p := range prods {
				for _, a := range alts {
					next = append(next, and(p, a))
				}
			}
			prods = next
		}
		return join(condOr, prods)
	}
	return c
}

// condExpr is a rendered condition: its text and its placeholders, which
// start with "#k" and ":k" so as not to meet those of the SDK's builder.
type condExpr struct {
	text   string
	names  map[string]string
	values map[string]types.AttributeValue
}

// build renders c flat.
func (c cond) build() (condExpr, error) {
	e := condExpr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
	if c.op == condTrue {
		return e, nil
	}
	nameOf := map[string]string{}
	valueOf := map[string]string{}
	var b strings.Builder
	var render func(c cond, parent condOp) error
	render = func(c cond, parent condOp) error {
		switch c.op {
		case condLeaf:
			t := c.term
			n, ok := nameOf[t.name]
			if !ok {
				n = "#k" + strconv.Itoa(len(nameOf))
				nameOf[t.name] = n
				e.names[n] = t.name
			}
			if t.fn != "" {
				fmt.Fprintf(&b, "%s(%s)", t.fn, n)
				return nil
			}
			id := fmt.Sprintf("%T:%v", t.value, t.value)
			v, ok := valueOf[id]
			if !ok {
				av, err := attributevalue.Marshal(t.value)
				if err != nil {
					return fmt.Errorf("condition on %s: %w", t.name, err)
				}
				v = ":k" + strconv.Itoa(len(valueOf))
				valueOf[id] = v
				e.values[v] = av
			}
			fmt.Fprintf(&b, "%s %s %s", n, t.cmp, v)
			return nil
		case condAnd, condOr:
			sep := " AND "
			if c.op == condOr {
				sep = " OR "
			}
			paren := parent == condAnd && c.op == condOr
			if paren {
				b.WriteString("(")
			}
			for i, k := range c.kids {
				if i > 0 {
					b.WriteString(sep)
				}
				if err := render(k, c.op); err != nil {
					return err
				}
			}
			if paren {
				b.WriteString(")")
			}
		}
		return nil
	}
	if err := render(c.flat(), condTrue); err != nil {
		return condExpr{}, err
	}
	e.text = b.String()
	return e, nil
}

// with returns the condition and the update upd as an UpdateItem wants
// them, the placeholders of both in one map each (nil when none).
func (e condExpr) with(upd expression.UpdateBuilder) (condition, update *string, names map[string]string, values map[string]types.AttributeValue, err error) {
	ue, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	names, values = ue.Names(), ue.Values()
	if len(e.names) > 0 && names == nil {
		names = map[string]string{}
	}
	if len(e.values) > 0 && values == nil {
		values = map[string]types.AttributeValue{}
	}
	maps.Copy(names, e.names)
	maps.Copy(values, e.values)
	if e.text != "" {
		condition = &e.text
	}
	return condition, ue.Update(), names, values, nil
}
