package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// evalsha is not a lock: it is the floor a Redis lock's client side is
// measured against. Its "lock" is one bare go-redis EVALSHA round trip of a
// script that sets the key with a TTL, its "unlock" one that deletes it,
// so its lock p50 is what one script call costs on this machine in this
// run. It takes part in the uncontended runs only (it excludes nobody).
const evalshaName = "evalsha"

var (
	evalshaSet = redis.NewScript(`redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2]) return 1`)
	evalshaDel = redis.NewScript(`return redis.call('del', KEYS[1])`)
)

type evalshaImpl struct{ rdb *redis.Client }

func openEvalsha(rdb *redis.Client) (impl, error) { return &evalshaImpl{rdb: rdb}, nil }

func (e *evalshaImpl) newLocker(name string) locker { return &evalshaLocker{rdb: e.rdb, key: name} }

func (e *evalshaImpl) close(context.Context) error { return nil }

type evalshaLocker struct {
	rdb *redis.Client
	key string
}

func (l *evalshaLocker) lock(ctx context.Context) error {
	return evalshaSet.Run(ctx, l.rdb, []string{l.key}, "held", (30 * time.Second).Milliseconds()).Err()
}

func (l *evalshaLocker) unlock(ctx context.Context) error {
	return evalshaDel.Run(ctx, l.rdb, []string{l.key}).Err()
}
