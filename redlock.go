package actorlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/actors"

	"github.com/actorlock/actorlock/internal/sentinel"
)

// red is a RedLock's way of acquiring (see RedLock).
type red struct {
	members []groupMember
	err     error

	hostsOnce sync.Once
	hostsErr  error // two members' servers are one, by the addresses they resolve to
}

// RedLock groups locks on independent Redis masters (one runtime each)
// into one held by a majority (len/2+1) of them (Redisson's
// RedissonRedLock, after Redis's Redlock algorithm). It survives the loss
// of a minority of masters; its guarantees are no better than the masters'
// clocks and pauses allow (see docs/guarantees.md), so use fencing tokens
// for the guarded resource. Invalid members (none, nil, bad, two on one
// server, whatever their runtimes: servers are told apart as
// WithServerName says) are reported by Acquire and TryAcquire as
// ErrInvalidArgument.
//
// Acquire tries every master at once (each attempt bounded by a timeout far
// below the lease, so a dead or frozen master costs little) and holds when a
// majority granted it within the validity time: lease - elapsed - drift,
// drift = 1% of the lease + 2 ms, at least 25 ms (at most a quarter of the
// lease). Otherwise it releases every member (the masters that did not
// answer too) and tries again after a random back-off, until WaitTime is
// used up (ErrNotAcquired) or ctx ends; without WaitTime, until ctx ends.
// With LeaseTime the hold ends when its validity does; without, the
// members' watchdogs renew it, and it is lost when fewer than a majority
// can be renewed. TryAcquire makes one round of attempts.
func RedLock(locks ...*Lock) *Group {
	m, err := orderMembers(locks, "RedLock")
	if err == nil {
		for i := 1; i < len(m); i++ {
			if m[i].server == m[i-1].server {
				err = fmt.Errorf("%w: members %q and %q on one server (%q)", ErrInvalidArgument, m[i-1].lock.key.Name, m[i].lock.key.Name, m[i].server)
				break
			}
		}
	}
	return &Group{by: &red{members: m, err: err}}
}

func (r *red) acquire(ctx context.Context, try bool, opts []AcquireOption) (held *GroupHeld, err error) {
	defer failed("acquire RedLock", "", &err)
	ac, err := groupOptions(ctx, r.err, try, opts)
	if err != nil {
		return nil, err
	}
	r.hostsOnce.Do(func() { r.hostsErr = r.distinctHosts() })
	if r.hostsErr != nil {
		return nil, r.hostsErr
	}
	ctx, obs := r.members[0].lock.rt.tel.startAcquire(ctx, kindRed, "", !try, ac.waitSet && ac.wait > 0)
	defer func() { obs.end(err, "", 0) }()
	lease := r.lease(ac)
	quorum := len(r.members)/2 + 1
	var deadline time.Time
	if ac.waitSet {
		deadline = time.Now().Add(ac.wait)
	}
	for {
		g, err := r.round(ctx, ac, lease, quorum)
		if err == nil || try || ctx.Err() != nil {
			return g, err
		}
		if ac.waitSet && !time.Now().Before(deadline) {
			return nil, err
		}
		// Back off at random so that contenders stop splitting the vote.
		pause := time.Duration(rand.Int64N(int64(redLockBackoff(lease))))
		if ac.waitSet {
			pause = min(pause, time.Until(deadline))
		}
		if !sleepCtx(ctx, pause) {
			return nil, ctxError(ctx)
		}
	}
}

// distinctHosts checks, once, that no two members' single-server clients
// reach one server by different spellings of a loopback or literal
// address ("localhost:6379" and "127.0.0.1:6379", "[::1]:6379"): a
// RedLock over one server is no RedLock, a "majority" would be one server.
// Other host names are compared as spelt (no DNS lookup here: it may be
// slow, and outlive the call); WithServerName names a deployment however
// its clients reach it.
func (r *red) distinctHosts() error {
	seen := map[string]string{} // ip:port -> member
	for _, m := range r.members {
		c, ok := m.lock.rt.rdb.(*redis.Client)
		if !ok || m.lock.rt.named {
			continue
		}
		host, port, err := net.SplitHostPort(c.Options().Addr)
		if err != nil {
			continue
		}
		var ips []net.IP
		switch ip := net.ParseIP(host); {
		case ip != nil && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)), host == "localhost", strings.HasSuffix(host, ".localhost"):
			ips = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback} // RFC 6761: one loopback server
		case ip != nil:
			ips = []net.IP{ip}
		default:
			continue
		}
		for _, ip := range ips {
			at := net.JoinHostPort(ip.String(), port)
			if other, dup := seen[at]; dup && other != m.lock.key.Name {
				return fmt.Errorf("%w: RedLock members %s and %s on one server (%s)", ErrInvalidArgument,
					sentinel.Quote(other), sentinel.Quote(m.lock.key.Name), c.Options().Addr)
			}
			seen[at] = m.lock.key.Name
		}
	}
	return nil
}

// lease is the lease of the members: LeaseTime, or the shortest watchdog
// lease among their runtimes.
func (r *red) lease(ac acquireConfig) time.Duration {
	if ac.lease > 0 {
		return ac.lease
	}
	lease := time.Duration(0)
	for _, m := range r.members {
		if w := m.lock.rt.watchdog; lease == 0 || w < lease {
			lease = w
		}
	}
	return lease
}

// redLockAttempt bounds one master's attempt: far below the lease, so a
// master that does not answer costs little of it.
func redLockAttempt(lease time.Duration) time.Duration {
	return min(max(lease/20, 5*time.Millisecond), 250*time.Millisecond)
}

func redLockBackoff(lease time.Duration) time.Duration {
	return min(max(lease/50, 2*time.Millisecond), 100*time.Millisecond)
}

// round is one attempt at every master at once.
func (r *red) round(ctx context.Context, ac acquireConfig, lease time.Duration, quorum int) (*GroupHeld, error) {
	var opts []AcquireOption
	if ac.lease > 0 {
		opts = append(opts, LeaseTime(ac.lease))
	}
	start := time.Now()
	helds := make([]*Held, len(r.members))
	errs := make([]error, len(r.members))
	var wg sync.WaitGroup
	for i, m := range r.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, redLockAttempt(lease))
			defer cancel()
			helds[i], errs[i] = m.lock.TryAcquire(actx, opts...)
			errs[i] = sentinel.Member(m.lock.key.Name, errs[i])
		}()
	}
	wg.Wait()
	var got []*Held
	for _, h := range helds {
		if h != nil {
			got = append(got, h)
		}
	}
	validity := lease - time.Since(start) - actors.Drift(lease)
	if len(got) >= quorum && validity > 0 {
		var validUntil time.Time
		if ac.lease > 0 {
			validUntil = start.Add(lease - actors.Drift(lease))
		}
		return newGroupHeld(ctx, got, quorum, validUntil, "RedLock"), nil
	}
	// Masters that did not answer in time give back what they granted
	// late on their own (a cancelled acquisition is undone). The members'
	// errors are told, not wrapped: a member's attempt timeout must not
	// read as the caller's context ending.
	release := unlockAll(context.WithoutCancel(ctx), got)
	err := fmt.Errorf("%w: %d of %d masters granted it (%d needed) with %v of validity left (%v)",
		ErrNotAcquired, len(got), len(r.members), quorum, validity.Round(time.Millisecond), sentinel.List(errs...))
	return nil, joinCauses(err, release)
}
