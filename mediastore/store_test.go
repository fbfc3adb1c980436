package mediastore

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// clock is a settable time for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestStore opens a store on opts, filling in a directory, the test
// secret and a clock when they are unset, and closes it at cleanup.
func newTestStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Dir == "" && opts.Blobs == nil {
		opts.Dir = t.TempDir()
	}
	if opts.Secret == nil {
		opts.Secret = testSecret
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustPut(t testing.TB, s *Store, owner, mimeType string, data []byte) Entry {
	t.Helper()
	e, err := s.Put(owner, mimeType, data)
	if err != nil {
		t.Fatalf("Put(%q, %q): %v", owner, mimeType, err)
	}
	return e
}

// dirNames lists the files of dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	return names
}

// wantID computes an id the way the spec says, independently of mediaID.
func wantID(owner string, data []byte) string {
	k := hmac.New(sha256.New, testSecret)
	k.Write([]byte("mcpgw media id"))
	m := hmac.New(sha256.New, k.Sum(nil))
	sum := sha256.Sum256(data)
	m.Write([]byte(owner + "\x00"))
	m.Write(sum[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(m.Sum(nil)))
}

func TestNew_Options(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		opts Options
		want string // part of the error; "" for none
	}{
		{"ok", Options{Dir: dir, Secret: testSecret}, ""},
		{"no dir", Options{Secret: testSecret}, "Dir is required"},
		{"short secret", Options{Dir: dir, Secret: testSecret[:31]}, "at least 32"},
		{"no secret", Options{Dir: dir}, "at least 32"},
		{"negative max bytes", Options{Dir: dir, Secret: testSecret, MaxBytes: -1}, "MaxBytes"},
		{"negative max age", Options{Dir: dir, Secret: testSecret, MaxAge: -1}, "MaxAge"},
		{"negative sweep", Options{Dir: dir, Secret: testSecret, SweepInterval: -1}, "SweepInterval"},
		{"creates dir", Options{Dir: filepath.Join(dir, "a", "b"), Secret: testSecret}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if err == nil {
				s.Close()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New: %v, want an error with %q", err, tt.want)
			}
		})
	}
	fi, err := os.Stat(filepath.Join(dir, "a", "b"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created dir: %v, %v; want mode 0700", fi, err)
	}
}

func TestPut_GetReadFor(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Options{Now: c.Now})
	png := []byte("\x89PNG not really")
	alice := mustPut(t, s, "principal:alice", "image/png", png)
	bob := mustPut(t, s, "principal:bob", "image/png", png)
	mp3 := mustPut(t, s, "principal:alice", "audio/mpeg", []byte("ID3"))
	text := mustPut(t, s, "principal:alice", "Text/Plain; Charset=UTF-8", []byte("hello"))
	noType := mustPut(t, s, "principal:alice", "", []byte("?"))
	badType := mustPut(t, s, "principal:alice", "not a type", []byte("??"))

	want := Entry{ID: wantID("principal:alice", png), Ext: "png", MIMEType: "image/png", Size: int64(len(png)), Owner: "principal:alice", Stored: c.Now()}
	if diff := cmp.Diff(want, alice); diff != "" {
		t.Errorf("Put entry (-want +got):\n%s", diff)
	}
	if alice.ID == bob.ID {
		t.Errorf("two owners share id %s", alice.ID)
	}
	if text.MIMEType != "text/plain; charset=UTF-8" || text.Ext != "txt" {
		t.Errorf("text entry %+v; want canonical MIME type and ext txt", text)
	}
	if noType.MIMEType != "application/octet-stream" || noType.Ext != "bin" || badType.MIMEType != "application/octet-stream" {
		t.Errorf("missing or bad MIME type stored as %q and %q; want application/octet-stream", noType.MIMEType, badType.MIMEType)
	}

	gets := []struct {
		name   string
		file   string
		wantOK bool
	}{
		{"alice png", alice.Name(), true},
		{"bob png", bob.Name(), true},
		{"mp3", mp3.Name(), true},
		{"wrong ext", alice.ID + ".jpg", false},
		{"unknown id", strings.Repeat("a", 52) + ".png", false},
		{"bad name", "../" + alice.Name(), false},
		{"upper case", strings.ToUpper(alice.Name()), false},
		{"empty", "", false},
	}
	for _, tt := range gets {
		t.Run("Get/"+tt.name, func(t *testing.T) {
			e, ok := s.Get(tt.file)
			if ok != tt.wantOK {
				t.Fatalf("Get(%q) = %v, want %v", tt.file, ok, tt.wantOK)
			}
			if ok && e.Name() != tt.file {
				t.Errorf("Get(%q) = %s", tt.file, e.Name())
			}
		})
	}

	reads := []struct {
		name     string
		owner    string
		file     string
		wantData []byte
		wantErr  error
	}{
		{"own", "principal:alice", alice.Name(), png, nil},
		{"own other", "principal:bob", bob.Name(), png, nil},
		{"another's", "principal:bob", alice.Name(), nil, ErrNotFound},
		{"no owner", "", alice.Name(), nil, ErrNotFound},
		{"unknown", "principal:alice", strings.Repeat("b", 52) + ".png", nil, ErrNotFound},
		{"wrong ext", "principal:alice", alice.ID + ".bin", nil, ErrNotFound},
		{"bad name", "principal:alice", "x", nil, ErrNotFound},
	}
	for _, tt := range reads {
		t.Run("ReadFor/"+tt.name, func(t *testing.T) {
			e, data, err := s.ReadFor(tt.owner, tt.file)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("ReadFor: %v, want %v", err, tt.wantErr)
			}
			if !bytes.Equal(data, tt.wantData) {
				t.Errorf("ReadFor data %q, want %q", data, tt.wantData)
			}
			if err == nil && e.Name() != tt.file {
				t.Errorf("ReadFor entry %s, want %s", e.Name(), tt.file)
			}
		})
	}

	if got := dirNames(t, s.root.Name()); len(got) != 6 {
		t.Errorf("dir holds %v; want 6 files", got)
	}
	fi, err := os.Stat(filepath.Join(s.root.Name(), alice.Name()))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("blob file: %v, %v; want mode 0600", fi, err)
	}
}

func TestPut_Refresh(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Options{Now: c.Now})
	data := []byte("the same bytes")
	first := mustPut(t, s, "o", "image/png", data)
	c.Add(time.Hour)
	again := mustPut(t, s, "o", "image/png", data)
	if again.ID != first.ID || !again.Stored.Equal(c.Now()) {
		t.Errorf("re-Put = %+v; want the same id, stored now", again)
	}
	other := mustPut(t, s, "o", "image/jpeg", data) // the same bytes under another type replace it
	if other.ID != first.ID || other.Ext != "jpg" {
		t.Errorf("Put as jpeg = %+v", other)
	}
	if _, ok := s.Get(first.Name()); ok {
		t.Errorf("the png name still resolves after the jpeg replaced it")
	}
	want := Stats{Bytes: int64(len(data)), Files: 1, Stored: 2}
	if diff := cmp.Diff(want, s.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{other.Name()}, dirNames(t, s.root.Name())); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestPut_ConcurrentSameContent(t *testing.T) {
	s := newTestStore(t, Options{})
	data := bytes.Repeat([]byte("x"), 10000)
	var wg sync.WaitGroup
	ids := make([]string, 16)
	for i := range ids {
		wg.Go(func() {
			e, err := s.Put("o", "image/png", data)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = e.ID
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.Bytes != int64(len(data)) || st.Files != 1 || st.Stored != 1 {
		t.Errorf("Stats = %+v; want the blob counted once", st)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Errorf("ids differ: %v", ids)
			break
		}
	}
	if got := dirNames(t, s.root.Name()); len(got) != 1 {
		t.Errorf("dir holds %v; want one file and no temporary ones", got)
	}
}

func TestPut_Concurrent(t *testing.T) {
	// Puts, Gets and reads of many blobs under a tight bound, for the race
	// detector; then the books must balance with the directory.
	s := newTestStore(t, Options{MaxBytes: 5000})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				data := bytes.Repeat([]byte{byte(i % 20)}, 1000)
				e, err := s.Put(fmt.Sprint("o", g%2), "image/png", data)
				if err != nil {
					t.Error(err)
					return
				}
				if _, got, err := s.ReadFor(e.Owner, e.Name()); err == nil && !bytes.Equal(got, data) {
					t.Errorf("ReadFor %s returned other bytes", e.Name())
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.Bytes > 5000 || st.Bytes != int64(st.Files)*1000 {
		t.Errorf("Stats = %+v; want at most 5000 bytes in 1000-byte files", st)
	}
	if got := dirNames(t, s.root.Name()); len(got) != st.Files {
		t.Errorf("dir holds %d files, the index %d", len(got), st.Files)
	}
}

func TestPut_Eviction(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Options{MaxBytes: 300, Now: c.Now})
	blob := func(b byte) []byte { return bytes.Repeat([]byte{b}, 100) }
	a := mustPut(t, s, "o", "image/png", blob('a'))
	b := mustPut(t, s, "o", "image/png", blob('b'))
	cc := mustPut(t, s, "o", "image/png", blob('c'))
	if _, ok := s.Get(a.Name()); !ok { // a is now the most recent
		t.Fatal("a is missing")
	}
	d := mustPut(t, s, "o", "image/png", blob('d')) // evicts b
	for _, tt := range []struct {
		e    Entry
		want bool
	}{{a, true}, {b, false}, {cc, true}, {d, true}} {
		if _, ok := s.Get(tt.e.Name()); ok != tt.want {
			t.Errorf("Get(%s) = %v, want %v", tt.e.Name(), ok, tt.want)
		}
	}
	want := Stats{Bytes: 300, Files: 3, Stored: 4, Evictions: 1}
	if diff := cmp.Diff(want, s.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(s.root.Name(), b.Name())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("evicted file: %v, want it gone", err)
	}

	big := mustPut(t, s, "o", "image/png", bytes.Repeat([]byte("e"), 300)) // exactly the bound: everything else goes
	if st := s.Stats(); st.Files != 1 || st.Bytes != 300 || st.Evictions != 4 {
		t.Errorf("after a blob of MaxBytes: %+v", st)
	}
	if _, ok := s.Get(big.Name()); !ok {
		t.Error("the blob of MaxBytes is missing")
	}
	_, err := s.Put("o", "image/png", make([]byte, 301))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Put of 301 bytes: %v, want ErrTooLarge", err)
	}
}

func TestExpiry(t *testing.T) {
	c := newClock()
	s := newTestStore(t, Options{MaxAge: time.Hour, Now: c.Now})
	a := mustPut(t, s, "o", "image/png", []byte("a"))
	b := mustPut(t, s, "o", "image/png", []byte("b"))
	c.Add(time.Hour - time.Nanosecond)
	mustPut(t, s, "o", "image/png", []byte("b")) // refreshed: b lives another hour
	if _, ok := s.Get(a.Name()); !ok {
		t.Fatal("a expired early")
	}
	c.Add(time.Nanosecond)
	if _, ok := s.Get(a.Name()); ok {
		t.Error("a is still there at MaxAge")
	}
	if _, _, err := s.ReadFor("o", a.Name()); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadFor of expired: %v", err)
	}
	if _, _, err := s.ReadFor("o", b.Name()); err != nil {
		t.Errorf("ReadFor of refreshed b: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.root.Name(), a.Name())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("expired file: %v, want it gone", err)
	}
	c.Add(time.Hour)
	if n := s.sweep(); n != 1 {
		t.Errorf("sweep removed %d, want 1", n)
	}
	want := Stats{Stored: 2, Expirations: 2}
	if diff := cmp.Diff(want, s.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	again := mustPut(t, s, "o", "image/png", []byte("a")) // stored anew after expiry
	if again.ID != a.ID || s.Stats().Stored != 3 {
		t.Errorf("re-Put after expiry: %+v, %+v", again, s.Stats())
	}
}

func TestSweeper(t *testing.T) {
	// In a synctest bubble time is fake, the sweeper ticks when every
	// goroutine waits, and the test fails if Close leaves it running.
	synctest.Test(t, func(t *testing.T) {
		s, err := New(Options{Dir: t.TempDir(), Secret: testSecret, MaxAge: time.Hour, SweepInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		e := mustPut(t, s, "o", "image/png", []byte("a"))
		time.Sleep(59 * time.Minute)
		synctest.Wait()
		if st := s.Stats(); st.Files != 1 {
			t.Fatalf("swept early: %+v", st)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := s.Stats(); st.Files != 0 || st.Expirations != 1 {
			t.Errorf("after MaxAge: %+v; want the sweeper to have removed it", st)
		}
		if _, err := os.Stat(filepath.Join(s.root.Name(), e.Name())); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("swept file: %v, want it gone", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := s.Put("o", "image/png", []byte("b")); err == nil {
			t.Error("Put after Close succeeded")
		}
		if _, ok := s.Get(e.Name()); ok {
			t.Error("Get after Close found a swept blob")
		}
	})
}
