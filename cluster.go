package actorlock

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/actorlock/actorlock/scripts"
)

// clusterSetup is how a runtime talks to a Redis Cluster.
type clusterSetup struct {
	cc      *redis.ClusterClient // nil: not a cluster
	sharded bool                 // channels use SPUBLISH/SSUBSCRIBE
	scripts redis.UniversalClient
}

// setupCluster decides, for a cluster client, whether lock channels use
// sharded pub/sub: as WithShardedPubSub says, else if the cluster has it
// (Redis 7 or later), which it asks once, within the call timeout.
func setupCluster(rdb redis.UniversalClient, cfg *config) (clusterSetup, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		if cfg.shardedPubSub != nil && *cfg.shardedPubSub {
			return clusterSetup{}, fmt.Errorf("%w: sharded pub/sub needs a cluster client", ErrInvalidArgument)
		}
		return clusterSetup{scripts: rdb}, nil
	}
	if cfg.replicaSync.Replicas > 0 {
		// WAIT must run on the connection that ran the script, and a
		// cluster client routes a keyless command to any node.
		return clusterSetup{}, fmt.Errorf("%w: WithReplicaSync is not supported with a cluster client", ErrInvalidArgument)
	}
	s := clusterSetup{cc: cc, scripts: rdb}
	if cfg.shardedPubSub != nil {
		s.sharded = *cfg.shardedPubSub
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.callTimeout)
		defer cancel()
		info, err := cc.Do(ctx, "command", "info", "spublish").Slice()
		if err != nil {
			return clusterSetup{}, fmt.Errorf("asking the cluster whether it has sharded pub/sub (or say so with WithShardedPubSub): %w", err)
		}
		s.sharded = len(info) == 1 && info[0] != nil
	}
	if s.sharded {
		s.scripts = scripts.Sharded{UniversalClient: rdb}
	}
	return s, nil
}
