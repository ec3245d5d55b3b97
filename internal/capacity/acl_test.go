package capacity

import (
	"os"
	"strings"
	"testing"
)

// TestACLDocumented: docs/security.md shows the ACL users as the code
// builds them.
func TestACLDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"user gangway-server on >SERVER-PASSWORD " + ServerACL(DefaultPrefix),
		"user gangway-agent on >AGENT-PASSWORD " + AgentACL(DefaultPrefix),
	} {
		if !strings.Contains(string(doc), line+"\n") {
			t.Errorf("docs/security.md lacks the line\n%s", line)
		}
	}
}
