package chaos

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// sentinelMaster is the name the Sentinel knows the run's master by.
const sentinelMaster = "chaos"

// startReplication gives the run's Redis a replica (with the same
// persistence, made a replica by REPLICAOF rather than by its command line,
// so that a restart brings it back as it was) and a Sentinel. The
// Sentinel's down-after is a minute: the other faults freeze the master
// for seconds and must not fail it over; only the sentinel-failover fault
// does, with SENTINEL FAILOVER.
//
// The workers reach Redis through their proxies, which follow the
// Sentinel: after a failover they connect to the master it names, as a
// Sentinel-aware proxy or go-redis's failover client does on
// +switch-master. So every other fault (the proxy's own among them) still
// reaches them, and the run stays one history of one lock service.
func (h *harness) startReplication() {
	t := h.t
	replica, err := redisserver.Start(dataServerArgs...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Close() })
	h.replica = replica
	ctx, cancel := h.ctx(20 * time.Second)
	defer cancel()
	require.NoError(t, h.replicate(ctx, replica, h.srv))
	h.sentinel, err = redisserver.StartSentinel(h.srv, sentinelMaster, time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.sentinel.Close() })
}

// replicate makes r a replica of m and waits until it is in sync.
func (h *harness) replicate(ctx context.Context, r, m *redisserver.Server) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	if err := c.Do(ctx, "replicaof", "127.0.0.1", m.Port).Err(); err != nil {
		return err
	}
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// failoverToLaggingReplica is the sentinel-failover fault, without
// WithReplicaSync: the replica is frozen and cut off from the master (a
// lagging replica), the workers go on being granted locks on the master for
// 0.3 to 1 s, the master dies, and the Sentinel promotes the replica, which
// never received those grants. The proxies then follow the Sentinel to
// the new master; the old one comes back as its replica.
func failoverToLaggingReplica(h *harness) (fault, bool) {
	if h.replica == nil {
		return fault{}, false
	}
	ctx, cancel := h.ctx(60 * time.Second)
	defer cancel()
	sc := redis.NewSentinelClient(&redis.Options{Addr: h.sentinel.Addr})
	defer sc.Close()
	if !sentinelSeesReplica(ctx, sc, h.replica) {
		return fault{}, false
	}
	if err := h.replica.Pause(); err != nil {
		h.t.Errorf("pause the replica: %v", err)
		return fault{}, false
	}
	if err := h.admin.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		_ = h.replica.Resume()
		return fault{}, false
	}
	snap := h.counters(ctx)
	time.Sleep(time.Duration(300+h.rng.IntN(700)) * time.Millisecond)
	// Grants the failover loses: wait for one, 8 s at most.
	var pre map[string]int64
	for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pre = h.counters(ctx)
		if rolledBack(snap, pre) > 0 || time.Now().After(deadline) {
			break
		}
	}
	t := now()
	if err := h.srv.Kill(); err != nil {
		h.t.Errorf("kill the master: %v", err)
	}
	if err := h.replica.Resume(); err != nil {
		h.t.Errorf("resume the replica: %v", err)
	}
	// The replica was frozen for seconds: until the Sentinel has its next
	// PING reply it refuses it (NOGOODSLAVE: last answer older than 5 s),
	// which is what an operator retrying the command also sees.
	for {
		err := sc.Failover(ctx, sentinelMaster).Err()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "NOGOODSLAVE") || ctx.Err() != nil {
			h.t.Errorf("SENTINEL FAILOVER: %v", err)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		addr, err := sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
		if err == nil && addr[1] == strconv.Itoa(h.replica.Port) {
			break
		}
		if ctx.Err() != nil {
			h.t.Errorf("the Sentinel did not promote the replica: %v %v", addr, err)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	old := h.srv
	h.mu.Lock()
	h.srv, h.replica = h.replica, old
	procs := append([]*proc(nil), h.procs...)
	h.mu.Unlock()
	for _, p := range procs {
		p.proxy.setTarget(h.srv.Addr)
	}
	_ = h.admin.Close()
	h.admin = redis.NewClient(&redis.Options{Addr: h.srv.Addr, ReadTimeout: 10 * time.Second})
	end := now()
	// The old master comes back, with the grants the failover lost in its
	// AOF, as the new master's replica (nobody is sent to it meanwhile).
	if err := old.Restart(); err != nil {
		h.t.Errorf("restart the old master: %v", err)
	} else if err := h.replicate(ctx, old, h.srv); err != nil {
		h.t.Errorf("make the old master a replica: %v", err)
	}
	return fault{Kind: "sentinel-failover", Start: t, End: end, Proc: -1, Excuses: true, Hits: rolledBack(snap, pre)}, true
}

// sentinelSeesReplica waits up to 15 s until the Sentinel knows r as a
// healthy replica of the master with recent INFO, which SENTINEL FAILOVER
// needs to pick it (just after a failover it may not yet).
func sentinelSeesReplica(ctx context.Context, sc *redis.SentinelClient, r *redisserver.Server) bool {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		reps, _ := sc.Replicas(ctx, sentinelMaster).Result()
		for _, rep := range reps {
			refresh, _ := strconv.Atoi(rep["info-refresh"])
			if rep["port"] == strconv.Itoa(r.Port) && rep["flags"] == "slave" && rep["master-link-status"] == "ok" && refresh < 5000 {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}
