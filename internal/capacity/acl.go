package capacity

import "strings"

// Redis ACL rules for the two kinds of Gangway clients, under one key
// prefix, as redis.conf's user directive (or ACL SETUSER) takes them after
// the user's name and password. docs/security.md prints them for the
// default prefix.
//
// A server may do anything to Gangway's keys and channels, nothing else
// and nothing dangerous (no KEYS, FLUSHALL, CONFIG, DEBUG...).
//
// An agent may read the inventory (P:nodes) and GPU health records
// (P:gpu-health), write heartbeats (P:heartbeat) and the tasks it runs
// (P:node-tasks), record its tasks' checkpoints (P:checkpoints) and the
// tasks that exited 0 (P:task-done:*, SET only), and append to log
// streams (P:log:*), with the commands that takes and no others (and, on
// a Redis Cluster, CLUSTER SLOTS and COMMAND, which the cluster client
// asks where the slots are, and where each command's keys, with): its
// node's inventory changes go through the server's NodeUpdate activity,
// which checks who it is. Redis checks a script's commands and keys
// against the user who runs it, so EVAL gives an agent nothing more.

// ServerACL is the rules of a server's Redis user.
func ServerACL(prefix string) string {
	return "resetkeys resetchannels ~" + prefix + "* &" + prefix + "* +@all -@dangerous"
}

// AgentACL is the rules of an agent's Redis user.
func AgentACL(prefix string) string {
	k := newKeys(prefix)
	return strings.Join([]string{
		"resetkeys", "resetchannels",
		"%R~" + k.nodes, "%R~" + prefix + ":gpu-health", "~" + k.heartbeat, "~" + k.nodeTasks, "~" + k.checkpoints,
		"~" + k.logPrefix + "*",
		"-@all", "+ping", "+hello", "+auth",
		"+hexists", "+hget", "+hgetall", "+hset", "+hdel", "+xadd", "+eval", "+evalsha", "+time", "+cluster|slots", "+command",
		"(~" + k.taskDone + "* +set)",
	}, " ")
}
