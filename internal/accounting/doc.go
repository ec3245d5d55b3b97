// Package accounting owns the usage and cost ledger: every run segment of
// every job (job, attempt, team, project, pool, capacity type, GPUs, start,
// end, price per GPU-hour) kept in Redis, and the pure aggregation behind
// `gangway cost` — GPU-hours and dollars per team, project or pool, split
// into on-prem, spot and on-demand, and what spot saved against on-demand.
//
// The ledger stores the segments themselves, never pre-rounded dollars:
// every total is computed with gangway.UsageSegment.Dollars, the method
// JobWorkflow uses for the job's own result, so the two agree exactly.
//
// # Idempotency
//
// JobWorkflow records each segment through an activity, which Temporal runs
// at least once, and a replayed workflow may record it again. A segment is
// identified by job, attempt, pool and start; recording one that is already
// there changes nothing and Record reports it as not new, so counters fed
// from Record never count a segment twice. The first recording wins.
//
// # Key layout
//
// Keys start with Options.Prefix (default "{gangway}", the hash tag the
// capacity view uses), so the ledger lives in the same Redis Cluster slot and
// one record is one atomic script. P is the prefix below; a segment ID is
// "<job ID>|<attempt>|<pool>|<start, RFC 3339 UTC>".
//
//	key                type   member / field → value
//	P:usage:segments   hash   segment ID → gangway.UsageSegment JSON
//	P:usage:by-end     zset   segment ID, scored by end time (unix ms): the time index
//	P:usage:by-job     zset   segment ID, all scored 0: a lexical index by job
//
// # Retention
//
// Each write first drops segments that ended more than Options.MaxAge ago
// (default 400 days, so a year-on-year comparison still has its year), a
// bounded batch at a time. A segment that is already older than that is not
// recorded at all.
package accounting
