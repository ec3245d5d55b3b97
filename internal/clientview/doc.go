// Package clientview adapts the Redis view (internal/capacity) to
// client.View, so the public client needs no internal/ package while
// Gangway's own programs (the gangway command, tests) give it the fleet,
// waiting reasons and job output.
package clientview
