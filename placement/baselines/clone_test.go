package baselines

import (
	"reflect"
	"testing"

	"github.com/gangwayhq/gangway/placement"
)

// TestStatefulScorersClone: every policy whose scorer can keep state (a
// pointer) clones itself, so that a Place call running beside another —
// the dispatch loop's background forecast beside its cycles — never
// shares one (two Prepares writing one scorer's maps at once crash the
// process).
func TestStatefulScorersClone(t *testing.T) {
	for _, name := range Names() {
		s, err := ScorerByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.TypeOf(s).Kind() != reflect.Pointer {
			continue
		}
		c := placement.Independent(s)
		if c == s {
			t.Errorf("%s: Independent returned the same %T; it must implement placement.Cloner", name, s)
			continue
		}
		if c.Name() != s.Name() || reflect.TypeOf(c) != reflect.TypeOf(s) {
			t.Errorf("%s: the clone is %T %q", name, c, c.Name())
		}
	}
}
