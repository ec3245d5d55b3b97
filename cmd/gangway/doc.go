// Command gangway is Gangway's one binary: `dev` runs the whole system on one
// machine, `server` and `agent` are the production split, `replay` runs the
// simulators, and `submit`, `status`, `why`, `list`, `cancel`, `logs`, `cost`
// and `nodes` are for people: they speak the user API (client.NewAPI) with
// the settings of internal/config's CLIConfig. `server`, `agent` and `dev`
// load internal/config's Config (defaults, then a config file, then
// GANGWAY_* environment variables, then flags), validate the sections they
// use, and compose the packages that do the work; this package holds only
// flags, wiring and printing.
package main
