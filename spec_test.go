package gangway

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"
)

var update = flag.Bool("update", false, "rewrite testdata/jobspec/*.golden from the current output")

// validSpec is a defaulted spec that passes Validate; cases change one
// thing each.
func validSpec() JobSpec {
	s := JobSpec{
		Name:    "train-1",
		Team:    "research",
		Command: []string{"torchrun", "train.py"},
		Env:     map[string]string{"NCCL_DEBUG": "WARN"},
		Gang:    Gang{Replicas: 2, GPUsPerReplica: 8, GPUModels: []string{"H100"}},
		Pools:   []string{"onprem-a"},
	}
	s.Default()
	return s
}

// problemsOf returns the problems of a *SpecError, nil for nil, and fails
// the test for any other error.
func problemsOf(t *testing.T, err error) []FieldError {
	t.Helper()
	if err == nil {
		return nil
	}
	var se *SpecError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *SpecError", err, err)
	}
	if !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("errors.Is(%v, ErrInvalidSpec) = false", err)
	}
	return se.Problems
}

func TestParseJobSpec(t *testing.T) {
	const minimal = "name: a\nteam: t\ncommand: [run]\ngang: {replicas: 1, gpusPerReplica: 1}\n"
	tests := map[string]struct {
		in           string
		wantProblems []FieldError
		check        func(t *testing.T, s JobSpec)
	}{
		"minimal gets defaults": {
			in: minimal,
			check: func(t *testing.T, s JobSpec) {
				want := JobSpec{
					Name: "a", Team: "t", PriorityClass: "normal", Command: []string{"run"},
					Gang:       Gang{Replicas: 1, GPUsPerReplica: 1, CPU: "1", Memory: "4Gi"},
					MaxRuntime: Duration{24 * time.Hour},
					Checkpoint: Checkpoint{Signal: "SIGTERM", GracePeriod: Duration{30 * time.Second}, Keep: DefaultKeep},
				}
				if diff := cmp.Diff(want, s); diff != "" {
					t.Errorf("spec (-want +got):\n%s", diff)
				}
			},
		},
		"durations, numbers as quantities, aliases and null fields": {
			in: "name: a\nteam: t\ncommand: &cmd [run]\nargs: *cmd\nenv:\nmaxRuntime: 2h30m\n" +
				"gang: {replicas: 1, gpusPerReplica: 1, cpu: 2.5, memory: 1073741824}\n" +
				"checkpoint: {gracePeriod: 90s}\n",
			check: func(t *testing.T, s JobSpec) {
				got := []any{s.Args, s.Env, s.MaxRuntime.Duration, s.Checkpoint.GracePeriod.Duration, s.CPUMilli(), s.MemMiB()}
				want := []any{[]string{"run"}, map[string]string(nil), 150 * time.Minute, 90 * time.Second, int64(2500), int64(1024)}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			},
		},
		"leading and trailing document markers are one document": {
			in: "---\n" + minimal + "---\n",
		},
		"unknown nested field with a suggestion": {
			in: "name: a\nteam: t\ncommand: [run]\ngang: {replicas: 1, gpuPerReplica: 4}\n",
			wantProblems: []FieldError{
				{"gang.gpuPerReplica", "unknown field (did you mean gpusPerReplica?)"},
			},
		},
		"unknown field in another case": {
			in: minimal + "PriorityClass: high\n",
			wantProblems: []FieldError{
				{"PriorityClass", "unknown field (did you mean priorityClass?)"},
			},
		},
		"gang field written at the top level": {
			in: "name: a\nteam: t\ncommand: [run]\nreplicas: 2\ngang: {replicas: 2, gpusPerReplica: 1}\n",
			wantProblems: []FieldError{
				{"replicas", "unknown field (did you mean gang.replicas?)"},
			},
		},
		"unknown field, nothing close": {
			in:           minimal + "image: pytorch:2.4\n",
			wantProblems: []FieldError{{"image", "unknown field"}},
		},
		"wrong types are all reported, with paths": {
			in: "name: a\nteam: t\ncommand: [python, x.py, --epochs, 3]\nenv: {PORT: 8080, X: [1]}\n" +
				"gang: {replicas: two, gpusPerReplica: 1.5}\nretries: \"2\"\nmaxRuntime: 3600\n" +
				"checkpoint: {enabled: yes}\npools: onprem-a\n",
			wantProblems: []FieldError{
				{"command[3]", `want a string, got integer 3 (quote it: "3")`},
				{"env.PORT", `want a string, got integer 8080 (quote it: "8080")`},
				{"env.X", "want a string, got a list"},
				{"gang.replicas", `want an integer, got string "two"`},
				{"gang.gpusPerReplica", "want an integer, got float 1.5"},
				{"retries", `want an integer, got string "2"`},
				{"maxRuntime", `want a duration such as "90s" or "2h30m" (units h, m, s, ms), got integer 3600`},
				{"checkpoint.enabled", `want true or false, got string "yes"`},
				{"pools", `want a list, got string "onprem-a"`},
			},
		},
		"a mapping where a scalar belongs": {
			in: minimal + "project: {name: x}\n",
			wantProblems: []FieldError{
				{"project", "want a string, got a mapping"},
			},
		},
		"null inside a list or map": {
			in: "name: a\nteam: t\ncommand: [run, ~]\nenv: {A: }\ngang: {replicas: 1, gpusPerReplica: 1}\n",
			wantProblems: []FieldError{
				{"command[1]", "want a string, got null"},
				{"env.A", "want a string, got null"},
			},
		},
		"env keys that need quoting in the path": {
			in: minimal + "env: {\"a.b\": 1}\n",
			wantProblems: []FieldError{
				{`env["a.b"]`, `want a string, got integer 1 (quote it: "1")`},
			},
		},
		"duplicate keys": {
			in: "name: a\nteam: t\ncommand: [run]\ngang:\n  replicas: 1\n  gpusPerReplica: 1\n  replicas: 2\nenv: {A: x, A: y}\n",
			wantProblems: []FieldError{
				{"gang.replicas", "duplicate key (first at line 5)"},
				{"env.A", "duplicate key (first at line 8)"},
			},
		},
		"merge keys": {
			in: minimal + "checkpoint:\n  <<: {enabled: true}\n",
			wantProblems: []FieldError{
				{"checkpoint.<<", "merge keys (<<) are not supported; write the fields out"},
			},
		},
		"decode and validation problems together, each field once": {
			in: "name: Bad_Name\nteam: t\ncommand: [run]\ngang: {replicas: two, gpusPerReplica: 12}\n",
			wantProblems: []FieldError{
				{"gang.replicas", `want an integer, got string "two"`},
				{"name", `must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit), got "Bad_Name"`},
				{"gang.gpusPerReplica", "must be between 1 and 8, got 12"},
			},
		},
		"validation runs after decoding": {
			in: "name: a\nteam: t\ncommand: [run]\ngang: {replicas: 1, gpusPerReplica: 12}\n",
			wantProblems: []FieldError{
				{"gang.gpusPerReplica", "must be between 1 and 8, got 12"},
			},
		},
		"several documents": {
			in: minimal + "---\n" + minimal,
			wantProblems: []FieldError{
				{"", "several YAML documents (a second one starts at line 5); submit one job per file"},
			},
		},
		"empty input": {
			in:           "",
			wantProblems: []FieldError{{"", "empty job spec: want a YAML mapping with at least name, team, command and gang"}},
		},
		"only a comment": {
			in:           "# nothing here\n",
			wantProblems: []FieldError{{"", "empty job spec: want a YAML mapping with at least name, team, command and gang"}},
		},
		"only a document marker": {
			in:           "---\n",
			wantProblems: []FieldError{{"", "empty job spec: want a YAML mapping with at least name, team, command and gang"}},
		},
		"a list, not a mapping": {
			in:           "- name: a\n",
			wantProblems: []FieldError{{"", "want a YAML mapping of job spec fields, got a list"}},
		},
		"a scalar, not a mapping": {
			in:           "hello\n",
			wantProblems: []FieldError{{"", `want a YAML mapping of job spec fields, got string "hello"`}},
		},
		"bad YAML syntax": {
			in:           "name: a: b\n",
			wantProblems: []FieldError{{"", "invalid YAML at line 1, column 7: mapping values are not allowed in this context"}},
		},
		// yaml.v3 alone names the line the enclosing mapping starts on
		// (line 1); the problem is on line 3.
		"unclosed flow sequence on line 3": {
			in:           "name: a\nteam: b\ncommand: [python, train.py\ngang:\n  replicas: 1\n",
			wantProblems: []FieldError{{"", "invalid YAML at line 4, column 1: did not find expected ',' or ']'"}},
		},
		"bad key on line 3": {
			in:           "name: a\nteam: b\n  bad: : x\ngang: {}\n",
			wantProblems: []FieldError{{"", "invalid YAML at line 3, column 8: mapping values are not allowed in this context"}},
		},
		"tab indentation on line 3": {
			in:           "name: a\nteam: b\n\tcommand: x\n",
			wantProblems: []FieldError{{"", "invalid YAML at line 3, column 1: found a tab character that violates indentation"}},
		},
		"missing required fields": {
			in: "gang: {}\n",
			wantProblems: []FieldError{
				{"name", "required"},
				{"team", "required"},
				{"command", "required: the program and its arguments, e.g. [torchrun, train.py]"},
				{"gang.replicas", "must be between 1 and 256, got 0"},
				{"gang.gpusPerReplica", "must be between 1 and 8, got 0"},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseJobSpec([]byte(tt.in))
			if diff := cmp.Diff(tt.wantProblems, problemsOf(t, err)); diff != "" {
				t.Fatalf("problems (-want +got):\n%s\nerror:\n%v", diff, err)
			}
			if err != nil {
				if diff := cmp.Diff(JobSpec{}, got); diff != "" {
					t.Errorf("spec returned with an error is not zero:\n%s", diff)
				}
				return
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestParseJobSpecCapsProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: a\nteam: t\ncommand: [run]\ngang: {replicas: 1, gpusPerReplica: 1}\nenv:\n")
	for i := range 80 {
		fmt.Fprintf(&b, "  V%02d: %d\n", i, i)
	}
	_, err := ParseJobSpec([]byte(b.String()))
	got := problemsOf(t, err)
	if len(got) != maxProblems+1 {
		t.Fatalf("%d problems, want %d", len(got), maxProblems+1)
	}
	if diff := cmp.Diff(FieldError{Message: "... and 30 more problems"}, got[maxProblems]); diff != "" {
		t.Errorf("last problem (-want +got):\n%s", diff)
	}

	s := validSpec()
	s.Env = map[string]string{}
	for i := range 80 {
		s.Env[fmt.Sprintf("%02d", i)] = "x"
	}
	data, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseJobSpec(data)
	if got := problemsOf(t, err); len(got) != maxProblems+1 || got[maxProblems].Message != "... and 30 more problems" {
		t.Errorf("%d validation problems, last %v; want %d, last \"... and 30 more problems\"", len(got), got[len(got)-1], maxProblems+1)
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		change       func(s *JobSpec)
		wantProblems []FieldError
	}{
		"valid":                    {change: func(s *JobSpec) {}},
		"name longest label":       {change: func(s *JobSpec) { s.Name = strings.Repeat("a", 63) }},
		"name one character":       {change: func(s *JobSpec) { s.Name = "a" }},
		"name digits and dashes":   {change: func(s *JobSpec) { s.Name = "0-run-2" }},
		"low priority":             {change: func(s *JobSpec) { s.PriorityClass = PriorityLow }},
		"high priority":            {change: func(s *JobSpec) { s.PriorityClass = PriorityHigh }},
		"bounds at their maximums": {change: func(s *JobSpec) { s.Gang.Replicas, s.Gang.GPUsPerReplica, s.Retries = 256, 8, 10 }},
		"one GPU":                  {change: func(s *JobSpec) { s.Gang.Replicas, s.Gang.GPUsPerReplica = 1, 1 }},
		"longest runtime":          {change: func(s *JobSpec) { s.MaxRuntime.Duration = 30 * 24 * time.Hour }},
		"zero grace":               {change: func(s *JobSpec) { s.Checkpoint.GracePeriod.Duration = 0 }},
		"one hour grace":           {change: func(s *JobSpec) { s.Checkpoint.GracePeriod.Duration = time.Hour }},
		"each signal":              {change: func(s *JobSpec) { s.Checkpoint.Signal = "SIGUSR2" }},
		"any model, any pool":      {change: func(s *JobSpec) { s.Gang.GPUModels, s.Pools = nil, nil }},
		"env names":                {change: func(s *JobSpec) { s.Env = map[string]string{"_X": "", "lower_1": "v", "A": "="} }},
		"quantities":               {change: func(s *JobSpec) { s.Gang.CPU, s.Gang.Memory = "500m", "512Mi" }},
		"preemptible, NVLink required": {change: func(s *JobSpec) {
			s.Preemptible, s.Gang.Topology = true, Topology{Level: LevelNVLink, Required: true}
		}},
		"rack preferred": {change: func(s *JobSpec) { s.Gang.Topology = Topology{Level: LevelRack} }},
		"burst with a deadline": {change: func(s *JobSpec) {
			s.Burst = Burst{Enabled: true, Pools: []string{"aws-spot"}, CapacityTypes: []CapacityType{CapacitySpot}, MaxPricePerGPUHour: 2.5}
			s.EstimatedRuntime.Duration, s.Deadline.Duration = time.Hour, 3*time.Hour
		}},
		"idle checkpoint-and-release": {change: func(s *JobSpec) {
			s.Checkpoint.Enabled = true
			s.Idle = Idle{After: Duration{time.Hour}, Action: IdleCheckpointAndRelease, Threshold: 0.1}
		}},
		"burst settings without enabled": {
			change:       func(s *JobSpec) { s.Burst.MaxPricePerGPUHour = 3 },
			wantProblems: []FieldError{{"burst.enabled", "burst settings are given but burst is not enabled; add enabled: true"}},
		},
		"bad burst": {
			change: func(s *JobSpec) {
				s.Burst = Burst{Enabled: true, Pools: []string{"AWS"}, CapacityTypes: []CapacityType{"reserved"}, MaxPricePerGPUHour: -1}
			},
			wantProblems: []FieldError{
				{"burst.pools[0]", `must be a pool name (a DNS label), got "AWS"`},
				{"burst.capacityTypes[0]", `must be "spot" or "on-demand", got "reserved"`},
				{"burst.maxPricePerGPUHour", "must not be negative, got -1"},
			},
		},
		"deadline shorter than the job": {
			change:       func(s *JobSpec) { s.EstimatedRuntime.Duration, s.Deadline.Duration = 2*time.Hour, time.Hour },
			wantProblems: []FieldError{{"deadline", "1h is shorter than the job's own runtime (2h): it can never be met"}},
		},
		"estimate beyond maxRuntime": {
			change:       func(s *JobSpec) { s.EstimatedRuntime.Duration = 100 * time.Hour },
			wantProblems: []FieldError{{"estimatedRuntime", "must be between 0s and maxRuntime (24h), got 100h"}},
		},
		"idle checkpoint without checkpointing": {
			change:       func(s *JobSpec) { s.Idle = Idle{After: Duration{time.Hour}, Action: IdleCheckpointAndRelease} },
			wantProblems: []FieldError{{"idle.action", `"checkpoint-and-release" needs checkpoint.enabled: true`}},
		},
		"idle action without after": {
			change: func(s *JobSpec) { s.Idle.Action, s.Idle.Threshold = "pause", 1.5 },
			wantProblems: []FieldError{
				{"idle.after", "required when idle.action or idle.threshold is set, e.g. 60m"},
				{"idle.action", `must be "release" or "checkpoint-and-release", got "pause"`},
				{"idle.threshold", "must be at least 0 and below 1, got 1.5"},
			},
		},
		"bad checkpoint interval and keep": {
			change: func(s *JobSpec) { s.Checkpoint.Interval.Duration, s.Checkpoint.Keep = -time.Second, 500 },
			wantProblems: []FieldError{
				{"checkpoint.interval", "must not be negative, got -1s"},
				{"checkpoint.keep", "must be between 1 and 100 (0 means 3), got 500"},
			},
		},
		"unknown topology level": {
			change:       func(s *JobSpec) { s.Gang.Topology.Level = "socket" },
			wantProblems: []FieldError{{"gang.topology.level", `must be one of nvlink, node, rack, block, got "socket"`}},
		},
		"required topology without a level": {
			change:       func(s *JobSpec) { s.Gang.Topology.Required = true },
			wantProblems: []FieldError{{"gang.topology.required", "needs gang.topology.level"}},
		},

		"name missing": {
			change:       func(s *JobSpec) { s.Name = "" },
			wantProblems: []FieldError{{"name", "required"}},
		},
		"name with capitals and underscore": {
			change:       func(s *JobSpec) { s.Name = "Train_1" },
			wantProblems: []FieldError{{"name", `must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit), got "Train_1"`}},
		},
		"name ends in a dash": {
			change:       func(s *JobSpec) { s.Name = "train-" },
			wantProblems: []FieldError{{"name", `must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit), got "train-"`}},
		},
		"name too long": {
			change:       func(s *JobSpec) { s.Name = strings.Repeat("a", 64) },
			wantProblems: []FieldError{{"name", "must be at most 63 characters, got 64"}},
		},
		"team missing": {
			change:       func(s *JobSpec) { s.Team = "" },
			wantProblems: []FieldError{{"team", "required"}},
		},
		"team with a dot": {
			change:       func(s *JobSpec) { s.Team = "ml.research" },
			wantProblems: []FieldError{{"team", `must be a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit), got "ml.research"`}},
		},
		"unknown priority class": {
			change:       func(s *JobSpec) { s.PriorityClass = "urgent" },
			wantProblems: []FieldError{{"priorityClass", `must be one of low, normal, high, got "urgent"`}},
		},
		"priority class not defaulted": {
			change:       func(s *JobSpec) { s.PriorityClass = "" },
			wantProblems: []FieldError{{"priorityClass", `must be one of low, normal, high, got ""`}},
		},
		"empty command": {
			change:       func(s *JobSpec) { s.Command = nil },
			wantProblems: []FieldError{{"command", "required: the program and its arguments, e.g. [torchrun, train.py]"}},
		},
		"empty program": {
			change:       func(s *JobSpec) { s.Command = []string{"", "train.py"} },
			wantProblems: []FieldError{{"command[0]", "must not be empty: it is the program to run"}},
		},
		"bad env names": {
			change: func(s *JobSpec) { s.Env = map[string]string{"1X": "", "A-B": "", "": "", "OK": ""} },
			wantProblems: []FieldError{
				{`env[""]`, "not a valid environment variable name: letters, digits and '_', not starting with a digit"},
				{"env.1X", "not a valid environment variable name: letters, digits and '_', not starting with a digit"},
				{"env.A-B", "not a valid environment variable name: letters, digits and '_', not starting with a digit"},
			},
		},
		"reserved env names": {
			change: func(s *JobSpec) { s.Env = map[string]string{"GANGWAY_RANK": "0", "CUDA_VISIBLE_DEVICES": "0"} },
			wantProblems: []FieldError{
				{"env.CUDA_VISIBLE_DEVICES", "reserved: the agent sets GANGWAY_* and CUDA_VISIBLE_DEVICES for every task, and the CUDA_MPS_* limits for GPU shares"},
				{"env.GANGWAY_RANK", "reserved: the agent sets GANGWAY_* and CUDA_VISIBLE_DEVICES for every task, and the CUDA_MPS_* limits for GPU shares"},
			},
		},
		"zero replicas": {
			change:       func(s *JobSpec) { s.Gang.Replicas = 0 },
			wantProblems: []FieldError{{"gang.replicas", "must be between 1 and 256, got 0"}},
		},
		"too many replicas": {
			change:       func(s *JobSpec) { s.Gang.Replicas = 257 },
			wantProblems: []FieldError{{"gang.replicas", "must be between 1 and 256, got 257"}},
		},
		"zero GPUs": {
			change:       func(s *JobSpec) { s.Gang.GPUsPerReplica = 0 },
			wantProblems: []FieldError{{"gang.gpusPerReplica", "must be between 1 and 8, got 0"}},
		},
		"negative GPUs": {
			change:       func(s *JobSpec) { s.Gang.GPUsPerReplica = -1 },
			wantProblems: []FieldError{{"gang.gpusPerReplica", "must be between 1 and 8, got -1"}},
		},
		"12 GPUs": {
			change:       func(s *JobSpec) { s.Gang.GPUsPerReplica = 12 },
			wantProblems: []FieldError{{"gang.gpusPerReplica", "must be between 1 and 8, got 12"}},
		},
		"empty and duplicate GPU models": {
			change: func(s *JobSpec) { s.Gang.GPUModels = []string{"H100", " ", "A100", "H100"} },
			wantProblems: []FieldError{
				{"gang.gpuModels[1]", "must not be empty"},
				{"gang.gpuModels[3]", `duplicate of gang.gpuModels[0] ("H100")`},
			},
		},
		"bad cpu": {
			change:       func(s *JobSpec) { s.Gang.CPU = "lots" },
			wantProblems: []FieldError{{"gang.cpu", `must be a CPU quantity such as "16", "2.5" or "500m", got "lots"`}},
		},
		"cpu with a memory suffix": {
			change:       func(s *JobSpec) { s.Gang.CPU = "2Gi" },
			wantProblems: []FieldError{{"gang.cpu", `must be a CPU quantity such as "16", "2.5" or "500m", got "2Gi"`}},
		},
		"zero cpu": {
			change:       func(s *JobSpec) { s.Gang.CPU = "0" },
			wantProblems: []FieldError{{"gang.cpu", `must be positive, got "0"`}},
		},
		"bad memory": {
			change:       func(s *JobSpec) { s.Gang.Memory = "4GB" },
			wantProblems: []FieldError{{"gang.memory", `must be a memory quantity such as "64Gi", "512Mi" or "1G", got "4GB"`}},
		},
		"negative memory": {
			change:       func(s *JobSpec) { s.Gang.Memory = "-1Gi" },
			wantProblems: []FieldError{{"gang.memory", `must be a memory quantity such as "64Gi", "512Mi" or "1G", got "-1Gi"`}},
		},
		"zero memory": {
			change:       func(s *JobSpec) { s.Gang.Memory = "0Gi" },
			wantProblems: []FieldError{{"gang.memory", `must be positive, got "0Gi"`}},
		},
		"zero runtime": {
			change:       func(s *JobSpec) { s.MaxRuntime.Duration = 0 },
			wantProblems: []FieldError{{"maxRuntime", "must be positive, got 0s"}},
		},
		"negative runtime": {
			change:       func(s *JobSpec) { s.MaxRuntime.Duration = -time.Minute },
			wantProblems: []FieldError{{"maxRuntime", "must be positive, got -1m"}},
		},
		"runtime over 30 days": {
			change:       func(s *JobSpec) { s.MaxRuntime.Duration = 30*24*time.Hour + time.Second },
			wantProblems: []FieldError{{"maxRuntime", "must be at most 720h (30 days), got 720h0m1s"}},
		},
		"negative retries": {
			change:       func(s *JobSpec) { s.Retries = -1 },
			wantProblems: []FieldError{{"retries", "must be between 0 and 10, got -1"}},
		},
		"too many retries": {
			change:       func(s *JobSpec) { s.Retries = 11 },
			wantProblems: []FieldError{{"retries", "must be between 0 and 10, got 11"}},
		},
		"uncatchable signal": {
			change:       func(s *JobSpec) { s.Checkpoint.Signal = "SIGKILL" },
			wantProblems: []FieldError{{"checkpoint.signal", `must be one of SIGTERM, SIGINT, SIGUSR1, SIGUSR2, got "SIGKILL"`}},
		},
		"signal without SIG": {
			change:       func(s *JobSpec) { s.Checkpoint.Signal = "TERM" },
			wantProblems: []FieldError{{"checkpoint.signal", `must be one of SIGTERM, SIGINT, SIGUSR1, SIGUSR2, got "TERM"`}},
		},
		"negative grace period": {
			change:       func(s *JobSpec) { s.Checkpoint.GracePeriod.Duration = -time.Second },
			wantProblems: []FieldError{{"checkpoint.gracePeriod", "must be between 0s and 1h, got -1s"}},
		},
		"grace period over an hour": {
			change:       func(s *JobSpec) { s.Checkpoint.GracePeriod.Duration = 61 * time.Minute },
			wantProblems: []FieldError{{"checkpoint.gracePeriod", "must be between 0s and 1h, got 1h1m"}},
		},
		"bad and duplicate pools": {
			change: func(s *JobSpec) { s.Pools = []string{"onprem-a", "Onprem_B", "onprem-a", ""} },
			wantProblems: []FieldError{
				{"pools[1]", `must be a pool name (a DNS label), got "Onprem_B"`},
				{"pools[2]", `duplicate of pools[0] ("onprem-a")`},
				{"pools[3]", `must be a pool name (a DNS label), got ""`},
			},
		},
		"not defaulted at all": {
			change: func(s *JobSpec) {
				*s = JobSpec{Name: "a", Team: "t", Command: []string{"x"}, Gang: Gang{Replicas: 1, GPUsPerReplica: 1}}
			},
			wantProblems: []FieldError{
				{"priorityClass", `must be one of low, normal, high, got ""`},
				{"gang.cpu", `must be a CPU quantity such as "16", "2.5" or "500m", got ""`},
				{"gang.memory", `must be a memory quantity such as "64Gi", "512Mi" or "1G", got ""`},
				{"maxRuntime", "must be positive, got 0s"},
				{"checkpoint.signal", `must be one of SIGTERM, SIGINT, SIGUSR1, SIGUSR2, got ""`},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := validSpec()
			tt.change(&s)
			if diff := cmp.Diff(tt.wantProblems, problemsOf(t, s.Validate())); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	tests := map[string]struct {
		in, want JobSpec
	}{
		"empty gets every default": {
			in: JobSpec{},
			want: JobSpec{
				PriorityClass: "normal",
				Gang:          Gang{CPU: "1", Memory: "4Gi"},
				MaxRuntime:    Duration{24 * time.Hour},
				Checkpoint:    Checkpoint{Signal: "SIGTERM", GracePeriod: Duration{30 * time.Second}, Keep: DefaultKeep},
			},
		},
		"set values are kept, retries stays as set": {
			in: JobSpec{
				PriorityClass: "low", Retries: 3,
				Gang:       Gang{CPU: "8", Memory: "32Gi"},
				MaxRuntime: Duration{time.Hour},
				Checkpoint: Checkpoint{Signal: "SIGUSR1", GracePeriod: Duration{time.Minute}},
			},
			want: JobSpec{
				PriorityClass: "low", Retries: 3,
				Gang:       Gang{CPU: "8", Memory: "32Gi"},
				MaxRuntime: Duration{time.Hour},
				Checkpoint: Checkpoint{Signal: "SIGUSR1", GracePeriod: Duration{time.Minute}, Keep: DefaultKeep},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := tt.in
			got.Default()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
			again := got
			again.Default()
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("Default is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestSpecErrorString(t *testing.T) {
	tests := map[string]struct {
		problems []FieldError
		want     string
	}{
		"one problem": {
			problems: []FieldError{{"gang.gpusPerReplica", "must be between 1 and 8, got 12"}},
			want:     "gang.gpusPerReplica: must be between 1 and 8, got 12",
		},
		"document problem": {
			problems: []FieldError{{"", "empty job spec"}},
			want:     "empty job spec",
		},
		"several problems": {
			problems: []FieldError{{"name", "required"}, {"gang.replicas", "must be between 1 and 256, got 0"}},
			want:     "2 problems in job spec:\n  - name: required\n  - gang.replicas: must be between 1 and 256, got 0",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := error(&SpecError{Problems: tt.problems})
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Error() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCPU(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int64
		wantErr bool
	}{
		"cores":               {in: "16", want: 16000},
		"millicores":          {in: "500m", want: 500},
		"fraction":            {in: "2.5", want: 2500},
		"leading dot":         {in: ".5", want: 500},
		"trailing dot":        {in: "2.", want: 2000},
		"sub-millicore up":    {in: "0.0001", want: 1},
		"fractional millis":   {in: "1.5m", want: 2},
		"zero":                {in: "0", want: 0},
		"empty":               {in: "", wantErr: true},
		"negative":            {in: "-1", wantErr: true},
		"unknown suffix":      {in: "2k", wantErr: true},
		"memory suffix":       {in: "1Gi", wantErr: true},
		"space":               {in: "1 ", wantErr: true},
		"exponent":            {in: "1e3", wantErr: true},
		"words":               {in: "two", wantErr: true},
		"overflows int64":     {in: "99999999999999999999", wantErr: true},
		"absurdly long input": {in: strings.Repeat("9", 1000), wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCPU(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseCPU(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseCPU(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseMemory(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    int64
		wantErr bool
	}{
		"MiB":            {in: "512Mi", want: 512},
		"GiB":            {in: "64Gi", want: 64 * 1024},
		"TiB":            {in: "1Ti", want: 1024 * 1024},
		"KiB rounds up":  {in: "1Ki", want: 1},
		"fractional GiB": {in: "1.5Gi", want: 1536},
		"decimal G":      {in: "1G", want: 954}, // 10^9 / 2^20 = 953.67
		"decimal M":      {in: "1M", want: 1},
		"decimal k":      {in: "2048k", want: 2},
		"plain bytes":    {in: "1073741824", want: 1024},
		"one byte":       {in: "1", want: 1},
		"EiB":            {in: "1Ei", want: 1 << 40},
		"zero":           {in: "0", want: 0},
		"GB is not k8s":  {in: "4GB", wantErr: true},
		"capital K":      {in: "1K", wantErr: true},
		"milli":          {in: "1m", wantErr: true},
		"negative":       {in: "-1Gi", wantErr: true},
		"empty":          {in: "", wantErr: true},
		"suffix alone":   {in: "Gi", wantErr: true},
		"overflow":       {in: "99999999999Ei", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMemory(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseMemory(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseMemory(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestResources(t *testing.T) {
	s := validSpec()
	s.Gang.CPU, s.Gang.Memory = "16", "64Gi"
	if got, want := []int64{s.CPUMilli(), s.MemMiB()}, []int64{16000, 65536}; !cmp.Equal(got, want) {
		t.Errorf("CPUMilli, MemMiB = %v, want %v", got, want)
	}
	s.Gang.CPU, s.Gang.Memory = "x", "y"
	if got := []int64{s.CPUMilli(), s.MemMiB()}; !cmp.Equal(got, []int64{0, 0}) {
		t.Errorf("CPUMilli, MemMiB of invalid quantities = %v, want [0 0]", got)
	}
}

// fleet builds FleetNodes: fleet("H100", "onprem-a", 8, 8) is two 8-GPU
// H100 nodes in pool onprem-a.
func fleet(model, pool string, gpus ...int) []FleetNode {
	out := make([]FleetNode, len(gpus))
	for i, g := range gpus {
		out[i] = FleetNode{Model: model, Pool: pool, GPUs: g}
	}
	return out
}

// cloudPool is one cloud pool's instance shape.
func cloudPool(pool, model string, gpus int, ct CapacityType) FleetNode {
	return FleetOfOffers([]Offer{{Pool: pool, GPUModel: model, GPUsPerInstance: gpus, CapacityType: ct}})[0]
}

func TestValidateFleet(t *testing.T) {
	gang := func(replicas, gpus int, models ...string) func(*JobSpec) {
		return func(s *JobSpec) {
			s.Gang.Replicas, s.Gang.GPUsPerReplica, s.Gang.GPUModels = replicas, gpus, models
			s.Pools = nil
		}
	}
	tests := map[string]struct {
		change       func(*JobSpec)
		nodes        []FleetNode
		wantProblems []FieldError
	}{
		"unknown fleet accepts anything": {
			change: gang(256, 8, "B200"),
		},
		"fits exactly": {
			change: gang(2, 8, "H100"),
			nodes:  fleet("H100", "onprem-a", 8, 8),
		},
		"several replicas per node": {
			change: gang(4, 2, "H100"),
			nodes:  fleet("H100", "onprem-a", 8),
		},
		"any model": {
			change: gang(3, 4),
			nodes:  append(fleet("H100", "onprem-a", 8), fleet("A100", "onprem-b", 4)...),
		},
		"fits, even though nothing is free today": {
			change: gang(1, 8, "H100"),
			nodes:  fleet("H100", "onprem-a", 8),
		},
		"too small": {
			change: gang(2, 8, "H100"),
			nodes:  append(fleet("H100", "onprem-a", 8), fleet("A100", "onprem-a", 8, 8)...),
			wantProblems: []FieldError{{"gang",
				"2 × 8 GPUs (H100) can never fit: the fleet holds at most 1 such replica (largest matching node has 8 GPUs, 1 matching node)"}},
		},
		"too small because of remainders": {
			change: gang(3, 3),
			nodes:  fleet("L4", "onprem-a", 4, 4),
			wantProblems: []FieldError{{"gang",
				"3 × 3 GPUs (any model) can never fit: the fleet holds at most 2 such replicas (largest matching node has 4 GPUs, 2 matching nodes)"}},
		},
		"too small within the allowed pools": {
			change: func(s *JobSpec) { gang(2, 8, "H100")(s); s.Pools = []string{"onprem-a"} },
			nodes:  append(fleet("H100", "onprem-a", 8), fleet("H100", "onprem-b", 8)...),
			wantProblems: []FieldError{{"gang",
				"2 × 8 GPUs (H100 in pool onprem-a) can never fit: the fleet holds at most 1 such replica (largest matching node has 8 GPUs, 1 matching node)"}},
		},
		"replica larger than any node": {
			change: gang(1, 8, "A100", "H100"),
			nodes:  append(fleet("A100", "onprem-a", 4, 4), fleet("H100", "onprem-b", 2)...),
			wantProblems: []FieldError{{"gang.gpusPerReplica",
				"8 GPUs per replica can never fit: the largest matching node has 4 GPUs (3 matching nodes)"}},
		},
		"model missing": {
			change: gang(1, 1, "B200"),
			nodes:  append(fleet("H100", "onprem-a", 8), append(fleet("A100", "onprem-b", 8), fleet("", "cpu", 0)...)...),
			wantProblems: []FieldError{{"gang.gpuModels",
				"no node in the fleet has B200 (the fleet has A100, H100)"}},
		},
		"none of several models": {
			change: gang(1, 1, "B200", "MI300X"),
			nodes:  fleet("H100", "onprem-a", 8),
			wantProblems: []FieldError{{"gang.gpuModels",
				"no node in the fleet has any of B200, MI300X (the fleet has H100)"}},
		},
		"model only in other pools": {
			change: func(s *JobSpec) { gang(1, 8, "H100")(s); s.Pools = []string{"onprem-a"} },
			nodes:  append(fleet("H100", "onprem-b", 8), fleet("A100", "onprem-a", 8)...),
			wantProblems: []FieldError{{"pools",
				"no node with a matching GPU is in pool onprem-a (matching nodes are in pool onprem-b)"}},
		},
		"fleet without GPUs": {
			change:       gang(1, 1),
			nodes:        fleet("", "cpu", 0, 0),
			wantProblems: []FieldError{{"gang", "the fleet has no GPUs"}},
		},
		// The case: an A100 job allowed to burst, H100-only
		// on-prem, an A100 cloud pool configured and nothing running there.
		"only a cloud pool holds it, bursting allowed": {
			change: func(s *JobSpec) { gang(2, 8, "A100")(s); s.Burst.Enabled = true },
			nodes:  append(fleet("H100", "onprem", 8, 8), cloudPool("fake-spot", "A100", 8, CapacitySpot)),
		},
		"a cloud pool holds it but bursting is off": {
			change: gang(1, 8, "A100"),
			nodes:  append(fleet("H100", "onprem", 8, 8), cloudPool("fake-spot", "A100", 8, CapacitySpot)),
			wantProblems: []FieldError{{"gang.gpuModels", "no node in the fleet has A100 (the fleet has H100; cloud pool fake-spot (A100)); " +
				"cloud pool fake-spot (spot, 8 × A100) could hold it with burst.enabled: true"}},
		},
		"a cloud pool holds it but not at an allowed capacity type": {
			change: func(s *JobSpec) {
				gang(1, 8, "A100")(s)
				s.Burst = Burst{Enabled: true, CapacityTypes: []CapacityType{CapacityOnDemand}}
			},
			nodes: append(fleet("H100", "onprem", 8), cloudPool("fake-spot", "A100", 8, CapacitySpot)),
			wantProblems: []FieldError{{"gang.gpuModels", "no node in the fleet has A100 (the fleet has H100; cloud pool fake-spot (A100)); " +
				"cloud pool fake-spot (spot, 8 × A100) could hold it if burst.capacityTypes allowed spot"}},
		},
		"cloud instances too small for a replica": {
			change:       func(s *JobSpec) { gang(1, 8, "A100")(s); s.Burst.Enabled = true },
			nodes:        append(fleet("H100", "onprem", 8), cloudPool("fake-small", "A100", 4, CapacityOnDemand)),
			wantProblems: []FieldError{{"gang.gpuModels", "no node in the fleet has A100 (the fleet has H100; cloud pool fake-small (A100))"}},
		},
		"a gang larger than on-prem bursts whole": {
			change: func(s *JobSpec) { gang(4, 8, "H100")(s); s.Burst.Enabled = true },
			nodes:  append(fleet("H100", "onprem", 8), cloudPool("h100-od", "H100", 8, CapacityOnDemand)),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := validSpec()
			tt.change(&s)
			if diff := cmp.Diff(tt.wantProblems, problemsOf(t, s.ValidateFleet(tt.nodes))); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFleetOf(t *testing.T) {
	nodes := []Node{
		{ID: "n1", Pool: "onprem-a", GPUs: []GPU{{Model: "H100"}, {Model: "H100", Healthy: false}}},
		{ID: "n2", Pool: "cpu"},
	}
	want := []FleetNode{{Model: "H100", Pool: "onprem-a", GPUs: 2}, {Model: "", Pool: "cpu", GPUs: 0}}
	if diff := cmp.Diff(want, FleetOf(nodes)); diff != "" {
		t.Errorf("FleetOf (-want +got):\n%s", diff)
	}
}

func TestQueueEntry(t *testing.T) {
	s := validSpec()
	s.Project, s.PriorityClass = "llama", PriorityHigh
	s.Gang.CPU, s.Gang.Memory = "96", "1500Gi"
	s.MaxRuntime.Duration = 72 * time.Hour
	s.EstimatedRuntime.Duration = 10 * time.Hour
	s.Deadline.Duration = 48 * time.Hour
	s.Checkpoint.Enabled, s.Checkpoint.Interval.Duration = true, 30*time.Minute
	s.Burst = Burst{Enabled: true, CapacityTypes: []CapacityType{CapacitySpot}}
	submitted := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	enqueued := submitted.Add(time.Hour)

	got := s.QueueEntry(3, submitted, enqueued)
	want := QueueEntry{
		JobID: "train-1", Team: "research", Project: "llama",
		PriorityClass: "high", Priority: 200, Attempt: 3,
		Replicas: 2, GPUsPerReplica: 8, GPUModels: []string{"H100"},
		CPUMilli: 96000, MemMiB: 1500 * 1024, Pools: []string{"onprem-a"},
		MaxRuntime: 72 * time.Hour, Runtime: 10 * time.Hour,
		Deadline:       submitted.Add(48 * time.Hour),
		Burst:          Burst{Enabled: true, CapacityTypes: []CapacityType{CapacitySpot}},
		Checkpointable: true, CheckpointInterval: 30 * time.Minute,
		SubmittedAt: submitted, EnqueuedAt: enqueued,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("QueueEntry (-want +got):\n%s", diff)
	}
	if got.GPUs() != 16 {
		t.Errorf("GPUs() = %d, want 16", got.GPUs())
	}
	got.GPUModels[0], got.Pools[0] = "changed", "changed"
	if s.Gang.GPUModels[0] != "H100" || s.Pools[0] != "onprem-a" {
		t.Error("QueueEntry shares slices with the spec")
	}
}

func TestDurationEncoding(t *testing.T) {
	tests := map[string]struct {
		d    time.Duration
		want string
	}{
		"zero":          {0, "0s"},
		"seconds":       {90 * time.Second, "1m30s"},
		"hours":         {24 * time.Hour, "24h"},
		"hours minutes": {150 * time.Minute, "2h30m"},
		"all units":     {time.Hour + time.Second, "1h0m1s"},
		"sub-second":    {1500 * time.Millisecond, "1.5s"},
		"negative":      {-time.Hour, "-1h"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := Duration{tt.d}
			if got := d.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(b), `"`+tt.want+`"`; got != want {
				t.Errorf("JSON = %s, want %s", got, want)
			}
			var back Duration
			if err := json.Unmarshal(b, &back); err != nil || back != d {
				t.Errorf("JSON round trip = %v, %v; want %v", back, err, d)
			}
			y, err := yaml.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var yback Duration
			if err := yaml.Unmarshal(y, &yback); err != nil || yback != d {
				t.Errorf("YAML round trip of %q = %v, %v; want %v", y, yback, err, d)
			}
		})
	}
	for _, bad := range []string{`90`, `"90"`, `"1d"`, `{}`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("json.Unmarshal(%s) into Duration = nil error, want one", bad)
		}
	}
}

// TestSpecRoundTrip: a spec travels as a Temporal JSON payload and comes
// back identical; written back out as YAML it parses to the same spec.
func TestSpecRoundTrip(t *testing.T) {
	data, err := os.ReadFile("examples/gang-h100.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseJobSpec(data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON JobSpec
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if diff := cmp.Diff(spec, fromJSON); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s\nJSON: %s", diff, b)
	}
	if !strings.Contains(string(b), `"maxRuntime":"10m"`) || !strings.Contains(string(b), `"gracePeriod":"30s"`) {
		t.Errorf("durations are not strings in JSON: %s", b)
	}

	y, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := ParseJobSpec(y)
	if err != nil {
		t.Fatalf("ParseJobSpec(yaml.Marshal(spec)): %v\n%s", err, y)
	}
	if diff := cmp.Diff(spec, fromYAML); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
}

// TestJobSpecFiles parses every file in testdata/jobspec and compares the
// outcome — the spec as JSON, or the error text — with its .golden file.
// Run `go test -run TestJobSpecFiles -update .` to rewrite them.
func TestJobSpecFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/jobspec/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := ParseJobSpec(data)
			wantValid := strings.HasPrefix(filepath.Base(file), "valid-")
			if (err == nil) != wantValid {
				t.Errorf("ParseJobSpec error = %v, want valid=%v", err, wantValid)
			}
			var got string
			if err != nil {
				problemsOf(t, err)
				got = "error:\n" + err.Error() + "\n"
			} else {
				b, err := json.MarshalIndent(spec, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got = string(b) + "\n"
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestExamples: every file in examples/ is a valid spec, and
// examples/README.md names each with the command that runs it, so the
// README cannot drift from the files. (internal/e2e's
// TestExamplesOnDevStack runs them.)
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) < 6 {
		t.Fatalf("examples/*.yaml: %d files, %v", len(files), err)
	}
	readme, err := os.ReadFile("examples/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseJobSpec(data); err != nil {
				t.Errorf("ParseJobSpec: %v", err)
			}
			if want := "gangway submit " + file; !strings.Contains(string(readme), want) {
				t.Errorf("examples/README.md lacks %q", want)
			}
		})
	}
}

func TestParseJobSpecNeverPanics(t *testing.T) {
	seed, err := os.ReadFile("examples/gang-h100.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		var in []byte
		if rapid.Bool().Draw(t, "mutate example") {
			// Random edits of a real spec reach much deeper than random bytes.
			in = append([]byte(nil), seed...)
			for range rapid.IntRange(1, 8).Draw(t, "edits") {
				at := rapid.IntRange(0, len(in)).Draw(t, "at")
				cut := rapid.IntRange(0, min(8, len(in)-at)).Draw(t, "cut")
				ins := rapid.SliceOfN(rapid.SampledFrom([]byte(" \n\t:-[]{},'\"&*!#|>~0aZ\x00\xff")), 0, 4).Draw(t, "insert")
				in = append(in[:at], append(ins, in[at+cut:]...)...)
			}
		} else {
			in = rapid.SliceOfN(rapid.Byte(), 0, 256).Draw(t, "bytes")
		}
		spec, err := ParseJobSpec(in)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) || len(se.Problems) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty *SpecError", err, err)
			}
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("accepted spec fails Validate: %v", err)
		}
	})
}

// choices are the values a generated spec field may take: mostly valid
// ones, so that specs are often accepted, and now and then an invalid one.
type choices struct{ valid, invalid []any }

// TestParseJobSpecAccepted generates specs field by field, drawing valid
// and invalid values alike: whatever ParseJobSpec accepts must validate,
// survive a JSON round trip, and have positive resources.
func TestParseJobSpecAccepted(t *testing.T) {
	top := map[string]choices{
		"name":          {[]any{"train-1", "a", "x-9"}, []any{"Bad_Name", "", 7, strings.Repeat("x", 64)}},
		"team":          {[]any{"research", "nlp"}, []any{"", "Team", []string{"x"}}},
		"project":       {[]any{"llama", ""}, []any{3, map[string]any{}}},
		"priorityClass": {[]any{"low", "normal", "high", ""}, []any{"urgent", 1}},
		"command":       {[]any{[]string{"python", "x.py"}, []string{"run"}}, []any{[]string{""}, []any{}, "python", []any{"a", 1}}},
		"args":          {[]any{[]string{"--lr", "0.1"}, []string{}}, []any{[]any{nil}, "x"}},
		"env":           {[]any{map[string]any{"A": "1"}, map[string]any{}}, []any{map[string]any{"1A": "x"}, map[string]any{"GANGWAY_X": "x"}, map[string]any{"B": 2}}},
		"workingDir":    {[]any{"/w", ""}, []any{true}},
		"maxRuntime":    {[]any{"1h", "90s", "720h", "0s"}, []any{"-1h", "721h", "1d", 3600}},
		"retries":       {[]any{0, 10, 3}, []any{11, -1, "2"}},
		"pools":         {[]any{[]string{"onprem-a"}, []string{}}, []any{[]string{"a", "a"}, []string{"Bad"}}},
		"gpusPerReplic": {nil, []any{1}},
	}
	gang := map[string]choices{
		"replicas":       {[]any{1, 2, 256}, []any{0, 257, -3, "two", 1.5}},
		"gpusPerReplica": {[]any{1, 8, 4}, []any{0, 9, 12, -1}},
		"gpuModels":      {[]any{[]string{"H100"}, []string{"A100", "L4"}, []string{}}, []any{[]string{"H100", "H100"}, []string{""}}},
		"cpu":            {[]any{"1", "500m", "2.5", 16, 0.5}, []any{"0", "lots", "1Gi"}},
		"memory":         {[]any{"4Gi", "512Mi", "1G", 1048576}, []any{"0", "4GB", "-1Gi"}},
		"gpuPerReplica":  {nil, []any{4}},
	}
	checkpoint := map[string]choices{
		"enabled":     {[]any{true, false}, []any{"yes"}},
		"signal":      {[]any{"SIGTERM", "SIGUSR1", ""}, []any{"SIGKILL"}},
		"gracePeriod": {[]any{"30s", "0s", "1h"}, []any{"2h", "-1s"}},
	}
	draw := func(t *rapid.T, prefix string, fields map[string]choices) map[string]any {
		out := map[string]any{}
		for _, k := range sortedKeysOf(fields) {
			c := fields[k]
			switch {
			case len(c.invalid) > 0 && rapid.IntRange(0, 99).Draw(t, prefix+k+" invalid?") >= 95:
				out[k] = rapid.SampledFrom(c.invalid).Draw(t, prefix+k)
			case len(c.valid) > 0:
				if rapid.IntRange(0, 99).Draw(t, prefix+k+" absent?") >= 95 {
					continue
				}
				out[k] = rapid.SampledFrom(c.valid).Draw(t, prefix+k)
			}
		}
		return out
	}
	accepted := 0
	rapid.Check(t, func(t *rapid.T) {
		doc := draw(t, "", top)
		doc["gang"] = draw(t, "gang.", gang)
		if rapid.Bool().Draw(t, "checkpoint") {
			doc["checkpoint"] = draw(t, "checkpoint.", checkpoint)
		}
		in, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := ParseJobSpec(in)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) || len(se.Problems) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty *SpecError", err, err)
			}
			return
		}
		accepted++
		if err := spec.Validate(); err != nil {
			t.Fatalf("accepted spec fails Validate: %v\n%s", err, in)
		}
		if spec.CPUMilli() <= 0 || spec.MemMiB() <= 0 {
			t.Fatalf("accepted spec has cpu %dm, memory %d MiB\n%s", spec.CPUMilli(), spec.MemMiB(), in)
		}
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var back JobSpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(spec, back); diff != "" {
			t.Fatalf("JSON round trip (-want +got):\n%s", diff)
		}
	})
	t.Logf("%d generated specs accepted", accepted)
	if accepted == 0 {
		t.Error("no generated spec was accepted; the generator tests nothing")
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
