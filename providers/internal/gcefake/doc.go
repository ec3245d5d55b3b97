// Package gcefake is a fake Compute Engine REST endpoint for tests:
// instances insert, get, delete and list (label filters, pagination) and
// zone operations that are RUNNING when returned and DONE when polled. It
// deduplicates by requestId and by instance name as GCE does, answers
// errors in googleapi's JSON shape, and injects faults: error answers,
// failed operations (ZONE_RESOURCE_POOL_EXHAUSTED, QUOTA_EXCEEDED), lost
// answers and a launch budget.
package gcefake
