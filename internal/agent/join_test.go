package agent_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/agent"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/workflows"
	"github.com/gangwayhq/gangway/workflows/activities"
)

const (
	prefix     = "{join}"
	poolToken  = "gwj-onprem-5d1e"
	n9Token    = "gwj-node-n9-0c44"
	agentPass  = "agent-pw-e7"
	serverPass = "server-pw-b2"
	adminPass  = "admin-pw-91"
)

// joinWorld is a Temporal dev server, a Redis whose agent user has only
// capacity.AgentACL, and a server worker running NodeUpdate.
type joinWorld struct {
	tc          tclient.Client
	server      *capacity.View // the server's user
	agentRedis  *redis.Client  // the agent's user
	auth        *nodeauth.Authority
	dir         string
	refused, ok int
}

func newJoinWorld(t *testing.T) *joinWorld {
	t.Helper()
	r := devstacktest.RedisWith(t, devstack.RedisOptions{
		Users: []string{"admin on >" + adminPass + " ~* &* +@all",
			"server on >" + serverPass + " " + capacity.ServerACL(prefix),
			"agent on >" + agentPass + " " + capacity.AgentACL(prefix)},
		Auth: devstack.RedisAuth{User: "admin", Password: adminPass},
	})
	ts := devstacktest.Temporal(t)
	w := &joinWorld{dir: t.TempDir()}
	client := func(user, pass string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: r.Addr, Username: user, Password: pass})
		t.Cleanup(func() { c.Close() })
		return c
	}
	w.server = capacity.New(client("server", serverPass), capacity.Options{Prefix: prefix})
	w.agentRedis = client("agent", agentPass)
	tokens, secret := filepath.Join(w.dir, "join-tokens"), filepath.Join(w.dir, "join-secret")
	must(t, os.WriteFile(tokens, []byte(nodeauth.TokenLine(poolToken, "onprem", "")+"\n"+nodeauth.TokenLine(n9Token, "", "n9")+"\n"), 0o600))
	must(t, os.WriteFile(secret, []byte("join-secret-for-the-test-0123456789abcdef\n"), 0o600))
	var err error
	w.auth, err = nodeauth.Open(nodeauth.Options{TokensFile: tokens, SecretFile: secret, Uses: w.server})
	must(t, err)
	w.tc, err = tclient.DialContext(t.Context(), tclient.Options{HostPort: ts.Addr, Namespace: ts.Namespace,
		Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	must(t, err)
	t.Cleanup(w.tc.Close)
	wk := worker.New(w.tc, workflows.TaskQueue, worker.Options{})
	wk.RegisterWorkflowWithOptions(workflows.NodeUpdateWorkflow, workflow.RegisterOptions{Name: workflows.NodeUpdateWorkflowName})
	(&activities.NodeUpdates{View: w.server, Auth: w.auth, Grace: time.Minute, Log: slog.New(slog.DiscardHandler)}).Register(wk)
	must(t, wk.Start())
	t.Cleanup(wk.Stop)
	return w
}

// agentView is what `gangway agent` builds: the Redis view under the
// agent's user, and the server for the inventory.
func (w *joinWorld) agentView(pool, token, tokenFile string) *agent.ServerView {
	return agent.NewServerView(capacity.New(w.agentRedis, capacity.Options{Prefix: prefix}), w.tc, pool,
		agent.JoinConfig{Token: token, TokenFile: tokenFile})
}

// expect counts an outcome and fails the test if it is not the one wanted.
func (w *joinWorld) expect(t *testing.T, what string, err error, refusal string) {
	t.Helper()
	switch {
	case refusal == "" && err != nil:
		t.Errorf("%s: %v", what, err)
	case refusal == "":
		w.ok++
	case err == nil || !strings.Contains(err.Error(), refusal):
		t.Errorf("%s: error %v, want a refusal with %q", what, err, refusal)
	default:
		w.refused++
	}
}

func TestJoinThroughTheServer(t *testing.T) {
	w := newJoinWorld(t)
	ctx := t.Context()
	n1 := agent.FakeNode("n1", "onprem", "10.0.0.1", 4, "H100")
	now := time.Now()

	err := w.agentView("onprem", "", "").RegisterNode(ctx, n1)
	w.expect(t, "register without a token", err, "no credential")
	if !errors.Is(err, agent.ErrJoinRefused) {
		t.Errorf("refusal %v is not ErrJoinRefused", err)
	}
	w.expect(t, "register with a wrong token", w.agentView("onprem", "gwj-guess", "").RegisterNode(ctx, n1),
		"the join token is not in the server's token file")
	w.expect(t, "register with the pool token as another pool", w.agentView("cloud", poolToken, "").RegisterNode(ctx,
		agent.FakeNode("n1", "cloud", "10.0.0.1", 4, "H100")), "the join token is for pool onprem, not cloud")

	tokenFile := filepath.Join(w.dir, "n1", "node-token")
	first := w.agentView("onprem", poolToken, tokenFile)
	w.expect(t, "register n1 with the pool token", first.RegisterNode(ctx, n1), "")
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("node token file: %v, %v; want it kept with mode 0600", fi, err)
	}
	w.expect(t, "heartbeat straight to Redis", first.Heartbeat(ctx, "n1", nil), "")
	w.expect(t, "task output straight to Redis", first.AppendLog(ctx, "job-1", gangway.LogLine{Time: now, Text: "step 1"}), "")

	// Another agent with the pool token may not take n1 over while it
	// lives, with a smaller inventory or another address.
	evil := agent.FakeNode("n1", "onprem", "203.0.113.9", 1, "H100")
	w.expect(t, "overwrite live n1 with the pool token", w.agentView("onprem", poolToken, "").RegisterNode(ctx, evil),
		"may not take it over")
	// n1's own agent, restarted, shows the node token it kept.
	w.expect(t, "n1 restarted registers with its node token", w.agentView("onprem", "", tokenFile).RegisterNode(ctx, n1), "")
	// A node token is its node's only.
	w.expect(t, "n1's node token for n2", w.agentView("onprem", "", tokenFile).RegisterNode(ctx,
		agent.FakeNode("n2", "onprem", "10.0.0.2", 4, "H100")), "the node token is not this node's")
	w.expect(t, "n9's own join token", w.agentView("onprem", n9Token, "").RegisterNode(ctx,
		agent.FakeNode("n9", "onprem", "10.0.0.9", 2, "H100")), "")
	w.expect(t, "n9's token for n1", w.agentView("onprem", n9Token, "").RegisterNode(ctx, evil),
		"the join token is another node's")

	// GPU health goes through the server with the node's own token.
	fault := gangway.GPUEvent{Node: "n1", GPUs: []int{2}, Kind: "xid", Xid: 79, Meaning: "GPU fell off the bus", Blame: "gpu", At: time.Now()}
	_, err = w.agentView("onprem", "", tokenFile).FenceGPUs(ctx, fault)
	w.expect(t, "fence n1's GPU with its node token", err, "")
	other := agent.FakeNode("n2", "onprem", "10.0.0.2", 4, "H100")
	w.expect(t, "register n2 with the pool token", w.agentView("onprem", poolToken, "").RegisterNode(ctx, other), "")
	_, err = w.agentView("onprem", poolToken, "").FenceGPUs(ctx, gangway.GPUEvent{Node: "n1", GPUs: []int{0}, Kind: "xid", Blame: "gpu", At: time.Now()})
	w.expect(t, "fence n1's GPU with the pool token", err, "GPU health needs the node's own token")

	// The agent's own Redis user cannot write the inventory itself.
	av := capacity.New(w.agentRedis, capacity.Options{Prefix: prefix})
	w.expect(t, "HSET the inventory as the agent", w.agentRedis.HSet(ctx, prefix+":nodes", "n1", "{}").Err(), "NOPERM")
	w.expect(t, "register.lua as the agent", av.RegisterNode(ctx, evil), "NOPERM")
	_, err = av.FenceGPUs(ctx, gangway.GPUEvent{Node: "n1", GPUs: []int{0}, Kind: "xid", Blame: "gpu", At: time.Now()})
	w.expect(t, "gpu_health.lua as the agent", err, "NOPERM")
	w.expect(t, "the queue as the agent", w.agentRedis.HSet(ctx, prefix+":queue", "job-x", "{}").Err(), "NOPERM")
	_, err = av.GPUHealth(ctx, "n1")
	w.expect(t, "read GPU health as the agent", err, "")

	nodes, err := w.server.FleetNodes(ctx)
	must(t, err)
	for _, n := range nodes {
		if n.ID == "n1" && (n.Addr != "10.0.0.1" || len(n.GPUs) != 4 || n.GPUs[2].Healthy) {
			t.Errorf("n1 in the view: addr %s, %d GPUs, GPU 2 healthy %v; want its own inventory with GPU 2 fenced", n.Addr, len(n.GPUs), n.GPUs[2].Healthy)
		}
	}
	if len(nodes) != 3 {
		t.Errorf("view has %d nodes, want n1, n2 and n9", len(nodes))
	}

	// A cloud launch of one instance: its one-use token joins one node.
	launch, err := w.auth.LaunchToken("cloud-spot", "gw-test-launch", 1, time.Now().Add(10*time.Minute))
	must(t, err)
	w.expect(t, "the launch's instance joins", w.agentView("cloud-spot", launch, "").RegisterNode(ctx,
		agent.FakeNode("i-1", "cloud-spot", "10.1.0.1", 8, "H100")), "")
	w.expect(t, "a second node with the one-use token", w.agentView("cloud-spot", launch, "").RegisterNode(ctx,
		agent.FakeNode("i-2", "cloud-spot", "10.1.0.2", 8, "H100")), "the launch token is used up")
	t.Logf("join: refused=%d allowed=%d", w.refused, w.ok)
}

// TestTaskDoneRecords: an agent records a task's exit 0 straight to Redis
// under its own user, signed with its node token; the server trusts a
// record only for the member's node and signed with a credential of that
// node alone.
func TestTaskDoneRecords(t *testing.T) {
	w := newJoinWorld(t)
	ctx := t.Context()
	nu := &activities.NodeUpdates{View: w.server, Auth: w.auth, Log: slog.New(slog.DiscardHandler)}
	tokenFile := filepath.Join(w.dir, "n1", "node-token")
	n1 := w.agentView("onprem", poolToken, tokenFile)
	must(t, n1.RegisterNode(ctx, agent.FakeNode("n1", "onprem", "10.0.0.1", 4, "H100")))
	done := func(job gangway.JobID, node string) workflows.TaskDone {
		return workflows.TaskDone{TaskRef: workflows.TaskRef{JobID: job, Attempt: 1, NodeID: node}, At: time.Now()}
	}
	must(t, n1.RecordTaskDone(ctx, done("job-1", "n1")))
	must(t, w.agentView("onprem", n9Token, "").RecordTaskDone(ctx, done("job-9", "n9")))
	// Before its first join an agent signs with the pool's token, which
	// vouches for no one node.
	must(t, w.agentView("onprem", poolToken, "").RecordTaskDone(ctx, done("job-2", "n2")))
	// Unsigned, as a server's in-process agent without a node token writes.
	must(t, agent.DirectView{View: w.server}.RecordTaskDone(ctx, done("job-3", "n3")))
	must(t, agent.DirectView{View: w.server, Token: w.auth.NodeToken("n4", "onprem")}.RecordTaskDone(ctx, done("job-4", "n4")))

	cases := []struct {
		job  gangway.JobID
		node string
		want bool
	}{
		{"job-1", "n1", true},  // its node token
		{"job-1", "n2", false}, // a record of another node
		{"job-9", "n9", true},  // the node's own join token
		{"job-2", "n2", false}, // the pool's join token
		{"job-3", "n3", false}, // unsigned
		{"job-4", "n4", true},  // an in-process agent's node token
		{"job-5", "n1", false}, // no record
	}
	for _, c := range cases {
		got, err := nu.TaskDone(ctx, workflows.TaskDoneInput{TaskRef: workflows.TaskRef{JobID: c.job, Attempt: 1, NodeID: c.node}, Pool: "onprem"})
		if err != nil || got != c.want {
			t.Errorf("TaskDone(%s on %s) = %v, %v; want %v", c.job, c.node, got, err, c.want)
		}
	}
	// Without credentials checked, a record of the member's node is enough.
	open := &activities.NodeUpdates{View: w.server, Log: slog.New(slog.DiscardHandler)}
	if got, err := open.TaskDone(ctx, workflows.TaskDoneInput{TaskRef: workflows.TaskRef{JobID: "job-3", Attempt: 1, NodeID: "n3"}, Pool: "onprem"}); err != nil || !got {
		t.Errorf("TaskDone(job-3) with no credentials checked = %v, %v; want true", got, err)
	}
	// The agent's user may SET task-done records and no other key.
	w.expect(t, "SET the lease as the agent", w.agentRedis.Set(ctx, prefix+":lease", "me", 0).Err(), "NOPERM")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
