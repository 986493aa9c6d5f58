package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/actorlock/actorlock"
	"github.com/actorlock/actorlock/internal/redisserver"
)

// deployment is a Redis deployment a test runs against: one server, or a
// Redis Cluster of three masters (with sharded pub/sub: Redis 7).
type deployment struct {
	name    string
	servers []*redisserver.Server // the server, or the cluster's masters
	cluster *redisserver.Cluster  // nil for a single server
}

// eachDeployment runs test as parallel subtests against a single server and
// against a 3-master cluster, each started for it: the lock, fair lock,
// read-write lock and delayed-queue suites hold on both.
func eachDeployment(t *testing.T, test func(t *testing.T, d *deployment)) {
	t.Helper()
	onDeployments(t, true, test)
}

// eachDeploymentInTurn is eachDeployment for tests that measure timing or
// load the machine: one deployment after the other.
func eachDeploymentInTurn(t *testing.T, test func(t *testing.T, d *deployment)) {
	t.Helper()
	onDeployments(t, false, test)
}

func onDeployments(t *testing.T, parallel bool, test func(t *testing.T, d *deployment)) {
	t.Helper()
	for _, kind := range []string{"single", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			test(t, startDeployment(t, kind))
		})
	}
}

func startDeployment(t testing.TB, kind string) *deployment {
	t.Helper()
	if kind == "single" {
		return &deployment{name: kind, servers: []*redisserver.Server{startRedis(t)}}
	}
	c, err := redisserver.StartCluster(3)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &deployment{name: kind, servers: c.Masters, cluster: c}
}

// client returns a client of the deployment (a cluster client for a
// cluster), closed after the test.
func (d *deployment) client(t testing.TB) redis.UniversalClient {
	t.Helper()
	if d.cluster == nil {
		return client(t, d.servers[0].Addr)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.cluster.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// setup is the common case: a client and a runtime on it.
func (d *deployment) setup(t testing.TB, opts ...actorlock.Option) (redis.UniversalClient, *actorlock.Runtime) {
	t.Helper()
	rdb := d.client(t)
	return rdb, newRuntime(t, rdb, opts...)
}

// serverOf is the server holding key (for a cluster: the master serving
// its slot).
func (d *deployment) serverOf(t testing.TB, key string) *redisserver.Server {
	t.Helper()
	if d.cluster == nil {
		return d.servers[0]
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.cluster.Addrs()})
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	master, err := cc.MasterForKey(ctx, key)
	require.NoError(t, err)
	for _, s := range d.servers {
		if s.Addr == master.Options().Addr {
			return s
		}
	}
	t.Fatalf("no server of the deployment serves %q (%s)", key, master.Options().Addr)
	return nil
}

// nodeOf is a plain client of serverOf(key), for per-server commands
// (INFO, CLIENT KILL, PUBSUB, KEYS) on a cluster too.
func (d *deployment) nodeOf(t testing.TB, key string) *redis.Client {
	t.Helper()
	return client(t, d.serverOf(t, key).Addr)
}

// subscribers counts the subscriptions to channel: sharded ones on a
// cluster (the runtime uses SSUBSCRIBE there), plain ones otherwise.
func (d *deployment) subscribers(t testing.TB, ctx context.Context, channel string) int64 {
	t.Helper()
	node := d.nodeOf(t, channel)
	verb := "numsub"
	if d.cluster != nil {
		verb = "shardnumsub"
	}
	res, err := node.Do(ctx, "pubsub", verb, channel).Slice()
	require.NoError(t, err)
	require.Len(t, res, 2)
	return res[1].(int64)
}

// keys lists the keys matching pattern on every server.
func (d *deployment) keys(t testing.TB, ctx context.Context, pattern string) []string {
	t.Helper()
	var all []string
	for _, s := range d.servers {
		ks, err := client(t, s.Addr).Keys(ctx, pattern).Result()
		require.NoError(t, err)
		all = append(all, ks...)
	}
	return all
}

// restart restarts the server holding key without persistence (its data is
// gone) and waits until the deployment serves again.
func (d *deployment) restart(t testing.TB, key string) error {
	t.Helper()
	if err := d.serverOf(t, key).Restart(); err != nil {
		return err
	}
	if d.cluster == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.cluster.WaitReady(ctx)
}

// workerEnv tells a worker process (see runWorker) how to reach the
// deployment.
func (d *deployment) workerEnv() map[string]string {
	if d.cluster == nil {
		return map[string]string{"REDIS_ADDR": d.servers[0].Addr}
	}
	return map[string]string{"REDIS_CLUSTER": strings.Join(d.cluster.Addrs(), ",")}
}

// workerClient is the client of a worker process: a cluster client when
// REDIS_CLUSTER lists seed addresses, else a client of REDIS_ADDR.
func workerClient(getenv func(string) string) redis.UniversalClient {
	if seeds := getenv("REDIS_CLUSTER"); seeds != "" {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(seeds, ",")})
	}
	return redis.NewClient(&redis.Options{Addr: getenv("REDIS_ADDR")})
}

// with adds more entries to a worker environment.
func with(env map[string]string, more map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}
