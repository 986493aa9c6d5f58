package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// backend is the Redis the demo runs on.
type backend struct {
	addrs   []string
	cluster bool
	own     bool // started by the demo, stopped at the end
	stop    func()
}

func (b backend) String() string {
	s := "redis " + strings.Join(b.addrs, ",")
	switch {
	case b.own && b.cluster:
		s += " (own 3-master cluster)"
	case b.own:
		s += " (own redis-server)"
	case b.cluster:
		s += " (cluster)"
	}
	return s
}

// redisFor starts the Redis the demo needs, or looks at the one --redis
// names. Ours runs in a process group of its own, so a Ctrl-C stops the
// demo, not the Redis its verdict still has to read, and it is killed if
// the demo dies.
func redisFor(ctx context.Context, cfg config) (backend, error) {
	if addrs := splitAddrs(cfg.redis); len(addrs) > 0 {
		b := backend{addrs: addrs, cluster: len(addrs) > 1, stop: func() {}}
		if len(addrs) == 1 {
			on, err := clusterEnabled(ctx, addrs[0])
			if err != nil {
				return b, fmt.Errorf("redis %s: %w", addrs[0], err)
			}
			b.cluster = on
		}
		return b, nil
	}
	if cfg.redisCluster {
		c, err := redisserver.StartCluster(3)
		if err != nil {
			return backend{}, err
		}
		return backend{addrs: c.Addrs(), cluster: true, own: true, stop: func() { _ = c.Close() }}, nil
	}
	srv, err := redisserver.Start()
	if err != nil {
		return backend{}, err
	}
	return backend{addrs: []string{srv.Addr}, own: true, stop: func() { _ = srv.Stop(); _ = srv.Close() }}, nil
}

// clusterEnabled asks a server whether it is a cluster node.
func clusterEnabled(ctx context.Context, addr string) (bool, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "cluster_enabled" {
			return v == "1", nil
		}
	}
	return false, nil
}

// demoKeys are every key the demo writes or its locks and queue use,
// apart from the fencing counters (which must only grow).
func demoKeys(cfg config) []string {
	keys := []string{bankKey, configKey, leaderLock, configLock, queueName,
		"redisson_delay_queue_timeout:{" + queueName + "}", "redisson_delay_queue:{" + queueName + "}",
		ticketKey(leaderLock), ticketKey(configLock)}
	for k := range cfg.accounts {
		keys = append(keys, acctLock(k), ticketKey(acctLock(k)))
	}
	for k := range cfg.jobs {
		keys = append(keys, jobLock(k), jobCounter(k), ticketKey(jobLock(k)),
			"redisson_lock_queue:{"+jobLock(k)+"}", "redisson_lock_timeout:{"+jobLock(k)+"}")
	}
	return keys
}

// seed starts from a clean slate: the accounts with their balances, the
// configuration at version 0, job counters at 0, no locks, an empty queue.
func seed(ctx context.Context, rdb redis.UniversalClient, cfg config) error {
	// One key per DEL: on a cluster the keys live in different slots.
	for _, k := range demoKeys(cfg) {
		if err := rdb.Del(ctx, k).Err(); err != nil {
			return err
		}
	}
	bank := make([]any, 0, 2*cfg.accounts)
	for k := range cfg.accounts {
		bank = append(bank, acctField(k), initBalance)
	}
	if err := rdb.HSet(ctx, bankKey, bank...).Err(); err != nil {
		return err
	}
	conf := []any{"version", "0:0"}
	for i := range configFields {
		conf = append(conf, cfgField(i), "0:0")
	}
	return rdb.HSet(ctx, configKey, conf...).Err()
}

// finalState is what Redis holds at the end.
type finalState struct {
	balances []int64
	jobs     []int64
}

func readFinal(ctx context.Context, rdb redis.UniversalClient, cfg config) (finalState, error) {
	var f finalState
	m, err := rdb.HGetAll(ctx, bankKey).Result()
	if err != nil {
		return f, err
	}
	for k := range cfg.accounts {
		v, err := strconv.ParseInt(m[acctField(k)], 10, 64)
		if err != nil {
			return f, fmt.Errorf("account %d: %w", k, err)
		}
		f.balances = append(f.balances, v)
	}
	for k := range cfg.jobs {
		v, err := rdb.Get(ctx, jobCounter(k)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return f, err
		}
		f.jobs = append(f.jobs, v)
	}
	return f, nil
}
