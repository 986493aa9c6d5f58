package scripts

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// kindLua is the prelude of the scripts of the semaphores, the latch and
// the queues: their first line refuses a name another kind holds.
//
//go:embed kind.lua
var kindLua string

// describeKind names what a key holds, as kind.lua tells it ("lock",
// "read-write-lock") or as its Redis type.
func describeKind(t string) string {
	switch t {
	case "lock":
		return "a lock or fair lock"
	case "read-write-lock":
		return "a read-write lock"
	case "string":
		return "a semaphore or count-down latch"
	case "list":
		return "a queue"
	}
	return "a Redis " + t + ", no actorlock object"
}

// wrongKind makes kind.lua's refusal ("WRONGKIND <what>") an error wrapping
// ErrWrongKind that says what the name holds; other errors stay as they
// are.
func wrongKind(err error) error {
	if err == nil || !redis.HasErrorPrefix(err, "WRONGKIND ") {
		return err
	}
	return fmt.Errorf("%w: it is %s", ErrWrongKind, describeKind(strings.TrimPrefix(err.Error(), "WRONGKIND ")))
}

// WrongType makes err, Redis's WRONGTYPE reply to a plain command on key
// name (GET, LLEN, LPOP, BLPOP), an error wrapping ErrWrongKind that says
// what name holds: one more round trip, on this error path only. Other
// errors stay as they are.
func WrongType(ctx context.Context, c any, name string, err error) error {
	if err == nil || !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return err
	}
	return refused(ctx, c, name, err)
}

// refused is ErrWrongKind for name, saying what name holds (a TYPE and,
// for a hash, an HEXISTS of its mode), or with cause when that cannot be
// read.
func refused(ctx context.Context, c any, name string, cause error) error {
	r, ok := c.(interface {
		Type(ctx context.Context, key string) *redis.StatusCmd
		HExists(ctx context.Context, key, field string) *redis.BoolCmd
	})
	t := "none"
	if ok {
		if v, err := r.Type(ctx, name).Result(); err == nil {
			t = v
		}
	}
	switch {
	case t == "none" && errors.Is(cause, ErrWrongKind):
		return cause
	case t == "none":
		return fmt.Errorf("%w: %w", ErrWrongKind, cause)
	}
	if t == "hash" {
		t = "lock"
		if mode, _ := r.HExists(ctx, name, "mode").Result(); mode {
			t = "read-write-lock"
		}
	}
	return fmt.Errorf("%w: it is %s", ErrWrongKind, describeKind(t))
}
