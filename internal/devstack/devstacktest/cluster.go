package devstacktest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway/internal/devstack"
)

// RedisCluster starts a Redis Cluster of n masters (no replicas) for the
// test, each node holding an equal range of the 16,384 slots, and returns
// their addresses once every node reports the cluster ok. The servers stop
// when the test ends.
func RedisCluster(t testing.TB, n int) []string {
	t.Helper()
	ctx := t.Context()
	addrs := make([]string, n)
	clients := make([]*redis.Client, n)
	for i := range n {
		r := RedisWith(t, devstack.RedisOptions{Cluster: true})
		addrs[i] = r.Addr
		clients[i] = redis.NewClient(&redis.Options{Addr: r.Addr})
		t.Cleanup(func() { _ = clients[i].Close() })
	}
	const slots = 16384
	for i, c := range clients {
		first, last := i*slots/n, (i+1)*slots/n-1
		if err := c.ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			t.Fatalf("devstacktest: cluster: slots %d-%d on %s: %v", first, last, addrs[i], err)
		}
		if i == 0 {
			continue
		}
		host, port, _ := strings.Cut(addrs[0], ":")
		if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
			t.Fatalf("devstacktest: cluster: %s meets %s: %v", addrs[i], addrs[0], err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range clients {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("devstacktest: cluster not ok after 30s: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return addrs
}
