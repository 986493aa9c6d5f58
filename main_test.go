package actorlock_test

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actorlock/actorlock/internal/redisserver"
)

// TestMain gives the examples a Redis: REDIS_ADDR's if set, else a
// redis-server started on a free loopback port. The Cluster and Sentinel
// examples get REDIS_CLUSTER_ADDRS (a 3-master cluster's seeds) and
// REDIS_SENTINEL_ADDR (a Sentinel watching REDIS_ADDR's server as
// "example-master"), and the RedLock example REDIS_MASTERS (REDIS_ADDR and
// two more servers), started the same way when unset. Examples without
// their Redis are skipped (they need a real one); the tests still run.
func TestMain(m *testing.M) {
	flag.Parse()
	var skip []string
	var closers []func() error
	if os.Getenv("REDIS_ADDR") == "" {
		if srv, err := redisserver.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "actorlock: examples skipped: set REDIS_ADDR or install redis-server:", err)
			skip = append(skip, "^Example")
		} else {
			closers = append(closers, srv.Close)
			_ = os.Setenv("REDIS_ADDR", srv.Addr)
			// A Sentinel needs the master's port: only for a server of ours.
			if os.Getenv("REDIS_SENTINEL_ADDR") == "" && examplesRun("ExampleNew_sentinel") {
				if s, err := redisserver.StartSentinel(srv, "example-master", 5*time.Second); err != nil {
					fmt.Fprintln(os.Stderr, "actorlock: Sentinel example skipped:", err)
				} else {
					closers = append(closers, s.Close)
					_ = os.Setenv("REDIS_SENTINEL_ADDR", s.Addr)
				}
			}
		}
	}
	if os.Getenv("REDIS_CLUSTER_ADDRS") == "" && os.Getenv("REDIS_ADDR") != "" && examplesRun("ExampleNew_cluster") {
		if c, err := redisserver.StartCluster(3); err != nil {
			fmt.Fprintln(os.Stderr, "actorlock: Cluster example skipped:", err)
		} else {
			closers = append(closers, c.Close)
			_ = os.Setenv("REDIS_CLUSTER_ADDRS", strings.Join(c.Addrs(), ","))
		}
	}
	if os.Getenv("REDIS_MASTERS") == "" && os.Getenv("REDIS_ADDR") != "" && examplesRun("ExampleRedLock") {
		// Two more servers: a RedLock's masters must be independent.
		masters := []string{os.Getenv("REDIS_ADDR")}
		for range 2 {
			srv, err := redisserver.Start()
			if err != nil {
				fmt.Fprintln(os.Stderr, "actorlock: RedLock example skipped:", err)
				break
			}
			closers = append(closers, srv.Close)
			masters = append(masters, srv.Addr)
		}
		if len(masters) == 3 {
			_ = os.Setenv("REDIS_MASTERS", strings.Join(masters, ","))
		}
	}
	if os.Getenv("REDIS_SENTINEL_ADDR") == "" {
		skip = append(skip, "^ExampleNew_sentinel$")
	}
	if os.Getenv("REDIS_MASTERS") == "" {
		skip = append(skip, "^ExampleRedLock$")
	}
	if os.Getenv("REDIS_CLUSTER_ADDRS") == "" {
		skip = append(skip, "^ExampleNew_cluster$")
	}
	if len(skip) > 0 {
		if given := flag.Lookup("test.skip").Value.String(); given != "" {
			skip = append(skip, given)
		}
		_ = flag.Set("test.skip", strings.Join(skip, "|"))
	}
	code := m.Run()
	for _, c := range closers {
		_ = c()
	}
	os.Exit(code)
}

// examplesRun reports whether this run may run the example name, so that a
// run of other tests does not start servers for it.
func examplesRun(name string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	// -run patterns are /-separated per level; examples have one level.
	pattern := strings.Split(f.Value.String(), "/")[0]
	ok, err := regexp.MatchString(pattern, name)
	return err != nil || ok
}
