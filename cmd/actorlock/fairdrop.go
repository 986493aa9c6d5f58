package main

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/actorlock/actorlock/internal/inspect"
	"github.com/actorlock/actorlock/scripts"
)

// fairDrop takes waiters out of a fair lock's queue: the owners named, or
// with --all every waiter. It is for the places of dead waiters that no
// runtime keeps alive (a Redisson client's, whose place lasts its whole
// wait; each dead one ahead adds its own to what a free lock costs the live
// waiters behind it). Those behind move up as if the dropped ones had given
// up, and the new head of a free lock is told. A live actorlock waiter that
// is dropped joins again at the back; so does a live Redisson one at its
// next try. Without --yes it only shows the queue.
func (c *command) fairDrop(ctx context.Context, args []string) error {
	name, drop := args[0], args[1:]
	o, err := c.read(ctx, name, c.limit)
	if err != nil {
		return err
	}
	if o.Kind != inspect.FairLock {
		return fmt.Errorf("%q is a %s: fair-drop works on fair locks only", name, o.Kind)
	}
	if c.all {
		if int64(len(o.Waiters)) < o.WaitersTotal {
			return fmt.Errorf("%q has %d waiters, more than --limit %d: raise --limit to drop them all", name, o.WaitersTotal, c.limit)
		}
		drop = drop[:0]
		for _, w := range o.Waiters {
			drop = append(drop, w.Owner)
		}
	}
	if len(drop) == 0 {
		fmt.Fprintf(c.stdout, "fair lock %q has no waiters: nothing to do\n", name)
		return nil
	}
	if !c.yes {
		fmt.Fprint(c.stdout, render(o, false))
		return fmt.Errorf("refusing to drop waiters of %q without --yes: a live waiter dropped joins again at the back", name)
	}
	sc, err := scriptClient(ctx, c.rdb)
	if err != nil {
		return err
	}
	dropped := 0
	for _, owner := range drop {
		cctx, cancel := c.bounded(ctx)
		// Its own request: a guard of a random id, which outlives the
		// call (it is not retried).
		was, err := scripts.LeaveFair(cctx, sc, name, owner, scripts.Guard{ID: "cli:" + rand.Text(), TTL: 3 * c.timeout})
		cancel()
		switch {
		case err != nil:
			return fmt.Errorf("fair-drop %q: waiter %q: %w", name, owner, err)
		case was:
			dropped++
			fmt.Fprintf(c.stdout, "dropped waiter %q of fair lock %q\n", owner, name)
		default:
			fmt.Fprintf(c.stdout, "%q is not waiting for fair lock %q: nothing dropped\n", owner, name)
		}
	}
	fmt.Fprintf(c.stdout, "%s dropped\n", plural(int64(dropped), "waiter"))
	return nil
}
