package placement

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEFilterOrder: the chain README.md draws is the one the engine
// runs.
func TestREADMEFilterOrder(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(filters))
	for k, f := range filters {
		names[k] = f.name
	}
	want := strings.Join(names, " ▸ ")
	if !strings.Contains(string(b), "\n             "+want+"\n") {
		t.Errorf("README.md does not draw the filter chain as the code runs it:\n  %s", want)
	}
}

// TestStaticFiltersFirst: explain counts a node the static filters rule
// out as not matching, so none may follow a dynamic one.
func TestStaticFiltersFirst(t *testing.T) {
	dynamic := false
	for _, f := range filters {
		if f.static && dynamic {
			t.Errorf("static filter %q after a dynamic one", f.name)
		}
		dynamic = dynamic || !f.static
	}
}

// TestPlaceOrderIsTheChain: the engine's order holds every filter once.
func TestPlaceOrderIsTheChain(t *testing.T) {
	seen := map[int]bool{}
	for _, k := range placeOrder {
		seen[k] = true
	}
	if len(seen) != numFilters {
		t.Errorf("placeOrder %v does not hold each of the %d filters once", placeOrder, numFilters)
	}
}
