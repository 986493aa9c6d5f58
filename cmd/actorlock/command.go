package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/inspect"
	"github.com/actorlock/actorlock/scripts"
)

// command is one run of a command: its flags and the client.
type command struct {
	*globals
	stdout, stderr io.Writer
	rdb            redis.UniversalClient

	kind     inspect.Kind // "": detect from the layout
	limit    int
	all      bool
	yes      bool
	interval time.Duration
	watchFor time.Duration
}

func (c *command) setKind(s string) error {
	k, err := inspect.ParseKind(s)
	c.kind = k
	return err
}

// checkArgs checks the positional arguments before connecting.
func (c *command) checkArgs(cmd string, args []string) error {
	if c.limit < 0 {
		return usageError{"a negative count makes no sense"}
	}
	if cmd == "list" {
		switch {
		case len(args) > 1:
			return usageError{"usage: actorlock list [flags] [PATTERN]"}
		case c.limit == 0:
			return usageError{"--max must be positive"}
		}
		return nil
	}
	if cmd == "fair-drop" {
		switch {
		case len(args) == 0 || args[0] == "":
			return usageError{"usage: actorlock fair-drop [flags] NAME OWNER... (or --all)"}
		case c.all == (len(args) > 1):
			return usageError{"fair-drop takes the OWNERs to drop, or --all, not both"}
		case c.limit == 0:
			return usageError{"--limit must be positive"}
		}
		return nil
	}
	if len(args) != 1 || args[0] == "" {
		return usageError{fmt.Sprintf("usage: actorlock %s [flags] NAME", cmd)}
	}
	return nil
}

// bounded bounds one read by --timeout.
func (c *command) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// read detects (unless --kind said) and reads name.
func (c *command) read(ctx context.Context, name string, limit int) (*inspect.Object, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	kind := c.kind
	if kind == "" {
		var err error
		if kind, err = inspect.Detect(ctx, c.rdb, name); err != nil {
			return nil, explain(name, err)
		}
	}
	o, err := inspect.Read(ctx, c.rdb, name, kind, limit)
	if err == nil && o.Locked() {
		// Where the holders run, from their runtimes' records.
		err = inspect.Identify(ctx, c.rdb, o)
	}
	return o, explain(name, err)
}

// explain words inspect's errors for an operator, keeping them matchable.
func explain(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, inspect.ErrNotFound):
		return explained{fmt.Sprintf("%q: no such lock, semaphore, latch or queue: neither the key nor any auxiliary key of it exists (a free lock that never issued a token leaves nothing)", name), err}
	case errors.Is(err, inspect.ErrNotObject):
		detail := strings.TrimPrefix(err.Error(), inspect.ErrNotObject.Error()+": ")
		return explained{fmt.Sprintf("%q is not an actorlock/Redisson object: %s", name, detail), err}
	case errors.Is(err, inspect.ErrWrongKind):
		return explained{strings.TrimPrefix(err.Error(), inspect.ErrWrongKind.Error()+": "), err}
	}
	return fmt.Errorf("reading %q: %w", name, err)
}

// explained is an error with an operator's wording.
type explained struct {
	msg string
	err error
}

func (e explained) Error() string { return e.msg }
func (e explained) Unwrap() error { return e.err }

func (c *command) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *command) inspect(ctx context.Context, args []string) error {
	o, err := c.read(ctx, args[0], c.limit)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(jsonOf(o))
	}
	_, err = io.WriteString(c.stdout, render(o, true))
	return err
}

// queueStats shows a delayed queue's backlog. Unless --kind says so, the
// name must hold a queue: nothing at all is "no such" (as inspect says),
// and another kind of object is named as such.
func (c *command) queueStats(ctx context.Context, args []string) error {
	name := args[0]
	if c.kind == "" {
		dctx, cancel := c.bounded(ctx)
		kind, err := inspect.Detect(dctx, c.rdb, name)
		cancel()
		switch {
		case err != nil:
			return explain(name, err)
		case kind != inspect.DelayedQueue && kind != inspect.Queue:
			return explained{fmt.Sprintf("%q is not a %s: it is a %s", name, inspect.DelayedQueue, kind), inspect.ErrWrongKind}
		}
		c.kind = inspect.DelayedQueue // its destination list too
	}
	o, err := c.read(ctx, name, 1)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(jsonOf(o))
	}
	_, err = io.WriteString(c.stdout, render(o, true))
	return err
}

// forceUnlock deletes a lock whoever holds it, with the force-unlock script
// of its kind, which wakes its waiters as an unlock would; without --yes it
// only shows what it would delete.
func (c *command) forceUnlock(ctx context.Context, args []string) error {
	name := args[0]
	o, err := c.read(ctx, name, c.limit)
	if err != nil {
		return err
	}
	switch o.Kind {
	case inspect.Lock, inspect.FairLock, inspect.ReadWriteLock:
	default:
		return fmt.Errorf("%q is a %s: force-unlock works on locks only", name, o.Kind)
	}
	if !o.Locked() {
		fmt.Fprintf(c.stdout, "%s %q is not locked: nothing to do\n", o.Kind, name)
		return nil
	}
	if !c.yes {
		fmt.Fprint(c.stdout, render(o, false))
		return fmt.Errorf("refusing to force-unlock %q without --yes: its holders would lose it while they may still be working", name)
	}
	sc, err := scriptClient(ctx, c.rdb)
	if err != nil {
		return err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	var deleted bool
	switch o.Kind {
	case inspect.Lock:
		deleted, err = scripts.ForceUnlockLock(ctx, sc, name)
	case inspect.FairLock:
		deleted, err = scripts.ForceUnlockFair(ctx, sc, name)
	case inspect.ReadWriteLock:
		deleted, err = scripts.ForceUnlockRW(ctx, sc, name, o.Mode == "write")
	}
	switch {
	case err != nil:
		return fmt.Errorf("force-unlock %q: %w", name, err)
	case !deleted:
		// Released (or, for a read-write lock, changed mode) between the
		// read and the script.
		fmt.Fprintf(c.stdout, "%q was released meanwhile: nothing deleted\n", name)
		return nil
	}
	fmt.Fprintf(c.stdout, "force-unlocked %s %q (was held by %s); waiters woken\n", o.Kind, name, owners(o))
	return nil
}
