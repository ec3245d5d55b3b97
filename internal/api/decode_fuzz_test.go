package api

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gangwayhq/gangway/client"
)

// FuzzDecodeSpec: the submit call's decoding never panics, and whatever
// it refuses is a spec error or an invalid request, which the API answers
// with 400 — never a 500.
func FuzzDecodeSpec(f *testing.F) {
	for _, seed := range []string{mlSpec, visionSpec, `{"name":"j","team":"t","command":["x"],"gang":{"replicas":1,"gpusPerReplica":1}}`,
		"name: x\n", "", "---\n---\n", "name: [\n", strings.Repeat("a: b\n", 100), "\x00\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := DecodeSpec(bytes.NewReader(data))
		if err != nil {
			if ae := client.AsAPIError(err); ae.Status != 400 {
				t.Fatalf("DecodeSpec refused with %d (%v), want 400", ae.Status, err)
			}
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("an accepted spec does not validate: %v", err)
		}
	})
}
