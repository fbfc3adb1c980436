package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/store"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// fakeManager is a ServerManager over an upstreamtest.Manager, on which
// the gateway core runs (Options.Upstreams): what the API adds, replaces,
// removes or switches shows in the core's servers and catalog, as with the
// real manager. It keeps the configs it got for ServerConfig, records its
// calls, and fails the next call when told to.
type fakeManager struct {
	*upstreamtest.Manager
	dir string // log files

	mu      sync.Mutex
	configs map[string]config.Server
	logs    map[string]string
	calls   []string
	failing error
}

var (
	_ ServerManager = (*fakeManager)(nil)
	// The core reads a live server's options from the manager, as from
	// *upstream.Manager.
	_ interface {
		ServerConfig(string) (config.Server, bool)
	} = (*fakeManager)(nil)
)

// newFakeManager returns a manager that runs servers.
func newFakeManager(t *testing.T, servers ...config.Server) *fakeManager {
	f := &fakeManager{
		Manager: upstreamtest.NewManager(),
		dir:     t.TempDir(),
		configs: map[string]config.Server{},
		logs:    map[string]string{},
	}
	for _, s := range servers {
		f.configs[s.Name] = s
		f.Manager.Set(fakeServer(s))
	}
	return f
}

// fakeServer is the upstream that runs srv: two tools, whose description
// tells which definition it runs (its url or command), and none while it
// is disabled.
func fakeServer(srv config.Server) *upstreamtest.Server {
	s := &upstreamtest.Server{Name: srv.Name, Transport: srv.Transport}
	if !srv.IsEnabled() {
		s.State = upstream.StateDisabled
		return s
	}
	desc, _ := json.Marshal(srv.URL + srv.Command)
	s.Tools = []json.RawMessage{
		json.RawMessage(`{"name":"ping","description":` + string(desc) + `,"inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"whoami","inputSchema":{"type":"object"}}`),
	}
	return s
}

// Servers reports Enabled from the configs, as the real manager does; the
// gateway core reads it.
func (f *fakeManager) Servers() []upstream.Status {
	out := f.Manager.Servers()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range out {
		if sc, ok := f.configs[out[i].Name]; ok {
			out[i].Enabled = sc.IsEnabled()
		}
	}
	return out
}

// failNext makes the next call that changes a server fail with err, and
// change nothing.
func (f *fakeManager) failNext(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = err
}

// beginLocked records a call and returns the error it is to fail with
// (f.mu held).
func (f *fakeManager) beginLocked(call string) error {
	f.calls = append(f.calls, call)
	err := f.failing
	f.failing = nil
	return err
}

// recorded returns the calls so far and forgets them.
func (f *fakeManager) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls := f.calls
	f.calls = nil
	return calls
}

func (f *fakeManager) Add(srv config.Server) error {
	f.mu.Lock()
	if err := f.beginLocked("Add " + srv.Name); err != nil {
		f.mu.Unlock()
		return err
	}
	if _, ok := f.configs[srv.Name]; ok {
		f.mu.Unlock()
		return fmt.Errorf("adding server %q: it exists", srv.Name)
	}
	f.configs[srv.Name] = srv
	f.mu.Unlock()
	f.Manager.Set(fakeServer(srv))
	return nil
}

func (f *fakeManager) Replace(srv config.Server) error {
	f.mu.Lock()
	if err := f.beginLocked("Replace " + srv.Name); err != nil {
		f.mu.Unlock()
		return err
	}
	if _, ok := f.configs[srv.Name]; !ok {
		f.mu.Unlock()
		return fmt.Errorf("replacing server %q: %w", srv.Name, upstream.ErrUnknownServer)
	}
	f.configs[srv.Name] = srv
	f.mu.Unlock()
	f.Manager.Set(fakeServer(srv))
	return nil
}

func (f *fakeManager) Remove(name string) error {
	f.mu.Lock()
	if err := f.beginLocked("Remove " + name); err != nil {
		f.mu.Unlock()
		return err
	}
	if _, ok := f.configs[name]; !ok {
		f.mu.Unlock()
		return fmt.Errorf("removing server %q: %w", name, upstream.ErrUnknownServer)
	}
	delete(f.configs, name)
	f.mu.Unlock()
	f.Manager.Remove(name)
	return nil
}

func (f *fakeManager) SetEnabled(name string, enabled bool) error {
	f.mu.Lock()
	if err := f.beginLocked(fmt.Sprintf("SetEnabled %s %t", name, enabled)); err != nil {
		f.mu.Unlock()
		return err
	}
	srv, ok := f.configs[name]
	if !ok {
		f.mu.Unlock()
		return fmt.Errorf("switching server %q: %w", name, upstream.ErrUnknownServer)
	}
	srv.Enabled = &enabled
	f.configs[name] = srv
	f.mu.Unlock()
	f.Manager.Set(fakeServer(srv))
	return nil
}

func (f *fakeManager) Restart(name string) error {
	f.mu.Lock()
	if err := f.beginLocked("Restart " + name); err != nil {
		f.mu.Unlock()
		return err
	}
	srv, ok := f.configs[name]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("restarting server %q: %w", name, upstream.ErrUnknownServer)
	}
	f.Manager.Set(fakeServer(srv))
	return nil
}

func (f *fakeManager) ServerConfig(name string) (config.Server, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	srv, ok := f.configs[name]
	return srv, ok
}

// configNames returns the names of the servers the manager runs.
func (f *fakeManager) configNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.configs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LogPath returns the log file writeLog wrote for the server, or "".
func (f *fakeManager) LogPath(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs[name]
}

// writeLog writes a log file for the server with content.
func (f *fakeManager) writeLog(t *testing.T, name, content string) {
	t.Helper()
	path := filepath.Join(f.dir, name+".log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f.setLogPath(name, path)
}

func (f *fakeManager) setLogPath(name, path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[name] = path
}

// errSecret is what a failing part of the gateway says; it must reach the
// log, never a client.
var errSecret = errors.New("disk on fire at /var/lib/mcpgw/secret-detail")

// faultyStore is a store.Memory whose next operation of a kind fails.
type faultyStore struct {
	*store.Memory

	mu   sync.Mutex
	fail map[string]bool // "put", "get", "delete"
}

func newFaultyStore() *faultyStore {
	return &faultyStore{Memory: store.NewMemory(), fail: map[string]bool{}}
}

// failNext makes the next operation op ("put", "get" or "delete") fail.
func (s *faultyStore) failNext(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[op] = true
}

func (s *faultyStore) failing(op string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fail[op]
	delete(s.fail, op)
	return f
}

func (s *faultyStore) PutServer(ctx context.Context, srv store.Server) (bool, error) {
	if s.failing("put") {
		return false, fmt.Errorf("putting server %q: %w", srv.Name, errSecret)
	}
	return s.Memory.PutServer(ctx, srv)
}

func (s *faultyStore) GetServer(ctx context.Context, name string) (store.Server, error) {
	if s.failing("get") {
		return store.Server{}, fmt.Errorf("getting server %q: %w", name, errSecret)
	}
	return s.Memory.GetServer(ctx, name)
}

func (s *faultyStore) DeleteServer(ctx context.Context, name string) error {
	if s.failing("delete") {
		return fmt.Errorf("deleting server %q: %w", name, errSecret)
	}
	return s.Memory.DeleteServer(ctx, name)
}

// syncBuffer is a bytes.Buffer for a logger that the API's handlers and
// the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// contains reports whether the log holds s.
func (b *syncBuffer) contains(s string) bool { return strings.Contains(b.String(), s) }
