package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// serverStore is the server half of the contract (contract_test.go).
type serverStore interface {
	PutServer(context.Context, Server) (bool, error)
	GetServer(context.Context, string) (Server, error)
	ListServers(context.Context) ([]Server, error)
	DeleteServer(context.Context, string) error
}

// apiServer is a server registered through the admin API with entry as its
// definition.
func apiServer(name, entry string) Server {
	return Server{Name: name, Source: ServerSourceAPI, Entry: json.RawMessage(entry)}
}

// configServer is the record of a config file's server with an enabled
// override.
func configServer(name string, enabled bool) Server {
	return Server{Name: name, Source: ServerSourceConfig, Enabled: &enabled}
}

// at is when step i of a TestServers case runs.
func at(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }

// stored is srv as the store returns it when written at created and last
// at updated.
func stored(srv Server, created, updated time.Time) Server {
	srv.CreatedAt, srv.UpdatedAt = created, updated
	return srv
}

// namesOf lists the servers' names.
func namesOf(srvs []Server) []string {
	var names []string
	for _, srv := range srvs {
		names = append(names, srv.Name)
	}
	return names
}

// TestServers runs each case's steps in order on a new store, step i at
// time at(i), then checks ListServers and GetServer of every name.
func TestServers(t *testing.T) {
	// A definition whose bytes no re-encoding would keep: spacing, key
	// order, escapes, a number beyond float64.
	const entry = ` { "url" : "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer s3cr3t"},
	"name": "caf\u00e9 — é", "big": 1e400, "z": [], "a": null }`
	type step struct {
		put         Server  // PutServer(put), unless del is set
		del         *string // DeleteServer(*del)
		wantCreated bool    // PutServer's created
		wantErr     error   // matched with errors.Is
	}
	tests := []struct {
		name  string
		steps []step
		want  []Server // ListServers afterwards, and what GetServer returns for each
		gone  []string // names for which GetServer returns ErrNotFound
	}{
		{
			name: "empty",
			gone: []string{"github", ""},
		},
		{
			name:  "an api server keeps its entry byte for byte",
			steps: []step{{put: apiServer("github", entry), wantCreated: true}},
			want:  []Server{stored(apiServer("github", entry), at(0), at(0))},
		},
		{
			name: "an api server with an enabled override",
			steps: []step{{put: func() Server {
				s := apiServer("github", `{}`)
				s.Enabled = ptr(false)
				return s
			}(), wantCreated: true}},
			want: []Server{func() Server {
				s := stored(apiServer("github", `{}`), at(0), at(0))
				s.Enabled = ptr(false)
				return s
			}()},
		},
		{
			name: "config overrides",
			steps: []step{
				{put: configServer("files", false), wantCreated: true},
				{put: configServer("fetch", true), wantCreated: true},
				{put: Server{Name: "time", Source: ServerSourceConfig}, wantCreated: true},
			},
			want: []Server{
				stored(configServer("fetch", true), at(1), at(1)),
				stored(configServer("files", false), at(0), at(0)),
				stored(Server{Name: "time", Source: ServerSourceConfig}, at(2), at(2)),
			},
		},
		{
			name: "an empty entry of a config server is none",
			steps: []step{{put: func() Server {
				s := configServer("files", true)
				s.Entry = json.RawMessage{}
				return s
			}(), wantCreated: true}},
			want: []Server{stored(configServer("files", true), at(0), at(0))},
		},
		{
			name: "an update replaces all but CreatedAt",
			steps: []step{
				{put: apiServer("github", `{"v":1}`), wantCreated: true},
				{put: func() Server {
					s := apiServer("github", `{"v":2}`)
					s.Enabled = ptr(true)
					s.CreatedAt = base.Add(-24 * time.Hour) // ignored on update
					s.UpdatedAt = base.Add(-24 * time.Hour) // always ignored
					return s
				}()},
			},
			want: []Server{func() Server {
				s := stored(apiServer("github", `{"v":2}`), at(0), at(1))
				s.Enabled = ptr(true)
				return s
			}()},
		},
		{
			name: "an update clears the override",
			steps: []step{
				{put: configServer("files", false), wantCreated: true},
				{put: Server{Name: "files", Source: ServerSourceConfig}},
			},
			want: []Server{stored(Server{Name: "files", Source: ServerSourceConfig}, at(0), at(1))},
		},
		{
			name: "an insert takes the caller's CreatedAt, in UTC",
			steps: []step{{put: func() Server {
				s := apiServer("github", `{}`)
				s.CreatedAt = base.Add(-time.Hour).In(time.FixedZone("CET", 3600))
				return s
			}(), wantCreated: true}},
			want: []Server{stored(apiServer("github", `{}`), base.Add(-time.Hour), at(0))},
		},
		{
			name: "the source changes both ways",
			steps: []step{
				{put: configServer("github", false), wantCreated: true},
				{put: apiServer("github", `{"url":"x"}`)},
				{put: configServer("github", true)},
			},
			want: []Server{stored(configServer("github", true), at(0), at(2))},
		},
		{
			name: "delete, and put again",
			steps: []step{
				{put: apiServer("github", `{"v":1}`), wantCreated: true},
				{put: configServer("files", true), wantCreated: true},
				{del: ptr("github")},
				{del: ptr("github"), wantErr: ErrNotFound},
				{put: apiServer("github", `{"v":2}`), wantCreated: true},
				{del: ptr("files")},
			},
			want: []Server{stored(apiServer("github", `{"v":2}`), at(4), at(4))},
			gone: []string{"files"},
		},
		{
			name:  "delete of an absent server",
			steps: []step{{del: ptr("nothing"), wantErr: ErrNotFound}, {del: ptr(""), wantErr: ErrNotFound}},
			gone:  []string{"nothing"},
		},
		{
			name: "names are exact",
			steps: []step{
				{put: configServer("GitHub", true), wantCreated: true},
				{put: configServer("github", false), wantCreated: true},
				{del: ptr("github "), wantErr: ErrNotFound},
			},
			want: []Server{
				stored(configServer("GitHub", true), at(0), at(0)),
				stored(configServer("github", false), at(1), at(1)),
			},
			gone: []string{"GITHUB", "github ", " github"},
		},
		{
			name: "list in byte order",
			steps: []step{
				{put: configServer("b", true), wantCreated: true},
				{put: configServer("é", true), wantCreated: true},
				{put: configServer("a-1", true), wantCreated: true},
				{put: configServer("B", true), wantCreated: true},
				{put: configServer("a", true), wantCreated: true},
			},
			want: []Server{
				stored(configServer("B", true), at(3), at(3)),
				stored(configServer("a", true), at(4), at(4)),
				stored(configServer("a-1", true), at(2), at(2)),
				stored(configServer("b", true), at(0), at(0)),
				stored(configServer("é", true), at(1), at(1)),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now time.Time
			forEachStore(t, func() time.Time { return now }, func(t *testing.T, s contractStore) {
				ctx := t.Context()
				for i, st := range tt.steps {
					now = at(i)
					if st.del != nil {
						if err := s.DeleteServer(ctx, *st.del); !errors.Is(err, st.wantErr) {
							t.Fatalf("step %d: DeleteServer(%q) = %v, want %v", i, *st.del, err, st.wantErr)
						}
						continue
					}
					created, err := s.PutServer(ctx, st.put)
					if !errors.Is(err, st.wantErr) {
						t.Fatalf("step %d: PutServer(%q) = %v, want %v", i, st.put.Name, err, st.wantErr)
					}
					if created != st.wantCreated {
						t.Errorf("step %d: PutServer(%q) created = %v, want %v", i, st.put.Name, created, st.wantCreated)
					}
				}
				got, err := s.ListServers(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ListServers (-want +got):\n%s", diff)
				}
				for _, want := range tt.want {
					got, err := s.GetServer(ctx, want.Name)
					if err != nil {
						t.Errorf("GetServer(%q): %v", want.Name, err)
						continue
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("GetServer(%q) (-want +got):\n%s", want.Name, diff)
					}
					// cmp compares times with Equal; the zone must be UTC too.
					for _, tm := range []time.Time{got.CreatedAt, got.UpdatedAt} {
						if tm.Location() != time.UTC {
							t.Errorf("GetServer(%q): time %v is in %v, want UTC", want.Name, tm, tm.Location())
						}
					}
				}
				for _, name := range tt.gone {
					got, err := s.GetServer(ctx, name)
					if !errors.Is(err, ErrNotFound) {
						t.Errorf("GetServer(%q) = %v, want ErrNotFound", name, err)
					}
					if !cmp.Equal(Server{}, got) {
						t.Errorf("GetServer(%q) returned %+v with its error", name, got)
					}
					if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("getting server %q: ", name)) {
						t.Errorf("GetServer(%q) error %q does not name the operation and the server", name, err)
					}
				}
			})
		})
	}
}

// TestServers_OwnCopy checks that a store shares no memory with its
// callers: changing what was put or what was got changes nothing stored.
func TestServers_OwnCopy(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		put := apiServer("github", `{"v":1}`)
		put.Enabled = ptr(true)
		if _, err := s.PutServer(ctx, put); err != nil {
			t.Fatal(err)
		}
		put.Entry[5] = '9'
		*put.Enabled = false
		got, err := s.GetServer(ctx, "github")
		if err != nil {
			t.Fatal(err)
		}
		got.Entry[5] = '8'
		*got.Enabled = false
		list, err := s.ListServers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		list[0].Entry[5] = '7'
		*list[0].Enabled = false
		got, err = s.GetServer(ctx, "github")
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Entry) != `{"v":1}` || got.Enabled == nil || !*got.Enabled {
			t.Errorf("GetServer = entry %s, enabled %v; want {\"v\":1}, true", got.Entry, got.Enabled)
		}
	})
}

func TestPutServer_Invalid(t *testing.T) {
	const secret = "hunter2-token"
	tests := []struct {
		name string
		put  Server
		want string
	}{
		{"no name", Server{Source: ServerSourceConfig}, "no Name"},
		{"no source", Server{Name: "github", Entry: json.RawMessage(`{}`)}, `Source ""`},
		{"unknown source", Server{Name: "github", Source: "file", Entry: json.RawMessage(`{}`)}, `Source "file"`},
		{"source in capitals", Server{Name: "github", Source: "API", Entry: json.RawMessage(`{}`)}, `Source "API"`},
		{"api without entry", Server{Name: "github", Source: ServerSourceAPI}, "Entry is missing"},
		{"api with an empty entry", apiServer("github", ""), "Entry is missing"},
		{"api with invalid JSON", apiServer("github", `{"token":"`+secret), "Entry is not valid JSON"},
		{"api with two values", apiServer("github", `{"token":"`+secret+`"} {}`), "Entry is not valid JSON"},
		{"api with invalid UTF-8", apiServer("github", "{\"token\":\""+secret+"\xff\"}"), "Entry is not valid JSON"},
		{"api with an array", apiServer("github", `["`+secret+`"]`), "Entry is not a JSON object"},
		{"api with a string", apiServer("github", `"`+secret+`"`), "Entry is not a JSON object"},
		{"api with null", apiServer("github", `null`), "Entry is not a JSON object"},
		{"config with entry", Server{Name: "github", Source: ServerSourceConfig, Entry: json.RawMessage(`{"token":"` + secret + `"}`)}, "source config must not"},
		{"created after 9999", func() Server {
			s := apiServer("github", `{}`)
			s.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			return s
		}(), "CreatedAt is outside"},
	}
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		// Every invalid put is of an existing name (but the nameless one)
		// and must leave its record as it was.
		if _, err := s.PutServer(t.Context(), configServer("github", true)); err != nil {
			t.Fatal(err)
		}
		before, err := s.GetServer(t.Context(), "github")
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				created, err := s.PutServer(t.Context(), tt.put)
				if err == nil {
					t.Fatal("PutServer succeeded")
				}
				if created {
					t.Error("PutServer failed but reported a created record")
				}
				prefix := fmt.Sprintf("putting server %q: ", tt.put.Name)
				if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q, want %q after %q", err, tt.want, prefix)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q shows the server's entry", err)
				}
			})
		}
		list, err := s.ListServers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Server{before}, list); diff != "" {
			t.Errorf("after only invalid puts, ListServers (-want +got):\n%s", diff)
		}
	})
}

func TestServers_ContextCancelled(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		if _, err := s.PutServer(t.Context(), configServer("github", true)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := s.PutServer(ctx, configServer("files", true)); !errors.Is(err, context.Canceled) {
			t.Errorf("PutServer = %v, want context.Canceled", err)
		}
		if _, err := s.GetServer(ctx, "github"); !errors.Is(err, context.Canceled) {
			t.Errorf("GetServer = %v, want context.Canceled", err)
		}
		if _, err := s.ListServers(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("ListServers = %v, want context.Canceled", err)
		}
		if err := s.DeleteServer(ctx, "github"); !errors.Is(err, context.Canceled) {
			t.Errorf("DeleteServer = %v, want context.Canceled", err)
		}
		list, err := s.ListServers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"github"}, namesOf(list)); diff != "" {
			t.Errorf("after cancelled calls, servers (-want +got):\n%s", diff)
		}
	})
}

// TestPutServer_Concurrent has goroutines put, read and list one name at
// once; run it with -race. Exactly one put creates the record, CreatedAt
// never moves, and no read sees a torn record (an entry of one put with the
// override of another).
func TestPutServer_Concurrent(t *testing.T) {
	forEachStore(t, nil, func(t *testing.T, s contractStore) {
		ctx := t.Context()
		const goroutines, rounds = 20, 5
		type entry struct{ G, R int }
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created int
			firsts  = map[time.Time]bool{} // the CreatedAt every read saw
		)
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				for r := range rounds {
					srv := apiServer("shared", fmt.Sprintf(`{"G":%d,"R":%d}`, g, r))
					srv.Enabled = ptr((g+r)%2 == 0)
					c, err := s.PutServer(ctx, srv)
					if err != nil {
						errs <- err
						return
					}
					got, err := s.GetServer(ctx, "shared")
					if err != nil {
						errs <- err
						return
					}
					var e entry
					if err := json.Unmarshal(got.Entry, &e); err != nil {
						errs <- fmt.Errorf("goroutine %d round %d: entry %s: %v", g, r, got.Entry, err)
						return
					}
					if got.Enabled == nil || *got.Enabled != ((e.G+e.R)%2 == 0) {
						errs <- fmt.Errorf("goroutine %d round %d: torn record: entry %s, enabled %v", g, r, got.Entry, got.Enabled)
						return
					}
					if got.UpdatedAt.Before(got.CreatedAt) {
						errs <- fmt.Errorf("goroutine %d round %d: updated %v before created %v", g, r, got.UpdatedAt, got.CreatedAt)
						return
					}
					if _, err := s.ListServers(ctx); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if c {
						created++
					}
					firsts[got.CreatedAt] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if created != 1 {
			t.Errorf("%d puts created the record, want 1", created)
		}
		if len(firsts) != 1 {
			t.Errorf("reads saw %d different CreatedAt, want 1", len(firsts))
		}
		list, err := s.ListServers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"shared"}, namesOf(list)); diff != "" {
			t.Errorf("servers (-want +got):\n%s", diff)
		}
	})
}

// TestServers_SQLChecks inserts rows directly, past PutServer's checks:
// the table's own constraints must refuse what PutServer refuses.
func TestServers_SQLChecks(t *testing.T) {
	s := openTest(t)
	ts := formatTime(base)
	tests := []struct {
		name    string
		row     []any // name, source, entry, enabled, created_at, updated_at
		wantErr string
	}{
		{"api", []any{"a", "api", `{}`, nil, ts, ts}, ""},
		{"api with override", []any{"b", "api", `{}`, 0, ts, ts}, ""},
		{"config", []any{"c", "config", nil, 1, ts, ts}, ""},
		{"config without override", []any{"d", "config", nil, nil, ts, ts}, ""},
		{"api without entry", []any{"e", "api", nil, nil, ts, ts}, "CHECK constraint failed"},
		{"config with entry", []any{"f", "config", `{}`, 1, ts, ts}, "CHECK constraint failed"},
		{"unknown source", []any{"g", "file", `{}`, nil, ts, ts}, "CHECK constraint failed"},
		{"enabled 2", []any{"h", "config", nil, 2, ts, ts}, "CHECK constraint failed"},
		{"enabled as text", []any{"i", "config", nil, "yes", ts, ts}, "cannot store TEXT value in INTEGER column"},
		{"empty name", []any{"", "config", nil, 1, ts, ts}, "CHECK constraint failed"},
		{"no name", []any{nil, "config", nil, 1, ts, ts}, "NOT NULL constraint failed"},
		{"no source", []any{"j", nil, `{}`, nil, ts, ts}, "NOT NULL constraint failed"},
		{"no created_at", []any{"k", "api", `{}`, nil, nil, ts}, "NOT NULL constraint failed"},
		{"no updated_at", []any{"l", "api", `{}`, nil, ts, nil}, "NOT NULL constraint failed"},
		{"duplicate name", []any{"a", "config", nil, 1, ts, ts}, "UNIQUE constraint failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.w.ExecContext(t.Context(), `INSERT INTO servers (`+serverColumns+`) VALUES (?, ?, ?, ?, ?, ?)`, tt.row...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("insert failed: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatal("insert succeeded")
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
	got, err := s.ListServers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, namesOf(got)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}
