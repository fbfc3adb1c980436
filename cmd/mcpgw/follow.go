package main

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/store"
)

// followEvery is how often a replica re-reads the servers the admin API
// keeps in the shared store: another replica's change runs here within
// it. With PostgreSQL a change is announced at once (LISTEN/NOTIFY), and
// the re-read, every followSafety, only catches a lost notice.
const (
	followEvery  = time.Second
	followSafety = 10 * time.Second
)

// serverWatcher is a store that announces changes of its server records,
// and of the tools 2026-07-28 clients found (store.Postgres).
type serverWatcher interface {
	Watch(ctx context.Context, w store.Watchers) error
}

// registered parses a server record of the admin API, as the admin API
// took it, under today's rules: an entry that no longer validates, or a
// stdio command the admin.stdio_* lists no longer allow, is an error.
func registered(cfg *config.Config, rec store.Server) (config.Server, error) {
	lookup := func(name string) (string, bool) {
		if !strings.HasPrefix(name, cfg.Admin.EnvPrefix) {
			return "", false
		}
		return os.LookupEnv(name)
	}
	srv, ps := config.ParseServer(rec.Entry, cfg.Naming, lookup)
	if len(ps) > 0 {
		return config.Server{}, fmt.Errorf("its entry no longer validates: %s", ps.Error())
	}
	if ps := cfg.Admin.CheckRegistration(&srv); len(ps) > 0 {
		return config.Server{}, fmt.Errorf("admin.stdio_commands, admin.stdio_cwd or admin.stdio_env no longer allow it: %s", ps.Error())
	}
	if rec.Enabled != nil {
		srv.Enabled = rec.Enabled
	}
	return srv, nil
}

// follow applies, every followEvery until ctx ends, what the admin API of
// any replica changed in the store: servers registered, replaced or
// removed, and the switches of the file's servers.
func (r *reloader) follow(ctx context.Context) {
	every := followEvery
	wake := make(chan struct{}, 1)
	if w, ok := r.db.(serverWatcher); ok {
		every = followSafety
		watched := make(chan struct{})
		go func() { r.watch(ctx, w, wake); close(watched) }()
		defer func() { <-watched }() // its connection closed before the store is
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		sctx, cancel := context.WithTimeout(ctx, followEvery)
		err := r.sync(sctx)
		cancel()
		switch {
		case err != nil && !failing:
			r.logger.Error("following the other replicas' admin changes failed; retrying", "err", err)
		case err == nil && failing:
			r.logger.Info("following the other replicas' admin changes works again")
		}
		failing = err != nil
	}
}

// watch wakes follow at each change of the server records w announces,
// and tells the core of each principal's new finds, listening again a
// second after the connection fails, until ctx ends.
func (r *reloader) watch(ctx context.Context, w serverWatcher, wake chan<- struct{}) {
	for ctx.Err() == nil {
		err := w.Watch(ctx, store.Watchers{
			Servers: func() {
				select {
				case wake <- struct{}{}:
				default: // a sync is due already
				}
			},
			Finds: func(owner string) {
				if r.core != nil {
					r.core.FoundElsewhere(owner)
				}
			},
		})
		if ctx.Err() != nil {
			return
		}
		r.logger.Warn("listening for the other replicas' admin changes failed; re-reading every "+followSafety.String()+" meanwhile", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// sync makes the running servers what the config file and the store's
// records say, changing only what differs (a server given the config it
// runs with is not restarted). No change through this replica's admin API
// comes between: it changes the manager before the store.
func (r *reloader) sync(ctx context.Context) (err error) {
	r.adm.Serialize(func() { err = r.syncLocked(ctx) })
	return err
}

func (r *reloader) syncLocked(ctx context.Context) error {
	recs, err := r.db.ListServers(ctx)
	if err != nil {
		return fmt.Errorf("reading the registered servers: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[string]config.Server{}
	for _, sc := range r.cfg.Servers {
		want[sc.Name] = sc
	}
	inFile := func(name string) bool {
		for _, sc := range r.cfg.Servers {
			if sc.Name == name {
				return true
			}
		}
		return false
	}
	for _, rec := range recs {
		switch {
		case inFile(rec.Name):
			if rec.Enabled != nil {
				sc := want[rec.Name]
				sc.Enabled = rec.Enabled
				want[rec.Name] = sc
			}
		case rec.Source == store.ServerSourceAPI:
			srv, err := registered(r.cfg, rec)
			if err != nil {
				if r.skipped == nil {
					r.skipped = map[string]time.Time{}
				}
				if !r.skipped[rec.Name].Equal(rec.UpdatedAt) {
					r.logger.Error("not running a server registered through the admin API", "server", rec.Name, "problem", err.Error())
					r.skipped[rec.Name] = rec.UpdatedAt
				}
				continue
			}
			want[rec.Name] = srv
		}
	}
	for name, srv := range want {
		cur, live := r.mgr.ServerConfig(name)
		switch {
		case !live:
			if err := r.mgr.Add(srv); err != nil {
				return fmt.Errorf("adding server %q: %w", name, err)
			}
			r.logger.Info("server added by another replica's admin API", "server", name)
		case !sameServer(cur, srv):
			if err := r.mgr.Replace(srv); err != nil {
				return fmt.Errorf("replacing server %q: %w", name, err)
			}
			r.logger.Info("server replaced by another replica's admin API", "server", name)
		case cur.IsEnabled() != srv.IsEnabled():
			if err := r.mgr.SetEnabled(name, srv.IsEnabled()); err != nil {
				return fmt.Errorf("switching server %q: %w", name, err)
			}
			r.logger.Info("server switched by another replica's admin API", "server", name, "enabled", srv.IsEnabled())
		}
	}
	for _, st := range r.mgr.Servers() {
		if _, ok := want[st.Name]; !ok {
			if err := r.mgr.Remove(st.Name); err != nil {
				return fmt.Errorf("removing server %q: %w", st.Name, err)
			}
			r.logger.Info("server removed by another replica's admin API", "server", st.Name)
		}
	}
	return nil
}

// sameServer reports whether a and b are one server's config, whether it
// is enabled aside (a switch does not restart it).
func sameServer(a, b config.Server) bool {
	a.Enabled, b.Enabled = nil, nil
	return reflect.DeepEqual(a, b)
}
