// Package workflows holds JobWorkflow, the durable source of truth of one
// job, and the contracts of the activities it calls: names, task queues and
// input/output types. Implementations live elsewhere — server-side ones in
// workflows/activities, RunTask in the node agent — so this package stays
// deterministic and free of I/O.
//
// See README.md in this directory for the state diagram.
package workflows
