// Package e2e holds Gangway's end-to-end tests: a real redis-server and a
// real Temporal dev server started by the test, `gangway server` processes
// that the test kills and restarts, and in-process agents running real
// child processes. It has no non-test code.
package e2e
