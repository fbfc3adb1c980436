package mediastore

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNew_Reindex stores blobs, closes the store, damages the directory
// in every way New must cope with, and opens it again.
func TestNew_Reindex(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	opts := Options{Dir: dir, Secret: testSecret, MaxAge: time.Hour, Now: c.Now}
	s := newTestStore(t, opts)
	old := mustPut(t, s, "principal:alice", "image/png", []byte("old"))
	c.Add(50 * time.Minute)
	keep := mustPut(t, s, "principal:alice", "image/png", []byte("keep me"))
	keepJSON := mustPut(t, s, "session:1", "application/json", []byte(`{"a":1}`))
	truncated := mustPut(t, s, "principal:alice", "image/png", []byte("truncated"))
	overlong := mustPut(t, s, "principal:alice", "image/png", []byte("overlong"))
	tampered := mustPut(t, s, "principal:alice", "image/png", []byte("tampered"))
	badHeader := mustPut(t, s, "principal:alice", "image/png", []byte("bad header"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	path := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path(name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(path(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := read(truncated.Name())
	write(truncated.Name(), b[:len(b)-1])
	write(overlong.Name(), append(read(overlong.Name()), 'x'))
	b = read(tampered.Name())
	b[len(b)-1] ^= 1
	write(tampered.Name(), b)
	b = read(badHeader.Name())
	write(badHeader.Name(), bytes.Replace(b, []byte(`"mcpgw_media":1`), []byte(`"mcpgw_media":2`), 1))
	write(keep.ID+".jpg", read(keep.Name()))                   // a name whose ext does not match its MIME type
	write(strings.Repeat("a", 52)+".png", []byte("no header")) // no newline at all
	write(".tmp-0123", []byte("half a write"))
	write("junk.txt", []byte("junk"))
	write("UPPER.PNG", []byte("junk"))
	if err := os.Mkdir(path("subdir"), 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, read(keep.Name()), 0o600); err != nil {
		t.Fatal(err)
	}
	link := strings.Repeat("b", 52) + ".png"
	if err := os.Symlink(outside, path(link)); err != nil {
		t.Fatal(err)
	}

	c.Add(11 * time.Minute) // old is 61 minutes old, the rest 11
	var logs bytes.Buffer
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s2 := newTestStore(t, opts)

	want := []string{keepJSON.Name(), keep.Name(), "subdir"}
	if diff := cmp.Diff(sortedStrings(want), dirNames(t, dir)); diff != "" {
		t.Errorf("files after New (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the symlink's target outside Dir: %v", err)
	}
	for _, e := range []Entry{keep, keepJSON} {
		got, data, err := s2.ReadFor(e.Owner, e.Name())
		if err != nil {
			t.Errorf("ReadFor(%s): %v", e.Name(), err)
			continue
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("re-indexed entry (-want +got):\n%s", diff)
		}
		if e.Size != int64(len(data)) {
			t.Errorf("ReadFor(%s) = %q", e.Name(), data)
		}
	}
	if _, ok := s2.Get(old.Name()); ok {
		t.Error("the expired blob was re-indexed")
	}
	wantStats := Stats{Bytes: keep.Size + keepJSON.Size, Files: 2, Expirations: 1}
	if diff := cmp.Diff(wantStats, s2.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}

	reasons := map[string]string{}
	var indexed map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		switch rec["msg"] {
		case "media file removed":
			reasons[rec["name"].(string)] = rec["reason"].(string)
		case "media store indexed":
			indexed = rec
		}
	}
	wantReasons := map[string]string{
		old.Name():                       "expired",
		truncated.Name():                 "truncated or overlong",
		overlong.Name():                  "truncated or overlong",
		tampered.Name():                  "content does not match its id",
		badHeader.Name():                 "bad header",
		keep.ID + ".jpg":                 "MIME type does not match the name",
		strings.Repeat("a", 52) + ".png": "no header",
		".tmp-0123":                      "temporary file",
		"junk.txt":                       "not a media file name",
		"UPPER.PNG":                      "not a media file name",
		link:                             "not a regular file",
	}
	if diff := cmp.Diff(wantReasons, reasons); diff != "" {
		t.Errorf("removals logged (-want +got):\n%s", diff)
	}
	if indexed == nil || indexed["files"] != 2.0 || indexed["removed"] != float64(len(wantReasons)) || indexed["level"] != "INFO" {
		t.Errorf("summary log %v; want 2 files and %d removed at info", indexed, len(wantReasons))
	}
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestNew_ReindexOrder(t *testing.T) {
	tests := []struct {
		name       string
		reopen     Options // MaxBytes, MaxAge, Secret of the second store
		advance    time.Duration
		wantNames  []string // of a, b, c (blobs of 100 bytes stored a minute apart, then a again)
		wantEvicts uint64
	}{
		{
			name:      "all fit",
			reopen:    Options{MaxBytes: 300},
			wantNames: []string{"a", "b", "c"},
		},
		{
			// New indexes oldest first and trims: b was stored first
			// since a was stored again last.
			name:       "trim oldest",
			reopen:     Options{MaxBytes: 200},
			wantNames:  []string{"a", "c"},
			wantEvicts: 1,
		},
		{
			// At 63.5m, b and c (stored at 2m and 3m) have expired, and
			// so would a (first stored at 1m) but for its refresh at 4m,
			// which survives the restart.
			name:      "refresh survives",
			reopen:    Options{MaxAge: time.Hour},
			advance:   59*time.Minute + 30*time.Second,
			wantNames: []string{"a"},
		},
		{
			name:   "other secret",
			reopen: Options{Secret: bytes.Repeat([]byte("z"), 32)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newClock()
			s := newTestStore(t, Options{Dir: dir, Now: c.Now})
			es := map[string]Entry{}
			for _, n := range []string{"a", "b", "c", "a"} {
				c.Add(time.Minute)
				es[n] = mustPut(t, s, "o", "image/png", bytes.Repeat([]byte(n), 100))
			}
			s.Close()
			c.Add(tt.advance)
			o := tt.reopen
			o.Dir, o.Now = dir, c.Now
			s2 := newTestStore(t, o)
			var got []string
			for _, n := range []string{"a", "b", "c"} {
				if _, ok := s2.Get(es[n].Name()); ok {
					got = append(got, n)
				}
			}
			if diff := cmp.Diff(tt.wantNames, got); diff != "" {
				t.Errorf("blobs after New (-want +got):\n%s", diff)
			}
			if st := s2.Stats(); st.Evictions != tt.wantEvicts || st.Files != len(tt.wantNames) {
				t.Errorf("Stats = %+v; want %d evictions", st, tt.wantEvicts)
			}
			if n := len(dirNames(t, dir)); n != len(tt.wantNames) {
				t.Errorf("%d files left, want %d", n, len(tt.wantNames))
			}
		})
	}
}
