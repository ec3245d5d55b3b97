// Package metrics owns every Prometheus collector Gangway exports. Collectors
// are registered on a registry passed in from cmd (never the global one) and
// updated through typed helpers, so names and labels live in one place.
package metrics
