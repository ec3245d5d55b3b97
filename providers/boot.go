package providers

import (
	"fmt"
	"strings"
)

// Join is what a launched instance needs to join the fleet as a node: where
// the control plane is and the credentials to reach it.
type Join struct {
	// Binary is the gangway binary on the image; "" means gangway on PATH.
	Binary          string
	TemporalAddress string
	Namespace       string
	// RedisURL may carry a password. Like Token it goes into the agent's
	// environment, never onto its command line where ps would show it.
	RedisURL string
	// Token authenticates the agent to the control plane where it asks for
	// one (GANGWAY_JOIN_TOKEN).
	Token string
	// FakeGPUs makes the agent report the offer's GPUs (--fake-gpus 8xH100)
	// instead of reading them from NVML: for images without a driver and
	// for the fake cloud.
	FakeGPUs bool
	DataDir  string
	// Args are extra agent flags, passed as they are.
	Args []string
}

// Boot is the launch-specific part of a boot script.
type Boot struct {
	JobID    string
	Attempt  int
	Pool     string
	GPUModel string
	GPUs     int
	// NodeIDCommand and AddrCommand are shell commands, run on the instance,
	// that print its node ID and private address (from the cloud's metadata
	// service): one user data serves every instance of a launch.
	NodeIDCommand string
	AddrCommand   string
}

// BootScript renders the user data (GCP: startup-script) that starts the
// agent on a launched instance:
//
//	gangway agent --node-id "$NODE_ID" --addr "$NODE_ADDR" --pool P [--fake-gpus NxMODEL]
//
// with the Temporal address, namespace, Redis URL and join token in the
// environment. Every value is shell-quoted.
func BootScript(j Join, b Boot) string {
	var s strings.Builder
	s.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&s, "# Gangway node for job %s, attempt %d, pool %s.\n", oneLine(b.JobID), b.Attempt, oneLine(b.Pool))
	s.WriteString("set -eu\n")
	env := []struct{ name, value string }{
		{"GANGWAY_TEMPORAL_ADDRESS", j.TemporalAddress},
		{"GANGWAY_NAMESPACE", j.Namespace},
		{"GANGWAY_REDIS_URL", j.RedisURL},
		{"GANGWAY_JOIN_TOKEN", j.Token},
	}
	for _, e := range env {
		if e.value != "" {
			fmt.Fprintf(&s, "export %s=%s\n", e.name, shellQuote(e.value))
		}
	}
	nodeID, addr := b.NodeIDCommand, b.AddrCommand
	if nodeID == "" {
		nodeID = "hostname -s"
	}
	if addr == "" {
		addr = "hostname -I | cut -d' ' -f1"
	}
	fmt.Fprintf(&s, "NODE_ID=\"$(%s)\"\n", nodeID)
	fmt.Fprintf(&s, "NODE_ADDR=\"$(%s)\"\n", addr)
	bin := j.Binary
	if bin == "" {
		bin = "gangway"
	}
	args := []string{"exec", shellQuote(bin), "agent", `--node-id "$NODE_ID"`, `--addr "$NODE_ADDR"`, "--pool " + shellQuote(b.Pool)}
	if j.FakeGPUs && b.GPUs > 0 {
		args = append(args, "--fake-gpus "+shellQuote(fmt.Sprintf("%dx%s", b.GPUs, b.GPUModel)))
	}
	if j.DataDir != "" {
		args = append(args, "--data-dir "+shellQuote(j.DataDir))
	}
	for _, a := range j.Args {
		args = append(args, shellQuote(a))
	}
	s.WriteString(strings.Join(args, " "))
	s.WriteString("\n")
	return s.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
