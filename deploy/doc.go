// Package deploy holds what runs Gangway in production: systemd units, an
// example config, Prometheus recording and alert rules (prometheus/) and
// Grafana dashboards (grafana/). It has no Go code; its tests check the
// rules with promtool and that every metric the rules and dashboards read
// is served by a running Gangway.
package deploy
