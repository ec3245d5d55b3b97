package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/internal/devstack"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/internal/nodeauth"
	"github.com/gangwayhq/gangway/internal/transport"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// The secrets of the security test: each is searched for in every log,
// every job's output and every workflow history of the run.
const (
	secAdminPass  = "redis-admin-pw-5a1f"
	secServerPass = "redis-server-pw-83c2"
	secAgentPass  = "redis-agent-pw-d94e"
	secJoinToken  = "gwj-onprem-join-token-4b7a"
	secJoinSecret = "join-secret-for-the-security-test-0c1d2e3f"
	secAWSKey     = "AKIASECURITYTEST0001"
	secAWSSecret  = "aws-secret-access-key-77f0"
)

// secTally counts what the security test checked: refusals it saw,
// allowed calls that succeeded, secrets found where they must not be.
type secTally struct {
	t                        *testing.T
	refused, allowed, leaks  int
	mutating                 int // API calls that change something (one audit line each)
	refusedWhat, allowedWhat []string
}

func (c *secTally) allow(what string, mutating bool, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
	c.allowed++
	c.allowedWhat = append(c.allowedWhat, what)
	if mutating {
		c.mutating++
	}
}

// refuse counts a refusal whose error says words (and, with want, is
// errors.Is want).
func (c *secTally) refuse(what string, mutating bool, err, want error, words string) {
	c.t.Helper()
	if err == nil || (want != nil && !errors.Is(err, want)) || !strings.Contains(err.Error(), words) {
		c.t.Errorf("%s = %v, want a refusal saying %q", what, err, words)
		return
	}
	c.refused++
	c.refusedWhat = append(c.refusedWhat, what)
	if mutating {
		c.mutating++
	}
}

// secProc is a `gangway` child process whose output goes to a log file.
type secProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startSecProc(t *testing.T, bin, log string, env []string, args ...string) *secProc {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	// The agents' and servers' environment: what a task must never see.
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start gangway %s: %v", args[0], err)
	}
	p := &secProc{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			data, _ := os.ReadFile(log)
			t.Logf("%s:\n%s", filepath.Base(log), tail(string(data), 4000))
		}
	})
	return p
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (p *secProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// exited waits for the process to end on its own and returns its output.
func (p *secProc) exited(t *testing.T, within time.Duration) (string, error) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v", filepath.Base(p.log), within)
	}
	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), p.err
}

// TestSecurityOnRealServers runs `gangway server` and `gangway agent`
// processes over encrypted, authenticated transport — Redis over TLS with
// an ACL user each for the server and the agents, Temporal through a
// proxy that demands a client certificate — with tasks run as their
// teams' Unix users, and checks that only who may does:
//
//   - transport: a Temporal client without a certificate, Redis in
//     plaintext, with a wrong password, and the agent's Redis user writing
//     the inventory or the queue are refused;
//   - node identity: an agent without a join token, with a wrong one, and
//     one taking over a live node with the pool's token are refused; the
//     agent with the token joins;
//   - the user API: team-a's user alice submitting as team-b, reading the
//     status and logs of team-b's job, cancelling it and draining its node
//     is forbidden (403), calls without a token are unauthenticated (401);
//     bob of team-b and the admin are allowed theirs, the admin's drain
//     moves team-b's job; every mutating call leaves one audit line;
//   - a placed signal forged for alice's queued job is ignored;
//   - alice's running task's /proc/self/environ holds no Redis URL, no
//     AWS_*, no token; it runs as team-a's user and cannot read team-b's
//     checkpoint folder, log folder, or the list of tasks;
//   - every log line of the run (servers, agents, task output, workflow
//     histories) is searched for every secret used.
//
// The last line counts what the test checked.
func TestSecurityOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real servers and runs real processes")
	}
	users := devstacktest.UnixUsers(t, "gwsec", 2) // skips without root
	ua, ub := users[0], users[1]
	c := &secTally{t: t}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin := buildGangway(t)
	dir := t.TempDir()
	devstacktest.Traversable(t, dir)
	scratch := filepath.Join(dir, "scratch") // where tasks leave markers for the test
	must(t, os.Mkdir(scratch, 0o755))
	must(t, os.Chmod(scratch, 0o1777))

	certs, other := devstacktest.NewCerts(t), devstacktest.NewCerts(t)
	const prefix = capacity.DefaultPrefix
	r := devstacktest.RedisWith(t, devstack.RedisOptions{
		TLS: &devstack.RedisTLS{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, CAFile: certs.CAFile},
		Users: []string{"admin on >" + secAdminPass + " ~* &* +@all",
			"gangway-server on >" + secServerPass + " " + capacity.ServerACL(prefix),
			"gangway-agent on >" + secAgentPass + " " + capacity.AgentACL(prefix)},
		Auth: devstack.RedisAuth{User: "admin", Password: secAdminPass},
	})
	ts := devstacktest.Temporal(t)
	proxy := devstacktest.StartMTLSProxy(t, ts.Addr, certs)
	redisURL := func(user, pass string) string { return "rediss://" + user + ":" + pass + "@" + r.Addr + "/0" }
	mtls := transport.TLSFiles{CAFile: certs.CAFile, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, ServerName: "localhost"}
	redisCA := transport.TLSFiles{CAFile: certs.CAFile}

	// Trusted-side clients, as an admin's tools hold them.
	topts, err := transport.Temporal{Address: proxy.Addr, Namespace: ts.Namespace, TLS: mtls}.Options(tclient.Options{
		Logger: tlog.NewStructuredLogger(discardLog())})
	must(t, err)
	tc, err := tclient.DialContext(ctx, topts)
	c.allow("a Temporal client with a certificate, through the mTLS proxy", false, err)
	t.Cleanup(tc.Close)
	view := capacity.New(secRedis(t, transport.Redis{URL: redisURL("gangway-server", secServerPass), TLS: redisCA}), capacity.Options{Prefix: prefix})
	_, err = view.FleetNodes(ctx)
	c.allow("Redis over TLS as the server's ACL user", false, err)

	// Transport refusals.
	for name, tf := range map[string]transport.TLSFiles{
		"a Temporal client without a certificate":         {CAFile: certs.CAFile, ServerName: "localhost"},
		"a Temporal client with another CA's certificate": {CAFile: certs.CAFile, CertFile: other.ClientCert, KeyFile: other.ClientKey, ServerName: "localhost"},
	} {
		o, err := transport.Temporal{Address: proxy.Addr, Namespace: ts.Namespace, TLS: tf}.Options(tclient.Options{
			Logger: tlog.NewStructuredLogger(discardLog())})
		must(t, err)
		bad, err := tclient.DialContext(ctx, o)
		if err == nil {
			bad.Close()
		}
		c.refuse(name, false, err, nil, "failed reaching server")
	}
	plain := redis.NewClient(&redis.Options{Addr: r.Addr, Username: "gangway-agent", Password: secAgentPass, MaxRetries: -1})
	c.refuse("Redis in plaintext", false, plain.Ping(ctx).Err(), nil, "EOF")
	plain.Close()
	c.refuse("Redis with a wrong password", false,
		secRedis(t, transport.Redis{URL: redisURL("gangway-agent", "guess"), TLS: redisCA}).Ping(ctx).Err(), nil, "WRONGPASS")
	agentRedis := secRedis(t, transport.Redis{URL: redisURL("gangway-agent", secAgentPass), TLS: redisCA})
	c.refuse("the agent's Redis user writes the inventory", false, agentRedis.HSet(ctx, prefix+":nodes", "node-a", "{}").Err(), nil, "NOPERM")
	c.refuse("the agent's Redis user writes the queue", false, agentRedis.HSet(ctx, prefix+":queue", "job-x", "{}").Err(), nil, "NOPERM")

	// The servers' files: join tokens and secret, API tokens.
	joinTokens, joinSecret := filepath.Join(dir, "join-tokens"), filepath.Join(dir, "join-secret")
	must(t, os.WriteFile(joinTokens, []byte(nodeauth.TokenLine(secJoinToken, "onprem", "")+"\n"), 0o600))
	must(t, os.WriteFile(joinSecret, []byte(secJoinSecret+"\n"), 0o600))
	apiTokens := filepath.Join(dir, "api-tokens")
	tokens := map[string]string{}
	for user, teams := range map[string][]string{"alice": {"team-a"}, "bob": {"team-b"}, "root": nil} {
		tokens[user], err = api.CreateToken(apiTokens, user, teams, user == "root", time.Now())
		must(t, err)
	}
	apiAddr := freeAddr(t)
	store := "file://" + filepath.Join(dir, "checkpoints")
	common := fmt.Sprintf(`temporal:
  address: %s
  namespace: %s
  tls: {caFile: %s, certFile: %s, keyFile: %s, serverName: localhost}
redis:
  tls: {caFile: %s}
checkpoint:
  store: %s
jobs:
  users:
    team-a: [%s]
    team-b: [%s]
`, proxy.Addr, ts.Namespace, certs.CAFile, certs.ClientCert, certs.ClientKey, certs.CAFile, store, ua, ub)
	serverYAML, agentYAML := filepath.Join(dir, "server.yaml"), filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(serverYAML, []byte(common+fmt.Sprintf(`server:
  metricsAddr: ""
  dispatchInterval: 200ms
  leaseTTL: 2s
  nodeTTL: 5s
  join: {tokensFile: %s, secretFile: %s}
ledger:
  dsn: sqlite:%s
api:
  listen: %s
  tokenFile: %s
`, joinTokens, joinSecret, filepath.Join(dir, "ledger.db"), apiAddr, apiTokens)), 0o600))
	agentData := filepath.Join(dir, "agent-a")
	must(t, os.WriteFile(agentYAML, []byte(common+fmt.Sprintf(`agent:
  pool: onprem
  addr: 127.0.0.1
  dataDir: %s
  fakeGPUs: 4xH100
  notices: none
  metricsAddr: ""
  heartbeatInterval: 500ms
`, agentData)), 0o600))
	// An agent's environment holds its credentials and the cloud's; no
	// task may see any of them.
	agentEnv := func(token string) []string {
		env := []string{"GANGWAY_REDIS_URL=" + redisURL("gangway-agent", secAgentPass),
			"AWS_ACCESS_KEY_ID=" + secAWSKey, "AWS_SECRET_ACCESS_KEY=" + secAWSSecret}
		if token != "" {
			env = append(env, "GANGWAY_JOIN_TOKEN="+token)
		}
		return env
	}
	startSecProc(t, bin, filepath.Join(dir, "server.log"), []string{"GANGWAY_REDIS_URL=" + redisURL("gangway-server", secServerPass)},
		"server", "--config", serverYAML)
	apiURL := "http://" + apiAddr
	waitFor(t, ctx, "the user API answers", func() bool {
		resp, err := http.Get(apiURL + "/v1/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// Node identity.
	for _, a := range []struct{ name, node, token, words string }{
		{"an agent without a join token", "node-x", "", "join refused by the server: node node-x: no credential"},
		{"an agent with a wrong join token", "node-x", "gwj-guess", "the join token is not in the server's token file"},
	} {
		p := startSecProc(t, bin, filepath.Join(dir, "agent-"+strings.ReplaceAll(a.name, " ", "-")+".log"), agentEnv(a.token),
			"agent", "--config", agentYAML, "--node-id", a.node, "--data-dir", filepath.Join(dir, "refused"))
		out, err := p.exited(t, time.Minute)
		if err == nil {
			err = errors.New("exited 0")
		}
		c.refuse(a.name, false, fmt.Errorf("%v: %s", err, out), nil, a.words)
	}
	startSecProc(t, bin, filepath.Join(dir, "agent-a.log"), agentEnv(secJoinToken), "agent", "--config", agentYAML, "--node-id", "node-a")
	waitFor(t, ctx, "node-a joined, its node token kept", func() bool {
		nodes, err := view.FleetNodes(ctx)
		_, kept := os.Stat(filepath.Join(agentData, "node-token"))
		return err == nil && len(nodes) == 1 && nodes[0].ID == "node-a" && kept == nil
	})
	c.allow("the agent with the pool's join token joins as node-a", false, nil)
	nodeToken, err := os.ReadFile(filepath.Join(agentData, "node-token"))
	must(t, err)
	thief := startSecProc(t, bin, filepath.Join(dir, "agent-thief.log"), agentEnv(secJoinToken),
		"agent", "--config", agentYAML, "--node-id", "node-a", "--data-dir", filepath.Join(dir, "thief"), "--addr", "203.0.113.9")
	out, err := thief.exited(t, time.Minute)
	c.refuse("an agent taking over live node-a with the pool's token", false, fmt.Errorf("%v: %s", err, out), nil, "may not take it over")

	// The user API.
	as := func(user string) *client.Client {
		cl, err := client.NewAPI(client.APIOptions{URL: apiURL, Token: tokens[user], Poll: 200 * time.Millisecond})
		must(t, err)
		return cl
	}
	alice, bob, root, nobody := as("alice"), as("bob"), as("root"), as("")
	bobJob := shellSpec("bob-job", "team-b", 1, `mkdir -p "$GANGWAY_CHECKPOINT_DIR/step-1" &&
echo weights > "$GANGWAY_CHECKPOINT_DIR/step-1/model.bin" && echo "bob attempt $GANGWAY_ATTEMPT ready" &&
touch "$SCRATCH/bob-ready-$GANGWAY_ATTEMPT"; while [ ! -e "$SCRATCH/done" ]; do sleep 0.1; done`, scratch)
	_, err = bob.Submit(ctx, bobJob, client.SubmitOptions{})
	c.allow("bob submits as team-b", true, err)
	waitFor(t, ctx, "bob's job running with its checkpoint written", func() bool {
		_, err := os.Stat(filepath.Join(scratch, "bob-ready-1"))
		return err == nil
	})
	_, err = bob.Status(ctx, bobJob.Name)
	c.allow("bob reads his job's status", false, err)
	waitFor(t, ctx, "bob's job's output", func() bool {
		var lines []gangway.LogLine
		lines, err = bob.Logs(ctx, bobJob.Name, "", 0)
		return err == nil && len(lines) > 0
	})
	c.allow("bob reads his job's logs", false, err)

	_, err = alice.Submit(ctx, shellSpec("sneaky", "team-b", 1, "true", scratch), client.SubmitOptions{})
	c.refuse("alice submits as team-b", true, err, client.ErrForbidden, "user alice is not in team team-b")
	_, err = alice.Status(ctx, bobJob.Name)
	c.refuse("alice reads team-b's status", false, err, client.ErrForbidden, "user alice is not in team team-b")
	_, err = alice.Logs(ctx, bobJob.Name, "", 0)
	c.refuse("alice reads team-b's logs", false, err, client.ErrForbidden, "user alice is not in team team-b")
	c.refuse("alice follows team-b's logs", false, alice.FollowLogs(ctx, bobJob.Name, true, func(gangway.LogLine) {}),
		client.ErrForbidden, "user alice is not in team team-b")
	c.refuse("alice cancels team-b's job", true, alice.Cancel(ctx, bobJob.Name), client.ErrForbidden, "user alice is not in team team-b")
	_, err = alice.Drain(ctx, "node-a")
	c.refuse("alice drains team-b's node", true, err, client.ErrForbidden, "user alice is not an admin")
	_, err = nobody.List(ctx)
	c.refuse("a list without a token", false, err, client.ErrUnauthenticated, "token required")
	_, err = nobody.Submit(ctx, shellSpec("anon", "team-a", 1, "true", scratch), client.SubmitOptions{})
	c.refuse("a submit without a token", true, err, client.ErrUnauthenticated, "token required")
	c.refuse("a cancel without a token", true, nobody.Cancel(ctx, bobJob.Name), client.ErrUnauthenticated, "token required")

	// A placed signal forged for alice's job, queued while bob's holds a
	// GPU: it names all four GPUs of node-a.
	big := shellSpec("alice-big", "team-a", 4, "true", scratch)
	_, err = alice.Submit(ctx, big, client.SubmitOptions{})
	c.allow("alice submits a job of 4 GPUs as team-a", true, err)
	waitFor(t, ctx, "alice's big job queued", func() bool {
		st, err := alice.Status(ctx, big.Name)
		return err == nil && st.Phase == gangway.PhaseQueued
	})
	forged := gangway.Assignment{JobID: big.Name, Attempt: 1, At: time.Now(), Members: []gangway.Member{
		{Rank: 0, NodeID: "node-a", Pool: "onprem", GPUs: []int{0, 1, 2, 3}, Addr: "127.0.0.1"}}}
	must(t, jobs.New(tc).SignalPlaced(ctx, forged))
	var bigSt client.JobStatus
	waitFor(t, ctx, "the forged placement ignored", func() bool {
		bigSt, err = alice.Status(ctx, big.Name)
		return err == nil && bigSt.IgnoredPlacements > 0
	})
	if bigSt.Phase != gangway.PhaseQueued || len(bigSt.Attempts) != 0 {
		t.Errorf("after a forged placed signal alice's job is %s with %d runs; want Queued, none", bigSt.Phase, len(bigSt.Attempts))
	} else {
		c.refused++
		c.refusedWhat = append(c.refusedWhat, "a forged placed signal")
	}
	c.allow("alice cancels her queued job", true, alice.Cancel(ctx, big.Name))

	// Alice's task, beside bob's on node-a: its environment, its user, and
	// what it can read of team-b's.
	bobCkpt := filepath.Join(agentData, "tasks", bobJob.Name, "attempt-1-rank-0", "checkpoint")
	probe := shellSpec("alice-probe", "team-a", 1, `tr '\0' '\n' < /proc/self/environ
echo "uid=$(id -u)"
for p in "$BCKPT" "$BCKPT/step-1/model.bin" "$BLOGS" "$TASKS"; do
  if ls "$p" >/dev/null 2>&1 || cat "$p" >/dev/null 2>&1; then echo "READ $p"; else echo "DENIED $p"; fi
done`, scratch)
	probe.Env["BCKPT"], probe.Env["BLOGS"], probe.Env["TASKS"] = bobCkpt, filepath.Join(agentData, "logs", bobJob.Name), filepath.Join(agentData, "tasks")
	_, err = alice.Submit(ctx, probe, client.SubmitOptions{})
	c.allow("alice submits as team-a", true, err)
	res, err := alice.Result(ctx, probe.Name)
	c.allow("alice waits for her job", false, err)
	if res.Phase != gangway.PhaseSucceeded {
		t.Fatalf("alice's job ended %s: %s", res.Phase, res.Reason)
	}
	lines, err := alice.Logs(ctx, probe.Name, "", 0)
	c.allow("alice reads her job's logs", false, err)
	var environ strings.Builder
	for _, l := range lines {
		environ.WriteString(l.Text + "\n")
	}
	env := environ.String()
	envLeaks := c.leaks
	for _, bad := range []string{"GANGWAY_REDIS_URL=", "rediss://", secAgentPass, "GANGWAY_JOIN_TOKEN=", secJoinToken,
		strings.TrimSpace(string(nodeToken)), tokens["alice"], "GANGWAY_TEMPORAL_API_KEY="} {
		if strings.Contains(env, bad) {
			t.Errorf("alice's task environment holds %q:\n%s", bad, env)
			c.leaks++
		}
	}
	for line := range strings.Lines(env) {
		if strings.HasPrefix(line, "AWS_") {
			t.Errorf("alice's task environment holds %s", line)
			c.leaks++
		}
	}
	if !strings.Contains(env, "uid="+lookupUID(t, ua)+"\n") || !strings.Contains(env, "USER="+ua+"\n") {
		t.Errorf("alice's task did not run as %s:\n%s", ua, env)
	}
	if c.leaks == envLeaks {
		c.refused++
		c.refusedWhat = append(c.refusedWhat, "the agent's environment in a task's /proc/self/environ")
	}
	for _, p := range []string{bobCkpt, bobCkpt + "/step-1/model.bin", probe.Env["BLOGS"], probe.Env["TASKS"]} {
		if strings.Contains(env, "DENIED "+p+"\n") {
			c.refused++
			c.refusedWhat = append(c.refusedWhat, "team-a's task reads "+p)
		} else {
			t.Errorf("alice's task, as team-a's user, could read %s:\n%s", p, env)
		}
	}

	list, err := alice.List(ctx)
	c.allow("alice lists", false, err)
	if ids := jobIDs(list); slices.Contains(ids, bobJob.Name) {
		t.Errorf("alice lists %v, with team-b's job", ids)
	}
	asked, err := root.Drain(ctx, "node-a")
	c.allow("the admin drains node-a", true, err)
	if !slices.Equal(asked, []string{bobJob.Name}) {
		t.Errorf("drain asked %v, want [%s]", asked, bobJob.Name)
	}
	c.allow("the admin waits for the drain", false, root.WaitDrained(ctx, "node-a", asked, 200*time.Millisecond, nil))
	c.allow("the admin uncordons node-a", true, root.Uncordon(ctx, "node-a"))
	waitFor(t, ctx, "bob's job running again after the drain", func() bool {
		_, err := os.Stat(filepath.Join(scratch, "bob-ready-2"))
		return err == nil
	})
	must(t, os.WriteFile(filepath.Join(scratch, "done"), nil, 0o644))
	res, err = bob.Result(ctx, bobJob.Name)
	c.allow("bob waits for his job", false, err)
	if res.Phase != gangway.PhaseSucceeded || res.Attempt != 2 {
		t.Errorf("bob's job ended %s after %d attempts, want Succeeded after the drain moved it once", res.Phase, res.Attempt)
	}

	// Everything the run wrote, searched for every secret.
	secrets := map[string]string{"the Redis admin password": secAdminPass, "the server's Redis password": secServerPass,
		"the agents' Redis password": secAgentPass, "the join token": secJoinToken, "the join secret": secJoinSecret,
		"the node token": strings.TrimSpace(string(nodeToken)), "the AWS secret key": secAWSSecret,
		"the client certificate's key": pemBody(t, certs.ClientKey)}
	for user, tok := range tokens {
		secrets[user+"'s API token"] = tok
	}
	texts := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	taskLogs, _ := filepath.Glob(filepath.Join(agentData, "logs", "*", "*.log"))
	for _, f := range append(files, taskLogs...) {
		data, err := os.ReadFile(f)
		must(t, err)
		texts[f] = string(data)
	}
	for _, job := range []gangway.JobID{bobJob.Name, probe.Name, big.Name} {
		lines, err := view.Logs(ctx, job, "", 0)
		must(t, err)
		var b strings.Builder
		for _, l := range lines {
			b.WriteString(l.Text + "\n")
		}
		texts["the log stream of "+job] = b.String()
	}
	histories := workflowHistories(t, ctx, tc)
	updates := 0
	for id, h := range histories {
		texts["the history of "+id] = h
		if strings.HasPrefix(id, "node-update/") {
			updates++
		}
	}
	if updates == 0 {
		t.Error("no NodeUpdate history to search: the agents did not join through the server")
	}
	audits, refusal := 0, false
	lineCount := 0
	for where, text := range texts {
		lineCount += strings.Count(text, "\n")
		for what, secret := range secrets {
			if secret != "" && strings.Contains(text, secret) {
				t.Errorf("%s holds %s", where, what)
				c.leaks++
			}
		}
		if strings.HasSuffix(where, "server.log") {
			for line := range strings.Lines(text) {
				if strings.Contains(line, "msg=audit") {
					audits++
					refusal = refusal || containsAll(line, "user=alice", "action=cancel", "target="+bobJob.Name, "outcome=refused", "status=403")
				}
			}
		}
	}
	if !refusal {
		t.Error("no audit line records alice's refused cancel of team-b's job")
	}
	if audits != c.mutating {
		t.Errorf("%d audit lines, want one per mutating API call: %d", audits, c.mutating)
	}
	t.Logf("refused: %s", strings.Join(c.refusedWhat, "; "))
	t.Logf("searched %d lines of %d logs, outputs and histories for %d secrets", lineCount, len(texts), len(secrets))
	fmt.Printf("security: refused=%d allowed=%d leaks=%d\n", c.refused, c.allowed, c.leaks)
}

// shellSpec is a job of team running script under /bin/sh on gpus GPUs,
// with SCRATCH set.
func shellSpec(name, team string, gpus int, script, scratch string) gangway.JobSpec {
	s := gangway.JobSpec{Name: name, Team: team, Command: []string{"/bin/sh", "-c", script},
		Env:  map[string]string{"SCRATCH": scratch},
		Gang: gangway.Gang{Replicas: 1, GPUsPerReplica: gpus}}
	s.Checkpoint.GracePeriod = gangway.Duration{Duration: time.Second}
	return s
}

func secRedis(t *testing.T, r transport.Redis) *redis.Client {
	t.Helper()
	o, err := r.Options()
	must(t, err)
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// workflowHistories is every workflow's history in the namespace, as JSON.
func workflowHistories(t *testing.T, ctx context.Context, tc tclient.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	var next []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 100, NextPageToken: next})
		must(t, err)
		for _, e := range resp.Executions {
			id := e.Execution.WorkflowId
			it := tc.GetWorkflowHistory(ctx, id, e.Execution.RunId, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			var b strings.Builder
			for it.HasNext() {
				ev, err := it.Next()
				must(t, err)
				js, err := protojson.Marshal(ev)
				must(t, err)
				b.Write(js)
				b.WriteString("\n")
			}
			out[id+"/"+e.Execution.RunId] = b.String()
		}
		if next = resp.NextPageToken; len(next) == 0 {
			return out
		}
	}
}

// pemBody is the base64 of a PEM file's first block, the secret part of a
// private key.
func pemBody(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	var body []string
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "-----") {
			body = append(body, strings.TrimSpace(line))
		}
	}
	return strings.Join(body, "")[:40]
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func lookupUID(t *testing.T, name string) string {
	t.Helper()
	u, err := user.Lookup(name)
	must(t, err)
	return u.Uid
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
