package scripts

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redisson's delayed-queue prefixes, and ours for request markers.
const (
	delayTimeoutPrefix = "redisson_delay_queue_timeout"
	delayQueuePrefix   = "redisson_delay_queue"
	delayChannelPrefix = "redisson_delay_queue_channel"
)

var (
	//go:embed queue_offer.lua
	queueOfferLua string
	//go:embed queue_move.lua
	queueMoveLua string
	//go:embed queue_delayed_poll.lua
	queueDelayedPollLua string
	//go:embed queue_delayed_contains.lua
	queueDelayedContainsLua string
	//go:embed queue_delayed_remove.lua
	queueDelayedRemoveLua string
	//go:embed queue_push.lua
	queuePushLua string
	//go:embed queue_give_back.lua
	queueGiveBackLua string
	//go:embed queue_taken.lua
	queueTakenLua string

	queueOffer           = newScript(kindLua, guardLua, queueOfferLua)
	queueMove            = newScript(kindLua, queueMoveLua)
	queueDelayedPoll     = newScript(queueDelayedPollLua)
	queueDelayedContains = newScript(queueDelayedContainsLua)
	queueDelayedRemove   = newScript(guardLua, queueDelayedRemoveLua)
	queuePush            = newScript(kindLua, guardLua, queuePushLua)
	queueGiveBack        = newScript(kindLua, guardLua, queueGiveBackLua)
	queueTaken           = newScript(queueTakenLua)
)

// MaxMoveBatch is the most items one move call takes out of a delayed queue,
// so that a backlog never holds the Redis event loop for long.
const MaxMoveBatch = 100

// DelayTimeoutKey is the ZSET of a delayed queue: member -> due ms.
func DelayTimeoutKey(name string) string { return prefixed(delayTimeoutPrefix, name) }

// DelayQueueKey is the LIST of a delayed queue's members in insertion order.
func DelayQueueKey(name string) string { return prefixed(delayQueuePrefix, name) }

// DelayChannel carries the due time (ms) of a new earliest item.
func DelayChannel(name string) string { return prefixed(delayChannelPrefix, name) }

// DelayMember encodes a delayed item as Redisson does (Lua
// struct.pack('Bc0Lc0', 8, id, #value, value)): the length byte 8, the 8
// random bytes of id that keep equal values distinct, the value's length as
// 8 little-endian bytes, the value.
func DelayMember(id [8]byte, value []byte) string {
	b := make([]byte, 0, 17+len(value))
	b = append(b, 8)
	b = append(b, id[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(value)))
	return string(append(b, value...))
}

// OfferArgs describes one delayed offer.
type OfferArgs struct {
	Name   string
	Member string // DelayMember
	Delay  time.Duration
}

// OfferDelayed stores one item of a delayed queue, due Delay after the
// server's clock reads now, once for the request g guards (whatever became
// of the item since an earlier attempt stored it), and announces its due
// time when it is the new earliest. go-redis never replays it; re-attempt
// it with the same guard when its outcome is unknown.
func OfferDelayed(ctx context.Context, c Client, a OfferArgs, g Guard) error {
	_, err := guardedInts(ctx, c, queueOffer, g, a.Name,
		[]string{DelayTimeoutKey(a.Name), DelayQueueKey(a.Name), a.Name},
		a.Member, max(ms(a.Delay), 0), DelayChannel(a.Name))
	return err
}

// Moved is the outcome of one MoveDue call.
type Moved struct {
	N int // items moved
	// Next is how long until the earliest remaining item is due, by the
	// server's clock; negative when none is left.
	Next time.Duration
	// ServerNow is the server's clock when the call ran (Unix ms).
	ServerNow int64
	// Late is how long after its due time each moved item was moved.
	Late []time.Duration
}

// MoveDue moves at most MaxMoveBatch due items of delayed queue name into
// its destination list. It is atomic, and safe for go-redis to replay (a
// replay moves what is due then).
func MoveDue(ctx context.Context, c Client, name string) (Moved, error) {
	res, err := queueMove.run(ctx, c,
		[]string{name, DelayTimeoutKey(name), DelayQueueKey(name)}, MaxMoveBatch).Result()
	if err != nil {
		return Moved{}, err
	}
	all, _ := res.([]any)
	if len(all) != 4 {
		return Moved{}, fmt.Errorf("scripts: unexpected move reply %v", res)
	}
	v, err := ints(all[:3])
	late, lateErr := ints(all[3])
	if err != nil || lateErr != nil {
		return Moved{}, fmt.Errorf("scripts: unexpected move reply %v", res)
	}
	m := Moved{N: int(v[0]), Next: -1, ServerNow: v[2], Late: make([]time.Duration, len(late))}
	for i, ms := range late {
		m.Late[i] = time.Duration(ms) * time.Millisecond
	}
	if v[1] >= 0 {
		m.Next = time.Duration(v[1]) * time.Millisecond
	}
	return m, nil
}

// PollDelayed takes the oldest item of delayed queue name, due or not. It is
// never replayed: a lost reply loses that item, a replay would lose two.
func PollDelayed(ctx context.Context, c Client, name string) ([]byte, bool, error) {
	res, err := queueDelayedPoll.evalOnce(ctx, c, []string{DelayTimeoutKey(name), DelayQueueKey(name)})
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	s, ok := res.(string)
	if !ok {
		return nil, false, fmt.Errorf("scripts: unexpected poll reply %T", res)
	}
	return []byte(s), true, nil
}

// ContainsDelayed reports whether delayed queue name holds value, not yet
// moved.
func ContainsDelayed(ctx context.Context, c Client, name string, value []byte) (bool, error) {
	res, err := queueDelayedContains.run(ctx, c, []string{DelayQueueKey(name)}, value).Result()
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// RemoveDelayed removes the oldest pending item equal to value, once for
// the request g guards.
func RemoveDelayed(ctx context.Context, c Client, name string, value []byte, g Guard) (bool, error) {
	v, err := guardedInts(ctx, c, queueDelayedRemove, g, name, []string{DelayTimeoutKey(name), DelayQueueKey(name)}, value)
	if err != nil {
		return false, err
	}
	return v[0] == 1, nil
}

// Push appends value to list name, once for the request g guards.
func Push(ctx context.Context, c Client, name string, value []byte, g Guard) error {
	_, err := guardedInts(ctx, c, queuePush, g, name, []string{name}, value)
	return err
}

// GiveBack puts value back at the head of list name, where a pop took it
// from, once for the request g guards.
func GiveBack(ctx context.Context, c Client, name string, value []byte, g Guard) error {
	_, err := guardedInts(ctx, c, queueGiveBack, g, name, []string{name}, value)
	return err
}

// Pop moves the head of list name into the hold of request holdID, and
// reports it, or false when the list is empty. The item stays in the hold
// until Taken: a reply lost on its way leaves it there for Taken to give
// back, never lost. It is never replayed (a replay would move a second
// item while the first reply was lost).
func Pop(ctx context.Context, c Client, name, holdID string) ([]byte, bool, error) {
	v, err := bounded(ctx, func() ([]byte, error) {
		cmd := redis.NewStringCmd(ctx, "lmove", name, requestKey(name, holdID), "left", "right")
		_ = c.Process(ctx, onceStringCmd{cmd})
		return cmd.Bytes()
	})
	return moved(ctx, c, name, v, err)
}

// BlockingPop waits up to timeout (whole seconds, at least one: go-redis
// sends the timeout in seconds and sizes the read deadline to it) for the
// head of list name and moves it into the hold of request holdID, as Pop
// does, on a pooled connection the call holds meanwhile. It reports false
// when nothing came. go-redis may replay it after a broken connection,
// which moves a second item into the hold: Taken gives that back.
func BlockingPop(ctx context.Context, c redis.Cmdable, name, holdID string, timeout time.Duration) ([]byte, bool, error) {
	v, err := c.BLMove(ctx, name, requestKey(name, holdID), "left", "right", max(timeout, time.Second)).Bytes()
	return moved(ctx, c, name, v, err)
}

func moved(ctx context.Context, c any, name string, v []byte, err error) ([]byte, bool, error) {
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, WrongType(ctx, c, name, err)
	}
	return v, true, nil
}

// Taken ends the hold of request holdID on list name: the taker has item
// when took (else none: the pop's outcome was lost), and whatever else the
// hold has goes back to the head of the list. When an attempt of the pop
// may still reach Redis (late > 0: one held back on its connection, or
// written after its caller gave up), the hold's key stays marked as ended
// for late, so that such a pop fails (WRONGTYPE) instead of moving an item
// into a hold nobody ends. Safe to repeat: a hold that ended is left as it
// is.
func Taken(ctx context.Context, c Client, name, holdID string, took bool, item []byte, late time.Duration) error {
	return queueTaken.run(ctx, c, []string{name, requestKey(name, holdID)}, flag(took), item, max(ms(late), 0)).Err()
}

type onceStringCmd struct{ *redis.StringCmd }

func (onceStringCmd) NoRetry() bool { return true }
