package capacity

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/gangwayhq/gangway/internal/transport"
)

// Every key must carry the prefix's hash tag, or scripts break on Redis
// Cluster (all keys of a script must live in one slot).
func TestKeysShareHashTag(t *testing.T) {
	tests := map[string]struct {
		prefix  string
		wantTag string
	}{
		"default":         {prefix: "", wantTag: "{gangway}"},
		"custom prefix":   {prefix: "{cluster-b}", wantTag: "{cluster-b}"},
		"tag then suffix": {prefix: "{gw}:prod", wantTag: "{gw}"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := New(nil, Options{Prefix: tc.prefix})
			k := reflect.ValueOf(v.k)
			for i := range k.NumField() {
				key := k.Field(i).String()
				if !strings.HasPrefix(key, tc.wantTag) {
					t.Errorf("key %s = %q, want it to start with hash tag %s", k.Type().Field(i).Name, key, tc.wantTag)
				}
			}
		})
	}
}

func TestParseGPUField(t *testing.T) {
	tests := map[string]struct {
		node  string
		index int
	}{
		"plain":            {node: "n1", index: 3},
		"slash in node id": {node: "aws/us-east-1/i-0abc", index: 7},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			node, index, err := parseGPUField(gpuField(tc.node, tc.index))
			must(t, err)
			if node != tc.node || index != tc.index {
				t.Errorf("parseGPUField(gpuField(%q, %d)) = %q, %d", tc.node, tc.index, node, index)
			}
		})
	}
}

// TestViewOnRedisCluster runs the tests of every script, the log
// streams, the lease and the rebuild on one Redis Cluster of three
// masters, reached through a cluster URL as a server's config gives it:
// all of the view's keys share a hash tag, so one slot, and every script
// names its keys. (GANGWAY_TEST_REDIS_CLUSTER=1 runs the whole package on
// clusters. TestChangesAnnounceWhatMayStartAJob, which expects each event
// before the next write's reply, can fail there: a cluster's PUBLISH
// reaches a subscriber on another node through the cluster bus, later.
// The events only wake the dispatch loop early; it runs every interval
// regardless.)
func TestViewOnRedisCluster(t *testing.T) {
	onCluster = startCluster(t)
	defer func() { onCluster = nil }()
	for name, test := range map[string]func(*testing.T){
		"Commit": TestCommit, "CommitRejects": TestCommitRejects, "Release": TestRelease, "Burst": TestBurst,
		"Enqueue": TestEnqueue, "Reasons": TestReasons, "Nodes": TestNodes, "HostedNodes": TestHostedNodes,
		"FenceGPUs": TestFenceGPUs, "RecordCheckpoint": TestRecordCheckpoint, "Lease": TestLease,
		"Logs": TestLogs, "LogsBlockWakesOnAppend": TestLogsBlockWakesOnAppend,
		"PublishOffers": TestPublishOffers,
		"SaveLearned":   TestSaveLearned, "RebuildPieces": TestRebuildPieces, "ViewWentBack": TestViewWentBack,
	} {
		t.Run(name, test)
	}
	t.Run("AgentACL", func(t *testing.T) { agentOnCluster(t, onCluster) })
}

// agentOnCluster: an agent's Redis user (AgentACL) reaches the cluster
// through a cluster URL and heartbeats, and is refused what it may not do.
func agentOnCluster(t *testing.T, rdb redis.UniversalClient) {
	ctx := t.Context()
	cc := rdb.(*redis.ClusterClient)
	must(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Do(ctx, append([]any{"ACL", "SETUSER", "agent", "on", ">agent-pass"}, aclArgs(AgentACL(DefaultPrefix))...)...).Err()
	}))
	server := New(rdb, Options{})
	must(t, server.RegisterNode(ctx, node("n1", 2)))
	var seed string
	must(t, cc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		seed = m.Options().Addr
		return nil
	}))
	agentRDB, err := transport.Redis{URL: "redis://agent:agent-pass@" + seed + "?cluster=true"}.Client()
	must(t, err)
	defer agentRDB.Close()
	agent := New(agentRDB, Options{})
	must(t, agent.Heartbeat(ctx, "n1", []Task{{JobID: "j", Attempt: 1, GPUs: []int{0}}}))
	if err := agentRDB.HSet(ctx, DefaultPrefix+":queue", "j", "{}").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("the agent wrote the queue: %v, want NOPERM", err)
	}
	nodes, err := server.Nodes(ctx)
	must(t, err)
	if len(nodes) != 1 || nodes[0].Allocated[0] != "j" {
		t.Errorf("after the agent's heartbeat: %+v; want n1 with GPU 0 held by its task", nodes)
	}
}

// aclArgs splits ACL rules into ACL SETUSER's arguments, a parenthesised
// selector as one.
func aclArgs(rules string) []any {
	var out []any
	for rest := rules; rest != ""; {
		rest = strings.TrimLeft(rest, " ")
		end := strings.IndexByte(rest, ' ')
		if strings.HasPrefix(rest, "(") {
			end = strings.IndexByte(rest, ')') + 1
		}
		if end <= 0 || end > len(rest) {
			end = len(rest)
		}
		out = append(out, rest[:end])
		rest = rest[end:]
	}
	return out
}
