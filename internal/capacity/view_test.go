package capacity

import (
	"reflect"
	"strings"
	"testing"
)

// Every key must carry the prefix's hash tag, or scripts break on Redis
// Cluster (all keys of a script must live in one slot).
func TestKeysShareHashTag(t *testing.T) {
	tests := map[string]struct {
		prefix  string
		wantTag string
	}{
		"default":         {prefix: "", wantTag: "{gangway}"},
		"custom prefix":   {prefix: "{cluster-b}", wantTag: "{cluster-b}"},
		"tag then suffix": {prefix: "{gw}:prod", wantTag: "{gw}"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := New(nil, Options{Prefix: tc.prefix})
			k := reflect.ValueOf(v.k)
			for i := range k.NumField() {
				key := k.Field(i).String()
				if !strings.HasPrefix(key, tc.wantTag) {
					t.Errorf("key %s = %q, want it to start with hash tag %s", k.Type().Field(i).Name, key, tc.wantTag)
				}
			}
		})
	}
}

func TestParseGPUField(t *testing.T) {
	tests := map[string]struct {
		node  string
		index int
	}{
		"plain":            {node: "n1", index: 3},
		"slash in node id": {node: "aws/us-east-1/i-0abc", index: 7},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			node, index, err := parseGPUField(gpuField(tc.node, tc.index))
			must(t, err)
			if node != tc.node || index != tc.index {
				t.Errorf("parseGPUField(gpuField(%q, %d)) = %q, %d", tc.node, tc.index, node, index)
			}
		})
	}
}
