package checkpoint

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const sum0 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" // SHA-256 of nothing

func validManifest() Manifest {
	return Manifest{
		Format:  FormatVersion,
		ID:      newID(1_700_000_000_000_000_000, 3, "0a1b2c3d"),
		Job:     "job",
		Attempt: 3,
		Created: time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC),
		Layout:  Layout{Replicas: 2, GPUsPerReplica: 8, GPUModel: "H100"},
		Files: []File{
			{Path: "a/b.bin", Size: 10, SHA256: strings.Repeat("ab", 32)},
			{Path: "empty", Size: 0, SHA256: sum0},
		},
		TotalBytes: 10,
	}
}

func TestDecodeManifest(t *testing.T) {
	m := validManifest()
	cases := map[string]struct {
		edit    func(m *Manifest)
		mangle  func(data []byte) []byte // applied to the encoded manifest
		wantErr error
	}{
		"valid":             {},
		"truncated":         {mangle: func(b []byte) []byte { return b[:len(b)/2] }, wantErr: ErrCorrupt},
		"newer format":      {edit: func(m *Manifest) { m.Format = 2 }, wantErr: ErrFormat},
		"no format":         {edit: func(m *Manifest) { m.Format = 0 }, wantErr: ErrCorrupt},
		"other job":         {edit: func(m *Manifest) { m.Job = "other" }, wantErr: ErrCorrupt},
		"other id":          {edit: func(m *Manifest) { m.ID = newID(1, 3, "00000000") }, wantErr: ErrCorrupt},
		"attempt not in id": {edit: func(m *Manifest) { m.Attempt = 4 }, wantErr: ErrCorrupt},
		"no time":           {edit: func(m *Manifest) { m.Created = time.Time{} }, wantErr: ErrCorrupt},
		"total off":         {edit: func(m *Manifest) { m.TotalBytes = 11 }, wantErr: ErrCorrupt},
		"negative size":     {edit: func(m *Manifest) { m.Files[1].Size = -1; m.TotalBytes = 9 }, wantErr: ErrCorrupt},
		"short sha":         {edit: func(m *Manifest) { m.Files[0].SHA256 = "abcd" }, wantErr: ErrCorrupt},
		"uppercase sha":     {edit: func(m *Manifest) { m.Files[0].SHA256 = strings.Repeat("AB", 32) }, wantErr: ErrCorrupt},
		"unsorted":          {edit: func(m *Manifest) { slices.Reverse(m.Files) }, wantErr: ErrCorrupt},
		"duplicate":         {edit: func(m *Manifest) { m.Files[1] = m.Files[0]; m.TotalBytes = 20 }, wantErr: ErrCorrupt},
		"escaping path":     {edit: func(m *Manifest) { m.Files[0].Path = "../../etc/passwd" }, wantErr: ErrCorrupt},
		"absolute path":     {edit: func(m *Manifest) { m.Files[0].Path = "/etc/passwd" }, wantErr: ErrCorrupt},
		"unclean path":      {edit: func(m *Manifest) { m.Files[0].Path = "a/./b.bin" }, wantErr: ErrCorrupt},
		"negative layout":   {edit: func(m *Manifest) { m.Layout.Replicas = -1 }, wantErr: ErrCorrupt},
		"unknown field":     {mangle: func(b []byte) []byte { return append([]byte(`{"future": true, `), b[1:]...) }},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := m
			in.Files = slices.Clone(m.Files)
			if c.edit != nil {
				c.edit(&in)
			}
			data, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if c.mangle != nil {
				data = c.mangle(data)
			}
			got, err := decodeManifest(data, "job", m.ID)
			if !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
				t.Fatalf("decodeManifest: %v, want %v", err, c.wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(in, got); diff != "" {
					t.Errorf("decodeManifest (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestIDsSortByTime(t *testing.T) {
	ids := []string{
		newID(999, 0, "ffffffff"),
		newID(1_000, 9, "00000000"),
		newID(1_000, 10, "00000000"),
		newID(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), 1, "00000000"),
		newID(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), 1, "00000000"),
	}
	if !slices.IsSorted(ids[:2]) || !slices.IsSorted(ids[2:]) || ids[1] > ids[3] {
		t.Errorf("IDs do not sort by time: %q", ids)
	}
	for _, id := range ids {
		if _, _, ok := parseID(id); !ok {
			t.Errorf("parseID(%q) failed", id)
		}
	}
	at, attempt, ok := parseID(newID(1_700_000_000_123_456_789, 7, "0a1b2c3d"))
	if want := time.Unix(0, 1_700_000_000_123_456_789).UTC(); !ok || !at.Equal(want) || attempt != 7 {
		t.Errorf("parseID = %v, %d, %v; want %v, 7, true", at, attempt, ok, want)
	}
}

func TestParseURL(t *testing.T) {
	cases := map[string]location{
		"file:///mnt/ckpt":          {scheme: "file", path: "/mnt/ckpt"},
		"file:///mnt/ckpt/":         {scheme: "file", path: "/mnt/ckpt"},
		"file://localhost/mnt/ckpt": {scheme: "file", path: "/mnt/ckpt"},
		"/mnt//ckpt/./x/..":         {scheme: "file", path: "/mnt/ckpt"},
		"s3://bucket":               {scheme: "s3", bucket: "bucket"},
		"s3://bucket/":              {scheme: "s3", bucket: "bucket"},
		"s3://bucket/team/ckpt/":    {scheme: "s3", bucket: "bucket", prefix: "team/ckpt"},
		"s3://my.bucket-1/a":        {scheme: "s3", bucket: "my.bucket-1", prefix: "a"},
	}
	for url, want := range cases {
		t.Run(url, func(t *testing.T) {
			got, err := parseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(location{})); diff != "" {
				t.Errorf("parseURL(%q) (-want +got):\n%s", url, diff)
			}
		})
	}
}

func TestCheckJob(t *testing.T) {
	cases := map[string]bool{
		"train-7b":               true,
		"job_1.v2":               true,
		"ünïcode":                true,
		"":                       false,
		".":                      false,
		"..":                     false,
		".hidden":                false,
		"a/b":                    false,
		`a\b`:                    false,
		"tab\there":              false,
		strings.Repeat("x", 256): false,
	}
	for job, ok := range cases {
		if err := checkJob(job); (err == nil) != ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("checkJob(%q) = %v, want ok %v", job, err, ok)
		}
	}
}

func TestManifestCaptured(t *testing.T) {
	created := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		taken time.Time
		want  time.Time
	}{
		{"taken unknown", time.Time{}, created},
		{"taken before the save", created.Add(-90 * time.Second), created.Add(-90 * time.Second)},
		{"taken after the save (another clock)", created.Add(time.Second), created},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Manifest{Created: created, Taken: tc.taken}
			if got := m.Captured(); !got.Equal(tc.want) {
				t.Errorf("Captured() = %v, want %v", got, tc.want)
			}
		})
	}
}
