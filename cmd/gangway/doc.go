// Command gangway is Gangway's one binary: `dev` runs the whole system on one
// machine, `server` and `agent` are the production split, `replay` runs the
// simulators, and `submit`, `status`, `why`, `list`, `cancel`, `logs`, `cost`
// and `nodes` are for people. Each command loads internal/config's Config
// (defaults, then a config file, then GANGWAY_* environment variables, then
// flags), validates the sections it uses, and composes the packages that do
// the work; this package holds only flags, wiring and printing.
package main
