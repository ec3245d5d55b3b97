// Package client is Gangway's Go client: submit a job, read its status and
// why it waits, list jobs, cancel, read and follow logs, cordon and drain
// nodes. `gangway submit` and friends are thin wrappers over it, and
// programs outside this module can use it: it and its dependencies import
// no internal/ package.
//
// Jobs are Temporal workflows (workflow ID = job ID), so the client reaches
// them through Jobs (workflows/jobs, the one door to job workflows) for the
// job's truth, and through View for the fleet, the dispatch loop's typed
// waiting reasons and job output. Dial connects to Temporal from Options
// alone; a client without a View still submits (validating the spec but
// skipping the check against the fleet) and follows jobs to their end.
// Inside Gangway, the Redis view (internal/capacity.View) is the View; the
// types it returns (gangway.Waiting, LogLine, NodeStatus) are the root
// package's, so nothing is copied between the view and the client.
package client
