package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/gangwayhq/gangway/workflows"
)

// Task isolation. A task runs as the Unix user its team's policy names
// (Config.TaskUsers; config jobs.users), set on the process with
// SysProcAttr.Credential, and sees only the environment built for it: the
// agent variables Config.PassEnv names, HOME, USER and LOGNAME of its user,
// the spec's env and the workload contract. Nothing else of the agent's
// environment (GANGWAY_REDIS_URL, GANGWAY_JOIN_TOKEN, AWS_*, ...) reaches
// it. Its checkpoint and resume directories belong to its user (0700), its
// log folder too (0750, the log files 0640), and the folders above them
// are 0711, so another team's task can neither list nor read them.

// DefaultPassEnv is the agent environment a task gets when Config.PassEnv
// is nil: what a shell needs to find programs and speak the locale, and
// where the node's MPS server listens (GPU shares under MPS).
var DefaultPassEnv = []string{"PATH", "LANG", "LC_ALL", "TZ", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"}

// Folder modes of task isolation.
const (
	modeShared  = 0o711 // tasks/, logs/ and each job's task folder: traversable, not listable
	modePrivate = 0o700 // a task's checkpoint and resume directories
	modeLogs    = 0o750 // a job's log folder, owned by its task user
	modeLogFile = 0o640
)

// taskUser is the Unix user a task runs as; nil is the agent's own.
type taskUser struct {
	name     string
	uid, gid uint32
	groups   []uint32
	home     string
}

// taskUserFor resolves the user in's task runs as under the agent's
// policy: nil (the agent's own user) when the policy isolates nothing.
func (a *Agent) taskUserFor(in workflows.RunTaskInput) (*taskUser, error) {
	name, err := a.cfg.TaskUsers.For(in.Team, in.RunAs)
	if err != nil || name == "" {
		return nil, err
	}
	return lookupTaskUser(name)
}

func lookupTaskUser(name string) (*taskUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("task user %s: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("task user %s: %w", name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("task user %s is root: tasks never run as root", name)
	}
	tu := &taskUser{name: name, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("task user %s: groups: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil && !slices.Contains(tu.groups, uint32(n)) {
			tu.groups = append(tu.groups, uint32(n))
		}
	}
	return tu, nil
}

// String names the user for logs ("" for the agent's own).
func (u *taskUser) String() string {
	if u == nil {
		return ""
	}
	return u.name
}

// credential is what the process is started with: nil keeps the agent's.
func (u *taskUser) credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
}

// own gives path to the task's user (nothing for the agent's own) and sets
// its mode.
func (u *taskUser) own(path string, mode fs.FileMode) error {
	if u != nil {
		if err := os.Lchown(path, int(u.uid), int(u.gid)); err != nil {
			return fmt.Errorf("give %s to task user %s: %w", path, u.name, err)
		}
	}
	return os.Chmod(path, mode)
}

// ownTree gives everything under root to the task's user (the checkpoint
// restored for it) and makes root private.
func (u *taskUser) ownTree(root string) error {
	if u != nil {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, int(u.uid), int(u.gid))
		})
		if err != nil {
			return fmt.Errorf("give %s to task user %s: %w", root, u.name, err)
		}
	}
	return os.Chmod(root, modePrivate)
}

// baseEnv is the part of a task's environment that is not the spec's nor
// the contract's: the agent variables PassEnv names and, for a task user
// of its own, its HOME, USER and LOGNAME.
func (a *Agent) baseEnv(u *taskUser) []string {
	var env []string
	for _, name := range a.cfg.PassEnv {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	if u != nil {
		env = append(env, "HOME="+u.home, "USER="+u.name, "LOGNAME="+u.name)
	}
	return env
}

// mkdirMode makes dir (and its parents) and sets dir's mode, which
// MkdirAll leaves as it was on a folder that exists.
func mkdirMode(dir string, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}
