package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// scriptSHAs names the lock scripts by the SHA1 EVALSHA carries, so that a
// history says which script a fault hit. The sources are the files of
// package scripts, joined as it joins them (a prelude, then the parts).
var scriptSHAs = sync.OnceValue(func() map[string]string {
	parts := map[string][]string{
		"lock_acquire":      {"guard", "reentrant", "lock_acquire"},
		"lock_unlock":       {"guard", "lock_unlock"},
		"lock_handoff":      {"guard", "reentrant", "lock_handoff"},
		"lock_force_unlock": {"lock_force_unlock"},
		"lock_renew":        {"lock_renew"},
		"lock_extend":       {"lock_extend"},
		"fair_acquire":      {"guard", "reentrant", "fair", "fair_acquire"},
		"fair_unlock":       {"guard", "reentrant", "fair", "fair_unlock"},
		"fair_leave":        {"guard", "fair", "fair_leave"},
		"fair_force_unlock": {"fair_force_unlock"},
		"rw_read_acquire":   {"guard", "reentrant", "rw_read_acquire"},
		"rw_write_acquire":  {"guard", "reentrant", "rw_write_acquire"},
		"rw_read_unlock":    {"guard", "rw_read_unlock"},
		"rw_write_unlock":   {"guard", "rw_write_unlock"},
		"rw_renew":          {"rw_renew"},
		"rw_force_unlock":   {"rw_force_unlock"},
		"latch_try_set":     {"kind", "guard", "latch_try_set"},
		"latch_count_down":  {"kind", "guard", "latch_count_down"},
		"latch_delete":      {"kind", "guard", "latch_delete"},
		// The queues' and semaphores' (scripts/queue.go, semaphore.go).
		"queue_offer":                   {"kind", "guard", "queue_offer"},
		"queue_move":                    {"kind", "queue_move"},
		"queue_delayed_poll":            {"queue_delayed_poll"},
		"queue_delayed_remove":          {"guard", "queue_delayed_remove"},
		"queue_push":                    {"kind", "guard", "queue_push"},
		"queue_give_back":               {"kind", "guard", "queue_give_back"},
		"queue_taken":                   {"queue_taken"},
		"semaphore_acquire":             {"kind", "guard", "semaphore_acquire"},
		"semaphore_add":                 {"kind", "guard", "semaphore_add"},
		"semaphore_try_set":             {"kind", "guard", "semaphore_try_set"},
		"semaphore_drain":               {"kind", "guard", "semaphore_drain"},
		"semaphore_expirable_acquire":   {"kind", "semaphore_expirable", "semaphore_expirable_acquire"},
		"semaphore_expirable_release":   {"kind", "guard", "semaphore_expirable", "semaphore_expirable_release"},
		"semaphore_expirable_available": {"kind", "semaphore_expirable", "semaphore_expirable_available"},
	}
	out := map[string]string{}
	for name, ps := range parts {
		var body strings.Builder
		for _, p := range ps {
			b, err := os.ReadFile(filepath.Join("..", "..", "scripts", p+".lua"))
			if err != nil {
				return out
			}
			body.Write(b)
		}
		sum := sha1.Sum([]byte("local PUBLISH = 'publish'\n" + body.String()))
		out[hex.EncodeToString(sum[:])] = name
	}
	return out
})

func scriptName(sha string) string {
	if n, ok := scriptSHAs()[sha]; ok {
		return n
	}
	return "sha:" + sha[:8]
}
