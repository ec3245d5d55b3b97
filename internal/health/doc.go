// Package health says whether a Gangway process can do its work: the
// checks behind /readyz on the server's and the agent's metrics listener
// (Temporal reachable, Redis reachable, the Redis view's generation
// rebuilt), each failure shortened to the network error at its root.
// /healthz only says the process is up.
package health
