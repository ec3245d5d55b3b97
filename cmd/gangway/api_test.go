package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/gangwayhq/gangway"
	"github.com/gangwayhq/gangway/client"
	"github.com/gangwayhq/gangway/internal/api"
	"github.com/gangwayhq/gangway/internal/capacity"
	"github.com/gangwayhq/gangway/workflows/jobs"
)

// startAPI serves the user API over tc and view (and ledger, if not nil),
// as gangway server does, until the test ends; it returns the API's URL
// and an admin's token.
func startAPI(t *testing.T, tc tclient.Client, view *capacity.View, ledger api.CostLedger) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	token, err := api.CreateToken(path, "admin", nil, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tf, err := api.OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var jt api.JobTeams = noJobs{}
	var cj client.Jobs
	if tc != nil {
		j := jobs.New(tc)
		jt, cj = j, j
	}
	cl := client.New(cj, view)
	srv, err := api.New(api.Options{Client: cl, Jobs: jt, Fleet: view, Ledger: ledger,
		Tokens: []api.TokenVerifier{tf}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, token
}

// noJobs knows no job: for tests of what needs no workflow (cost).
type noJobs struct{}

func (noJobs) Describe(context.Context, gangway.JobID) (jobs.Description, error) {
	return jobs.Description{}, jobs.ErrJobGone
}
