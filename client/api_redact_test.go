package client_test

import (
	"strings"
	"testing"

	"github.com/gangwayhq/gangway/client"
)

// TestAPIURLErrorsHidePasswords: a bad API URL is named in the error
// without the password its user info may hold.
func TestAPIURLErrorsHidePasswords(t *testing.T) {
	for _, u := range []string{"ftp://alice:s3cret@api.example", "https://alice:s3cret@", "https://alice:s3%zzcret@api.example"} {
		_, err := client.NewAPI(client.APIOptions{URL: u})
		if err == nil || strings.Contains(err.Error(), "s3") || !strings.Contains(err.Error(), "API URL") {
			t.Errorf("NewAPI(%q) = %v, want an API URL error without the password", u, err)
		}
	}
}
