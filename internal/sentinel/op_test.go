package sentinel

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

const (
	errNotAcquired Error = "actorlock: lock not acquired"
	errUpgrade     Error = "actorlock: a read holder cannot take the write lock (upgrade)"
	errWrongKind   Error = "actorlock: the name holds another kind of object"
)

func TestOpErrorText(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
		is   []error
	}{
		{Op("acquire", "a", context.DeadlineExceeded), `actorlock: acquire "a": context deadline exceeded`, []error{context.DeadlineExceeded}},
		{Op("acquire", "config", With(errNotAcquired, errUpgrade)),
			`actorlock: acquire "config": lock not acquired: a read holder cannot take the write lock (upgrade)`, []error{errNotAcquired, errUpgrade}},
		// Wrapped again for the same name: once.
		{Op("acquire", "a", Op("acquire", "a", errNotAcquired)), `actorlock: acquire "a": lock not acquired`, []error{errNotAcquired}},
		{Op("count", "a", Op("latch count", "a", errNotAcquired)), `actorlock: latch count "a": lock not acquired`, []error{errNotAcquired}},
		{Op("close", "", Op("close", "", errNotAcquired)), `actorlock: close: lock not acquired`, []error{errNotAcquired}},
		{Op("acquire MultiLock", "", Member("acct:2", Op("acquire", "acct:2", errNotAcquired))),
			`actorlock: acquire MultiLock: member "acct:2": lock not acquired`, []error{errNotAcquired}},
		{Op("holders", "x", fmt.Errorf("%w: %w", errWrongKind, Named(errNotAcquired, "x", "is a string"))),
			`actorlock: holders "x": the name holds another kind of object: lock not acquired: is a string`, []error{errWrongKind, errNotAcquired}},
		{Named(errNotAcquired, "x", "is a string"), `actorlock: lock not acquired: "x" is a string`, []error{errNotAcquired}},
		{Named(errNotAcquired, "x", ": mode is 1"), `actorlock: lock not acquired: "x": mode is 1`, []error{errNotAcquired}},
		{Named(errNotAcquired, "x", ""), `actorlock: lock not acquired: "x"`, []error{errNotAcquired}},
		{Op("acquire RedLock", "", fmt.Errorf("%w: (%v)", errNotAcquired, List(Member("a", errNotAcquired), nil, Member("b", context.DeadlineExceeded)))),
			`actorlock: acquire RedLock: lock not acquired: (member "a": lock not acquired; member "b": context deadline exceeded)`, []error{errNotAcquired}},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		for _, target := range c.is {
			if !errors.Is(c.err, target) {
				t.Errorf("%s: not errors.Is %v", c.err, target)
			}
		}
	}
	if Op("a", "b", nil) != nil || Member("a", nil) != nil || List(nil) != nil {
		t.Error("nil is not wrapped")
	}
	// A member's context error listed is told, not wrapped.
	if errors.Is(List(context.DeadlineExceeded), context.DeadlineExceeded) {
		t.Error("List wraps")
	}
	if got := Clean(fmt.Errorf("%w: %w", errNotAcquired, errUpgrade)); got != "actorlock: lock not acquired: a read holder cannot take the write lock (upgrade)" {
		t.Errorf("Clean: %s", got)
	}
}
