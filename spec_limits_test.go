package gangway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidateLimits(t *testing.T) {
	const disguise = ", which can disguise what the spec says"
	tests := map[string]struct {
		change       func(s *JobSpec)
		opts         []ValidateOption
		wantProblems []FieldError
	}{
		"multi-line script and value": {change: func(s *JobSpec) {
			s.Command = []string{"sh", "-c", "set -e\n\tpython train.py\n"}
			s.Env = map[string]string{"CERT": "-----BEGIN-----\nabc\n-----END-----\n"}
		}},
		"non-ASCII text":  {change: func(s *JobSpec) { s.Args = []string{"--name=café", "日本語", "\uFFFD"} }},
		"at the caps":     {change: func(s *JobSpec) { s.Command = []string{strings.Repeat("x", MaxCommandBytes-1)} }},
		"allowed loader":  {change: withEnv("LD_LIBRARY_PATH"), opts: []ValidateOption{AllowEnv("LD_LIBRARY_PATH")}},
		"any loader":      {change: withEnv("LD_PRELOAD", "DYLD_INSERT_LIBRARIES"), opts: []ValidateOption{AllowLoaderEnv()}},
		"LD in the value": {change: func(s *JobSpec) { s.Env = map[string]string{"OLD_LD": "LD_PRELOAD=x"} }},

		"right-to-left override first": {
			change:       func(s *JobSpec) { s.Command = []string{"\u202Ecod.sh", "x"} },
			wantProblems: []FieldError{{"command[0]", "contains bidirectional text control U+202E at byte 0" + disguise}},
		},
		"isolate in an argument": {
			change:       func(s *JobSpec) { s.Args = []string{"ok", "--user=admin\u2066 --debug"} },
			wantProblems: []FieldError{{"args[1]", "contains bidirectional text control U+2066 at byte 12" + disguise}},
		},
		"zero-width space": {
			change:       func(s *JobSpec) { s.Command = []string{"python", "tra\u200Bin.py"} },
			wantProblems: []FieldError{{"command[1]", "contains invisible format character U+200B at byte 3" + disguise}},
		},
		"carriage return and escape": {
			change: func(s *JobSpec) {
				s.Command = []string{"sh", "-c", "rm -rf ~\r echo hi"}
				s.Args = []string{"\x1b[2K"}
			},
			wantProblems: []FieldError{
				{"command[2]", "contains control character U+000D at byte 8" + disguise},
				{"args[0]", "contains control character U+001B at byte 0" + disguise},
			},
		},
		"C1 control and NUL": {
			change: func(s *JobSpec) { s.Args = []string{"a\u0085b", "a\x00b"} },
			wantProblems: []FieldError{
				{"args[0]", "contains control character U+0085 at byte 1" + disguise},
				{"args[1]", "contains control character U+0000 at byte 1" + disguise},
			},
		},
		"newline in the program": {
			change:       func(s *JobSpec) { s.Command = []string{"python\n", "x"} },
			wantProblems: []FieldError{{"command[0]", "contains control character U+000A at byte 6" + disguise}},
		},
		"invalid UTF-8": {
			change:       func(s *JobSpec) { s.Args = []string{"ab\xff"} },
			wantProblems: []FieldError{{"args[0]", "is not valid UTF-8 (byte 2)"}},
		},
		"env value, workingDir and project": {
			change: func(s *JobSpec) {
				s.Env = map[string]string{"A": "x\u202Ey"}
				s.WorkingDir = "/w\t"
				s.Project = "p\u2028"
			},
			wantProblems: []FieldError{
				{"env.A", "contains bidirectional text control U+202E at byte 1" + disguise},
				{"workingDir", "contains control character U+0009 at byte 2" + disguise},
				{"project", "contains invisible format character U+2028 at byte 1" + disguise},
			},
		},
		"loader variables": {
			change: withEnv("LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "GLIBC_TUNABLES"),
			opts:   []ValidateOption{AllowEnv("LD_AUDIT", "PATH")},
			wantProblems: []FieldError{
				{"env.DYLD_INSERT_LIBRARIES", loaderMsg("DYLD_INSERT_LIBRARIES")},
				{"env.GLIBC_TUNABLES", loaderMsg("GLIBC_TUNABLES")},
				{"env.LD_LIBRARY_PATH", loaderMsg("LD_LIBRARY_PATH")},
				{"env.LD_PRELOAD", loaderMsg("LD_PRELOAD")},
			},
		},
		"one loader variable allowed": {
			change:       withEnv("LD_PRELOAD", "LD_LIBRARY_PATH"),
			opts:         []ValidateOption{AllowEnv("LD_LIBRARY_PATH")},
			wantProblems: []FieldError{{"env.LD_PRELOAD", loaderMsg("LD_PRELOAD")}},
		},
		"command over its cap": {
			change:       func(s *JobSpec) { s.Command = []string{"sh", "-c", strings.Repeat("x", MaxCommandBytes)} },
			wantProblems: []FieldError{{"command", "is 65543 bytes (each element plus 1), more than the 65536 (64 KiB) allowed"}},
		},
		"many empty args": {
			change:       func(s *JobSpec) { s.Args = make([]string, MaxArgsBytes+1) },
			wantProblems: []FieldError{{"args", "is 65537 bytes (each element plus 1), more than the 65536 (64 KiB) allowed"}},
		},
		"env over its cap": {
			change: func(s *JobSpec) {
				s.Env = map[string]string{"A": strings.Repeat("x", MaxEnvBytes/2), "B": strings.Repeat("x", MaxEnvBytes/2)}
			},
			wantProblems: []FieldError{{"env", "is 65542 bytes (each NAME=value plus 1), more than the 65536 (64 KiB) allowed"}},
		},
		"long workingDir and project": {
			change: func(s *JobSpec) {
				s.WorkingDir = "/" + strings.Repeat("d", MaxWorkingDirBytes)
				s.Project = strings.Repeat("p", MaxProjectBytes+1)
			},
			wantProblems: []FieldError{
				{"workingDir", "is 4097 bytes, more than the 4096 allowed"},
				{"project", "is 257 bytes, more than the 256 allowed"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := validSpec()
			tt.change(&s)
			if diff := cmp.Diff(tt.wantProblems, problemsOf(t, s.Validate(tt.opts...))); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func withEnv(names ...string) func(*JobSpec) {
	return func(s *JobSpec) {
		s.Env = map[string]string{}
		for _, n := range names {
			s.Env[n] = "/opt/x"
		}
	}
}

func loaderMsg(name string) string {
	return "not allowed: LD_*, DYLD_* and GLIBC_TUNABLES change what the dynamic loader loads into the job; the server must allow " + name + " by name"
}

func TestParseJobSpecLimits(t *testing.T) {
	const minimal = "name: a\nteam: t\ncommand: [run]\ngang: {replicas: 1, gpusPerReplica: 1}\n"
	tests := map[string]struct {
		in           string
		opts         []ValidateOption
		wantProblems []FieldError
	}{
		"10 MB spec": {
			in:           minimal + "# " + strings.Repeat("x", 10<<20) + "\n",
			wantProblems: []FieldError{{"", "job spec is larger than the 262144 (256 KiB) allowed"}},
		},
		"right-to-left override as a YAML escape": {
			in:           "name: a\nteam: t\ncommand: [\"\\u202Erun\"]\ngang: {replicas: 1, gpusPerReplica: 1}\n",
			wantProblems: []FieldError{{"command[0]", "contains bidirectional text control U+202E at byte 0, which can disguise what the spec says"}},
		},
		"LD_PRELOAD": {
			in:           minimal + "env: {LD_PRELOAD: /tmp/x.so}\n",
			wantProblems: []FieldError{{"env.LD_PRELOAD", loaderMsg("LD_PRELOAD")}},
		},
		"LD_LIBRARY_PATH allowed": {
			in:   minimal + "env: {LD_LIBRARY_PATH: /usr/local/cuda/lib64}\n",
			opts: []ValidateOption{AllowEnv("LD_LIBRARY_PATH")},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseJobSpec([]byte(tt.in), tt.opts...)
			if diff := cmp.Diff(tt.wantProblems, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseJobSpecHostile: files within MaxSpecBytes that once held
// ParseJobSpec for seconds to minutes get a clear error instead.
func TestParseJobSpecHostile(t *testing.T) {
	badEnv := func(n int) string {
		var b strings.Builder
		b.WriteString("name: a\nteam: t\ncommand: [run]\ngang: {replicas: 1, gpusPerReplica: 1}\nenv:\n")
		for i := range n {
			fmt.Fprintf(&b, "  1a%d: [x]\n", i)
		}
		return b.String()
	}
	tests := map[string]struct {
		in   string
		want []FieldError // the first problems; the last one when more is set
		more bool
	}{
		// Each *a is the whole 100 KiB project; 35,000 of them made the
		// character checks read 3.5 GB.
		"aliases repeating a long value": {
			in:   "project: &a " + strings.Repeat("x", 100<<10) + "\ncommand: [" + strings.Repeat("*a, ", 35000) + "*a]\n",
			want: []FieldError{{"command[4]", "its aliases (*name) expand the job spec past 524288 (512 KiB); write the values out instead"}},
		},
		// goccy/go-yaml, which finds the position of a syntax error, still
		// ran after 40 s on these; yaml.v3's error stands.
		"flow lists nested 100,000 deep": {
			in:   "command: " + strings.Repeat("[", 100000) + "\n",
			want: []FieldError{{"", "invalid YAML: exceeded max depth of 10000"}},
		},
		"block lists nested 100,000 deep": {
			in:   strings.Repeat("- ", 100000) + "\n",
			want: []FieldError{{"", "invalid YAML: exceeded max depth of 10000"}},
		},
		"flow lists nested 150 deep, unclosed": {
			in:   "name: a\ncommand: " + strings.Repeat("[", 150) + "x\n",
			want: []FieldError{{"", "invalid YAML at line 1: did not find expected ',' or ']'"}},
		},
		// goccy's time grows faster than the number of tokens: seconds
		// for these. Past 20,000 tokens yaml.v3's line stands.
		"32,000 anchored keys, then an unknown alias": {
			in:   strings.Repeat("a: &x b\n", 32000) + "c: *nope\n",
			want: []FieldError{{"", "invalid YAML: unknown anchor 'nope' referenced"}},
		},
		"40,000 keys, then a syntax error": {
			in:   strings.Repeat("a: b\n", 40000) + "b: : c\n",
			want: []FieldError{{"", "invalid YAML at line 40001: mapping values are not allowed in this context"}},
		},
		// goccy stopped at the duplicate key (line 2) and the position of
		// its error went with yaml.v3's message about line 4.
		"a duplicate key before a syntax error": {
			in:   "name: a\nname: b\nteam: t\ncommand: [x\n",
			want: []FieldError{{"", "invalid YAML at line 4, column 10: did not find expected ',' or ']'"}},
		},
		// Every decoder problem was compared with every validation one:
		// 20,000 bad entries took 15 s. The validation problems on the
		// same fields are still left out.
		"18,000 bad env entries": {
			in:   badEnv(18000),
			want: []FieldError{{"env.1a0", "want a string, got a list"}, {Message: "... and 17950 more problems"}},
			more: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if len(tt.in) > MaxSpecBytes {
				t.Fatalf("input is %d bytes, over MaxSpecBytes", len(tt.in))
			}
			_, err := ParseJobSpec([]byte(tt.in))
			got := problemsOf(t, err)
			if tt.more && len(got) > 1 {
				got = []FieldError{got[0], got[len(got)-1]}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
