package gangway

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Size caps on a job spec. docs/jobspec.md lists the same numbers; change
// both together. They keep a spec well inside what Temporal carries in one
// payload (the spec travels in the job's workflow input and in every
// replica's task), and the command within what exec accepts.
const (
	// MaxSpecBytes bounds the YAML document ParseJobSpec reads.
	MaxSpecBytes = 256 << 10
	// MaxCommandBytes bounds command, and MaxArgsBytes args, counted as
	// exec counts them: each element's bytes plus its terminating NUL.
	MaxCommandBytes = 64 << 10
	MaxArgsBytes    = 64 << 10
	// MaxEnvBytes bounds env, counted as exec counts the environment: each
	// NAME=value plus its terminating NUL.
	MaxEnvBytes = 64 << 10
	// MaxWorkingDirBytes is Linux's PATH_MAX; MaxProjectBytes bounds the
	// free-text project, which cost reports and metrics carry.
	MaxWorkingDirBytes = 4096
	MaxProjectBytes    = 256
)

// loaderEnvPrefixes and loaderEnv are environment variables that change
// what the dynamic loader loads into every process of the job (glibc and
// musl read LD_*, macOS dyld DYLD_*; GLIBC_TUNABLES tunes the loader
// itself). A spec may set one only when the server allows it by name
// (AllowEnv), e.g. LD_LIBRARY_PATH on a fleet whose images need it.
var (
	loaderEnvPrefixes = []string{"LD_", "DYLD_"}
	loaderEnv         = []string{"GLIBC_TUNABLES"}
)

// IsLoaderEnv reports whether name is an environment variable that steers
// the dynamic loader, which Validate rejects unless allowed (AllowEnv).
func IsLoaderEnv(name string) bool {
	return slices.Contains(loaderEnv, name) || slices.ContainsFunc(loaderEnvPrefixes, func(p string) bool {
		return strings.HasPrefix(name, p)
	})
}

// A ValidateOption changes what Validate and ParseJobSpec accept. The
// defaults are the strict ones; a server sets options from its config.
type ValidateOption func(*validateOptions)

type validateOptions struct {
	allowEnv     []string
	anyLoaderEnv bool
	users        *TaskUsers // nil: runAs is checked for its syntax only
}

// AllowEnv lets a spec set the named loader variables (see IsLoaderEnv),
// which are rejected by default. Names that are not loader variables
// need no allowing and are ignored here.
func AllowEnv(names ...string) ValidateOption {
	return func(o *validateOptions) { o.allowEnv = append(o.allowEnv, names...) }
}

// AllowLoaderEnv skips the loader-variable check altogether. It is for
// checking a spec that was already checked at submit, against the
// server's policy of the day (JobWorkflow): a policy changed since must
// not fail a running job, nor change how its history replays.
func AllowLoaderEnv() ValidateOption {
	return func(o *validateOptions) { o.anyLoaderEnv = true }
}

func (o validateOptions) envAllowed(name string) bool {
	return o.anyLoaderEnv || !IsLoaderEnv(name) || slices.Contains(o.allowEnv, name)
}

// validateLimits checks the size caps and the characters of command, args,
// env, workingDir and project.
func (s JobSpec) validateLimits(p *problems, o validateOptions) {
	checkListBytes(p, "command", s.Command, MaxCommandBytes)
	checkListBytes(p, "args", s.Args, MaxArgsBytes)
	for i, v := range s.Command {
		// The program is a path: no line breaks either.
		checkText(p, fmt.Sprintf("command[%d]", i), v, i > 0)
	}
	for i, v := range s.Args {
		checkText(p, fmt.Sprintf("args[%d]", i), v, true)
	}

	envBytes := 0
	for _, k := range sortedKeys(s.Env) {
		envBytes += len(k) + len(s.Env[k]) + 2
		if isEnvName(k) && !o.envAllowed(k) {
			p.add(keyPath("env", k), "not allowed: LD_*, DYLD_* and GLIBC_TUNABLES change what the dynamic loader loads into the job; the server must allow %s by name", k)
		}
		checkText(p, keyPath("env", k), s.Env[k], true)
	}
	if envBytes > MaxEnvBytes {
		p.add("env", "is %d bytes (each NAME=value plus 1), more than the %s allowed", envBytes, kib(MaxEnvBytes))
	}

	if len(s.WorkingDir) > MaxWorkingDirBytes {
		p.add("workingDir", "is %d bytes, more than the %d allowed", len(s.WorkingDir), MaxWorkingDirBytes)
	}
	checkText(p, "workingDir", s.WorkingDir, false)
	if len(s.Project) > MaxProjectBytes {
		p.add("project", "is %d bytes, more than the %d allowed", len(s.Project), MaxProjectBytes)
	}
	checkText(p, "project", s.Project, false)
}

// checkListBytes reports a list whose elements, each with a NUL as exec
// counts them, come to more than limit bytes.
func checkListBytes(p *problems, field string, list []string, limit int) {
	n := 0
	for _, v := range list {
		n += len(v) + 1
	}
	if n > limit {
		p.add(field, "is %d bytes (each element plus 1), more than the %s allowed", n, kib(limit))
	}
}

// checkText reports the first character of v that could make it read
// differently from what runs: invalid UTF-8 (which JSON would silently
// replace), control characters (C0, DEL, C1: a carriage return or an
// escape sequence rewrites a terminal line), and invisible format
// characters, among them the bidirectional overrides and isolates that
// reorder text on screen (Trojan Source). lines allows tab and newline,
// as a multi-line `sh -c` script or value needs them.
func checkText(p *problems, field, v string, lines bool) {
	for i, r := range v {
		var what string
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(v[i:], "\uFFFD"):
			p.add(field, "is not valid UTF-8 (byte %d)", i)
			return
		case lines && (r == '\t' || r == '\n'):
			continue
		case unicode.Is(unicode.Cc, r):
			what = "control character"
		case isBidiControl(r):
			what = "bidirectional text control"
		case unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			what = "invisible format character"
		default:
			continue
		}
		p.add(field, "contains %s U+%04X at byte %d, which can disguise what the spec says", what, r, i)
		return
	}
}

// isBidiControl reports the embeddings, overrides and isolates of
// U+202A–U+202E and U+2066–U+2069.
func isBidiControl(r rune) bool {
	return r >= '\u202A' && r <= '\u202E' || r >= '\u2066' && r <= '\u2069'
}

func kib(n int) string { return fmt.Sprintf("%d (%d KiB)", n, n>>10) }
