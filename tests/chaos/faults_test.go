package chaos

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// injector applies one fault and returns it as recorded; ok false when the
// fault could not be placed (e.g. no holder reached the pause point).
type injector struct {
	kind string
	// expected outcome, for the report and docs/guarantees.md.
	expect string
	run    func(h *harness) (fault, bool)
}

// faultChecks assert what a fault alone must show in a run, beyond what
// every run is held to.
var faultChecks = map[string]func(t *testing.T, v *verdict){
	"holder-kill": func(t *testing.T, v *verdict) {
		assert.NotZero(t, v.KilledOvertaken, "no killed holder's lock was taken over, so the lower bound was not exercised")
	},
	"holder-pause-rw": func(t *testing.T, v *verdict) {
		assert.NotZero(t, v.Overtaken, "no paused holder was overtaken")
		assert.NotZero(t, v.StaleRejected, "no stale write was rejected")
	},
	"holder-sigstop": func(t *testing.T, v *verdict) {
		assert.NotZero(t, v.Overtaken, "no stopped holder was overtaken")
	},
	"redis-sigstop": func(t *testing.T, v *verdict) {
		assert.NotZero(t, v.DoneMargins, "no holder lost its lock (Done) to the freeze")
	},
	"redis-restart-old-rdb": func(t *testing.T, v *verdict) {
		for _, f := range v.faults {
			assert.NotZero(t, f.Hits, "no fencing counter was rolled back: the fault did nothing")
		}
		// Tokens rising across the rollback and the fence holding are
		// what every run checks (lock and register models).
		t.Logf("%d excused holds, %d overtaken, %d stale writes rejected", v.ExcusedHolds, v.Overtaken, v.StaleRejected)
	},
	"sentinel-failover": func(t *testing.T, v *verdict) {
		for _, f := range v.faults {
			assert.NotZero(t, f.Hits, "no grant was made on the master while the replica lagged: the failover lost nothing")
		}
		t.Logf("%d excused holds, %d overtaken, %d stale writes rejected", v.ExcusedHolds, v.Overtaken, v.StaleRejected)
	},
	"proxy-loss": func(t *testing.T, v *verdict) {
		for _, f := range v.faults {
			assert.NotZero(t, f.Hits, "no packet was lost: the fault did nothing")
			// The victim's link works again: it is granted a lock within
			// the stall bound (every run checks that someone is).
			var after time.Duration = -1
			for _, h := range byGrant(v.holds) {
				if h.p == f.Proc && h.got > f.End {
					after = time.Duration(h.got - f.End)
					break
				}
			}
			t.Logf("%d packets lost; the victim's next grant came %v after the loss ended", f.Hits, after)
			assert.True(t, after >= 0 && after <= v.bounds.Stall, "the victim was not granted a lock within the stall bound after the loss ended")
		}
	},
	"proxy-blackhole": func(t *testing.T, v *verdict) {
		assert.NotZero(t, v.DoneMargins, "no cut-off holder lost its lock (Done) while another took it")
	},
}

// checkNeedsGrants: these faults' checks need grants during or after the
// fault (a counter to roll back, a grant to lose, the victim granted
// again), not a takeover.
var checkNeedsGrants = map[string]bool{"redis-restart-old-rdb": true, "sentinel-failover": true, "proxy-loss": true}

var injectors = []injector{
	{"holder-kill", "the killed holder's lock is granted to another no earlier than 2/3 lease after the kill, and within a lease",
		func(h *harness) (fault, bool) {
			p := h.pickHolder()
			if p == nil {
				return fault{}, false
			}
			t := now()
			_ = p.cmd.Process.Kill()
			<-p.exited
			h.mu.Lock()
			h.killed[p.id] = t
			h.mu.Unlock()
			h.remove(p)
			p.proxy.close()
			h.spawn()
			return fault{Kind: "holder-kill", Start: t, End: t, Proc: p.id}, true
		}},
	{"holder-pause-rw", "documented unsafety: a holder stopped between its read and its write past its lease is overtaken; its write is rejected by the fence",
		func(h *harness) (fault, bool) {
			p := h.pick()
			_ = p.cmd.Process.Signal(syscall.SIGUSR1)
			deadline := time.Now().Add(5 * time.Second)
			for !stopped(p.cmd.Process.Pid) {
				if time.Now().After(deadline) {
					_ = p.cmd.Process.Signal(syscall.SIGUSR2)
					time.Sleep(200 * time.Millisecond)
					_ = p.cmd.Process.Signal(syscall.SIGCONT)
					return fault{}, false
				}
				time.Sleep(5 * time.Millisecond)
			}
			t := now()
			time.Sleep(3 * h.lease / 2)
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			return fault{Kind: "holder-pause-rw", Start: t, End: now(), Proc: p.id, Excuses: true}, true
		}},
	{"holder-sigstop", "documented unsafety: a process stopped past its lease anywhere loses its holds; Done() closes when it runs again",
		func(h *harness) (fault, bool) {
			p := h.pickHolder()
			if p == nil {
				return fault{}, false
			}
			t := now()
			_ = p.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(3 * h.lease / 2)
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			return fault{Kind: "holder-sigstop", Start: t, End: now(), Proc: p.id, Excuses: true}, true
		}},
	{"redis-sigstop", "Redis frozen for 1 to 1.5 leases: Done() closes before another grant; waits end on time",
		func(h *harness) (fault, bool) {
			if !h.inLongHold() {
				return fault{}, false
			}
			t := now()
			_ = h.srv.Pause()
			time.Sleep(time.Duration(float64(h.lease) * (1 + h.rng.Float64()/2)))
			_ = h.srv.Resume()
			return fault{Kind: "redis-sigstop", Start: t, End: now(), Proc: -1}, true
		}},
	{"redis-restart-aof-always", "SIGKILL and restart with AOF always: holds survive, no overlap",
		func(h *harness) (fault, bool) {
			if !h.inLongHold() {
				return fault{}, false
			}
			t := now()
			if err := h.srv.Restart(); err != nil {
				h.t.Errorf("restart: %v", err)
			}
			return fault{Kind: "redis-restart-aof-always", Start: t, End: now(), Proc: -1}, true
		}},
	{"redis-crash-aof-everysec", "SIGKILL with appendfsync everysec: up to 1 s of writes may be lost (excused); tokens still increase",
		func(h *harness) (fault, bool) {
			ctx, cancel := h.ctx(5 * time.Second)
			defer cancel()
			if err := h.admin.ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
				return fault{}, false
			}
			time.Sleep(time.Duration(h.rng.IntN(1000)) * time.Millisecond)
			t := now()
			if err := h.srv.Restart(); err != nil { // back with appendfsync always
				h.t.Errorf("restart: %v", err)
			}
			return fault{Kind: "redis-crash-aof-everysec", Start: t, End: now(), Proc: -1, Excuses: true}, true
		}},
	{"redis-restart-empty", "documented unsafety: Redis back without its data; holds are lost (excused), stale writes are rejected, tokens still increase",
		func(h *harness) (fault, bool) {
			t := now()
			if err := h.srv.Kill(); err != nil {
				h.t.Errorf("kill: %v", err)
			}
			_ = os.RemoveAll(filepath.Join(h.srv.Dir(), "appendonlydir"))
			_ = os.Remove(filepath.Join(h.srv.Dir(), "dump.rdb"))
			if err := h.srv.Restart(); err != nil {
				h.t.Errorf("restart: %v", err)
			}
			return fault{Kind: "redis-restart-empty", Start: t, End: now(), Proc: -1, Excuses: true}, true
		}},
	{"redis-restart-old-rdb", "documented unsafety: Redis back from an RDB snapshot taken 1 to 4 s earlier, lock keys and fencing counters rolled back: holds granted since are lost (excused) and a stale holder's writes are rejected by the fence; tokens still rise (max(counter+1, TIME in µs))",
		restartFromOldSnapshot},
	{"sentinel-failover", "documented unsafety (no WithReplicaSync): the master dies while its replica lags, the Sentinel promotes the replica, which lacks the last grants: those holds are lost (excused), another owner may be granted while the old holder still believes it holds (recorded), its stale writes are rejected by the fence and tokens still rise; grants resume within the stall bound",
		failoverToLaggingReplica},
	{"client-pause-write", "CLIENT PAUSE WRITE for 3/4 lease: no overlap, waits end on time",
		func(h *harness) (fault, bool) {
			if !h.inLongHold() {
				return fault{}, false
			}
			ctx, cancel := h.ctx(5 * time.Second)
			defer cancel()
			d := 3 * h.lease / 4
			t := now()
			if err := h.admin.Do(ctx, "client", "pause", d.Milliseconds(), "write").Err(); err != nil {
				h.t.Errorf("client pause: %v", err)
			}
			time.Sleep(d)
			return fault{Kind: "client-pause-write", Start: t, End: now(), Proc: -1}, true
		}},
	{"debug-sleep", "DEBUG SLEEP 3/4 lease: no overlap, waits end on time",
		func(h *harness) (fault, bool) {
			if !h.inLongHold() {
				return fault{}, false
			}
			ctx, cancel := h.ctx(10 * time.Second)
			defer cancel()
			t := now()
			if err := h.admin.Do(ctx, "debug", "sleep", (3 * h.lease / 4).Seconds()).Err(); err != nil {
				h.t.Errorf("debug sleep: %v", err)
			}
			return fault{Kind: "debug-sleep", Start: t, End: now(), Proc: -1}, true
		}},
	{"busy-script", "a script spinning 2.5 s (BUSY after 1 s) then SCRIPT KILL: no overlap, waits end on time",
		func(h *harness) (fault, bool) {
			if !h.inLongHold() {
				return fault{}, false
			}
			ctx, cancel := h.ctx(10 * time.Second)
			defer cancel()
			spin, killer := h.admin.Conn(), h.admin.Conn()
			defer spin.Close()
			defer killer.Close()
			if spin.Ping(ctx).Err() != nil || killer.Ping(ctx).Err() != nil {
				return fault{}, false
			}
			t := now()
			done := make(chan struct{})
			go func() { defer close(done); _ = spin.Eval(ctx, "while true do end", nil).Err() }()
			time.Sleep(2500 * time.Millisecond)
			for killer.ScriptKill(ctx).Err() != nil && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			<-done
			return fault{Kind: "busy-script", Start: t, End: now(), Proc: -1}, true
		}},
	{"pubsub-kill", "CLIENT KILL TYPE pubsub, 5 times in 1 s: waiters re-subscribe; no overlap",
		func(h *harness) (fault, bool) {
			if !h.inLongHold() {
				return fault{}, false
			}
			ctx, cancel := h.ctx(5 * time.Second)
			defer cancel()
			t := now()
			for range 5 {
				_ = h.admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err()
				time.Sleep(200 * time.Millisecond)
			}
			return fault{Kind: "pubsub-kill", Start: t, End: now(), Proc: -1}, true
		}},
	{"proxy-blackhole", "one worker cut off for 1.5 leases while the others proceed: its Done() closes before another grant",
		func(h *harness) (fault, bool) {
			p := h.pickHolder()
			if p == nil {
				return fault{}, false
			}
			t := now()
			p.proxy.blackhole.Store(true)
			time.Sleep(3 * h.lease / 2)
			p.proxy.blackhole.Store(false)
			p.proxy.closeAll()
			return fault{Kind: "proxy-blackhole", Start: t, End: now(), Proc: p.id}, true
		}},
	{"proxy-loss", "one worker's link loses 30, 50 or 70 % of its packets (emulated as TCP sees it: each lost segment arrives after the retransmission backoff) for 1 to 1.5 leases, or until one is lost, while the others proceed: no overlap (if its renewals cannot get through, its Done() closes before another grant), its waits end on time, and it is granted a lock again within the stall bound",
		func(h *harness) (fault, bool) {
			p := h.pickHolder()
			if p == nil {
				return fault{}, false
			}
			pm := []int64{300, 500, 700}[h.rng.IntN(3)]
			before := p.proxy.lost.Load()
			t := now()
			p.proxy.loss.Store(pm)
			time.Sleep(time.Duration(float64(h.lease) * (1 + h.rng.Float64()/2)))
			// A holder sends little (a renewal every third of a lease):
			// go on until something was lost, a lease more at most.
			for end := time.Now().Add(h.lease); p.proxy.lost.Load() == before && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			p.proxy.loss.Store(0)
			f := fault{Kind: "proxy-loss", Start: t, End: now(), Proc: p.id, Hits: int(p.proxy.lost.Load() - before)}
			// Let the victim be granted again before the run can end
			// (its check looks for that grant).
			h.waitGrantAfter(f.End, runBounds(h.lease, h.wait).Stall+time.Second, p)
			return f, true
		}},
	{"proxy-drop-reply", "the reply to a script that ran is dropped and the connection broken: the retry takes effect once (no double hold, no lost release)",
		func(h *harness) (fault, bool) {
			p := h.pick()
			t := now()
			p.proxy.dropArmed.Store(true)
			select {
			case <-p.proxy.dropped:
				return fault{Kind: "proxy-drop-reply", Start: t, End: now(), Proc: p.id}, true
			case <-time.After(5 * time.Second):
				p.proxy.dropArmed.Store(false)
				return fault{}, false
			}
		}},
}

func injectorByKind(kind string) injector {
	for _, in := range injectors {
		if in.kind == kind {
			return in
		}
	}
	panic("chaos: no injector " + kind)
}
