package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoCLI: redis-cli, which creates clusters, is not installed.
var ErrNoCLI = errors.New("redis-cli not found in PATH; install it (Debian/Ubuntu: sudo apt-get install -y redis-tools, which redis-server pulls in)")

// Cluster is a Redis Cluster of masters without replicas on loopback ports.
type Cluster struct {
	Masters []*Server
}

// nodeTimeout is how long the cluster waits before it declares an
// unreachable master failed (and, without replicas, itself down).
const nodeTimeout = 2 * time.Second

// StartCluster runs n cluster-enabled servers and joins them into one
// cluster with the 16384 slots spread evenly (redis-cli --cluster create).
// It returns once every node reports cluster_state:ok.
func StartCluster(n int) (*Cluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("redisserver: a cluster needs at least 3 masters, not %d", n)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, ErrNoCLI
	}
	c := &Cluster{}
	fail := func(err error) (*Cluster, error) {
		_ = c.Close()
		return nil, err
	}
	for range n {
		// The cluster bus port defaults to port+10000, which may be taken or
		// beyond 65535 for an ephemeral port: pick it explicitly.
		bus, err := FreePort()
		if err != nil {
			return fail(err)
		}
		s, err := Start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(nodeTimeout.Milliseconds())),
			"--cluster-port", strconv.Itoa(bus))
		if err != nil {
			return fail(err)
		}
		c.Masters = append(c.Masters, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("redisserver: redis-cli --cluster create: %w: %s", err, out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// Addrs are the masters' addresses, a seed list for a cluster client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Masters))
	for i, s := range c.Masters {
		addrs[i] = s.Addr
	}
	return addrs
}

// WaitReady waits until every master is up and reports cluster_state:ok
// with all slots served and every node known: a restarted master rejoins
// from its nodes.conf, which takes a few gossip rounds.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for _, s := range c.Masters {
		for {
			err := clusterOK(s.Addr, len(c.Masters))
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("redisserver: cluster node %s not ready: %w", s.Addr, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// Close kills every node and removes their directories.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range c.Masters {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// clusterOK asks addr for CLUSTER INFO and checks it describes a healthy
// cluster of n known nodes.
func clusterOK(addr string, n int) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("CLUSTER INFO\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	header, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(header, "$") {
		return fmt.Errorf("unexpected reply %q", strings.TrimSpace(header))
	}
	size, err := strconv.Atoi(strings.TrimSpace(header[1:]))
	if err != nil {
		return err
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	info := map[string]string{}
	for _, line := range strings.Split(string(body), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = v
		}
	}
	want := map[string]string{
		"cluster_state":       "ok",
		"cluster_slots_ok":    "16384",
		"cluster_known_nodes": strconv.Itoa(n),
	}
	for k, v := range want {
		if info[k] != v {
			return fmt.Errorf("%s is %q, want %q", k, info[k], v)
		}
	}
	return nil
}

// MoveSlot migrates slot, with its keys, from the master serving it to dst,
// as resharding does: IMPORTING on dst, MIGRATING on the source, MIGRATE of
// its keys, then every master is told that dst serves it.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, dst *Server) error {
	clients := map[string]*redis.Client{}
	for _, s := range c.Masters {
		clients[s.Addr] = redis.NewClient(&redis.Options{Addr: s.Addr})
		defer clients[s.Addr].Close()
	}
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; test servers may be older
	ranges, err := clients[dst.Addr].ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	var src string
	for _, r := range ranges {
		if int(r.Start) <= slot && slot <= int(r.End) && len(r.Nodes) > 0 {
			src = r.Nodes[0].Addr
		}
	}
	from, to := clients[src], clients[dst.Addr]
	if from == nil {
		return fmt.Errorf("redisserver: no master of the cluster serves slot %d", slot)
	}
	if from == to {
		return nil
	}
	fromID, err := from.ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	toID, err := to.ClusterMyID(ctx).Result()
	if err != nil {
		return err
	}
	steps := []error{
		to.Do(ctx, "cluster", "setslot", slot, "importing", fromID).Err(),
		from.Do(ctx, "cluster", "setslot", slot, "migrating", toID).Err(),
	}
	if err := errors.Join(steps...); err != nil {
		return err
	}
	for {
		keys, err := from.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", "127.0.0.1", dst.Port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := from.Do(ctx, args...).Err(); err != nil {
			return err
		}
	}
	// The new owner first, so that no master points at a node that does
	// not know yet that it serves the slot.
	for _, c := range append([]*redis.Client{to, from}, otherClients(clients, to, from)...) {
		if err := c.Do(ctx, "cluster", "setslot", slot, "node", toID).Err(); err != nil {
			return err
		}
	}
	return nil
}

func otherClients(all map[string]*redis.Client, skip ...*redis.Client) []*redis.Client {
	var out []*redis.Client
	for _, c := range all {
		if !slices.Contains(skip, c) {
			out = append(out, c)
		}
	}
	return out
}
