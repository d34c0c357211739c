package filter

import (
	"errors"
	"fmt"
)

// ErrInvalid matches (errors.Is) every error Compile and ParseCriteria
// return for a pattern or criteria that Lambda would refuse.
var ErrInvalid = errors.New("invalid filter")

// Error is a refused filter: which one, where in its pattern, and what is
// wrong. It matches ErrInvalid.
type Error struct {
	// Index is the filter's position in the list given to Compile, counted
	// from 0. The message counts from 1, as the console and a template
	// reader do ("filter 1" is Index 0). It is -1 when the problem is the
	// list as a whole (too many filters, criteria that are not JSON).
	Index int
	// Path is where in the pattern the problem is: field names joined by
	// dots, with [i] for the i-th rule of a field's list or the i-th
	// branch of a $or (from 0), e.g. "data.order.amount[0]". Empty means
	// the pattern as a whole.
	Path string
	// Problem says what is wrong and what was expected.
	Problem string
}

func (e *Error) Error() string {
	where := "filter criteria"
	if e.Index >= 0 {
		where = fmt.Sprintf("filter %d", e.Index+1)
	}
	if e.Path != "" {
		return fmt.Sprintf("%s: at %s: %s", where, e.Path, e.Problem)
	}
	return fmt.Sprintf("%s: %s", where, e.Problem)
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }
