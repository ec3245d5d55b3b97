// Package health says whether a Gangway process can do its work: the
// checks behind /readyz on the server's and the agent's metrics listener
// (Temporal reachable, Redis reachable, the Redis view's generation rebuilt),
// and the one-line message the command line prints for a service it cannot
// reach. /healthz only says the process is up.
package health
