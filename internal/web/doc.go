// Package web is Gangway's web view: server-rendered pages (html/template,
// assets embedded) of the fleet and the queue for the people who use and
// run it.
//
//   - /            the cluster map: every node's GPUs coloured by the team
//     holding them, free, fenced or reserved; nodes grouped by pool (cloud
//     pools with their offer), GPUs by NVLink domain
//   - /queue       the pending jobs in queue order (priority first), each
//     with the dispatch loop's reason, the jobs it waits for, its start
//     estimate and the priced cloud alternative when the waiting record
//     carries them
//   - /jobs, /jobs/{id}  the jobs; one job's phases, runs, checkpoints and
//     cost
//   - /teams, /teams/{team}  GPUs in use against quota, the month's cost
//     against the cloud budget
//   - /fragmentation  fragmentation over time, an SVG chart drawn on the
//     server from samples the server takes into a bounded ring
//   - /login       sets the gangway_token cookie the user API authenticates
//
// Pages read through [Source], declared here; [Backend] implements it over
// the Go client (job workflows), the capacity view (Redis) and the usage
// ledger, and samples fragmentation into a bounded ring.
//
// `gangway server` mounts the view on the user API (internal/server):
// the pages behind the API's authentication, [PublicPaths] (the sign-in
// form, signing out, the assets) without. A browser asking for a page
// without valid credentials gets a 401 page with the sign-in form and
// why ([Handler.SignedOut]); an API client (it accepts JSON) the API's
// JSON 401. The form checks the token with
// the API (Options.Verify) and keeps it in the HttpOnly, SameSite=Strict
// gangway_token cookie the API reads. With the API's identity on the
// request (Options.Identity) a user sees only their teams' jobs and team
// pages — other teams' GPUs are coloured on the map but name no job, and
// their queue entries are counted, not listed; an admin, or a request
// without identity, sees everything.
//
// Elements carry stable IDs and data attributes (data-node, data-gpu,
// data-team, data-job, data-reason, data-dollars) that the tests read; a
// page refreshes its content every few seconds with a little vanilla
// JavaScript (?refresh=0 turns that off).
package web
