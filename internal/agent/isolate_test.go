package agent

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/internal/devstack/devstacktest"
	"github.com/gangwayhq/gangway/workflows"
)

// The agent's own secrets, as an agent's environment holds them: none may
// reach a task.
var agentSecrets = map[string]string{
	"GANGWAY_REDIS_URL":     "redis://agent:redis-pass-7f3a@127.0.0.1:6379/0",
	"GANGWAY_JOIN_TOKEN":    "gwj-join-token-52c1",
	"AWS_SECRET_ACCESS_KEY": "aws-secret-9d0e",
	"AWS_ACCESS_KEY_ID":     "AKIAEXAMPLE0001",
}

func TestTaskEnvironmentIsBuiltNotInherited(t *testing.T) {
	for k, v := range agentSecrets {
		t.Setenv(k, v)
	}
	t.Setenv("LANG", "C.UTF-8")
	h := newHarness(t)
	in := h.task(`tr '\0' '\n' < /proc/self/environ`)
	in.GPUs = []int{0}
	res, err := h.run(in)
	if err != nil {
		t.Fatal(err)
	}
	env := readLog(t, res.LogPath)
	checkNoSecrets(t, env)
	for _, want := range []string{"GANGWAY_JOB_ID=train-1", "CUDA_VISIBLE_DEVICES=0", "PIDFILE=" + h.path("pid"), "LANG=C.UTF-8", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("task environment lacks %s:\n%s", want, env)
		}
	}
}

func checkNoSecrets(t *testing.T, env string) {
	t.Helper()
	for k, v := range agentSecrets {
		if strings.Contains(env, v) || strings.Contains(env, k+"=") {
			t.Errorf("the agent's %s reached the task:\n%s", k, env)
		}
	}
	for line := range strings.SplitSeq(env, "\n") {
		if strings.HasPrefix(line, "AWS_") {
			t.Errorf("task environment has %s", line)
		}
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTasksRunAsTheirTeamsUsers runs team B's task, which writes a
// checkpoint and waits, and meanwhile team A's, which tries to read it: A
// runs as its own user, with a clean environment, and is refused B's
// checkpoint folder, B's log folder and the list of tasks.
func TestTasksRunAsTheirTeamsUsers(t *testing.T) {
	users := devstacktest.UnixUsers(t, "gwt", 2)
	ua, ub := users[0], users[1]
	for k, v := range agentSecrets {
		t.Setenv(k, v)
	}
	h := newHarness(t)
	dataDir := filepath.Join(t.TempDir(), "agent")
	devstacktest.Traversable(t, filepath.Dir(dataDir))
	h.a = New(Config{Node: FakeNode("n1", "onprem", "10.0.0.1", 4, "H100"), DataDir: dataDir, Recorder: h.rec,
		TaskUsers: gangway.TaskUsers{Teams: map[string][]string{"team-a": {ua}, "team-b": {ub}}}}, h.cap)
	// The scratch folder is where the tasks tell the test how far they
	// got: both users may write it.
	if err := os.Chmod(h.scratch, 0o1777); err != nil {
		t.Fatal(err)
	}
	devstacktest.Traversable(t, h.scratch)

	inB := workflows.RunTaskInput{JobID: "job-b", Team: "team-b", Attempt: 1, WorldSize: 1, NodeID: "n1", GPUs: []int{1},
		Command: []string{"/bin/sh", "-c", `mkdir "$GANGWAY_CHECKPOINT_DIR/step-1" &&
echo weights > "$GANGWAY_CHECKPOINT_DIR/step-1/model.bin" && touch "$READY" &&
while [ ! -e "$DONE" ]; do sleep 0.05; done`},
		Env: map[string]string{"READY": h.path("b-ready"), "DONE": h.path("a-done")}}
	bDirs := h.a.taskDirs(inB)
	bDone := h.start(inB)
	waitFile(t, h.path("b-ready"), bDone)

	inA := workflows.RunTaskInput{JobID: "job-a", Team: "team-a", Attempt: 1, WorldSize: 1, NodeID: "n1", GPUs: []int{0},
		Command: []string{"/bin/sh", "-c", `tr '\0' '\n' < /proc/self/environ
echo "uid=$(id -u)"
for p in "$BCKPT" "$BCKPT/step-1/model.bin" "$BLOGS" "$TASKS"; do
  if ls "$p" >/dev/null 2>&1 || cat "$p" >/dev/null 2>&1; then echo "READ $p"; else echo "DENIED $p"; fi
done
touch "$DONE"`},
		Env: map[string]string{"BCKPT": bDirs.checkpoint, "BLOGS": filepath.Join(dataDir, "logs", "job-b"),
			"TASKS": filepath.Join(dataDir, "tasks"), "DONE": h.path("a-done")}}
	resA, err := h.run(inA)
	if err != nil {
		t.Fatalf("team A's task: %v", err)
	}
	if o := wait(t, bDone); o.err != nil {
		t.Fatalf("team B's task: %v", o.err)
	}
	out := readLog(t, resA.LogPath)
	checkNoSecrets(t, out)
	uidA := lookupUID(t, ua)
	if !strings.Contains(out, "uid="+uidA+"\n") {
		t.Errorf("team A's task did not run as %s (uid %s):\n%s", ua, uidA, out)
	}
	for _, p := range []string{inA.Env["BCKPT"], inA.Env["BCKPT"] + "/step-1/model.bin", inA.Env["BLOGS"], inA.Env["TASKS"]} {
		if !strings.Contains(out, "DENIED "+p+"\n") {
			t.Errorf("team A's task could read %s:\n%s", p, out)
		}
	}
	for _, want := range []string{"USER=" + ua, "LOGNAME=" + ua, "GANGWAY_TEAM=team-a"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("team A's task environment lacks %s:\n%s", want, out)
		}
	}
	checkOwner(t, filepath.Dir(resA.LogPath), ua, modeLogs)
	checkOwner(t, resA.LogPath, ua, modeLogFile)
	checkOwner(t, filepath.Join(dataDir, "tasks"), "root", modeShared)
}

// TestTaskUserRefused: a team the policy does not list, and a runAs the
// team may not use, are refused before anything starts.
func TestTaskUserRefused(t *testing.T) {
	h := newHarness(t)
	h.a.cfg.TaskUsers = gangway.TaskUsers{Teams: map[string][]string{"team-a": {"nobody"}}}
	for name, in := range map[string]workflows.RunTaskInput{
		"unlisted team":     {Team: "team-b"},
		"runAs not allowed": {Team: "team-a", RunAs: "daemon"},
	} {
		t.Run(name, func(t *testing.T) {
			task := h.task(`touch "$PIDFILE"`)
			task.Team, task.RunAs = in.Team, in.RunAs
			_, err := h.run(task)
			appError(t, err, workflows.ErrTypeTaskFailed)
			if _, err := os.Stat(h.path("pid")); err == nil {
				t.Error("the task ran")
			}
		})
	}
}

func waitFile(t *testing.T, path string, done <-chan outcome) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case o := <-done:
			t.Fatalf("task ended before it wrote %s: %v", path, o.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 10s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lookupUID(t *testing.T, name string) string {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u.Uid
}

func checkOwner(t *testing.T, path, owner string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Sys().(*syscall.Stat_t).Uid; strconv.Itoa(int(got)) != lookupUID(t, owner) || fi.Mode().Perm() != mode {
		t.Errorf("%s: owner uid %d mode %v, want %s and %v", path, got, fi.Mode().Perm(), owner, mode)
	}
}
