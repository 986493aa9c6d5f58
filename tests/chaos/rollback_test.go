package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
)

// restartFromOldSnapshot is the redis-restart-old-rdb fault: Redis is
// killed and comes back from an RDB snapshot taken 1 to 4 s earlier, as a
// restore from a backup (or a crash of a server that only snapshots)
// would bring it back. Every lock key and fencing counter rolls back to the
// snapshot: holds granted since are gone, and the counters are lower than
// tokens already handed out.
//
// The server runs with AOF on, and Redis 7 then ignores a dump.rdb at
// start-up; so the snapshot is put back as the AOF's base file (an RDB),
// with a manifest that names only it.
func restartFromOldSnapshot(h *harness) (fault, bool) {
	ctx, cancel := h.ctx(20 * time.Second)
	defer cancel()
	// Markers, never touched by the workers, prove which data came back:
	// the first is in the snapshot, the second only in the data after it.
	before, after := fmt.Sprintf("chaos:snap:%d", now()), fmt.Sprintf("chaos:unsnap:%d", now())
	if h.admin.Set(ctx, before, 1, 0).Err() != nil || h.admin.Save(ctx).Err() != nil {
		return fault{}, false
	}
	// Read after the SAVE: at least what the snapshot holds.
	snap := h.counters(ctx)
	old := filepath.Join(h.dir, fmt.Sprintf("snapshot-%d.rdb", now()))
	if err := copyFile(filepath.Join(h.srv.Dir(), "dump.rdb"), old); err != nil {
		h.t.Errorf("copy the snapshot: %v", err)
		return fault{}, false
	}
	// Let the workers move on from it: at least one grant, 1 to 4 s.
	time.Sleep(time.Duration(1000+h.rng.IntN(3000)) * time.Millisecond)
	var pre map[string]int64
	for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		pre = h.counters(ctx)
		if rolledBack(snap, pre) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if h.admin.Set(ctx, after, 1, 0).Err() != nil {
		return fault{}, false
	}
	t := now()
	if err := h.srv.Kill(); err != nil {
		h.t.Errorf("kill: %v", err)
	}
	aof := filepath.Join(h.srv.Dir(), "appendonlydir")
	_ = os.RemoveAll(aof)
	_ = os.Remove(filepath.Join(h.srv.Dir(), "dump.rdb"))
	if err := os.Mkdir(aof, 0o700); err != nil {
		h.t.Errorf("restore the snapshot: %v", err)
	}
	if err := os.Rename(old, filepath.Join(aof, "appendonly.aof.1.base.rdb")); err != nil {
		h.t.Errorf("restore the snapshot: %v", err)
	}
	manifest := "file appendonly.aof.1.base.rdb seq 1 type b\n"
	if err := os.WriteFile(filepath.Join(aof, "appendonly.aof.manifest"), []byte(manifest), 0o600); err != nil {
		h.t.Errorf("restore the snapshot: %v", err)
	}
	if err := h.srv.Restart(); err != nil {
		h.t.Errorf("restart: %v", err)
	}
	end := now()
	if n, err := h.admin.Exists(ctx, before, after).Result(); err != nil || n != 1 || h.admin.Exists(ctx, before).Val() != 1 {
		h.t.Errorf("Redis did not come back from the snapshot (markers: %d, %v)", n, err)
	}
	_ = h.admin.Del(ctx, before).Err()
	return fault{Kind: "redis-restart-old-rdb", Start: t, End: end, Proc: -1, Excuses: true, Hits: rolledBack(snap, pre)}, true
}

// counters are the fencing counters of the run's lock names.
func (h *harness) counters(ctx context.Context) map[string]int64 {
	out := map[string]int64{}
	for _, n := range h.names {
		v, err := h.admin.Get(ctx, "redisson_lock_token:{"+n+"}").Int64()
		if err == nil || err == redis.Nil {
			out[n] = v
		}
	}
	return out
}

// rolledBack is how many names' counters moved on since the snapshot, so
// that the restart takes them back.
func rolledBack(snap, pre map[string]int64) int {
	n := 0
	for k, v := range pre {
		if v > snap[k] {
			n++
		}
	}
	return n
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
