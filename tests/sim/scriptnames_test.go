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
		"lock_unlock":       {"guard", "release", "lock_unlock"},
		"lock_handoff":      {"guard", "reentrant", "lock_handoff"},
		"lock_force_unlock": {"lock_force_unlock"},
		"lock_renew":        {"reentrant", "lock_renew"},
		"lock_extend":       {"reentrant", "lock_extend"},
		"fair_acquire":      {"guard", "reentrant", "fair", "fair_acquire"},
		"fair_unlock":       {"guard", "release", "reentrant", "fair", "fair_unlock"},
		"fair_leave":        {"guard", "fair", "fair_leave"},
		"fair_force_unlock": {"fair_force_unlock"},
		"rw_read_acquire":   {"guard", "reentrant", "rw_read_acquire"},
		"rw_write_acquire":  {"guard", "reentrant", "rw_write_acquire"},
		"rw_read_unlock":    {"guard", "rw_read_unlock"},
		"rw_write_unlock":   {"guard", "release", "rw_write_unlock"},
		"rw_renew":          {"reentrant", "rw_renew"},
		"rw_force_unlock":   {"rw_force_unlock"},
		"latch_try_set":     {"latch_try_set"},
		"latch_count_down":  {"latch_count_down"},
		"latch_delete":      {"latch_delete"},
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
