// Package client is Gangway's Go client: submit a job, read its status and
// why it waits, list jobs, cancel, read logs. `gangway submit` and friends
// are thin wrappers over it; programs can use it directly.
//
// Jobs are Temporal workflows (workflow ID = job ID), so the client speaks
// to Temporal for the job's truth and to the Redis view for the fleet and
// the dispatch loop's waiting reasons.
package client
