// Command gangway is Gangway's one binary: `dev` runs the whole system on one
// machine, `server` and `agent` are the production split, and `submit`,
// `status`, `list`, `cancel`, `logs` and `nodes` are for people. Config is
// read here and only here: defaults, then a config file, then GANGWAY_*
// environment variables, then flags.
package main
