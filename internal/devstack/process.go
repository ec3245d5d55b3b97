package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
	// The Temporal dev server needs about 3 s to shut down cleanly.
	stopGrace = 5 * time.Second
	// killWait bounds the wait for a process to disappear after SIGKILL; only
	// a process stuck in the kernel (uninterruptible sleep) takes longer.
	killWait = 5 * time.Second
	// tailSize is how much of a server's most recent output is kept for
	// error messages.
	tailSize = 4 << 10
	// probeInterval is the pause between two readiness probes.
	probeInterval = 50 * time.Millisecond
	// portAttempts is how often a start is tried on a fresh free port when
	// the server reports that the port it was given was taken meanwhile.
	portAttempts = 3
)

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on.
//
// Nothing reserves the port: another process may bind it before the caller
// does. To make that unlikely, the port is left in TIME_WAIT (the same trick
// as the Temporal CLI's devserver.GetFreePort): Linux hands out ephemeral
// ports at random and does not give a TIME_WAIT port to another bind(:0) for
// about a minute, while a server that binds it explicitly (with SO_REUSEADDR,
// as Redis and Go servers do) still can. StartRedis and StartTemporal retry
// on a new port if the one they picked was taken anyway.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// freePorts returns n distinct free ports. All listeners stay open until all
// ports are chosen, so the kernel cannot hand out the same one twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		// Connect and close from the server side: the server end of the
		// connection then sits in TIME_WAIT on this port (see FreePort).
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		s, err := l.Accept()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("find free port: %w", err)
		}
		s.Close()
		c.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// process is one child server process: started in its own process group,
// killed by the kernel if this process dies, its output kept in a small tail
// buffer (and copied to a caller's log), reaped by one goroutine.
type process struct {
	name string // for messages: "redis-server", "temporal dev server"
	pid  int
	out  *tailBuffer
	// stopSig is what stop sends first; zero means SIGTERM.
	stopSig syscall.Signal

	done    chan struct{} // closed once the child has exited and been reaped
	waitErr error         // the child's exit status; read only after done

	stopOnce sync.Once
	stopErr  error
}

// startProcess starts path with args in dir, its stdout and stderr going to
// the tail buffer and to log (nil: nowhere else).
func startProcess(name, path string, args []string, dir string, log io.Writer) (*process, error) {
	return startProcessAs(name, path, args, dir, log, nil)
}

// startProcessAs is startProcess run as another user (cred nil: as this
// process). The kernel sets the parent-death signal after the change of
// user, so it still applies.
func startProcessAs(name, path string, args []string, dir string, log io.Writer, cred *syscall.Credential) (*process, error) {
	p := &process{
		name: name,
		out:  &tailBuffer{max: tailSize},
		done: make(chan struct{}),
	}
	var w io.Writer = p.out
	if log != nil {
		w = io.MultiWriter(p.out, ignoreErrors{log})
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	// One writer for both streams: exec then uses one pipe and one copying
	// goroutine, so lines from the two streams are not torn.
	cmd.Stdout = w
	cmd.Stderr = w
	// If the child leaves a grandchild holding the pipe, Wait gives up on
	// the pipe this long after the child exits instead of hanging.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: Stop and Kill signal the whole group.
		Setpgid: true,
		// The kernel sends SIGKILL to the child when the *thread* that
		// forked it exits, not when the process does. Go may retire OS
		// threads, so the goroutine below stays locked to its thread for
		// as long as the child lives: no other goroutine can run on it, so
		// nothing can make it exit early. When this whole process dies, the
		// thread dies with it and the child is killed, even after SIGKILL.
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}

	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Unlock only after the child is gone: from then on the thread
		// may be reused or retired freely.
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the child has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the child's process group. It does nothing once the
// child has been reaped: its pid may then belong to someone else. (A pid is
// not reused while its zombie or a process group of that id exists; the
// window between Wait reaping the child and done being closed is a few
// instructions long.)
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s (pid %d): %w", p.name, p.pid, err)
	}
	return nil
}

// stop sends SIGTERM (or stopSig), waits up to grace, then sends SIGKILL.
// It is idempotent; later calls return the first call's result. A process
// that already exited (crashed, or was killed) stops without error.
func (p *process) stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		sig := p.stopSig
		if sig == 0 {
			sig = syscall.SIGTERM
		}
		if err := p.signal(sig); err != nil {
			p.stopErr = err
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.stopErr = p.kill()
	})
	return p.stopErr
}

// kill sends SIGKILL to the process group and waits until the child has been
// reaped. It is safe to call at any time, any number of times.
func (p *process) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("%s (pid %d) still running %v after SIGKILL", p.name, p.pid, killWait)
	}
}

// waitGroupGone waits, up to timeout, until no process of the child's
// process group is left: a server's own children (PostgreSQL's backends)
// may outlive it by a moment, and a server started again on the same data
// must not find them still attached to it.
func (p *process) waitGroupGone(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := syscall.Kill(-p.pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) exited, but processes of its group still run %v later", p.name, p.pid, timeout)
		}
		time.Sleep(probeInterval)
	}
}

// waitReady calls probe until it succeeds, the child exits, timeout passes
// or ctx ends. Each probe gets a context that ends when the child exits, so
// a probe blocked on a dead server returns at once.
func (p *process) waitReady(ctx context.Context, timeout, perProbe time.Duration, probe func(context.Context) error) error {
	deadline, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	var lastErr error
	for {
		probeCtx, cancelProbe := context.WithTimeout(deadline, perProbe)
		go func() {
			select {
			case <-p.done:
				cancelProbe()
			case <-probeCtx.Done():
			}
		}()
		err := probe(probeCtx)
		cancelProbe()
		if err == nil {
			return nil
		}
		lastErr = err

		select {
		case <-p.done:
		case <-deadline.Done():
		case <-tick.C:
			continue
		}
		switch {
		case p.exited():
			return p.errorf("exited during start-up (%v)", p.waitErr)
		case ctx.Err() != nil:
			return p.errorf("start-up interrupted: %w", context.Cause(ctx))
		default:
			return p.errorf("not ready after %v: %w", timeout, lastErr)
		}
	}
}

// errorf returns an error about the process that ends with its last output.
func (p *process) errorf(format string, args ...any) error {
	err := fmt.Errorf("%s (pid %d) "+format, append([]any{p.name, p.pid}, args...)...)
	tail := strings.TrimRight(p.out.String(), "\n")
	if tail == "" {
		return fmt.Errorf("%w; it wrote no output", err)
	}
	return fmt.Errorf("%w; its last output:\n%s", err, tail)
}

// portTaken reports whether the process's output says that it could not bind
// its port because something else had it.
func (p *process) portTaken() bool {
	return strings.Contains(strings.ToLower(p.out.String()), "address already in use")
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = b.buf[:copy(b.buf, b.buf[over:])]
		b.dropped = true
	}
	return len(p), nil
}

// String returns the kept output. When older output was dropped, it starts
// at the first whole line, after a "..." line.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := string(b.buf)
	if b.dropped {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		s = "...\n" + s
	}
	return s
}

// ignoreErrors hides a log writer's errors: io.MultiWriter stops at the first
// error, and then the child would block on a full pipe.
type ignoreErrors struct{ w io.Writer }

func (w ignoreErrors) Write(p []byte) (int, error) {
	_, _ = w.w.Write(p)
	return len(p), nil
}
